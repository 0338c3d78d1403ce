/*
 * shardcache.h - the public C API of shardcache.
 *
 * shardcache shards a training dataset across MPI ranks each epoch, caches
 * each rank's shards node-locally and streams batches to the training loop.
 * This header is what a training loop needs: statuses, settings, the
 * loader and its batches, epoch summaries with the exactly-once verdict,
 * checkpoints, and transforms.  The tool-level API (plans, datasets, the
 * cache, file formats) is in the headers under <shardcache/>, which this header includes,
 * so `#include <shardcache.h>` is all any caller needs.  Every handle is
 * opaque, and every function returns an int status (SC_OK or a negative
 * SC_E* code, see SC_STATUS_LIST) instead of aborting.  Where a call has
 * no handle to keep its message in, it takes an optional `sc_error *` that
 * receives the status and a sentence naming the epoch, rank, shard or file
 * involved.
 *
 * ABI.  The shared library's soname carries the major version
 * (libshardcache.so.MAJOR), and every exported symbol carries the version
 * node of the release that added it (SHARDCACHE_0.1, ...; the linker script
 * runtime/shardcache.map lists them, and a test checks that it lists
 * exactly what the library exports).  A release adds symbols in a new node
 * and never changes an old one; a change that would break a compiled
 * caller bumps the major version.  Structs that callers fill have an
 * *_INIT initializer or an init call; structs the library writes into the
 * caller's memory, and those callers fill and pass by pointer, end in
 * reserved space (sc_config, sc_batch, sc_epoch_info, sc_epoch_summary and
 * its sc_exactly_once, sc_transform and sc_field_info, sc_plan_params,
 * sc_plan_info, sc_plan_cut, sc_quality_params, sc_quality and its
 * sc_quality_figures, sc_dataset_info, sc_cache_stats, sc_cache_dir_info,
 * sc_features): new fields take their room from it, so no size changes
 * within a major version (tests/unit/test_abi.c holds them to it).
 */
#ifndef SHARDCACHE_H
#define SHARDCACHE_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#include "shardcache/base.h"
#include "shardcache/cache.h"
#include "shardcache/config.h"
#include "shardcache/dataset.h"
#include "shardcache/formats.h"
#include "shardcache/plan.h"
#include "shardcache/plan_share.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------ */
/* Transforms                                                               */
/* ------------------------------------------------------------------------ */

/*
 * Transform once, augment every time.
 *
 * `shard` runs on a producer thread when a shard is first read from the
 * source and maps the source's fields (in[i]: nsamples * their sample
 * bytes, in sc_dataset_field order of the source, each 8-aligned; a
 * variable-length field's is nsamples + 1 uint64 offsets, in bytes from
 * its values, then the values) to the declared output fields (out[i]:
 * nsamples * the declared sample bytes; outputs have fixed shapes).  The cache keeps
 * the output, so later epochs (and jobs) skip the transform; `name` and
 * `version` are part of the cache key, so changing either invalidates the
 * entries.  NULL keeps the source's fields (and `out` is ignored).
 *
 * `augment` runs on a producer thread on every delivery of every sample,
 * in the batch's buffers (fields[i] points at this sample's bytes of field
 * i; for a variable-length field, at its values, whose length is not
 * passed), with `seed` a function of (SC_SEED, epoch, sample) only: runs
 * are reproducible whatever the thread count.  NULL: none.
 *
 * `outputs`, when set, declares the outputs from the inputs, so that a
 * transform made before the dataset is open (a crop that keeps the
 * images' channels, a factory by name) need not open it to learn their
 * shapes: at the open, on every rank, before any shard, it gets the
 * source's fields (in[nin], as sc_dataset_field gives them without a
 * transform) and fills out[] and *nout (1..SC_MAX_FIELDS), which take
 * the place of the struct's nout and out[] (left empty).  It may keep what
 * it learns (a shape) in arg for `shard` and `augment`, which run only
 * after it; every open of a dataset or loader with this transform calls it
 * again.  A refusal (non-zero) fails the open with SC_EINVAL and msg.
 *
 * Either returns 0, or non-zero with a reason in msg: the loader stops with
 * SC_ETRANSFORM naming the shard (transform) or the sample (augment), and
 * nothing half-transformed is cached.  Both may run concurrently on several
 * threads, for different shards and samples.
 */
