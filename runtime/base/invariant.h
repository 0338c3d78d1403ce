/*
 * invariant.h - SC__ASSERT: an invariant asserted where it is assumed
 * (SQLite's assert(sqlite3_mutex_held(...))).
 *
 * Checked in debug and sanitizer builds (no NDEBUG: CMake's Debug build
 * type, which the debug, asan and tsan presets use); in release builds the
 * condition is type-checked and never evaluated, so it may be costly or
 * have no meaning there (a debug-only mutex check).  An invariant is what
 * the code itself guarantees, never a check of input: input is refused
 * with a status.  A broken one names the file, line and condition, then
 * aborts, so that a test or a sanitizer run stops where it broke.
 */
#ifndef SC_INVARIANT_H
#define SC_INVARIANT_H

#ifndef NDEBUG
#include <stdio.h>
#include <stdlib.h>

static inline void sc__invariant_broken(const char *cond, const char *file, int line,
                                        const char *func)
{
    fprintf(stderr, "shardcache: invariant broken at %s:%d in %s(): %s\n", file, line, func,
            cond);
    abort();
}

#define SC__ASSERT(cond)                                                                   \
    ((cond) ? (void)0 : sc__invariant_broken(#cond, __FILE__, __LINE__, __func__))
#else
#define SC__ASSERT(cond) ((void)sizeof((cond) ? 1 : 0))
#endif

#endif /* SC_INVARIANT_H */
