/*
 * loader_open.c - a loader's open and close (loader_state.h says how the
 * loader's files divide it), and what it opened.
 *
 * Open is collective step by step: a step that fails on one rank fails on
 * all before the next collective step (sc__agree), so that no rank waits in
 * one alone.  Close is collective too: ranks may close in different
 * epochs, and each finishes the broadcasts and verifications of the
 * furthest one.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agree.h"
#include "augment.h"
#include "config.h"
#include "decode.h"
#include "error.h"
#include "fields.h"
#include "jobwide.h"
#include "loader_state.h"
#include "log.h"
#include "mpierr.h"
#include "node.h"
#include "plan_state.h"
#include "schedule.h"

/* A step of open, agreed on by every rank (agree.h). */
static int loader_agree(const sc_loader *ld, int rc, sc_error *err)
{
    return sc__agree(ld->comm, rc, "failed to open its loader", err);
}

/* The least and the greatest of every rank's v, in one reduction. */
static int loader_range(const sc_loader *ld, int v, int *lo, int *hi, sc_error *err)
{
    SC_MPI_CHECK(err, sc__agree_range(ld->comm, v, lo, hi));
    return SC_OK;
}

/*
 * This rank's share of the cores it may run on: the cores of its affinity
 * mask over the node-local ranks whose masks meet it (a launcher that gives
 * each rank a block of cores leaves it the whole block; Open MPI's default
 * binding to a socket shares the socket).  At least 2: a lone producer
 * stalls the ring while it maps or reads a shard, and a second one keeps
 * it filled even where ranks outnumber cores (docs/benchmarks.md,
 * "Producers per rank"), and at most 8.  Collective.
 */
static int loader_default_producers(const sc_loader *ld, int *producers, sc_error *err)
{
    cpu_set_t mask;
    CPU_ZERO(&mask);
    if (sched_getaffinity(0, sizeof mask, &mask) != 0) {
        long online = sysconf(_SC_NPROCESSORS_ONLN);
        for (long c = 0; c < (online > 0 ? online : 1) && c < CPU_SETSIZE; c++)
            CPU_SET(c, &mask);
    }
    int sharers = 1;
    int rc = sc__node_overlap(ld->comm, &mask, (int)sizeof mask, &sharers, err);
    int n = CPU_COUNT(&mask) / (sharers > 0 ? sharers : 1);
    *producers = n < 2 ? 2 : n > 8 ? 8 : n;
    return rc;
}

/* A loader with its own communicators, nothing opened yet. */
static int loader_new(MPI_Comm comm, const sc_config *cfg, sc_loader **out, sc_error *err)
{
    sc_loader *ld = *out = calloc(1, sizeof *ld);
    if (!ld)
        return sc__seterr(err, SC_ENOMEM, "no memory for a loader");
    ld->cfg = *cfg;
    ld->comm = ld->hdr = ld->data = MPI_COMM_NULL;
    ld->device = -1;
    SC_MPI_CHECK(err, MPI_Comm_rank(comm, &ld->rank));
    SC_MPI_CHECK(err, MPI_Comm_size(comm, &ld->size));
    sc__loader_read_faults(ld);
    int level = MPI_THREAD_SINGLE;
    SC_MPI_CHECK(err, MPI_Query_thread(&level));
    if (level == MPI_THREAD_SINGLE)
        sc__log(cfg->log_level, SC__LOG_WARN, ld->rank,
                "MPI was initialized with MPI_THREAD_SINGLE; the loader runs producer "
                "threads (which never call MPI): MPI_THREAD_FUNNELED says so");
    MPI_Comm *own[3] = {&ld->comm, &ld->hdr, &ld->data};
    for (int i = 0; i < 3; i++)
        SC_MPI_CHECK(err, sc__comm_own(comm, own[i], NULL, NULL));
    return sc__node_local(ld->comm, &ld->local_rank, &ld->local_size, err);
}

/*
 * What the data, the world size and the settings rule out for every epoch
 * (more ranks than shards, too few samples for a batch a rank with drop),
 * refused here, not at an epoch's begin: sc_plan_params_check's words,
 * after the source and its shards.  Agreed on, so that no rank waits alone.
 */
static int loader_check_plans(const sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    sc_plan_params p;
    sc_dataset_info di;
    sc__dataset_plan_params(ld->ds, cfg, (uint32_t)ld->size, 0, &p);
    sc_dataset_get_info(ld->ds, &di);
    int rc = sc_plan_params_check(&p, err);
    if (rc != SC_OK)
        sc__errctx(err, rc, "rank %d: source '%s' (%llu samples, SC_SHARD_SIZE=%llu%s) on %d ranks",
                   ld->rank, cfg->source, (unsigned long long)di.nsamples,
                   (unsigned long long)di.shard_size,
                   cfg->shard_size == SC_SHARD_AUTO ? " by auto" : "", ld->size);
    return loader_agree(ld, rc, err);
}