typedef int (*sc_shard_fn)(void *arg, uint64_t shard, uint64_t first_sample,
                           uint64_t nsamples, const void *const *in, void *const *out,
                           char *msg, size_t msglen);
typedef int (*sc_augment_fn)(void *arg, uint64_t epoch, uint64_t sample, uint64_t seed,
                             void *const *fields, char *msg, size_t msglen);
typedef int (*sc_outputs_fn)(void *arg, const sc_field_info *in, int nin, sc_field_info *out,
                             int *nout, char *msg, size_t msglen);

struct sc_transform {
    const char *name;                  /* e.g. "normalize-crop56"; part of the cache key */
    const char *version;               /* e.g. "1"; part of the cache key */
    int nout;                          /* output fields, 1..SC_MAX_FIELDS (or from outputs) */
    sc_field_info out[SC_MAX_FIELDS];  /* name, dtype, ndims, dims (sample_bytes is computed) */
    sc_shard_fn shard;                 /* NULL: no transform */
    sc_augment_fn augment;             /* NULL: no augmentation */
    void *arg;
    /* appended (room taken from reserved[]) */
    sc_outputs_fn outputs;             /* NULL: nout and out[] as set; else declared at open */
    uint64_t reserved[3];     /* room for later fields: the size stays */
};

/*
 * A transform by name, for callers that cannot pass C pointers (the Python
 * package: Loader(transform="libx.so:symbol", transform_arg="...")): a
 * shared library exports a function of this type, which fills *out from
 * its text argument; a transform whose outputs depend on the dataset's
 * fields declares them with `outputs`, at the open.  *out and what it
 * points to must live until the process ends.  0 or a status, with the
 * reason in msg.
 */
typedef int (*sc_transform_factory)(const char *arg, sc_transform *out, char *msg,
                                    size_t msglen);

/* ------------------------------------------------------------------------ */
/* Exactly-once verification                                                */
/* ------------------------------------------------------------------------ */

/*
 * The verdict on one epoch, across the whole job.  In the default mode it
 * comes from an order-independent sketch (count, sum of strong 64-bit hashes
 * of (epoch, sample) and of their squares), one small reduction per epoch;
 * with SC_VERIFY=full a per-sample count vector names every offender.
 */
typedef struct sc_exactly_once {
    uint64_t epoch;
    int verified;          /* 0 while the reduction is still in flight */
    int ok;                /* every sample delivered (or dropped by policy, or skipped
                              with a reason: skipped_bad, skipped_listed) once */
    int full;              /* 1: counted per sample (SC_VERIFY=full) */
    uint64_t samples;      /* samples in the dataset */
    uint64_t delivered;    /* deliveries, repeats for padding excluded */
    uint64_t dropped;      /* dropped by the remainder policy */
    uint64_t padded;       /* repeats delivered for padding (flagged) */
    uint64_t duplicated;   /* extra deliveries (sketch: a lower bound) */
    uint64_t skipped;      /* samples missing: never delivered nor accounted for
                              (sketch: a lower bound) */
    char detail[256];      /* what went wrong, with sample ids in full mode */
    /* appended (room taken from reserved[]) */
    uint64_t caller_skipped; /* never handed out: the caller ended the epoch early
                                (sc_epoch_skip_rest); such an epoch is not ok */
    /* appended for bad samples (room taken from reserved[]): skipped with a reason,
       each replaced by another sample of its shard; such an epoch is still ok */
    uint64_t skipped_bad;    /* did not decode (SC_BAD_SAMPLE=skip) */
    uint64_t skipped_listed; /* in the skip list (SC_SKIP_LIST) */
    uint64_t replacements;   /* deliveries in their place (batch.replaced), not duplicates */
    uint64_t stopped;        /* ranks that stopped in this epoch, or before it (they never
                                ran it: detail names the epoch), on a sample that does not
                                decode (SC_BAD_SAMPLE=error); such an epoch is not ok */
    uint64_t stopped_rank;   /* where stopped is 1: that rank, */
    uint64_t stopped_sample; /* and the sample it stopped on */
    uint64_t reserved[1];     /* room for later fields: the size stays */
} sc_exactly_once;

