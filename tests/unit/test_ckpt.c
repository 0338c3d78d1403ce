/*
 * The checkpoint record's sizes and bytes (ckpt.c), and what a rank of an
 * epoch dealt out again writes into it (sc__share_record): the pieces it
 * has left after some batches, its drops once its epoch has ended, rank
 * 0's carried counts, and the bound past which it is refused.
 */
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"
#include "resume.h"
#include "sc_test.h"

/* The bound the API states: 245 pieces fill SC_CHECKPOINT_MAX_BYTES. */
static void test_sizes(void **state)
{
    (void)state;
    assert_int_equal(SC__CKPT_MAX_PIECES, 245);
    assert_true(SC__CKPT_HEAD_BYTES + SC__CKPT_PIECE_BYTES * SC__CKPT_MAX_PIECES <=
                SC_CHECKPOINT_MAX_BYTES);
    assert_true(SC__CKPT_HEAD_BYTES + SC__CKPT_PIECE_BYTES * (SC__CKPT_MAX_PIECES + 1) >
                SC_CHECKPOINT_MAX_BYTES);
    sc__ckpt plain = {.epoch = 1}, sliced = {.resliced = 1, .npieces = SC__CKPT_MAX_PIECES};
    assert_int_equal(sc__ckpt_size(&plain), SC_CHECKPOINT_BYTES);
    assert_true(sc__ckpt_size(&sliced) <= SC_CHECKPOINT_MAX_BYTES);
}

/* A full resliced record round-trips; one piece more is refused, and so is a bad piece. */
static void test_resliced_bytes(void **state)
{
    (void)state;
    static sc__piece p[SC__CKPT_MAX_PIECES + 1];
    static unsigned char rec[SC_CHECKPOINT_MAX_BYTES + 64];
    for (uint64_t i = 0; i <= SC__CKPT_MAX_PIECES; i++)
        p[i] = (sc__piece){i % 7, 3 * i, 3 * i + 2};
    sc__ckpt c = {.epoch = 4, .consumed = 2, .rank = 1, .world = 3, .batch = 8,
                  .batches = 9, .resliced = 1, .world0 = 7, .batches0 = 5, .run = 42,
                  .padded = 3, .dropped = 11, .npieces = SC__CKPT_MAX_PIECES};
    sc__ckpt_encode(&c, p, rec);
    sc__ckpt back;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__ckpt_decode(rec, sc__ckpt_size(&c), 0, &back, &err), &err);
    assert_true(back.resliced);
    assert_int_equal(back.npieces, SC__CKPT_MAX_PIECES);
    assert_int_equal(back.run, 42);
    assert_int_equal(back.dropped, 11);
    for (uint64_t i = 0; i < back.npieces; i++) {
        sc__piece x = sc__ckpt_piece(&back, i);
        assert_true(x.q == p[i].q && x.start == p[i].start && x.end == p[i].end);
    }
    c.npieces++; /* well-formed bytes but for their size: refused by the bound */
    sc__ckpt_encode(&c, p, rec);
    assert_int_equal(sc__ckpt_decode(rec, sc__ckpt_size(&c), 3, &back, &err), SC_EFORMAT);
    assert_non_null(strstr(err.msg, "checkpoint 3"));
    assert_non_null(strstr(err.msg, "at most 245"));
    c.npieces = 1;
    p[0].q = 7; /* the plan had ranks 0..6 */
    sc__ckpt_encode(&c, p, rec);
    assert_int_equal(sc__ckpt_decode(rec, sc__ckpt_size(&c), 0, &back, &err), SC_EFORMAT);
    assert_non_null(strstr(err.msg, "not a range of the plan's 7 ranks' samples"));
    /* An older build's record is refused by its version, a plain one still read. */
    sc__ckpt plain = {.epoch = 1, .world = 2, .batches = 3, .mode = 1, .partitions = 8};
    sc__ckpt_encode(&plain, NULL, rec);
    SC_ASSERT_OK(sc__ckpt_decode(rec, SC_CHECKPOINT_BYTES, 0, &back, &err), &err);
    assert_false(back.resliced);
    assert_int_equal(back.mode, 1);
    assert_int_equal(back.partitions, 8);
    rec[8] = 1;
    assert_int_equal(sc__ckpt_decode(rec, SC_CHECKPOINT_BYTES, 0, &back, &err), SC_EVERSION);
    assert_non_null(strstr(err.msg, "version 1, this build reads 4 and 5"));
    /* Whole-shard plans' records (2 plain, 3 resliced) are refused by name. */
    for (unsigned char v = 2; v <= 3; v++) {
        rec[8] = v;
        assert_int_equal(sc__ckpt_decode(rec, SC_CHECKPOINT_BYTES, 0, &back, &err),
                         SC_EVERSION);
        assert_non_null(strstr(err.msg, "dropped and padded whole shards"));
    }
}