/*
 * SC_EPOCHS, the same on every rank: a rank that posted the broadcast of a
 * plan the others do not post would wait alone.
 */
static int loader_check_epochs(const sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int lo = 0, hi = 0, rc = loader_range(ld, cfg->epochs, &lo, &hi, err);
    if (rc == SC_OK && cfg->epochs < 0)
        rc = sc__seterr(err, SC_EINVAL, "rank %d: sc_config.epochs is %d: 0 (not said) or the "
                        "job's epochs", ld->rank, cfg->epochs);
    else if (rc == SC_OK && lo != hi)
        rc = sc__seterr(err, SC_EINVAL, "rank %d: SC_EPOCHS is %d here, and differs between "
                        "ranks (from %d to %d): every rank must say the same", ld->rank,
                        cfg->epochs, lo, hi);
    return rc;
}

/*
 * The same shards on every rank.  What shapes them beyond the job-wide
 * settings (a skip list each rank reads at its own path, the files each
 * node sees) would otherwise surface only at the first plan, as "shard
 * count 41, this rank expects 14".
 */
static int loader_check_shards(const sc_loader *ld, sc_error *err)
{
    sc_dataset_info in;
    sc_dataset_get_info(ld->ds, &in);
    uint64_t mine[2] = {in.nshards, in.shard_size}, lo[2], hi[2];
    SC_MPI_CHECK(err, sc__agree_range_u64(ld->comm, mine, 2, lo, hi));
    if (lo[0] == hi[0] && lo[1] == hi[1])
        return SC_OK;
    return sc__seterr(err, SC_EINVAL, "rank %d: source '%s' is %llu shards of up to %llu "
                      "samples here, and %llu to %llu shards of up to %llu to %llu on the "
                      "ranks: every rank must cut the same (SC_SHARD_SIZE, SC_SKIP_LIST and "
                      "SC_BAD_SAMPLE under SC_DECODE shape them, and each rank must see the "
                      "same files)", ld->rank, ld->cfg.source, (unsigned long long)mine[0],
                      (unsigned long long)mine[1], (unsigned long long)lo[0],
                      (unsigned long long)hi[0], (unsigned long long)lo[1],
                      (unsigned long long)hi[1]);
}

/* The source, the cache and the ownership ledger, each agreed on by every rank. */
static int loader_open_data(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int rc = loader_check_epochs(ld, cfg, err);
    if (rc == SC_OK)
        rc = loader_agree(ld, sc_dataset_open(ld->comm, cfg, &ld->ds, err), err);
    if (rc == SC_OK)
        rc = loader_check_shards(ld, err);
    if (rc == SC_OK)
        rc = loader_check_plans(ld, cfg, err);
    if (rc == SC_OK)
        rc = loader_agree(ld, sc_cache_open(ld->ds, ld->comm, cfg, &ld->cache, err), err);
    if (rc != SC_OK)
        return rc;
    sc__ledger_opts lo = {cfg->verify == SC_VERIFY_FULL,
                          cfg->audit_dir[0] ? cfg->audit_dir : NULL};
    ld->nshards = ld->ds->nshards;
    uint64_t units = cfg->partitions ? cfg->partitions : (uint64_t)ld->size;
    return loader_agree(ld, sc__ledger_open(ld->comm, ld->nshards, SC__PLAN_MAX_CUTS(units),
                                            ld->ds->shard_first, &lo, &ld->ledger, err),
                        err);
}

static const char *loader_device_name(int mode)
{
    static const char *names[] = {"auto", "host", "cuda", "sim"};
    return mode >= 0 && mode < 4 ? names[mode] : "unknown";
}

/*
 * Every rank must ask for the same device, and "auto" means the GPU only
 * when every rank has one: a rank left on host memory beside ranks on GPUs
 * would meet their NCCL set-up with its own MPI all-reduce, and the job
 * would hang.
 */
