/*
 * Checkpoint and resume (sc_loader_checkpoint, sc_loader_resume) under
 * mpiexec -n 1, 2 and 4.  A job runs epoch 0 and part of epoch 1, every
 * rank checkpoints and the job stops (as if killed: no end of epoch);
 * the job is resumed on the same number of ranks and on fewer, on
 * sub-communicators of this run: the union of both runs delivers every
 * sample of epoch 1 at most once and leaves out exactly the samples the
 * verdict says were dropped, the verdict of the resumed epoch is ok, the
 * next epoch is exactly-once too, every batch carries the right bytes; on
 * the same number of ranks each rank's first batch is exactly the batch an
 * uninterrupted job would have delivered next.  Records of another epoch,
 * dataset or seed, damaged or missing, are refused naming why.  Run again
 * with each rank a pretend node (SC_TEST_NODES, ctest's
 * mpi.test_resume.nodes4): shards then move between nodes over MPI, and
 * the first run stops with transfers for the next epoch asked.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "config.h"
#include "fault.h"
#include "hash.h"
#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
static uint64_t nb_epoch1; /* epoch 1's batches per rank in the first run */
static char dir[1024], src[1200];

enum { NSHARDS = 30, SHARD = 10, W = 2, NSAMPLES = NSHARDS * SHARD - 5, B = 7 };
#define STOP_BEFORE_LAST UINT64_MAX

static sc_config config(sc_shuffle_mode mode, sc_remainder rem)
{
    sc_config c = sc_t_config(src, dir, SHARD, B, 99);
    c.mode = mode;
    c.exchange = 0.3;
    c.remainder = rem;
    c.shuffle_window = 32;
    /* Each rank a pretend node (ctest's mpi.test_resume.nodes): a cache of its own. */
    size_t n = strlen(c.cache_dir);
    if (getenv("SC_TEST_NODES"))
        snprintf(c.cache_dir + n, sizeof c.cache_dir - n, "/node%d", rank);
    return c;
}

static void check_bytes(const sc_batch *b)
{
    char why[256];
    if (!sc_t_samples_ok(b, W, NSAMPLES, why, sizeof why))
        fail_msg("%s", why);
}

/*
 * Epoch 0 whole, then `stop` batches of epoch 1 on each rank (fewer if it
 * has fewer), the checkpoint, and a close without ending the epoch.  Real
 * deliveries of epoch 1 are counted in count1 (this rank's); every rank's
 * record lands in blobs[rank] (gathered to all).
 */
static void first_run(const sc_config *c, uint64_t stop, uint32_t *count1,
                      unsigned char (*blobs)[SC_CHECKPOINT_BYTES], uint64_t *next_ids)
{
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, c, &ld, &err), &err);
    sc_batch b;
    int rc;
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    while ((rc = sc_batch_next(ld, &b)) == SC_OK)
        sc_batch_release(ld, &b);
    assert_int_equal(rc, SC_END_OF_EPOCH);
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 1, &info), SC_OK);
    uint64_t taken = 0;
    nb_epoch1 = info.batches;
    if (stop == STOP_BEFORE_LAST) /* a short rank then has only padding left */
        stop = info.batches ? info.batches - 1 : 0;
    for (; taken < stop && (rc = sc_batch_next(ld, &b)) == SC_OK; taken++) {
        check_bytes(&b);
        for (uint64_t k = 0; k < b.size - b.padded; k++)
            count1[b.ids[k]]++;
        sc_batch_release(ld, &b);
    }
    unsigned char mine[SC_CHECKPOINT_BYTES];
    size_t len = 0;
    assert_int_equal(sc_loader_checkpoint(ld, mine, sizeof mine, &len), SC_OK);
    assert_int_equal(len, SC_CHECKPOINT_BYTES);
    MPI_Allgather(mine, SC_CHECKPOINT_BYTES, MPI_BYTE, blobs, SC_CHECKPOINT_BYTES, MPI_BYTE,
                  MPI_COMM_WORLD);
    /* What this rank would have delivered next, had it gone on. */
    memset(next_ids, 0xff, sizeof *next_ids * B);
    if (taken < info.batches && sc_batch_next(ld, &b) == SC_OK) {
        memcpy(next_ids, b.ids, sizeof *next_ids * B);
        sc_batch_release(ld, &b);
    }
    sc_loader_close(ld); /* mid-epoch: as if the job died here */
}

