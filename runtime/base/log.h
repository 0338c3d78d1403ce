/*
 * log.h - the few things shardcache says on its own: repairs, fallbacks.
 * Lines go to stderr as "shardcache[rank R]: ...", at or below the
 * configured level (SC_LOG): 0 errors, 1 warnings, 2 info.  Errors are
 * returned as statuses, not logged; logging is for events that were
 * handled but that an operator should know about.
 */
#ifndef SC_LOG_H
#define SC_LOG_H

#define SC__LOG_WARN 1
#define SC__LOG_INFO 2

void sc__log(int threshold, int level, int rank, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif /* SC_LOG_H */