static int loader_resolve_device(sc_loader *ld, const sc_config *cfg, sc_device_mode *mode,
                                 sc_error *err)
{
    /* Ranks on different paths would meet each other's collectives. */
    int lo = 0, hi = 0, rc = loader_range(ld, (int)*mode, &lo, &hi, err);
    if (rc == SC_OK && lo != hi)
        rc = sc__seterr(err, SC_EINVAL,
                        "rank %d: SC_DEVICE is %s here, and differs between ranks (from %s "
                        "to %s): every rank must ask for the same",
                        ld->rank, loader_device_name(*mode), loader_device_name(lo),
                        loader_device_name(hi));
    if (rc != SC_OK || *mode != SC_DEVICE_AUTO)
        return rc;
    int n = 0;
    rc = loader_agree(ld, sc__dev_probe(*mode, &n, err), err);
    if (rc == SC_OK) /* lo: every rank has a GPU; hi: some rank has one */
        rc = loader_range(ld, n > 0, &lo, &hi, err);
    if (rc != SC_OK)
        return rc;
    if (ld->rank == 0 && lo != hi)
        sc__log(cfg->log_level, SC__LOG_WARN, ld->rank,
                "SC_DEVICE=auto: some ranks see a GPU and some do not; batches stay in host "
                "memory on every rank (SC_DEVICE=cuda makes this an error)");
    *mode = lo ? SC_DEVICE_CUDA : SC_DEVICE_HOST;
    return SC_OK;
}

/* Two ranks of a node on one GPU is an error: NCCL refuses it later, worse. */
static int loader_own_device(sc_loader *ld, sc_error *err)
{
    char id[SC__DEV_ID_BYTES] = "";
    int distinct = 0, twin = -1;
    int rc = ld->device >= 0 ? sc__dev_identity(ld->dev, id, err) : SC_OK;
    rc = loader_agree(ld, rc, err);
    if (rc == SC_OK) /* every rank, on a device or not: it is collective */
        rc = sc__node_same(ld->comm, id, (int)sizeof id, &distinct, &twin, err);
    if (rc == SC_OK && twin >= 0 && ld->device >= 0)
        rc = sc__seterr(err, SC_ECUDA,
                        "rank %d: %d ranks on this node share %d GPU%s of %d visible (GPU %d, "
                        "%s, is rank %d's too): each rank needs its own; select a different "
                        "device on each rank before opening (or none: the loader takes "
                        "node-local rank modulo the visible count), start at most %d ranks "
                        "per node, or make more GPUs visible (CUDA_VISIBLE_DEVICES)",
                        ld->rank, ld->local_size, distinct, distinct == 1 ? "" : "s",
                        sc__dev_visible(ld->dev), ld->device, id, twin,
                        sc__dev_visible(ld->dev));
    return loader_agree(ld, rc, err);
}

/* Where batches land, agreed on by every rank. */
static int loader_open_device(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    sc_device_mode mode = cfg->device;
    int rc = loader_resolve_device(ld, cfg, &mode, err);
    if (rc == SC_OK) {
        rc = sc__dev_open(mode, ld->local_rank, &ld->dev, &ld->device, err);
        if (rc != SC_OK)
            sc__errctx(err, rc, "rank %d", ld->rank);
        rc = loader_agree(ld, rc, err);
    }
    if (rc == SC_OK)
        rc = loader_own_device(ld, err);
    return rc;
}

/* Transfers between nodes, unless SC_PEERS=off (which every rank must say alike). */
static int loader_open_peers(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int lo = 0, hi = 0, rc = loader_range(ld, (int)cfg->peers, &lo, &hi, err);
    if (rc == SC_OK && cfg->peers != SC_PEERS_ON && cfg->peers != SC_PEERS_OFF)
        rc = sc__seterr(err, SC_EINVAL, "rank %d: sc_config.peers is %d, neither SC_PEERS_ON "
                        "nor SC_PEERS_OFF", ld->rank, (int)cfg->peers);
    else if (rc == SC_OK && lo != hi)
        rc = sc__seterr(err, SC_EINVAL,
                        "rank %d: SC_PEERS is %s here, and differs between ranks: every rank "
                        "must say the same (a rank asking another that does not answer would "
                        "wait for nothing)",
                        ld->rank, cfg->peers == SC_PEERS_ON ? "on" : "off");
    if (rc != SC_OK || cfg->peers != SC_PEERS_ON)
        return rc;
    sc__peer_opts po = {cfg->peer_bytes, LOADER_PEER_WAIT_S, cfg->log_level, ld->tr};
    return loader_agree(ld, sc__peer_open(ld->comm, ld->ds, ld->cache, &po, &ld->peer, err),
                        err);
}

/*
 * While the caller waits for a batch: transfers from peers go on (a batch
 * may need one), this rank answers the others' asks and claims (where
 * they wait for it: across nodes, or a window whose atomics need their
 * target), and the next epoch's plan broadcast moves on (its payload is
 * posted once its header is in).  Errors wait for the next call that can
 * return them.
 */
static void loader_idle(void *arg)
{
    sc_loader *ld = arg;
    sc__peer_pump(ld->peer, NULL);
    sc__ledger_progress(ld->ledger, NULL);
    sc__loader_progress(ld);
    sc__loader_release_next(ld);
}