/*
 * The resumed job on `world` ranks (a sub-communicator; others skip):
 * epoch 1's rest, then epoch 2.  Returns 1 on ranks that took part.
 */
static int resumed_run(const sc_config *c, int world, unsigned char (*blobs)[SC_CHECKPOINT_BYTES],
                       int nblobs, uint32_t *count1, const uint64_t *next_ids, uint64_t *dropped)
{
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, rank < world ? 0 : MPI_UNDEFINED, rank, &comm);
    if (comm == MPI_COMM_NULL)
        return 0;
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(comm, c, &ld, &err), &err);
    const void *ptrs[8];
    size_t lens[8];
    for (int i = 0; i < nblobs; i++)
        ptrs[i] = blobs[i], lens[i] = SC_CHECKPOINT_BYTES;
    uint64_t epoch = 99;
    if (sc_loader_resume(ld, ptrs, lens, nblobs, &epoch) != SC_OK)
        fail_msg("resume: %s", sc_loader_last_error(ld));
    assert_int_equal(epoch, 1);
    assert_int_equal(sc_epoch_begin(ld, 2, NULL), SC_EINVAL); /* the resumed epoch first */
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 1, &info), SC_OK);
    sc_batch b;
    int rc, first = 1;
    uint64_t n = 0;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        check_bytes(&b);
        if (first && world == size && next_ids[0] != UINT64_MAX)
            for (int k = 0; k < B; k++) /* exactly its next batch */
                assert_int_equal(b.ids[k], next_ids[k]);
        unsigned char ck[SC_CHECKPOINT_MAX_BYTES];
        size_t cl = 0;
        if (first && world != size && info.batches > 1) {
            /* Inside one dealt out again: a record naming what is left, longer than plain. */
            assert_int_equal(sc_loader_checkpoint(ld, ck, SC_CHECKPOINT_BYTES, &cl), SC_EINVAL);
            assert_true(cl > SC_CHECKPOINT_BYTES && cl <= SC_CHECKPOINT_MAX_BYTES);
            assert_int_equal(sc_loader_checkpoint(ld, ck, sizeof ck, &cl), SC_OK);
        }
        first = 0;
        for (uint64_t k = 0; k < b.size - b.padded; k++)
            count1[b.ids[k]]++;
        n++;
        sc_batch_release(ld, &b);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(n, info.batches);
    uint64_t lo = n, hi = n;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
    if (world != size)
        assert_int_equal(lo, hi); /* dealt out again: equal batch counts */
    sc_epoch_summary rep;
    assert_int_equal(sc_epoch_wait(ld, 1, &rep), SC_OK);
    if (!rep.exactly_once.ok)
        fail_msg("resumed epoch 1 on %d ranks: %s", world, rep.exactly_once.detail);
    *dropped = rep.exactly_once.dropped;
    /* On the same ranks, padding over both runs is the plan's: every slot less the samples. */
    if (world == size && c->remainder == SC_REMAINDER_PAD)
        assert_int_equal(rep.exactly_once.padded, (uint64_t)size * nb_epoch1 * B - NSAMPLES);
    assert_int_equal(sc_epoch_begin(ld, 2, NULL), SC_OK);
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        check_bytes(&b);
        sc_batch_release(ld, &b);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(sc_epoch_wait(ld, 2, &rep), SC_OK);
    if (!rep.exactly_once.ok)
        fail_msg("epoch 2 after resuming on %d ranks: %s", world, rep.exactly_once.detail);
    /* After an epoch dealt out again, a plain record again. */
    unsigned char again[SC_CHECKPOINT_BYTES];
    size_t len;
    assert_int_equal(sc_loader_checkpoint(ld, again, sizeof again, &len), SC_OK);
    assert_int_equal(sc_loader_close(ld), SC_OK);
    MPI_Comm_free(&comm);
    return 1;
}