/* ------------------------------------------------------------------------ */
/* The loader: what a training loop calls                                   */
/* ------------------------------------------------------------------------ */

/*
 * One loader per training process.  Collective calls (open, close) must be
 * made by every rank of the communicator; the rest are local and never wait
 * for another rank, except that a rank cannot begin epoch e before rank 0
 * has broadcast its plan (rank 0 sends epoch e+1's plan when it begins
 * epoch e) and cannot run more than SC_MAX_EPOCHS_AHEAD epochs ahead of
 * the slowest rank's verification.  Every MPI call the loader makes is made
 * from the thread that calls it; its producer threads never call MPI, so
 * MPI_THREAD_FUNNELED is enough.
 *
 *   sc_config cfg;  sc_loader *ld;  sc_batch b;
 *   sc_config_init(&cfg, NULL);                  // SC_* environment
 *   sc_loader_open(MPI_COMM_WORLD, &cfg, &ld, NULL);  // NULL: why, on stderr
 *   for (uint64_t e = 0; e < epochs; e++) {
 *       sc_epoch_begin(ld, e, NULL);
 *       while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
 *           train_step(b.data[0], b.data[1], b.size);   // on b.device
 *           sc_batch_release(ld, &b);
 *       }
 *       if (rc != SC_END_OF_EPOCH) fail(sc_loader_last_error(ld));
 *   }
 *   sc_loader_close(ld);
 */
typedef struct sc_loader sc_loader;

/* How far the fastest rank may run ahead of the slowest one's verdicts. */
#define SC_MAX_EPOCHS_AHEAD 3

typedef struct sc_epoch_info {
    uint64_t epoch;
    uint64_t batches;          /* batches this epoch: the same on every rank */
    uint64_t batch_size;
    uint64_t shards;           /* shards this rank owns this epoch */
    uint64_t samples;          /* samples in them */
    uint64_t plan_hash;        /* equal on every rank */
    double plan_wait_s;        /* time this call waited for the plan to arrive */
    uint64_t reserved[8];      /* room for later fields: the size stays */
} sc_epoch_info;

/*
 * Why a batch's slot holds a replacement (sc_batch.replaced): its sample did
 * not decode (SC_BAD_SAMPLE=skip), or is in the skip list (SC_SKIP_LIST).
 * The replacement is another sample of the same shard, chosen from (seed,
 * epoch, the skipped sample) alone: the same on every run.
 */
#define SC_REPLACED_BAD 1
#define SC_REPLACED_LISTED 2

typedef struct sc_batch {
    uint64_t epoch;
    uint64_t index;            /* 0 .. batches-1 within the epoch */
    uint64_t size;             /* samples in the batch (the batch size) */
    uint64_t padded;           /* the last `padded` samples repeat (SC_REMAINDER=pad) */
    const uint64_t *ids;       /* global sample ids, [size] */
    int nfields;
    void *data[SC_MAX_FIELDS]; /* per field, contiguous: size * the delivered sample bytes
                                * (sc_loader_field); variable-length: see offsets */
    uint64_t bytes[SC_MAX_FIELDS];
    int device;                /* -1: host memory; else the CUDA device of data[] */
    void *ready;               /* device batches: the cudaEvent_t to wait on before
                                * reading data[]; NULL for host batches */
    uint64_t seq;              /* the loader's own sequence number: do not change */
    /* appended (room taken from reserved[]) */
    const uint64_t *const *offsets; /* per field: NULL, or for a variable-length field its
                                * size + 1 offsets in bytes into data[f] (sample k is
                                * [offsets[f][k], offsets[f][k+1])), in host memory even
                                * for a device batch; bytes[f] is offsets[f][size] */
    void *detached;            /* set by sc_batch_detach: the memory it owns; do not change */
    /* appended for bad samples (room taken from reserved[]) */
    uint64_t nreplaced;        /* slots holding a replacement (0: replaced is all 0) */
    const unsigned char *replaced; /* [size]: 0, or why slot k holds a replacement:
                                * SC_REPLACED_BAD, SC_REPLACED_LISTED */
    const uint64_t *stands_for; /* [size]: where replaced[k], the sample slot k replaces
                                * (ids[k] is the replacement's id) */
    uint64_t reserved[11];     /* room for later fields: the size stays */
} sc_batch;