/*
 * Where a skip would find no replacement, another sample of its shard not
 * skipped: a shard SC_SKIP_LIST names whole, and under SC_BAD_SAMPLE=skip
 * (skip) one that leaves fewer than two unlisted (the one left could turn
 * out bad itself).  Layout A's last shard and layout B's grouped and cut
 * files can be that small, so every shard is looked at here rather than
 * met in the middle of an epoch.  The first such shard (nshards if none),
 * its listed samples in *listed, and how many such shards in *count.
 */
static uint64_t loader_unreplaceable(const sc_dataset *ds, int skip, const sc__skiplist *l,
                                     uint64_t *listed, uint64_t *count)
{
    uint64_t found = ds->nshards, i = 0;
    *listed = *count = 0;
    for (uint64_t s = 0; (skip || l) && s < ds->nshards; s++) {
        uint64_t n = 0; /* shard s's listed samples: l->ids ascend, distinct */
        for (; l && i < l->n && l->ids[i] < ds->shard_first[s + 1]; i++)
            n++;
        uint64_t left = ds->shard_sizes[s] - n;
        if (!((n && !left) || (skip && left < 2)))
            continue;
        if ((*count)++ == 0)
            found = s, *listed = n;
    }
    return found;
}

/* The refusal of shard s (loader_unreplaceable's), naming it and the ways out. */
static int loader_refuse_unreplaceable(const sc_loader *ld, const sc_config *cfg, uint64_t s,
                                       uint64_t listed, uint64_t count, sc_error *err)
{
    const sc_dataset *ds = ld->ds;
    int skip = sc__config_skips_bad(cfg);
    uint64_t n = ds->shard_sizes[s];
    char why[160];
    if (listed == n)
        snprintf(why, sizeof why, "has every sample in the skip list");
    else if (!listed)
        snprintf(why, sizeof why, "has only that one sample");
    else
        snprintf(why, sizeof why, "has %llu of its %llu samples in the skip list, and the one "
                 "left could not be replaced were it bad too", (unsigned long long)listed,
                 (unsigned long long)n);
    return sc__seterr(err, SC_EINVAL, "rank %d: %s replaces a skipped sample by another of its "
                      "shard, and shard %llu of source '%s' (%llu sample%s from sample %llu; "
                      "SC_SHARD_SIZE=%llu%s) %s%s: choose an SC_SHARD_SIZE that leaves every "
                      "shard %s not skipped%s%s", ld->rank,
                      skip ? "SC_BAD_SAMPLE=skip" : "SC_SKIP_LIST", (unsigned long long)s,
                      ds->path, (unsigned long long)n, n == 1 ? "" : "s",
                      (unsigned long long)ds->shard_first[s], (unsigned long long)ds->shard_size,
                      cfg->shard_size == SC_SHARD_AUTO ? ", auto" : "", why,
                      count > 1 ? " (and other shards too)" : "",
                      skip ? "two samples or more" : "a sample",
                      !skip || listed ? ""
                      : cfg->shard_size != SC_SHARD_AUTO ? " (SC_SHARD_SIZE=auto looks for one)"
                      : " (auto found none: it tried 32 sizes up from its own, then doubled "
                        "32 times)",
                      skip ? ", or, where SC_SKIP_LIST names every bad sample, keep "
                             "SC_BAD_SAMPLE=error" : "");
}

/*
 * SC_BAD_SAMPLE and SC_SKIP_LIST (read by the dataset's open, against what
 * its sample ids mean) checked against what can replace a sample: another
 * of its shard, at delivery.
 */
static int loader_open_skiplist(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int rc = SC_OK, skip = sc__config_skips_bad(cfg);
    const sc__skiplist *l = sc__fields_skip(ld->ds);
    uint64_t listed, count, s = loader_unreplaceable(ld->ds, skip, l, &listed, &count);
    if (cfg->bad_sample != SC_BAD_SAMPLE_ERROR && cfg->bad_sample != SC_BAD_SAMPLE_SKIP)
        rc = sc__seterr(err, SC_EINVAL, "rank %d: sc_config.bad_sample is %d, neither "
                        "SC_BAD_SAMPLE_ERROR nor SC_BAD_SAMPLE_SKIP", ld->rank,
                        (int)cfg->bad_sample);
    else if (s < ld->ds->nshards)
        rc = loader_refuse_unreplaceable(ld, cfg, s, listed, count, err);
    else if (skip && sc__fields_decodes_once(ld->ds))
        rc = sc__seterr(err, SC_EINVAL, "rank %d: SC_BAD_SAMPLE=skip replaces an image that "
                        "fails to decode at delivery (SC_DECODE=jpeg); decode-once (jpeg-once) "
                        "decodes a shard once into the cache, where a bad image has no "
                        "replacement: list every bad sample first with `shardcache scan "
                        "--decode` and pass the list as SC_SKIP_LIST", ld->rank);
    rc = loader_agree(ld, rc, err);
    if (rc == SC_OK && cfg->bad_sample == SC_BAD_SAMPLE_SKIP && !skip && ld->rank == 0)
        sc__log(cfg->log_level, SC__LOG_WARN, 0, "SC_BAD_SAMPLE=skip skips an image that fails "
                "to decode, and source '%s' is not decoded (no SC_DECODE): it skips nothing "
                "here (SC_SKIP_LIST skips the samples it names)", ld->ds->path);
    if (rc == SC_OK && l && ld->rank == 0)
        sc__log(cfg->log_level, SC__LOG_INFO, 0, "SC_SKIP_LIST '%s': %llu samples skipped, "
                "each replaced by another sample of its shard", cfg->skip_list,
                (unsigned long long)l->n);
    return rc;
}