static void one_case(sc_shuffle_mode mode, sc_remainder rem, uint64_t stop, int world)
{
    sc_config c = config(mode, rem);
    uint32_t *count1 = calloc(NSAMPLES, sizeof *count1);
    unsigned char(*blobs)[SC_CHECKPOINT_BYTES] = malloc((size_t)size * SC_CHECKPOINT_BYTES);
    uint64_t next_ids[B], dropped = 0;
    first_run(&c, stop, count1, blobs, next_ids);
    sc_config c2 = config(mode, rem); /* a fresh cache: the node may be another */
    int took = resumed_run(&c2, world, blobs, size, count1, next_ids, &dropped);
    /* The union of both runs, independently of the runtime's verdict. */
    MPI_Allreduce(MPI_IN_PLACE, count1, NSAMPLES, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(&dropped, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
    uint64_t zeros = 0;
    for (uint64_t id = 0; id < NSAMPLES; id++) {
        if (count1[id] > 1)
            fail_msg("sample %llu delivered %u times in epoch 1 across both runs "
                     "(resumed on %d ranks)", (unsigned long long)id, count1[id], world);
        zeros += count1[id] == 0;
    }
    assert_int_equal(zeros, dropped);
    (void)took;
    free(count1);
    free(blobs);
}

static void test_resume_same_and_fewer_ranks(void **state)
{
    (void)state;
    int worlds[3] = {size, size > 1 ? size / 2 : 1, size > 2 ? size - 1 : 1};
    for (int w = 0; w < 3; w++) {
        one_case(SC_SHUFFLE_STICKY, SC_REMAINDER_DROP, 3, worlds[w]);
        one_case(SC_SHUFFLE_GLOBAL, SC_REMAINDER_PAD, 1, worlds[w]);
        one_case(SC_SHUFFLE_STICKY, SC_REMAINDER_PAD, 0, worlds[w]);
        /* Checkpointed before the last batch: a rank with fewer samples has only
         * padding left, and resumes on the same ranks as on others. */
        one_case(SC_SHUFFLE_GLOBAL, SC_REMAINDER_PAD, STOP_BEFORE_LAST, worlds[w]);
    }
}

/*
 * A checkpoint after the epoch's last batch: the resumed job begins the
 * next epoch (not the same one with no batches), exactly once.
 */
static void test_checkpoint_after_the_last_batch(void **state)
{
    (void)state;
    sc_config c = config(SC_SHUFFLE_STICKY, SC_REMAINDER_PAD);
    uint32_t *count1 = calloc(NSAMPLES, sizeof *count1);
    unsigned char(*blobs)[SC_CHECKPOINT_BYTES] = malloc((size_t)size * SC_CHECKPOINT_BYTES);
    uint64_t next_ids[B];
    first_run(&c, UINT64_MAX - 1, count1, blobs, next_ids); /* every batch of epoch 1 */
    sc_config c2 = config(SC_SHUFFLE_STICKY, SC_REMAINDER_PAD);
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c2, &ld, &err), &err);
    const void *ptrs[8];
    size_t lens[8];
    for (int i = 0; i < size; i++)
        ptrs[i] = blobs[i], lens[i] = SC_CHECKPOINT_BYTES;
    uint64_t epoch = 99;
    SC_ASSERT_OK(sc_loader_resume(ld, ptrs, lens, size, &epoch), NULL);
    assert_int_equal(epoch, 2);
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, epoch, &info), SC_OK);
    assert_true(info.batches > 0);
    sc_batch b;
    int rc;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        check_bytes(&b);
        sc_batch_release(ld, &b);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    sc_epoch_summary rep;
    assert_int_equal(sc_epoch_wait(ld, epoch, &rep), SC_OK);
    assert_true(rep.exactly_once.ok);
    assert_int_equal(rep.batches, info.batches);
    assert_int_equal(sc_loader_close(ld), SC_OK);
    free(count1);
    free(blobs);
}

