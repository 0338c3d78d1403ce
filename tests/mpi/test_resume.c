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
    SC_ASSERT_OK(sc_loader_open_err(MPI_COMM_WORLD, c, &ld, &err), &err);
    sc_batch b;
    int rc;
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    while ((rc = sc_next_batch(ld, &b)) == SC_OK)
        sc_batch_release(ld, &b);
    assert_int_equal(rc, SC_END_OF_EPOCH);
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 1, &info), SC_OK);
    uint64_t taken = 0;
    nb_epoch1 = info.batches;
    if (stop == STOP_BEFORE_LAST) /* a short rank then has only padding left */
        stop = info.batches ? info.batches - 1 : 0;
    for (; taken < stop && (rc = sc_next_batch(ld, &b)) == SC_OK; taken++) {
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
    if (taken < info.batches && sc_next_batch(ld, &b) == SC_OK) {
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
    SC_ASSERT_OK(sc_loader_open_err(comm, c, &ld, &err), &err);
    const void *ptrs[8];
    size_t lens[8];
    for (int i = 0; i < nblobs; i++)
        ptrs[i] = blobs[i], lens[i] = SC_CHECKPOINT_BYTES;
    uint64_t epoch = 99;
    if (sc_loader_resume(ld, ptrs, lens, nblobs, &epoch) != SC_OK)
        fail_msg("resume: %s", sc_last_error(ld));
    assert_int_equal(epoch, 1);
    assert_int_equal(sc_epoch_begin(ld, 2, NULL), SC_EINVAL); /* the resumed epoch first */
    sc_epoch_info info;
    assert_int_equal(sc_epoch_begin(ld, 1, &info), SC_OK);
    sc_batch b;
    int rc, first = 1;
    uint64_t n = 0;
    while ((rc = sc_next_batch(ld, &b)) == SC_OK) {
        check_bytes(&b);
        if (first && world == size && next_ids[0] != UINT64_MAX)
            for (int k = 0; k < B; k++) /* exactly its next batch */
                assert_int_equal(b.ids[k], next_ids[k]);
        unsigned char ck[SC_CHECKPOINT_BYTES];
        size_t cl;
        if (first && world != size && info.batches > 1) /* inside one dealt out again: refused */
            assert_int_equal(sc_loader_checkpoint(ld, ck, sizeof ck, &cl), SC_ENOTSUP);
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
    while ((rc = sc_next_batch(ld, &b)) == SC_OK) {
        check_bytes(&b);
        sc_batch_release(ld, &b);
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    assert_int_equal(sc_epoch_wait(ld, 2, &rep), SC_OK);
    if (!rep.exactly_once.ok)
        fail_msg("epoch 2 after resuming on %d ranks: %s", world, rep.exactly_once.detail);
    /* A checkpoint inside an epoch dealt out again is refused; after it, fine. */
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
    SC_ASSERT_OK(sc_loader_open_err(MPI_COMM_WORLD, &c2, &ld, &err), &err);
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
    while ((rc = sc_next_batch(ld, &b)) == SC_OK) {
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
    SC_ASSERT_OK(sc_loader_open_err(MPI_COMM_WORLD, c, &ld, &err), &err);
    const void *ptrs[8];
    size_t lens[8];
    for (int i = 0; i < n; i++)
        ptrs[i] = blobs[i], lens[i] = SC_CHECKPOINT_BYTES;
    uint64_t epoch;
    int rc = sc_loader_resume(ld, ptrs, lens, n, &epoch);
    snprintf(msg, 512, "%s", sc_last_error(ld));
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
        assert_non_null(strstr(msg, "SC_SEED"));
    other = c; /* an auto window that comes to another number of samples than 32 */
    other.shuffle_window = SC_WINDOW_AUTO;
    assert_true(sc_config_window(&other, 1) != 32);
    assert_int_equal(resume_status(&other, blobs, size, msg), SC_EINVAL);
    if (rank == 0)
        assert_non_null(strstr(msg, "SC_SHUFFLE_WINDOW of 32 samples, this job's is"));
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
        sc__ckpt_encode(&k, forged[i]);
    }
    assert_int_equal(resume_status(&c, forged, size, msg), SC_EFORMAT);
    if (rank == 0)
        assert_non_null(strstr(msg, "its plan has"));
    free(forged);

    /* Records of another epoch, mixed in. */
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc_loader_open_err(MPI_COMM_WORLD, &c, &ld, &err), &err);
    sc_batch b;
    assert_int_equal(sc_epoch_begin(ld, 0, NULL), SC_OK);
    assert_int_equal(sc_next_batch(ld, &b), SC_OK);
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
    SC_ASSERT_OK(sc_loader_open_err(MPI_COMM_WORLD, &c, &ld, &err), &err);
    assert_int_equal(sc_loader_checkpoint(ld, early, sizeof early, &len), SC_EINVAL);
    assert_int_equal(sc_loader_checkpoint(ld, early, 3, &len), SC_EINVAL);
    sc_loader_close(ld);
    free(count1);
    free(blobs);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "resume");
    sc_t_shared_source(src, sizeof src, dir, NSAMPLES, W);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resume_same_and_fewer_ranks),
        cmocka_unit_test(test_bad_records_are_refused),
        cmocka_unit_test(test_checkpoint_after_the_last_batch),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
