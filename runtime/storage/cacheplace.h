/*
 * cacheplace.h - where one rank's cache lives: its root and directory,
 * chosen, checked, locked and held open for the cache's lifetime (cache.c
 * owns what is in it).
 *
 * A node is shared with other users, who may write wherever the system
 * lets them.  So every directory from / down to the cache's may be
 * written by nobody else without the sticky bit (else refused, named);
 * the root and the cache directory are then held open (the directory with
 * O_NOFOLLOW, its device, inode and owner checked), and every entry, the
 * lock and every temporary is reached relative to that descriptor: a name
 * swapped after the open reaches nothing.  A name someone else made first
 * (a squatted default root, a cache directory of another user's, a lock
 * replaced) is refused and the job falls back to a fresh private
 * directory (mkdtemp, 0700) with a warning naming the squatter: it runs,
 * cold.
 */
#ifndef SC_CACHEPLACE_H
#define SC_CACHEPLACE_H

#include <stdint.h>

#include "error.h"
#include "shardcache.h"

typedef struct sc__cache_place {
    /* Set by the caller before sc__cache_place_open. */
    int group; /* SC_CACHE_SHARE=group: the directory may be the group's */
    int rank, local_rank, log_level;
    /* Set by the open. */
    char root[SC_PATH_MAX];   /* dir's parent: SC_CACHE_DIR, the default root, or a fresh one */
    char dir[SC_PATH_MAX];    /* the cache directory, as messages name it */
    char node[64];            /* dir's name less the local rank: shardcache-<fp>-l */
    int rootfd, dfd, lock_fd; /* held for the cache's lifetime; -1 when not open */
    int private_dir;          /* dir is this process's own (-p<pid>.XXXXXX): removed at close */
    int own_root;             /* root is this process's own (mkdtemp): removed at close */
} sc__cache_place;

/* Marks p not open (every descriptor -1): sc__cache_place_close is then a no-op. */
void sc__cache_place_init(sc__cache_place *p);

/*
 * Chooses the root (cache_dir, else the default root: sc__cache_root),
 * checks every directory down to it, and takes this rank's directory for
 * dataset `fingerprint` under it: made 0700 (02770 with group), opened,
 * checked and locked; or, when another live process holds it or someone
 * else made it, a private one beside it (warned).  SC_EINVAL when a
 * directory on the way may be written by others; SC_EIO otherwise.
 */
int sc__cache_place_open(sc__cache_place *p, const char *cache_dir, uint64_t fingerprint,
                         sc_error *err);

/*
 * Local rank lr's directory beside p's (for entries a neighbor holds),
 * opened without following a link and checked as p's own was: its
 * descriptor (the caller closes it), or -1 if there is none usable.
 */
int sc__cache_place_neighbor(const sc__cache_place *p, int lr);

/* Removes a private directory (and an own root), releases the lock, closes. */
void sc__cache_place_close(sc__cache_place *p);

#endif /* SC_CACHEPLACE_H */