static int resume_status(const sc_config *c, unsigned char (*blobs)[SC_CHECKPOINT_BYTES], int n,
                         char *msg)
{
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, c, &ld, &err), &err);
    const void *ptrs[8];
    size_t lens[8];
    for (int i = 0; i < n; i++)
        ptrs[i] = blobs[i], lens[i] = SC_CHECKPOINT_BYTES;
    uint64_t epoch;
    int rc = sc_loader_resume(ld, ptrs, lens, n, &epoch);
    snprintf(msg, 512, "%s", sc_loader_last_error(ld));
    sc_loader_close(ld);
    return rc;
}

static void test_bad_records_are_refused(void **state)
{
    (void)state;
    sc_config c = config(SC_SHUFFLE_STICKY, SC_REMAINDER_DROP);
    uint32_t *count1 = calloc(NSAMPLES, sizeof *count1);
    unsigned char(*blobs)[SC_CHECKPOINT_BYTES] = malloc((size_t)size * SC_CHECKPOINT_BYTES);
    uint64_t next_ids[B];
    char msg[512];
    first_run(&c, 2, count1, blobs, next_ids);

    sc_config other = c;
    other.seed++;
    assert_int_equal(resume_status(&other, blobs, size, msg), SC_EINVAL);
    if (rank == 0)
        assert_non_null(strstr(msg, "SC_SEED="));
    other = c; /* partitions the records did not have: named first, with both values */
    other.partitions = (uint64_t)size;
    other.batch_size = B;
    assert_int_equal(resume_status(&other, blobs, size, msg), SC_EINVAL);
    if (rank == 0)
        assert_non_null(strstr(msg, "taken with SC_PARTITIONS=0, this job's is"));
    other = c; /* an auto window that comes to another number of samples than 32 */
    other.shuffle_window = SC_WINDOW_AUTO;
    assert_true(sc__config_window(&other, 1, SHARD, B) != 32);
    assert_int_equal(resume_status(&other, blobs, size, msg), SC_EINVAL);
    if (rank == 0)
        assert_non_null(strstr(msg, "SC_SHUFFLE_WINDOW=32, this job's is"));
    other = c; /* the same window on a machine whose SC_STREAM_BYTES cannot hold it */
    other.stream_bytes = 64;
    assert_int_equal(resume_status(&other, blobs, size, msg), SC_EINVAL);
    if (rank == 0 && (!strstr(msg, "SC_SHUFFLE_WINDOW=32, this job's is") ||
                      !strstr(msg, "SC_STREAM_BYTES")))
        fail_msg("a resume whose SC_STREAM_BYTES lowers the window: %s", msg);
    other = c;
    other.shard_size = SHARD + 1; /* another dataset (its fingerprint) */
    assert_int_equal(resume_status(&other, blobs, size, msg), SC_EINVAL);
    if (rank == 0)
        assert_non_null(strstr(msg, "another dataset"));
    if (size > 1) {
        assert_int_equal(resume_status(&c, blobs, size - 1, msg), SC_EINVAL);
        if (rank == 0)
            assert_non_null(strstr(msg, "are needed"));
    }
    blobs[0][40] ^= 1; /* damaged */
    assert_int_equal(resume_status(&c, blobs, size, msg), SC_EFORMAT);
    if (rank == 0)
        assert_non_null(strstr(msg, "checkpoint 0"));
    blobs[0][40] ^= 1;
    /* Well-formed records whose batch count is not the plan's (forged: the hash is no key). */
    unsigned char (*forged)[SC_CHECKPOINT_BYTES] = malloc((size_t)size * SC_CHECKPOINT_BYTES);
    for (int i = 0; i < size; i++) {
        sc__ckpt k;
        assert_int_equal(sc__ckpt_decode(blobs[i], SC_CHECKPOINT_BYTES, i, &k, NULL), SC_OK);
        k.batches += 1000, k.consumed += 900;
        sc__ckpt_encode(&k, NULL, forged[i]);
    }
    assert_int_equal(resume_status(&c, forged, size, msg), SC_EFORMAT);
    if (rank == 0)
        assert_non_null(strstr(msg, "its plan has"));
    free(forged);

    /* Records of another epoch, mixed in. */
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    sc_batch b;
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    assert_int_equal(sc_batch_next(ld, &b), SC_OK);
    sc_batch_release(ld, &b);
    unsigned char early[SC_CHECKPOINT_BYTES];
    size_t len;
    assert_int_equal(sc_loader_checkpoint(ld, early, sizeof early, &len), SC_OK);
    sc_loader_close(ld);
    if (size > 1) {
        memcpy(blobs[size - 1], early, SC_CHECKPOINT_BYTES);
        /* every rank's record of epoch 0 is its own; only the last is mixed in */
        unsigned char(*mixed)[SC_CHECKPOINT_BYTES] = malloc((size_t)size * SC_CHECKPOINT_BYTES);
        MPI_Allgather(early, SC_CHECKPOINT_BYTES, MPI_BYTE, mixed, SC_CHECKPOINT_BYTES,
                      MPI_BYTE, MPI_COMM_WORLD);
        memcpy(mixed[0], blobs[0], SC_CHECKPOINT_BYTES); /* rank 0's from epoch 1 */
        assert_int_equal(resume_status(&c, mixed, size, msg), SC_EINVAL);
        if (rank == 0)
            assert_non_null(strstr(msg, "different epochs"));
        free(mixed);
    }
    /* Misuse: resume after an epoch began; checkpoint before any. */
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
    assert_int_equal(sc_loader_checkpoint(ld, early, sizeof early, &len), SC_EINVAL);
    assert_int_equal(sc_loader_checkpoint(ld, early, 3, &len), SC_EINVAL);
    sc_loader_close(ld);
    free(count1);
    free(blobs);
}