/*
 * A share of 15 samples over three pieces: 12 slots in batches of 4, the
 * last 3 its drops.  What it has left after 1 and 3 batches, and after its
 * end; rank 0's counts from the runs before carried along.
 */
static void test_share_record(void **state)
{
    (void)state;
    sc__piece pieces[3] = {{0, 5, 10}, {1, 0, 4}, {2, 3, 9}};
    sc__share s = {.pieces = pieces, .npieces = 3, .nreal = 12, .nslots = 12, .ndropped = 3,
                   .world0 = 3, .batches0 = 6, .run = 9};
    sc__ckpt c = {.rank = 1, .epoch = 2};
    sc__piece *left = NULL;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__share_record(&s, 1, 4, 0, 245, &c, &left, &err), &err);
    assert_int_equal(c.npieces, 3);
    assert_true(left[0].q == 0 && left[0].start == 9 && left[0].end == 10);
    assert_true(left[2].q == 2 && left[2].start == 3 && left[2].end == 9);
    assert_int_equal(c.dropped, 0);
    assert_int_equal(c.run, 9);
    free(left);
    /* Every slot taken, the epoch not ended: its drops are still left. */
    SC_ASSERT_OK(sc__share_record(&s, 3, 4, 0, 245, &c, &left, &err), &err);
    assert_int_equal(c.npieces, 1);
    assert_true(left[0].q == 2 && left[0].start == 6 && left[0].end == 9);
    free(left);
    /* Ended: the drops were recorded; rank 0 adds what the runs before did. */
    s.padded_before = 5, s.dropped_before = 7;
    SC_ASSERT_OK(sc__share_record(&s, 3, 4, 1, 245, &c, &left, &err), &err);
    assert_int_equal(c.npieces, 0);
    assert_int_equal(c.dropped, 3 + 7);
    assert_int_equal(c.padded, 5);
    free(left);
    /* Pad: 10 real samples in 12 slots; after 3 batches, 2 repeats delivered. */
    sc__share pad = s;
    pad.nreal = 10, pad.ndropped = 0, pad.padded_before = 0, pad.dropped_before = 0;
    pieces[2].end = 4;
    SC_ASSERT_OK(sc__share_record(&pad, 3, 4, 0, 245, &c, &left, &err), &err);
    assert_int_equal(c.padded, 2);
    assert_int_equal(c.npieces, 0);
    free(left);
    /* Past the bound: refused, naming it and what to do instead. */
    assert_int_equal(sc__share_record(&s, 0, 4, 0, 2, &c, &left, &err), SC_ENOTSUP);
    assert_null(left);
    assert_non_null(strstr(err.msg, "rank 1: epoch 2: what this rank has left is 3 pieces"));
    assert_non_null(strstr(err.msg, "more than a checkpoint holds (2, in "
                                    "SC_CHECKPOINT_MAX_BYTES): take the checkpoint once the "
                                    "epoch has ended"));
}

/* Records of two runs of one epoch are never mixed: their shares may overlap. */
static void test_records_of_two_runs_are_refused(void **state)
{
    (void)state;
    sc__ckpt ck[2] = {{.rank = 0, .world = 2, .resliced = 1, .world0 = 4, .run = 1},
                      {.rank = 1, .world = 2, .resliced = 1, .world0 = 4, .run = 2}};
    sc_error err = SC_ERROR_INIT;
    /* Refused before the dataset and config are looked at. */
    assert_int_equal(sc__ckpt_check(ck, 2, NULL, NULL, 2, &err), SC_EINVAL);
    assert_non_null(strstr(err.msg, "different runs of epoch 0: rank 1's"));
    ck[1].run = 1, ck[1].resliced = 0;
    assert_int_equal(sc__ckpt_check(ck, 2, NULL, NULL, 2, &err), SC_EINVAL);
    assert_non_null(strstr(err.msg, "checkpoints of different jobs"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_resliced_bytes),
        cmocka_unit_test(test_share_record),
        cmocka_unit_test(test_records_of_two_runs_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