typedef struct sc_epoch_summary {
    sc_exactly_once exactly_once; /* verified = 0 while the job's check is in flight */
    uint64_t epoch;
    uint64_t batches;          /* delivered to this rank's consumer */
    uint64_t samples;
    uint64_t cache_hits;       /* this epoch, this rank */
    uint64_t cache_misses;
    uint64_t bytes_from_source;
    uint64_t bytes_from_cache;
    double wait_s;             /* consumer time blocked inside sc_batch_next */
    double wall_s;             /* sc_epoch_begin to the end-of-epoch return */
    uint64_t bytes_from_peers; /* of its shards, cached from other nodes' (in the epoch before) */
    double shards_per_batch;   /* distinct shards in this rank's full batches, mean: how
                                  widely its order mixes (docs/shuffle.md) */
    uint64_t cache_writes_skipped; /* of its misses, those the cache was to keep and did
                                  not: its writer was behind the reads (docs/cache.md) */
    uint64_t reserved[13];     /* room for later fields: the size stays */
} sc_epoch_summary;

/*
 * Opens the dataset (cfg->source), this rank's cache and the ownership
 * ledger, starts the producer threads and the broadcast of the first
 * epoch's plan.  Collective.  On failure *out is NULL and the message is in
 * `err` (and the same status on every rank when the cause is shared); with
 * a NULL `err` it goes to stderr instead, prefixed by the rank.  The
 * communicator comes first, as in sc_dataset_open and MPI_File_open.
 */
SC_API int sc_loader_open(MPI_Comm comm, const sc_config *cfg, sc_loader **out,
                          sc_error *err);

/*
 * Whether the program that started this process started more processes
 * than MPI_COMM_WORLD holds: torchrun (WORLD_SIZE with RANK), srun without
 * PMIx (SLURM_STEP_NUM_TASKS with SLURM_PROCID), or the mpirun of another
 * MPI (OMPI_COMM_WORLD_SIZE, PMI_SIZE) saying N while MPI sees fewer.  Each
 * such process would open a loader of its own and read the whole dataset.
 * SC_EINVAL naming both sizes, the variables and the fix; SC_OK when they
 * agree, when none is set, or with cfg->launcher_check off (NULL cfg: on).
 * Local: it reads this process's environment.  MPI must be initialized.
 * sc_loader_open calls it on every rank (and fails on every rank if one
 * fails); a program that sets up torch.distributed first may call it then.
 */
SC_API int sc_launcher_check(const sc_config *cfg, sc_error *err);

/*
 * Starts `epoch` on this rank: epochs are begun in order, the first one
 * begun may be any.  Waits only for the plan's broadcast, which rank 0
 * posts one epoch ahead.  `info` may be NULL.
 */
SC_API int sc_epoch_begin(sc_loader *ld, uint64_t epoch, sc_epoch_info *info);

/*
 * The next batch of the current epoch, SC_END_OF_EPOCH after its last one,
 * or an error (a source read, a checksum, an ownership check) that stops
 * the loader: every later call returns it too.  At most SC_PREFETCH_BATCHES
 * batches may be held at once (a held batch keeps its buffers, in any order;
 * the others keep cycling, fewer slots ahead); asking for one more is an
 * SC_EINVAL that does not stop the loader.  After an
 * SC_EMPI, end the job (MPI_Abort): other ranks may be in a collective.
 */