/* ---- chains of resumes on other numbers of ranks ---------------------------------- */

/* One epoch interrupted and resumed again and again, counted over all its runs. */
typedef struct chain {
    sc_config c;
    uint32_t *count;  /* this rank's real deliveries of each sample, every run */
    uint64_t padded;  /* this rank's padding repeats, every run */
    unsigned char (*recs)[SC_CHECKPOINT_MAX_BYTES]; /* the last run's records, on every rank */
    size_t lens[8];
    int nrecs;        /* 0: no run yet */
    int ended;        /* a run took the epoch's last batch on every rank */
    sc_exactly_once verdict; /* then, on rank 0 */
    uint64_t rng;
    int one_each;     /* every rank stops after one batch ... */
    uint64_t next[B]; /* ... and this rank's next batch would have been this */
    uint64_t first[B]; /* the first batch this rank took in the run */
    int world;        /* this run's ranks (nrecs: the run before's) */
} chain;

enum { CHAIN_EPOCH = 1 };

static uint64_t chain_rand(chain *ch, uint64_t below)
{
    ch->rng ^= ch->rng << 13, ch->rng ^= ch->rng >> 7, ch->rng ^= ch->rng << 17;
    return below ? ch->rng % below : 0;
}

/* Takes up to `stop` batches (UINT64_MAX: all), counting and checking them. */
static int chain_take(chain *ch, sc_loader *ld, uint64_t stop)
{
    sc_batch b;
    int rc = SC_OK;
    memset(ch->first, 0xff, sizeof ch->first);
    for (uint64_t k = 0; k < stop && (rc = sc_batch_next(ld, &b)) == SC_OK; k++) {
        if (!k)
            memcpy(ch->first, b.ids, sizeof ch->first);
        check_bytes(&b);
        for (uint64_t j = 0; j < b.size - b.padded; j++)
            ch->count[b.ids[j]]++;
        ch->padded += b.padded;
        sc_batch_release(ld, &b);
    }
    return rc;
}

