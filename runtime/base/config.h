/*
 * config.h - the settings table's internal half (the public half is
 * sc_config in shardcache/config.h): defaults that depend on where a job
 * runs.
 */
#ifndef SC_CONFIG_H
#define SC_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "shardcache/config.h"

/*
 * Where caches live for cfg: cfg->cache_dir, else (and for a NULL cfg) the
 * default root, the one rule every script and tool defers to:
 * $SLURM_TMPDIR, else $TMPDIR, else /tmp, then shardcache-<uid> (one root
 * per user).  Each cache directory under it holds a file `source`: the
 * source's path, then its size, modification time (s), inode and change
 * time (ns) when the cache was opened (`shardcache cache gc` reclaims
 * directories whose source changed).  SC_OK, or SC_EINVAL if it does not
 * fit in n bytes.
 */
int sc__cache_root(const sc_config *cfg, char *buf, size_t n);

/*
 * The shuffle window cfg means, in samples, for shards of shard_samples
 * samples of sample_bytes: the stream holds every shard a window touches
 * until its last batch is built, so a window may span at most as many
 * whole shards as half of stream_bytes holds (the other half loads the
 * next window, and holds this one's last shards while a batch straddles
 * the two); with P partitions each unit's window (window / P) a P-th of
 * that, so that one rank serving all P stays within it.  Auto is that
 * many; an explicit shuffle_window above it is lowered to it (the caller
 * warns).  Never below `least` (a batch: the stream holds its shards
 * whatever the window), which may exceed the bound.  0 for a NULL cfg.
 */
uint64_t sc__config_window(const sc_config *cfg, uint64_t sample_bytes, uint64_t shard_samples,
                           uint64_t least);
/*
 * The ring's depth for SC_PREFETCH_BATCHES=`asked` with slots of
 * slot_bytes: `asked`, or for SC_PREFETCH_AUTO what fits the auto rule
 * (include/shardcache/config.h), and `least` at least.
 */
uint64_t sc__config_depth(uint64_t asked, uint64_t slot_bytes, uint64_t least);
/* The shard bytes a window of `window` samples may hold at once (the rule above). */
uint64_t sc__config_window_bytes(uint64_t window, uint64_t partitions, uint64_t sample_bytes,
                                 uint64_t shard_samples);

/*
 * Whether SC_BAD_SAMPLE=skip can skip anything: only an image that fails to
 * decode at delivery is skipped, so without SC_DECODE the setting changes
 * nothing (not the shards either).  Decode-once alone refuses it at open.
 */
static inline int sc__config_skips_bad(const sc_config *cfg)
{
    return cfg->bad_sample == SC_BAD_SAMPLE_SKIP && cfg->decode[0] != '\0';
}

/*
 * The plan parameters of `epoch` for a job of world_size ranks with these
 * settings, over a dataset's shards (sizes[nshards], as
 * sc_dataset_shard_sizes gives them) and fingerprint.  Inline, so that the
 * Python extension, which links only the public library, plans with the
 * loader's own rule (storage's sc__dataset_plan_params calls it too).
 */
static inline sc_plan_params sc__config_plan_params(const sc_config *cfg,
                                                    const uint64_t *sizes, uint64_t nshards,
                                                    uint64_t fingerprint, uint32_t world_size,
                                                    uint64_t epoch)
{
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = nshards;
    p.world_size = world_size;
    p.seed = cfg->seed;
    p.epoch = epoch;
    p.batch_size = cfg->batch_size;
    p.remainder = cfg->remainder;
    p.mode = cfg->mode;
    p.exchange = cfg->exchange;
    p.partitions = cfg->partitions;
    p.fingerprint = fingerprint;
    return p;
}

/*
 * Setting `name`'s value ("SC_SEED") as the text SC_DUMP_CONFIG prints, into
 * buf; SC_EINVAL for an unknown name or a value longer than n - 1.
 */
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