/*
 * The shuffle window in samples, resolved here so that checkpoints record
 * (and resumes compare) samples: what SC_STREAM_BYTES holds in whole
 * shards (config.h), said on rank 0 with what it costs (the shards a batch
 * can draw from), and warned of when the user's window was lowered or a
 * batch alone needs more than the bound.  Returns the bound the stream
 * keeps its shards within: SC_STREAM_BYTES, or a batch's shards where
 * they alone need more (the next batch's loads then go on as the one
 * being built lets its shards go, not only after it).
 */
static uint64_t loader_resolve_window(sc_loader *ld, const sc_config *cfg)
{
    const sc_dataset *ds = ld->ds;
    uint64_t S = ds->shard_size ? ds->shard_size : 1, shard = S * ds->sample_bytes;
    uint64_t least = cfg->partitions ? cfg->batch_size * (uint64_t)ld->size : cfg->batch_size;
    uint64_t w = sc__config_window(cfg, ds->sample_bytes, S, least);
    uint64_t held = sc__config_window_bytes(w, cfg->partitions, ds->sample_bytes, S);
    ld->cfg.shuffle_window = w;
    /* a rank's own: with partitions `held` is the job's, P units of which this rank has P / R */
    uint64_t R = cfg->partitions ? (uint64_t)ld->size : 1, mine = held;
    if (cfg->partitions)
        mine = sc__config_window_bytes(w / R, (cfg->partitions + R - 1) / R, ds->sample_bytes, S);
    uint64_t bound = mine > cfg->stream_bytes ? mine : cfg->stream_bytes;
    if (ld->rank != 0)
        return bound;
    int lvl = cfg->log_level;
    uint64_t shards = shard ? held / shard : 0; /* a window past the dataset holds it all */
    sc__log(lvl, SC__LOG_INFO, 0, "shuffle window: %llu samples%s%s, at most %llu shards of %llu "
            "bytes held at once (%llu bytes; SC_STREAM_BYTES=%llu holds two windows): a batch "
            "draws from at most that many shards",
            (unsigned long long)w, cfg->shuffle_window == SC_WINDOW_AUTO ? " (auto)" : "",
            w >= ds->nsamples ? ", the whole dataset" : "",
            (unsigned long long)(shards < ds->nshards ? shards : ds->nshards),
            (unsigned long long)shard,
            (unsigned long long)(shards < ds->nshards ? held : ds->nsamples * ds->sample_bytes),
            (unsigned long long)cfg->stream_bytes);
    uint64_t asked = cfg->shuffle_window;
    if (asked != SC_WINDOW_AUTO && w < asked)
        sc__log(lvl, SC__LOG_WARN, 0,
                "SC_SHUFFLE_WINDOW=%llu spans up to %llu bytes of shards, more than half of "
                "SC_STREAM_BYTES=%llu: the window is %llu samples (%llu bytes of shards); "
                "SC_STREAM_BYTES=%llu would hold the one asked for",
                (unsigned long long)asked,
                (unsigned long long)sc__config_window_bytes(asked, cfg->partitions,
                                                            ds->sample_bytes, S),
                (unsigned long long)cfg->stream_bytes, (unsigned long long)w,
                (unsigned long long)held,
                (unsigned long long)(2 * sc__config_window_bytes(asked, cfg->partitions,
                                                                 ds->sample_bytes, S)));
    if (w == least && held > cfg->stream_bytes / 2)
        sc__log(lvl, SC__LOG_WARN, 0,
                "a batch of %llu samples spans up to %llu bytes of shards of %llu samples, "
                "more than half of SC_STREAM_BYTES=%llu: the window is one batch and the "
                "stream holds up to %llu bytes; raise SC_STREAM_BYTES or lower SC_SHARD_SIZE",
                (unsigned long long)least, (unsigned long long)held, (unsigned long long)S,
                (unsigned long long)cfg->stream_bytes, (unsigned long long)bound);
    return bound;
}