/*
 * This rank's part of a run on `comm`: resumes from the last run's records
 * (or begins the epoch), takes a random number of batches (rank 0 leaves
 * one when it can; `finish`: all) and checkpoints, or reads the verdict
 * when every rank has taken its last.  *len: its record's bytes.
 */
static void chain_member(chain *ch, MPI_Comm comm, int finish, unsigned char *mine, size_t *len)
{
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open(comm, &ch->c, &ld, &err), &err);
    if (ch->nrecs) {
        const void *ptrs[8];
        uint64_t e = 99;
        for (int i = 0; i < ch->nrecs; i++)
            ptrs[i] = ch->recs[i];
        if (sc_loader_resume(ld, ptrs, ch->lens, rank == 0 ? ch->nrecs : 0, &e) != SC_OK)
            fail_msg("resume from %d records: %s", ch->nrecs, sc_loader_last_error(ld));
        assert_int_equal(e, CHAIN_EPOCH);
    }
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, CHAIN_EPOCH, &info), SC_OK);
    uint64_t stop = finish ? UINT64_MAX : chain_rand(ch, info.batches + 1) + rank;
    if (!finish && rank == 0 && info.batches)
        stop = chain_rand(ch, info.batches); /* so that most runs end mid-epoch */
    if (ch->one_each)
        stop = finish ? UINT64_MAX : 1;
    int rc = chain_take(ch, ld, stop);
    /* Dealt out again on as many ranks, each having taken as many: its own next batch. */
    for (int k = 0; ch->one_each && ch->world == ch->nrecs && ch->next[0] != UINT64_MAX &&
                    k < B; k++)
        assert_int_equal(ch->first[k], ch->next[k]);
    sc_batch b;
    int ended = rc == SC_END_OF_EPOCH || stop >= info.batches;
    MPI_Allreduce(MPI_IN_PLACE, &ended, 1, MPI_INT, MPI_MIN, comm);
    if (ended) {
        sc_epoch_summary rep;
        assert_int_equal(sc_epoch_wait(ld, CHAIN_EPOCH, &rep), SC_OK);
        ch->verdict = rep.exactly_once;
    } else {
        assert_int_equal(sc_loader_checkpoint(ld, mine, SC_CHECKPOINT_MAX_BYTES, len), SC_OK);
        memset(ch->next, 0xff, sizeof ch->next);
        if (ch->one_each && sc_batch_next(ld, &b) == SC_OK) {
            memcpy(ch->next, b.ids, sizeof ch->next);
            sc_batch_release(ld, &b);
        }
    }
    ch->ended = ended;
    sc_loader_close(ld); /* mid-epoch: as if killed */
}

/* A run of the chain on the first `world` ranks; every rank gets its records. */
static void chain_run(chain *ch, int world, int finish)
{
    MPI_Comm comm;
    unsigned char mine[SC_CHECKPOINT_MAX_BYTES] = {0};
    size_t len = 0;
    MPI_Comm_split(MPI_COMM_WORLD, rank < world ? 0 : MPI_UNDEFINED, rank, &comm);
    ch->world = world;
    if (comm != MPI_COMM_NULL) {
        chain_member(ch, comm, finish, mine, &len);
        MPI_Comm_free(&comm);
    }
    MPI_Bcast(&ch->ended, 1, MPI_INT, 0, MPI_COMM_WORLD);
    unsigned long long l = len, all[8];
    MPI_Allgather(&l, 1, MPI_UNSIGNED_LONG_LONG, all, 1, MPI_UNSIGNED_LONG_LONG, MPI_COMM_WORLD);
    MPI_Allgather(mine, SC_CHECKPOINT_MAX_BYTES, MPI_BYTE, ch->recs, SC_CHECKPOINT_MAX_BYTES,
                  MPI_BYTE, MPI_COMM_WORLD);
    for (int i = 0; i < world; i++)
        ch->lens[i] = (size_t)all[i];
    ch->nrecs = world;
}

