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

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "shardcache.h"

/*
 * A cache directory's names, which sc__cachedir_describe reads back:
 * shardcache-<16 hex fingerprint>-l<local rank>, a private one (a second
 * process on a busy directory) with -p<pid>.XXXXXX after it, made by
 * mkdtemp.  It holds the lock file (a live owner's flock), the note of
 * its source, and the entries (entry.h names them).
 */
#define SC__CACHEDIR_LOCK "lock"
/* A directory's name less its local rank, shardcache-<16 hex>-l, into buf. */
void sc__cachedir_prefix(uint64_t fingerprint, char *buf, size_t n);
/* Appends a private directory's suffix to dir (of n bytes), as mkdtemp's template. */
void sc__cachedir_private(char *dir, size_t n);

/*
 * Removes cache directory `dir` while holding its lock: its files (never
 * a subdirectory, never through a symlink), the lock last (an opener
 * that finds it gone tries again), then the directory.  The one removal
 * of a cache directory.  It works on descriptors only: `dir` is opened
 * without following a link and must be this user's and the directory
 * listed (dev, ino), or, when this process holds its lock already
 * (`held`, else -1), the one that lock is in.  0 removed; 1 a live
 * process holds it (or made it again meanwhile); -1 not removed (errno:
 * ELOOP or ENOTDIR a symlink, EPERM another user's or another directory
 * than the one listed).
 */
int sc__cachedir_remove(const char *dir, uint64_t dev, uint64_t ino, int held);

/*
 * Removes the cache directory open at dfd, whose name was `dir` (a live
 * cache's own private directory at its close, or its fresh root): its
 * files are unlinked relative to dfd, so they are the verified
 * directory's wherever its name now points, and the name is removed only
 * if it still holds that directory.  dfd must be this user's.  0, or -1
 * (errno; ESTALE: the name was swapped, and what is there stays).
 */
int sc__cachedir_remove_open(const char *dir, int dfd);

/*
 * SC_EINVAL unless no directory from / down to `dir` itself (resolved:
 * realpath) may be written by others without the sticky bit: whoever can
 * write a directory can rename what is in it and put their own in its
 * place.  With `group` (SC_CACHE_SHARE=group) a directory this process's
 * group may write is fine.  The message names the directory, its owner
 * and mode.
 */
int sc__cachedir_check_ancestors(const char *dir, int group, sc_error *err);


/* uid's user name ("uid N" if it has none) into buf, which it returns. */
const char *sc__cachedir_user(unsigned uid, char *buf, size_t n);
/* gid's group name ("gid N" if it has none) into buf, which it returns. */
const char *sc__cachedir_group(unsigned gid, char *buf, size_t n);

/*
 * 1 and *d filled when `name` under root is a cache directory
 * (shardcache-<16 hex>-l<rank>[-p<pid>[.<6 letters or digits>]], a real
 * directory, not a symlink); else 0.  d->dev and d->ino identify it for a removal.
 */
int sc__cachedir_describe(const char *root, const char *name, sc_cache_dir_info *d);

/*
 * Writes the note of its source into the cache directory open at dfd:
 * the path (absolute) and its stamp now, read back by
 * sc__cachedir_describe to tell a changed source.  Best effort; `mode` is
 * the note's.
 */
void sc__cachedir_note_source(int dfd, const char *source, int mode);

/*
 * The filesystem holding root: its size and the bytes free to this user.
 * Testing builds: SC_TEST_CACHE_FS="SIZE,USED" pretends a filesystem of
 * SIZE bytes of which USED hold other files and the caches under root the
 * rest.  -1 if it cannot be told.
 */
int sc__cachedir_space(const char *root, uint64_t *size, uint64_t *avail);

/*
 * Makes `want` bytes, less what the cache directories of fingerprint
 * `keep` under root hold already, free above the reserve
 * (SC_CACHE_RESERVE_PCT of the filesystem) by removing whole idle cache
 * directories of this user and another fingerprint, least recently used first;
 * never one a live process holds.  Each removal is logged (rank, level).
 * Returns the bytes of the directories removed.
 */
uint64_t sc__cachedir_make_room(const char *root, uint64_t keep, uint64_t want, int rank,
                                int log_level);

#endif /* SC_CACHEDIR_H */