/*
 * The ring as resolved (ld->cfg, slots of `slot` bytes), said by rank 0:
 * its slots and how samples go into them at SC_LOG=2, and a warning where
 * a decoding loader was given fewer slots than producers (a producer
 * builds one batch at a time into a free slot, so the others wait, which a
 * decode-bound loader shows; auto gives them as many).
 */
static void loader_say_ring(const sc_loader *ld, const sc_config *cfg, uint64_t slot,
                            int decodes)
{
    uint64_t depth = ld->cfg.prefetch_batches;
    int producers = ld->cfg.producers;
    if (ld->rank != 0)
        return;
    const char *copy = sc__stream_copies_past_cache(ld->stream)
                           ? "past the CPU's cache (a ring of 4 MiB or more)"
                           : "by memcpy";
    if (cfg->prefetch_batches == SC_PREFETCH_AUTO)
        sc__log(cfg->log_level, SC__LOG_INFO, 0, "batch ring: %llu slots of %llu bytes "
                "(SC_PREFETCH_BATCHES=auto: %d, fewer where %d would take more than %llu MiB, "
                "%d at least, or the producers where they decode, or what the caller holds); "
                "samples copied %s", (unsigned long long)depth, (unsigned long long)slot,
                SC_PREFETCH_AUTO_MAX, SC_PREFETCH_AUTO_MAX,
                (unsigned long long)(SC_PREFETCH_AUTO_BYTES >> 20), SC_PREFETCH_AUTO_MIN, copy);
    else
        sc__log(cfg->log_level, SC__LOG_INFO, 0, "batch ring: %llu slots of %llu bytes; "
                "samples copied %s", (unsigned long long)depth, (unsigned long long)slot, copy);
    if (decodes && depth < (uint64_t)producers)
        sc__log(cfg->log_level, SC__LOG_WARN, 0,
                "SC_DECODE decodes in the producers as they build batches, and "
                "SC_PREFETCH_BATCHES=%llu lets only %llu of the %d producers build at once: "
                "SC_PREFETCH_BATCHES=%d keeps them all busy",
                (unsigned long long)depth, (unsigned long long)depth, producers, 2 * producers);
}

/* Tracing, the device ring and the producers, each agreed on by every rank. */
static int loader_open_pipeline(sc_loader *ld, const sc_config *cfg, sc_error *err)
{
    int rc = sc__trace_open(ld->comm, cfg->trace, cfg->trace_events, &ld->trace, err);
    rc = loader_agree(ld, rc, err);
    ld->tr = sc__trace_ring(ld->trace, "consumer");
    if (rc == SC_OK)
        rc = loader_open_peers(ld, cfg, err);
    if (rc == SC_OK)
        rc = loader_open_device(ld, cfg, err);
    int producers = 2;
    if (rc == SC_OK) /* collective: every rank, whatever SC_PRODUCERS says */
        rc = loader_agree(ld, loader_default_producers(ld, &producers, err), err);
    if (rc != SC_OK)
        return rc;
    if (rc == SC_OK)
        rc = loader_open_skiplist(ld, cfg, err);
    if (rc != SC_OK)
        return rc;
    uint64_t bound = loader_resolve_window(ld, cfg);
    /*
     * Each partition shuffles within window / P (core/schedule.c): say when
     * that holds fewer than two of the blocks it gives each batch.
     */
    uint64_t block = cfg->partitions ? cfg->batch_size * (uint64_t)ld->size / cfg->partitions : 0;
    uint64_t unit_window = sc__unit_window(ld->cfg.shuffle_window, cfg->partitions);
    if (ld->rank == 0 && block && ld->cfg.shuffle_window && unit_window < 2 * block)
        sc__log(cfg->log_level, SC__LOG_WARN, 0,
                "SC_SHUFFLE_WINDOW of %llu samples over SC_PARTITIONS=%llu leaves each "
                "partition a window of %llu, fewer than two of the %llu-sample blocks it "
                "gives each global batch: batches mix little; a window of %llu or more would",
                (unsigned long long)ld->cfg.shuffle_window, (unsigned long long)cfg->partitions,
                (unsigned long long)unit_window,
                (unsigned long long)block,
                (unsigned long long)(2 * block * cfg->partitions));
    sc__stream_opts so = {
        .producers = cfg->producers > 0 ? cfg->producers : producers,
        .depth = cfg->prefetch_batches,
        .batch_size = cfg->batch_size,
        .mem_bytes = bound,
        /* the pool's fill at open: twice a rank's share of the shards (an epoch, the next's) */
        .fill_most = 2 * ((ld->ds->nshards + (uint64_t)ld->size - 1) / (uint64_t)ld->size) + 2,
        .seed = cfg->seed,
        .rank = ld->rank,
        .dev = ld->dev,
        .device = ld->device,
        .trace = ld->trace,
        .tf = sc__fields_shard_tf(ld->ds, cfg),
        .idle = loader_idle,
        .idle_arg = ld,
        .skip_bad = cfg->bad_sample == SC_BAD_SAMPLE_SKIP,
        .skip = sc__fields_skip(ld->ds),
        .log_level = cfg->log_level,
        .fill_all = cfg->cache_writes == SC_CACHE_WRITES_ALL,
    };
    int decodes = 0;
    for (int f = 0; f < ld->ds->nfields; f++)
        so.crop[f] = sc__fields_crop(ld->ds, f), decodes |= so.crop[f].width > 0;
    uint64_t decoders = decodes ? (uint64_t)so.producers : 0; /* auto: a slot each */
    so.least = cfg->prefetch_least > decoders ? cfg->prefetch_least : decoders;
    rc = loader_agree(ld, sc__stream_open(ld->ds, ld->cache, &so, &ld->stream, err), err);
    if (rc != SC_OK)
        return rc;
    uint64_t slot;
    ld->cfg.prefetch_batches = sc__stream_ring(ld->stream, &slot); /* sc_loader_config's */
    ld->cfg.producers = so.producers;
    loader_say_ring(ld, cfg, slot, decodes);
    return SC_OK;
}

