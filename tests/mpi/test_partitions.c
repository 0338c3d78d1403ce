/*
 * SC_PARTITIONS on 1, 2, 4 and 8 ranks of one 8-rank job (sub-communicators
 * of MPI_COMM_WORLD): the job's global batches (every rank's k-th batch,
 * in rank order, as ordered id lists) are the same on every world size at
 * the same global batch, over three epochs, in global and sticky mode, with
 * drop and pad; every batch's bytes are the source's; every epoch is
 * exactly once with fewer than a global batch dropped or padded.  And a
 * checkpoint taken on 4 ranks mid-epoch, resumed on 2 and on 8: the rest
 * of the epoch's global batches are the uninterrupted run's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sc_h5test.h"
#include "sc_test.h"

static int rank, size;
static char dir[1024], src[1200];

enum { W = 3, N = 3000, SHARD = 16, P = 8, G = 64, EPOCHS = 3 };

/* Global batches, G ids each, in order: what rank 0 of a run collects. */
typedef struct seq {
    uint64_t *ids, n; /* n batches */
} seq;

static void seq_add(seq *s, const uint64_t *ids)
{
    s->ids = realloc(s->ids, sizeof *s->ids * G * (s->n + 1));
    assert_non_null(s->ids);
    memcpy(s->ids + G * s->n++, ids, sizeof *ids * G);
}

/* A run on the first R ranks: each of them in `sub`, the others MPI_COMM_NULL. */
static MPI_Comm first_ranks(int R)
{
    MPI_Comm sub;
    MPI_Comm_split(MPI_COMM_WORLD, rank < R ? 0 : MPI_UNDEFINED, rank, &sub);
    return sub;
}

static sc_config settings(int R, int sticky, int pad, uint64_t seed)
{
    sc_config c = sc_t_config(src, dir, SHARD, G / R, seed); /* on every rank: same dirs */
    c.partitions = P;
    c.mode = sticky ? SC_SHUFFLE_STICKY : SC_SHUFFLE_GLOBAL;
    c.remainder = pad ? SC_REMAINDER_PAD : SC_REMAINDER_DROP;
    return c;
}

/*
 * The rest of epoch e from wherever the loader stands: each batch checked
 * against the source, gathered into global batches on the run's rank 0;
 * after `stop` batches (if > 0) every rank's checkpoint record goes to
 * rec[] (rank r's at r * SC_CHECKPOINT_BYTES) on rank 0.
 */
static void run_epoch(sc_loader *ld, MPI_Comm sub, uint64_t e, uint64_t stop,
                      unsigned char *rec, seq *out)
{
    sc_epoch_info info;
    sc_batch b;
    char why[256];
    uint64_t got = 0, gathered[G];
    if (sc_epoch_begin(ld, e, &info) != SC_OK)
        fail_msg("epoch %llu: %s", (unsigned long long)e, sc_loader_last_error(ld));
    int rc;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        if (!sc_t_samples_ok(&b, W, N, why, sizeof why))
            fail_msg("epoch %llu: %s", (unsigned long long)e, why);
        MPI_Gather(b.ids, (int)b.size, MPI_UINT64_T, gathered, (int)b.size, MPI_UINT64_T, 0,
                   sub);
        if (out)
            seq_add(out, gathered);
        assert_int_equal(sc_batch_release(ld, &b), SC_OK);
        if (++got == stop) {
            unsigned char mine[SC_CHECKPOINT_BYTES];
            size_t len = 0;
            assert_int_equal(sc_loader_checkpoint(ld, mine, sizeof mine, &len), SC_OK);
            assert_int_equal(len, SC_CHECKPOINT_BYTES);
            MPI_Gather(mine, SC_CHECKPOINT_BYTES, MPI_BYTE, rec, SC_CHECKPOINT_BYTES, MPI_BYTE,
                       0, sub);
        }
    }
    assert_int_equal(rc, SC_END_OF_EPOCH);
    sc_epoch_summary rep;
    assert_int_equal(sc_epoch_wait(ld, e, &rep), SC_OK);
    if (!rep.exactly_once.ok || rep.exactly_once.dropped >= G || rep.exactly_once.padded >= G)
        fail_msg("epoch %llu: exactly once %d, %llu dropped, %llu padded (a global batch is %d)",
                 (unsigned long long)e, rep.exactly_once.ok,
                 (unsigned long long)rep.exactly_once.dropped,
                 (unsigned long long)rep.exactly_once.padded, G);
}

