/*
 * cachedir.h - cache directories as whole things: which names under a root
 * are cache directories, what each holds, whether a live process holds it
 * (its flock), its note of the source, and removing one while holding its
 * lock.  The one owner of that logic: the cache's open (dead owners'
 * private directories, old caches evicted for room) and `shardcache cache`
 * (sc_cache_list, sc_cache_remove) use it.
 */
#ifndef SC_CACHEDIR_H
#define SC_CACHEDIR_H

#include <stdint.h>

#include "shardcache.h"

/*
 * The lock of cache directory `dir`, taken without waiting (`how`: LOCK_SH
 * to look, LOCK_EX to remove; LOCK_EX makes a missing lock file): the fd,
 * held until closed; -1 if a live process holds it, -2 if it has none.
 */
int sc__cachedir_lock(const char *dir, int how);

/*
 * Whether the lock fd holds is still the file at `lock`: removers unlink
 * the lock last, and a lock taken on a file no longer at its path is no
 * lock on the directory.
 */
int sc__cachedir_lock_is_path(int fd, const char *lock);

/*
 * Removes a cache directory whose lock this process holds: its files
 * (never a subdirectory), the lock last (an opener that finds it gone
 * tries again), then the directory.  0, or -1 (errno; ENOTEMPTY: a job
 * made files in it meanwhile).
 */
int sc__cachedir_remove_held(const char *dir);

/*
 * Takes the lock of cache directory `dir` and removes it: 0 removed,
 * 1 a live process holds it, -1 an error (errno).
 */
int sc__cachedir_remove(const char *dir);

/*
 * 1 and *d filled when `name` under root is a cache directory
 * (shardcache-<16 hex>-l<rank>[-p<pid>], a real directory); else 0.
 */
int sc__cachedir_describe(const char *root, const char *name, sc_cache_dir_info *d);

/*
 * Writes `dir`'s note of its source: the path (absolute) and its stamp
 * now, read back by sc__cachedir_describe to tell a changed source.
 * Best effort; `mode` is the note's.
 */
void sc__cachedir_note_source(const char *dir, const char *source, int mode);

/*
 * The filesystem holding root: its size and the bytes free to this user.
 * Testing builds: SC_TEST_CACHE_FS="SIZE,USED" pretends a filesystem of
 * SIZE bytes of which USED hold other files and the caches under root the
 * rest.  -1 if it cannot be told.
 */
int sc__cachedir_space(const char *root, uint64_t *size, uint64_t *avail);

/*
 * Makes `want` bytes free above the reserve (SC_CACHE_RESERVE_PCT of the
 * filesystem) under root by removing whole idle cache directories of this
 * user and another fingerprint than `keep`, least recently used first;
 * never one a live process holds.  Each removal is logged (rank, level).
 * Returns the bytes of the directories removed.
 */
uint64_t sc__cachedir_make_room(const char *root, uint64_t keep, uint64_t want, int rank,
                                int log_level);

#endif /* SC_CACHEDIR_H */