/*
 * Settings the stream would refuse only after the dataset and the cache
 * are open, refused first, by name.
 */
static int loader_check_ring(const sc_config *cfg, sc_error *err)
{
    if (cfg->prefetch_batches == 0)
        return sc__seterr(err, SC_EINVAL, "SC_PREFETCH_BATCHES=0: the ring needs a slot at "
                          "least (auto, the default, sizes it by the batch's bytes)");
    if (cfg->producers < 0)
        return sc__seterr(err, SC_EINVAL, "SC_PRODUCERS=%d: at least 1 (0: by the cores)",
                          cfg->producers);
    return SC_OK;
}

/* err is never NULL here (sc_loader_open gives its own). */
static int loader_open(MPI_Comm comm, const sc_config *cfg, sc_loader **out, sc_error *err)
{
    if (!cfg || !out)
        return sc__seterr(err, SC_EINVAL, "sc_loader_open: NULL argument");
    *out = NULL;
    sc_loader *ld = NULL;
    int rc = loader_new(comm, cfg, &ld, err);
    if (rc == SC_OK) /* before any work, on every rank: a rank refused alone would hang the rest */
        rc = loader_agree(ld, sc_launcher_check(cfg, err), err);
    if (rc == SC_OK)
        rc = loader_agree(ld, loader_check_ring(cfg, err), err);
    if (rc == SC_OK)
        rc = sc__jobwide_check(ld->comm, cfg, err);
    if (rc == SC_OK)
        rc = loader_open_data(ld, cfg, err);
    if (rc == SC_OK)
        rc = loader_open_pipeline(ld, cfg, err);
    if (rc != SC_OK) {
        sc_error keep = *err; /* close's own error must not replace the cause */
        if (ld) {
            ld->failed = 1; /* nothing is in flight yet: close frees, it does not abandon */
            sc_loader_close(ld);
        }
        *err = keep;
        return rc;
    }
    *out = ld;
    return sc__errok(err);
}

/* With no `err` the caller still learns why, on stderr, prefixed by the rank. */
int sc_loader_open(MPI_Comm comm, const sc_config *cfg, sc_loader **out, sc_error *err)
{
    sc_error mine = SC_ERROR_INIT;
    int rc = loader_open(comm, cfg, out, err ? err : &mine);
    if (rc != SC_OK && !err) {
        int rank = 0;
        MPI_Comm_rank(comm, &rank);
        fprintf(stderr, "shardcache[rank %d]: %s: %s\n", rank, sc_status_name(rc), mine.msg);
    }
    return rc;
}

int sc_loader_device(const sc_loader *ld)
{
    return ld ? ld->device : -1;
}

const sc_dataset *sc_loader_dataset(const sc_loader *ld)
{
    return ld ? ld->ds : NULL;
}

int sc_loader_config(const sc_loader *ld, sc_config *out)
{
    if (!ld || !out)
        return SC_EINVAL;
    *out = ld->cfg;
    return SC_OK;
}

int sc_loader_field(const sc_loader *ld, int i, sc_field_info *out)
{
    if (!ld || !out || i < 0 || i >= ld->ds->nfields)
        return SC_EINVAL;
    sc__field f;
    sc__fields_decoded(ld->ds, i, &f);
    sc__fields_augmented(ld->ds, i, &f);
    sc__field_info(&f, out);
    return SC_OK;
}