SC_API int sc_batch_next(sc_loader *ld, sc_batch *batch);

/*
 * Ends the current epoch early on this rank (after the training loop broke
 * out of it): its batches not yet taken are never handed out, and their
 * samples (*skipped, optional) count in the verdict as skipped by the
 * caller (sc_exactly_once.caller_skipped), not as delivered: such an epoch
 * is not exactly-once.  SC_OK once the epoch has ended.
 */
SC_API int sc_epoch_skip_rest(sc_loader *ld, uint64_t *skipped);

/*
 * `samples` of the batches already taken this epoch were not used (a thread
 * took them ahead of a loop that stopped, or their processing failed): the
 * verdict counts them as skipped by the caller, not delivered.  SC_EINVAL
 * once the epoch's last batch is taken (its verdict is on its way: take the
 * last batch only when it will be used).
 */
SC_API int sc_epoch_unused(sc_loader *ld, uint64_t samples);

/*
 * Detaches a held host batch from the loader: its memory becomes the
 * batch's own, valid (at the same addresses) until sc_batch_free, also
 * after sc_loader_close, and the ring slot gets new memory, so the loader
 * goes on as if it had been released.  SC_ENOTSUP for a loader with a
 * device (SC_DEVICE=cuda: its memory is the device's).
 */
SC_API int sc_batch_detach(sc_loader *ld, sc_batch *batch);

/* Frees a detached batch's memory (SC_EINVAL if it was not detached). */
SC_API int sc_batch_free(sc_batch *batch);

/*
 * Gives a batch's buffers back.  Host batches are reused at once.  A device
 * batch (batch->device >= 0) is reused only after the work queued so far on
 * the CUDA stream that read it: sc_batch_release_on(ld, b, stream) records
 * that point on `stream` (a cudaStream_t) and returns without waiting; the
 * loader's next copy into those buffers waits for it on the GPU, so the CPU
 * never blocks on the GPU to release.  sc_batch_release() is
 * sc_batch_release_on(ld, b, NULL): NULL is CUDA's legacy default stream,
 * which does not order work on streams created non-blocking.  The usual
 * GPU loop, with no host synchronization per step:
 *
 *   sc_batch_next(ld, &b);
 *   cudaStreamWaitEvent(stream, (cudaEvent_t)b.ready, 0);
 *   step<<<..., stream>>>(b.data[0], b.data[1], b.size);
 *   sc_batch_release_on(ld, &b, stream);
 */
SC_API int sc_batch_release(sc_loader *ld, sc_batch *batch);
SC_API int sc_batch_release_on(sc_loader *ld, sc_batch *batch, void *stream);

/*
 * Waits on the calling thread until a device batch's bytes have arrived
 * (b.ready has fired); at once for a host batch.  A GPU loop does not need
 * it (its stream waits on b.ready); a host thread reading a device batch
 * back does.
 */
SC_API int sc_batch_wait(sc_loader *ld, const sc_batch *batch);

/*
 * Makes `stream` (a cudaStream_t) wait, on the GPU, until a device batch's
 * bytes have arrived: cudaStreamWaitEvent(stream, b.ready) for callers that
 * do not link the CUDA runtime themselves (the Python package).  Returns
 * without waiting; nothing to do for a host batch.
 */
SC_API int sc_batch_wait_on(sc_loader *ld, const sc_batch *batch, void *stream);

/*
 * What happened in `epoch` on this rank, and the job's exactly-once verdict
 * if its reduction has completed (exactly_once.verified); never waits.
 * sc_epoch_wait() waits for the verdict, which needs every rank of the
 * loader's communicator to end the epoch: a wait past a minute is said
 * (SC_LOG >= 1), and again at each doubling.
 */
SC_API int sc_epoch_report(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep);
SC_API int sc_epoch_wait(sc_loader *ld, uint64_t epoch, sc_epoch_summary *rep);