/*
 * The epoch run on worlds[0], stopped, resumed on worlds[1], stopped
 * again, ... and finished on worlds[n - 1]: every sample delivered at most
 * once over all runs, with its bytes; those never delivered are exactly
 * the verdict's drops; delivered and padded cover every run; verdict ok.
 */
static void chain_case(sc_shuffle_mode mode, sc_remainder rem, const int *worlds, int n,
                       uint64_t seed, int one_each)
{
    chain ch = {.c = config(mode, rem), .rng = seed * 0x9e3779b97f4a7c15ULL | 1,
                .one_each = one_each};
    ch.count = calloc(NSAMPLES, sizeof *ch.count);
    ch.recs = calloc((size_t)size, sizeof *ch.recs);
    for (int i = 0; i < n && !ch.ended; i++)
        chain_run(&ch, worlds[i], i == n - 1);
    MPI_Allreduce(MPI_IN_PLACE, ch.count, NSAMPLES, MPI_UINT32_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &ch.padded, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Bcast(&ch.verdict, sizeof ch.verdict, MPI_BYTE, 0, MPI_COMM_WORLD);
    char how[64];
    int at = snprintf(how, sizeof how, "%s, ranks", rem == SC_REMAINDER_PAD ? "pad" : "drop");
    for (int i = 0; i < n && at < (int)sizeof how; i++)
        at += snprintf(how + at, sizeof how - (size_t)at, " %d", worlds[i]);
    uint64_t zeros = 0;
    for (uint64_t id = 0; id < NSAMPLES; id++) {
        if (ch.count[id] > 1)
            fail_msg("%s: sample %llu delivered %u times", how, (unsigned long long)id,
                     ch.count[id]);
        zeros += ch.count[id] == 0;
    }
    if (!ch.verdict.ok)
        fail_msg("%s: the epoch's verdict: %s", how, ch.verdict.detail);
    assert_int_equal(zeros, ch.verdict.dropped);
    assert_int_equal(NSAMPLES - zeros, ch.verdict.delivered);
    assert_int_equal(ch.padded, ch.verdict.padded);
    free(ch.count);
    free(ch.recs);
}

/*
 * A checkpoint inside an epoch that was itself resumed on another number
 * of ranks, resumed on yet another: 4 ranks, then 2, then 3 (with fewer
 * ranks in the run: 2, 1, 2).
 */
static void test_checkpoint_after_an_elastic_resume(void **state)
{
    (void)state;
    int worlds[3] = {size, size > 1 ? size / 2 : 1, size > 2 ? size - 1 : size};
    chain_case(SC_SHUFFLE_STICKY, SC_REMAINDER_DROP, worlds, 3, 1, 0);
    chain_case(SC_SHUFFLE_GLOBAL, SC_REMAINDER_PAD, worlds, 3, 2, 0);
    int back[3] = {size, size > 1 ? size / 2 : 1, size}; /* back on the first count */
    chain_case(SC_SHUFFLE_GLOBAL, SC_REMAINDER_DROP, back, 3, 3, 0);
    /* Resumed on as many ranks as took its checkpoint, each after as many batches:
       every rank continues at exactly its next batch. */
    int twice[4] = {size, size > 1 ? size / 2 : 1, size > 1 ? size / 2 : 1, size};
    chain_case(SC_SHUFFLE_STICKY, SC_REMAINDER_DROP, twice, 4, 4, 1);
    chain_case(SC_SHUFFLE_GLOBAL, SC_REMAINDER_PAD, twice, 4, 5, 1);
}

/* Chains of 2 or 3 resumes on random numbers of ranks, random stops, both policies. */
static void test_random_chains_of_resumes(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        uint64_t r = seed * 0xda942042e4dd58b5ULL;
        int worlds[4], n = 3 + (int)(seed % 2);
        for (int i = 0; i < n; i++, r = r * 6364136223846793005ULL + 1442695040888963407ULL)
            worlds[i] = 1 + (int)((r >> 33) % (uint64_t)size);
        chain_case(seed % 2 ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL,
                   seed % 4 < 2 ? SC_REMAINDER_DROP : SC_REMAINDER_PAD, worlds, n, seed, 0);
        chain_case(seed % 2 ? SC_SHUFFLE_GLOBAL : SC_SHUFFLE_STICKY,
                   seed % 4 < 2 ? SC_REMAINDER_PAD : SC_REMAINDER_DROP, worlds, n, seed + 100, 0);
    }
}