const char *sc_loader_last_error(const sc_loader *ld)
{
    return ld ? ld->err.msg : "no loader";
}

/*
 * At close, rank 0 names every epoch that was not exactly-once, so that a
 * job whose loop never asked for a verdict (a rank that ran fewer epochs,
 * an epoch left in the middle) does not end as if all were well.
 */
static void loader_say_failed_epochs(sc_loader *ld)
{
    for (uint64_t i = 0; ld->rank == 0 && ld->started && i < ld->nreps; i++) {
        const sc_exactly_once *v = &ld->reps[i].exactly_once;
        if (v->verified && !v->ok)
            sc__log(ld->cfg.log_level, SC__LOG_WARN, 0, "at close: epoch %llu was not "
                    "exactly-once in this run: %s (an epoch left at a checkpoint is completed "
                    "by the job that resumes from it)", (unsigned long long)v->epoch, v->detail);
    }
}

int sc_loader_close(sc_loader *ld)
{
    if (!ld)
        return SC_OK;
    int rc = ld->failed ? ld->fatal.code : SC_OK;
    /* No producer may wait for a transfer while it is joined: reservations withdrawn. */
    sc__peer_give_up(ld->peer, UINT64_MAX, NULL);
    sc__stream_close(ld->stream);
    ld->stream = NULL;
    /* The producers are joined: every ring can be drained and the file finished. */
    sc_error terr = SC_ERROR_INIT;
    if (sc__trace_close(ld->trace, &terr) != SC_OK && rc == SC_OK) {
        rc = terr.code;
        ld->err = terr;
    }
    ld->trace = NULL;
    if (ld->ledger) {
        /*
         * Ranks may close in different epochs.  First what this rank can
         * post alone: its unfinished epoch, abandoned; and on rank 0 one
         * more (empty) plan broadcast, for a rank already waiting on it,
         * also where rank 0 began no epoch (the others may be in their
         * first begin: they waited there forever).
         */
        sc__loader_settle(ld);
        if (ld->rank == 0)
            sc__loader_post(ld, ld->posted_to, 1);
        /* Then the same broadcasts and verifications on every rank. */
        unsigned long long mine[2] = {ld->posted_to, ld->settled_to}, all[2] = {mine[0], mine[1]};
        int e = MPI_Allreduce(mine, all, 2, MPI_UNSIGNED_LONG_LONG, MPI_MAX, ld->comm);
        if (e != MPI_SUCCESS && rc == SC_OK) /* then this rank finishes only its own */
            rc = sc__mpi_err(&ld->err, e, "MPI_Allreduce of the epochs in flight at close",
                             __FILE__, __LINE__);
        for (uint64_t e = ld->posted_to; e < all[0]; e++)
            sc__loader_post(ld, e, 1);
        for (uint64_t e = ld->settled_to; e < all[1]; e++)
            sc__ledger_abandon(ld->ledger, e, UINT64_MAX, NULL);
        for (int i = 0; i < NREC; i++) {
            sc__loader_rec *r = &ld->recs[i];
            if (r->state != REC_FREE && r->bc_live) {
                sc_plan *got = NULL;
                sc__plan_bcast_finish(&r->bc, NULL, &got, NULL);
                sc_plan_free(got);
                r->bc_live = 0;
            }
        }
        for (uint64_t e = ld->started ? ld->first : 0; e < all[1]; e++) {
            sc_exactly_once v;
            sc_epoch_summary *rep = sc__loader_report_of(ld, e);
            if (sc__ledger_result(ld->ledger, e, 1, &v, NULL) == SC_OK && v.verified && rep)
                rep->exactly_once = v;
        }
        loader_say_failed_epochs(ld);
        /* Every rank is here: the transfers end together (a collective). */
        sc__peer_close(ld->peer);
        ld->peer = NULL;
        sc__ledger_close(ld->ledger);
    }
    for (int i = 0; i < NREC; i++)
        sc__loader_rec_free(ld, &ld->recs[i]);
    sc__resume_free(&ld->resume.state);
    sc__share_free(&ld->resume.share);
    sc_plan_free(ld->last_made);
    sc__dev_close(ld->dev);
    sc_cache_close(ld->cache);
    if (ld->ds)
        sc_dataset_close(ld->ds);
    if (ld->comm != MPI_COMM_NULL)
        MPI_Comm_free(&ld->comm);
    if (ld->hdr != MPI_COMM_NULL)
        MPI_Comm_free(&ld->hdr);
    if (ld->data != MPI_COMM_NULL)
        MPI_Comm_free(&ld->data);
    free(ld->reps);
    free(ld);
    return rc;
}
