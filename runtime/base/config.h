/*
 * config.h - the settings table's internal half (the public half is
 * sc_config in shardcache/config.h): defaults that depend on where a job
 * runs.
 */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

#include <stddef.h>

/*
 * Where caches live when SC_CACHE_DIR is empty, the one rule every script
 * and tool defers to: $SLURM_TMPDIR, else $TMPDIR, else /tmp, then
 * shardcache-<uid> (one root per user).  SC_OK, or SC_EINVAL if it does not
 * fit in n bytes.
 */
int sc__cache_root(char *buf, size_t n);

/*
 * Setting `name`'s value ("SC_SEED") as the text SC_DUMP_CONFIG prints, into
 * buf; SC_EINVAL for an unknown name or a value longer than n - 1.
 */
typedef struct sc_config sc_config;
int sc__config_text(const sc_config *cfg, const char *name, char *buf, size_t n);

#endif /* SC_CONFIG_H */