/*
 * The bound: a rank of a job resumed on one rank from 4 holds pieces of 4
 * schedules.  With a bound of 2 (a testing build's SC_FAULT=ckpt-2-pieces)
 * its checkpoint is refused naming it; with the real one (245) it is taken.
 */
static void test_a_share_past_the_bound_is_refused(void **state)
{
    (void)state;
    if (size < 3)
        skip();
    chain ch = {.c = config(SC_SHUFFLE_GLOBAL, SC_REMAINDER_DROP), .rng = 5};
    ch.count = calloc(NSAMPLES, sizeof *ch.count);
    ch.recs = calloc((size_t)size, sizeof *ch.recs);
    chain_run(&ch, size, 0);
    MPI_Comm comm;
    MPI_Comm_split(MPI_COMM_WORLD, rank == 0 ? 0 : MPI_UNDEFINED, rank, &comm);
    if (comm != MPI_COMM_NULL) {
        sc_loader *ld = NULL;
        SC_ASSERT_OK(sc_loader_open(comm, &ch.c, &ld, NULL), NULL);
        const void *ptrs[8];
        uint64_t e;
        for (int i = 0; i < ch.nrecs; i++)
            ptrs[i] = ch.recs[i];
        SC_ASSERT_OK(sc_loader_resume(ld, ptrs, ch.lens, ch.nrecs, &e), NULL);
        assert_int_equal(sc_epoch_begin(ld, e, NULL), SC_OK);
        chain_take(&ch, ld, 1);
        unsigned char rec[SC_CHECKPOINT_MAX_BYTES];
        size_t len = 0;
        sc__fault_set("ckpt-2-pieces");
        assert_int_equal(sc_loader_checkpoint(ld, rec, sizeof rec, &len), SC_ENOTSUP);
        sc__fault_set(NULL);
        assert_non_null(strstr(sc_loader_last_error(ld), "more than a checkpoint holds (2, in "
                                                  "SC_CHECKPOINT_MAX_BYTES)"));
        assert_non_null(strstr(sc_loader_last_error(ld), "once the epoch has ended"));
        assert_int_equal(sc_loader_checkpoint(ld, rec, sizeof rec, &len), SC_OK);
        sc__ckpt k;
        assert_int_equal(sc__ckpt_decode(rec, len, 0, &k, NULL), SC_OK);
        assert_true(k.resliced && k.npieces > 2);
        sc_loader_close(ld);
        MPI_Comm_free(&comm);
    }
    free(ch.count);
    free(ch.recs);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "resume");
    sc_t_shared_source(src, sizeof src, dir, NSAMPLES, W);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_same_and_fewer_ranks),
        cmocka_unit_test(test_bad_records_are_refused),
        cmocka_unit_test(test_checkpoint_after_the_last_batch),
        cmocka_unit_test(test_checkpoint_after_an_elastic_resume),
        cmocka_unit_test(test_random_chains_of_resumes),
        cmocka_unit_test(test_a_share_past_the_bound_is_refused),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
