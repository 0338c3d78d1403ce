/*
 * config.h - the settings table's internal half (the public half is
 * sc_config in shardcache/config.h): defaults that depend on where a job
 * runs.
 */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

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

/*
 * What SC_SHARD_SIZE=auto rounds its size to, so that a shard holds whole
 * chunks of the source's compressed fields (a shard that cuts through a
 * chunk decompresses all of it, and so does its neighbour): field i's
 * chunks hold rows[i] samples (0: not chunked and compressed) and cost[i]
 * bytes.  The least common multiple of the rows of as many fields as fit
 * in SC_SHARD_AUTO_MAX_BYTES of samples of sample_bytes, the costliest
 * chunk first (ties: the first field); 0 when none is.  A pure function of
 * the dataset: every rank and every job agrees.
 */
uint64_t sc__shard_chunk_unit(uint64_t sample_bytes, const uint64_t *rows,
                              const uint64_t *cost, int n);

#endif /* SC_CONFIG_H */