/*
 * Checkpoint and resume.
 *
 * sc_loader_checkpoint writes this rank's position into buf and its
 * length into *len: a small, versioned, self-checking record of the epoch,
 * the batches taken in it, and every input the rank's schedule depends on
 * (seed, mode, exchange, remainder, batch size, shuffle window, dataset
 * fingerprint, world size).  Take it between batches, on every rank, and
 * save all of them with the model: every batch handed out so far counts as
 * consumed.  Local; never waits.  A record is SC_CHECKPOINT_BYTES, except
 * in an epoch resumed on another number of ranks, where it names the
 * samples this rank has left explicitly: up to SC_CHECKPOINT_MAX_BYTES
 * (245 ranges of the epoch's original schedules; a rank whose share needs
 * more gets SC_ENOTSUP saying so, and can checkpoint at the epoch's end).
 * A buffer of SC_CHECKPOINT_MAX_BYTES always suffices; a smaller one too
 * small for the record is SC_EINVAL, with *len the size needed.
 *
 * sc_loader_resume, right after sc_loader_open and before any epoch, takes
 * the records of all ranks of the checkpointed job (rank 0's copies count;
 * other ranks may pass none) and sets the loader to continue the
 * interrupted epoch, returned in *epoch: begin it next.  Records taken
 * after an epoch's last batch (on every rank) resume at the next epoch.  On the same number
 * of ranks every rank continues at exactly its next batch; on another, the
 * samples not yet consumed are dealt out again across the new ranks, each
 * exactly once, with equal batch counts; later epochs are planned for the
 * new size (sticky mode starts a new chain).  An epoch resumed on another
 * number of ranks can be checkpointed and resumed again, on any number of
 * ranks, any number of times.  The epoch's verdict covers all the runs.
 * Records of different epochs, jobs, runs or datasets, or taken with other
 * settings, are refused naming the difference.  Collective.
 */
#define SC_CHECKPOINT_BYTES 128
#define SC_CHECKPOINT_MAX_BYTES 4096
SC_API int sc_loader_checkpoint(sc_loader *ld, void *buf, size_t cap, size_t *len);
SC_API int sc_loader_resume(sc_loader *ld, const void *const *blobs, const size_t *lens,
                            int nblobs, uint64_t *epoch);

/*
 * Where this loader's batches land, agreed by every rank at open: -1 for
 * host memory, else the device (CUDA's, or the simulated one's number with
 * SC_DEVICE=sim), current on the thread that opened the loader.
 */
SC_API int sc_loader_device(const sc_loader *ld);

/* The dataset the loader reads: its fields, with sc_dataset_field(). */
SC_API const sc_dataset *sc_loader_dataset(const sc_loader *ld);
/*
 * The settings the loader runs with: the sc_config it was opened with,
 * but SC_SHUFFLE_WINDOW, SC_PREFETCH_BATCHES and SC_PRODUCERS as resolved
 * (auto, SC_PRODUCERS=0, or a window lowered to fit, replaced by what it
 * chose); other auto settings come back as given (the shard size:
 * sc_dataset_info; the device: sc_loader_device).  SC_EINVAL for a NULL
 * loader or out.
 */
SC_API int sc_loader_config(const sc_loader *ld, sc_config *out);
/*
 * Field i of the loader's batches as delivered: the dataset's field, or
 * for one decoded every epoch (SC_DECODE=jpeg) its images, 3 x N x N
 * uint8.  SC_EINVAL for a NULL loader or out, or i out of range.
 */
SC_API int sc_loader_field(const sc_loader *ld, int i, sc_field_info *out);

/* The message of the last failed call on this loader ("" if none). */
SC_API const char *sc_loader_last_error(const sc_loader *ld);

/*
 * Stops the producers, finishes every broadcast and reduction still in
 * flight (an unfinished epoch counts as failed), closes everything.
 * Collective; safe mid-epoch and after errors.  Returns the first error.
 */
SC_API int sc_loader_close(sc_loader *ld);

#ifdef __cplusplus
}
#endif

#endif /* SHARDCACHE_H */
