/*
 * output.h - the one way the library, its tools and the example trainer
 * create what they write (traces, audit trails, plans, datasets,
 * checkpoints) on a node shared with other users: never through a
 * symlink someone planted at the name, never into a file that exists,
 * mode 0600 files in 0700 directories (docs/reliability.md, "Shared
 * nodes").  The public half, sc_output_open and sc_output_dir, is in
 * include/shardcache/base.h.
 */
#ifndef SC_OUTPUT_H
#define SC_OUTPUT_H

#include "shardcache/base.h"

/*
 * Makes way for a new file at `path` for a writer that creates it itself
 * with O_CREAT|O_EXCL (HDF5's H5F_ACC_EXCL): nothing there, or this
 * user's own regular file, which is removed; a symlink (never followed),
 * another user's file or anything else is refused (SC_EIO, naming it).
 * `what` names the file in messages ("trace file").
 */
int sc__output_clear(const char *path, const char *what, sc_error *err);

#include <stddef.h>
#include <sys/stat.h>

/* Whether this process is in group gid (its own or a supplementary one). */
int sc__in_group(unsigned gid);

/*
 * The first directory on dir's resolved path, from "/" down to dir itself,
 * that users other than its owner may write without the sticky bit, or
 * whose sticky bit is another user's to ignore (with `group`, the members
 * of one of this process's groups do not count): its
 * path into bad[n] and its stat into *st, and 1; 0 when there is none; -1
 * (errno) when the path cannot be resolved.  Such a directory lets them
 * rename what is below it and put their own in its place.
 */
int sc__path_swappable(const char *dir, int group, char *bad, size_t n, struct stat *st);

#endif /* SC_OUTPUT_H */