/* EPOCHS epochs on R ranks; rank 0 gets the global batches. */
static seq run(int R, int sticky, int pad, uint64_t seed)
{
    seq s = {0};
    sc_config c = settings(R, sticky, pad, seed);
    MPI_Comm sub = first_ranks(R);
    if (sub != MPI_COMM_NULL) {
        sc_loader *ld = NULL;
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc_loader_open(sub, &c, &ld, &err), &err);
        for (uint64_t e = 0; e < EPOCHS; e++)
            run_epoch(ld, sub, e, 0, NULL, &s);
        assert_int_equal(sc_loader_close(ld), SC_OK);
        MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return s;
}

/* Rank 0: the same global batches, id for id. */
static void same(const seq *a, const seq *b, uint64_t from, const char *what)
{
    if (rank != 0)
        return;
    if (a->n != b->n + from)
        fail_msg("%s: %llu global batches, want %llu", what, (unsigned long long)b->n,
                 (unsigned long long)(a->n - from));
    for (uint64_t k = 0; k < b->n; k++)
        if (memcmp(a->ids + G * (k + from), b->ids + G * k, sizeof *a->ids * G))
            fail_msg("%s: global batch %llu differs", what, (unsigned long long)(k + from));
}

static void check_worlds(int sticky, int pad)
{
    uint64_t seed = sc_test_seed();
    seq ref = run(1, sticky, pad, seed);
    for (int R = 2; R <= 8; R *= 2) {
        if (R > size)
            break;
        seq s = run(R, sticky, pad, seed);
        char what[96];
        snprintf(what, sizeof what, "seed %llu, %s, %s, 1 rank against %d",
                 (unsigned long long)seed, sticky ? "sticky" : "global", pad ? "pad" : "drop", R);
        same(&ref, &s, 0, what);
        free(s.ids);
    }
    free(ref.ids);
}

static void test_global_drop_same_on_every_world(void **state)
{
    (void)state;
    check_worlds(0, 0);
}

static void test_sticky_pad_same_on_every_world(void **state)
{
    (void)state;
    check_worlds(1, 1);
}

/* Resumes epoch 1 from rec (4 records) on R ranks; rank 0 gets the rest's global batches. */
static seq resume_on(int R, const unsigned char *rec, uint64_t seed)
{
    seq s = {0};
    sc_config c = settings(R, 0, 0, seed);
    MPI_Comm sub = first_ranks(R);
    if (sub != MPI_COMM_NULL) {
        sc_loader *ld = NULL;
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc_loader_open(sub, &c, &ld, &err), &err);
        const void *blobs[4];
        size_t lens[4];
        for (int i = 0; i < 4; i++)
            blobs[i] = rec + i * SC_CHECKPOINT_BYTES, lens[i] = SC_CHECKPOINT_BYTES;
        uint64_t e = 0;
        if (sc_loader_resume(ld, blobs, lens, rank == 0 ? 4 : 0, &e) != SC_OK)
            fail_msg("resume on %d ranks: %s", R, sc_loader_last_error(ld));
        assert_int_equal(e, 1);
        run_epoch(ld, sub, 1, 0, NULL, &s);
        assert_int_equal(sc_loader_close(ld), SC_OK);
        MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    return s;
}

static void test_resume_on_other_worlds(void **state)
{
    (void)state;
    if (size < 4)
        skip(); /* the checkpoint is taken on 4 ranks */
    uint64_t seed = sc_test_seed() + 7, stop = 1 + seed % 20;
    unsigned char rec[4 * SC_CHECKPOINT_BYTES];
    seq whole = {0};
    sc_config c = settings(4, 0, 0, seed);
    MPI_Comm sub = first_ranks(4);
    if (sub != MPI_COMM_NULL) {
        sc_loader *ld = NULL;
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc_loader_open(sub, &c, &ld, &err), &err);
        run_epoch(ld, sub, 0, 0, NULL, NULL);
        run_epoch(ld, sub, 1, stop, rec, &whole); /* checkpointed, and run to its end */
        assert_int_equal(sc_loader_close(ld), SC_OK);
        MPI_Comm_free(&sub);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int R = 2; R <= size && R <= 8; R *= 2) {
        if (R == 4)
            continue;
        seq rest = resume_on(R, rec, seed);
        char what[96];
        snprintf(what, sizeof what, "seed %llu: checkpoint on 4 ranks after %llu batches, "
                 "resumed on %d", (unsigned long long)seed, (unsigned long long)stop, R);
        same(&whole, &rest, stop, what);
        free(rest.ids);
    }
    free(whole.ids);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "partitions");
    sc_t_shared_source(src, sizeof src, dir, N, W);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_global_drop_same_on_every_world),
        cmocka_unit_test(test_sticky_pad_same_on_every_world),
        cmocka_unit_test(test_resume_on_other_worlds),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
