/*
 * test_batch.c - the stream's batch assembly (runtime/pipeline/batch.c) on
 * a hand-made stream, epoch and shards in memory, without HDF5 files, MPI,
 * threads or torch: a slot's layout (each field aligned, a variable-length
 * one's B + 1 offsets before its values, an overflow refused naming the
 * field); every sample of the delivered order put into its batch (a
 * fixed-shape field's rows, a variable-length field's values packed after
 * the batch's earlier samples with its offsets), the ids and the padding
 * recorded; a sample longer than the field's largest refused naming it;
 * the user's augmentation called once a sample with the seed of (seed,
 * epoch, sample) alone, its failure naming the sample and transform; and
 * a JPEG field decoded with the draws of (seed, epoch, field, sample), a
 * corrupt image naming its sample, shard and field; with SC_BAD_SAMPLE=skip
 * the corrupt image replaced by another of its shard, decoded with that
 * one's own draws, the same one every time; a skip list's sample replaced
 * undecoded, and a shard with nothing left to stand in refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dataset_impl.h"
#include "hash.h"
#include "jpeg.h"
#include "sc_test.h"
#include "skiplist.h"
#include "stream_impl.h"
#include "vlen.h"

enum { B = 4, NSH = 2, PER = 3, M = NSH * PER, NB = 2, SEED = 77, EPOCH = 5 };

/*
 * Two shards of 3 samples (ids 10 + shard * 3 + row): /x int32[2] holding
 * (id, -id), /v uint8 of id % 4 + 1 bytes each `id`.  The epoch's order
 * takes them shuffled; its 6 samples fill 2 batches of 4, padded by 2.
 */
typedef struct fixture {
    sc_dataset ds;
    uint64_t shard_sizes[NSH], shard_first[NSH + 1];
    sc__stream s;
    ep e;
    uint64_t ids[NB * B];
    uint32_t src_shard[NB * B], src_off[NB * B], shards[NSH];
    int32_t x[NSH][PER][2];
    unsigned char *v[NSH];
    const unsigned char *fp[NSH * 2];
    rslot slot;
    uint64_t slot_ids[B], stands_for[B], bad;
    unsigned char replaced[B];
    sc__dev *dev;
} fixture;

static const uint32_t order[NB * B][2] = { /* (shard, row) of each position; the last 2 pad */
    {1, 2}, {0, 0}, {1, 0}, {0, 2}, {0, 1}, {1, 1}, {0, 1}, {1, 1}};

static uint64_t id_of(uint32_t sh, uint32_t row)
{
    return 10 + sh * PER + row;
}

static uint64_t vlen_of(uint64_t id)
{
    return id % 4 + 1;
}

/* Shard sh's /v blob: offsets, then each sample's vlen_of(id) bytes `id`. */
static unsigned char *v_blob(uint32_t sh)
{
    unsigned char *b = malloc(8 * (PER + 1) + 4 * PER);
    uint64_t at = 0;
    for (uint32_t r = 0; r <= PER; r++) {
        memcpy(b + 8 * r, &at, 8);
        if (r < PER) {
            uint64_t id = id_of(sh, r);
            memset(b + 8 * (PER + 1) + at, (int)id, vlen_of(id));
            at += vlen_of(id);
        }
    }
    return b;
}

static sc__field field(const char *name, sc__dtype dt, int ndims, uint64_t d0, uint64_t bytes,
                       int vlen)
{
    sc__field f = {.dtype = dt, .ndims = ndims, .dims = {d0}, .sample_bytes = bytes,
                   .vlen = vlen};
    snprintf(f.name, sizeof f.name, "%s", name);
    return f;
}

static int setup(void **state)
{
    fixture *t = calloc(1, sizeof *t);
    sc_error err = SC_ERROR_INIT;
    int device = 0;
    if (!t || sc__dev_open(SC_DEVICE_HOST, 0, &t->dev, &device, &err) != SC_OK)
        return -1;
    t->ds.nfields = 2;
    t->ds.fields[0] = field("/x", SC__DT_I32, 1, 2, 8, 0);
    t->ds.fields[1] = field("/v", SC__DT_U8, 0, 0, 4, 1); /* the largest: 4 bytes */
    t->ds.sample_bytes = 12;
    t->ds.shard_sizes = t->shard_sizes;
    t->ds.shard_first = t->shard_first;
    for (uint32_t sh = 0; sh <= NSH; sh++)
        t->shard_first[sh] = id_of(sh, 0);
    for (uint32_t sh = 0; sh < NSH; sh++) {
        t->shard_sizes[sh] = PER;
        t->shards[sh] = sh;
        t->v[sh] = v_blob(sh);
        for (uint32_t r = 0; r < PER; r++) {
            t->x[sh][r][0] = (int32_t)id_of(sh, r);
            t->x[sh][r][1] = -(int32_t)id_of(sh, r);
        }
        t->fp[sh * 2] = (const unsigned char *)t->x[sh];
        t->fp[sh * 2 + 1] = t->v[sh];
    }
    for (int q = 0; q < NB * B; q++) {
        t->src_shard[q] = order[q][0];
        t->src_off[q] = order[q][1];
        t->ids[q] = id_of(order[q][0], order[q][1]);
    }
    t->e = (ep){.epoch = EPOCH, .nb = NB, .m = M, .shards = t->shards, .nsh = NSH,
                .fp = t->fp, .src_shard = t->src_shard, .src_off = t->src_off,
                .sched = {.ids = t->ids, .nslots = NB * B, .nreal = M}};
    t->s.ds = &t->ds;
    t->s.nfields = 2;
    t->s.o = (sc__stream_opts){.producers = 1, .depth = 1, .batch_size = B, .seed = SEED,
                               .rank = 3, .dev = t->dev, .device = -1};
    t->s.copy = memcpy; /* sc__stream_open's for a ring this small */
    t->slot.ids = t->slot_ids;
    t->slot.replaced = t->replaced;
    t->slot.stands_for = t->stands_for;
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    fixture *t = *state;
    for (int sh = 0; sh < NSH; sh++)
        free(t->v[sh]);
    free(t->slot.host);
    sc__dev_close(t->dev);
    free(t);
    return 0;
}

/* The layout for batches of B, and a slot of that many bytes. */
static void lay_out(fixture *t)
{
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__batch_layout(&t->s, B, &err), &err);
    free(t->slot.host);
    t->slot.host = calloc(1, t->s.slot_bytes);
    for (int f = 0; f < t->s.nfields; f++)
        t->slot.offs[f] = t->s.vlen[f] ? (const uint64_t *)(t->slot.host + t->s.foff[f]) : NULL;
}

static void test_layout(void **state)
{
    fixture *t = *state;
    lay_out(t);
    assert_int_equal(t->s.vlen[0], 0);
    assert_int_equal(t->s.vlen[1], 1);
    assert_int_equal(t->s.fsb[0], 8);
    assert_int_equal(t->s.fsb[1], 4);
    assert_int_equal(t->s.foff[0], 0);
    assert_int_equal(t->s.fval[0], 0);
    assert_int_equal(t->s.foff[1], FIELD_ALIGN); /* B x 8 bytes of /x, rounded up */
    assert_int_equal(t->s.fval[1], FIELD_ALIGN + 8 * (B + 1));
    assert_int_equal(t->s.slot_bytes, 2 * FIELD_ALIGN);
    assert_int_equal(t->s.slot_bytes % FIELD_ALIGN, 0);

    sc__stream big = t->s;
    sc_dataset ds = t->ds;
    ds.fields[1].sample_bytes = UINT64_MAX / 2;
    big.ds = &ds;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_RC(sc__batch_layout(&big, B, &err), SC_EOVERFLOW, &err);
    assert_non_null(strstr(err.msg, "rank 3: batches of 4 samples of field '/v'"));
}

/* Batch b's samples in the slot: each one's own bytes, in the epoch's order. */
static void check_batch(const fixture *t, uint64_t b)
{
    const unsigned char *h = t->slot.host;
    const int32_t *x = (const int32_t *)h;
    const uint64_t *off = (const uint64_t *)(h + t->s.foff[1]);
    const unsigned char *val = h + t->s.fval[1];
    uint64_t end = 0;
    for (uint64_t k = 0; k < B; k++) {
        uint64_t id = t->ids[b * B + k];
        assert_int_equal(t->slot.ids[k], id);
        assert_int_equal(x[2 * k], (int32_t)id);
        assert_int_equal(x[2 * k + 1], -(int32_t)id);
        assert_int_equal(off[k], end); /* packed after the batch's earlier samples */
        for (uint64_t i = 0; i < vlen_of(id); i++)
            assert_int_equal(val[end + i], (unsigned char)id);
        end += vlen_of(id);
    }
    assert_int_equal(off[B], end);
}

static void test_build_puts_every_sample(void **state)
{
    fixture *t = *state;
    lay_out(t);
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, NULL, &t->bad, &err), &err);
    assert_int_equal(t->slot.epoch, EPOCH);
    assert_int_equal(t->slot.index, 0);
    assert_int_equal(t->slot.padded, 0);
    check_batch(t, 0);
    memset(t->slot.host, 0xab, t->s.slot_bytes); /* nothing left over from batch 0 counts */
    SC_ASSERT_OK(sc__batch_build(&t->s, &t->e, 1, &t->slot, NULL, NULL, &t->bad, &err), &err);
    assert_int_equal(t->slot.index, 1);
    assert_int_equal(t->slot.padded, 2); /* positions 6 and 7 repeat samples */
    check_batch(t, 1);
}

static void test_too_long_a_sample_is_named(void **state)
{
    fixture *t = *state;
    lay_out(t);
    /* Shard 1's row 2 (id 15, position 0) grows past the largest seen at open. */
    unsigned char *v = t->v[1];
    uint64_t last = sc__vlen_off(v, 2) + 9;
    unsigned char *grown = calloc(1, 8 * (PER + 1) + last);
    memcpy(grown, v, 8 * PER);
    memcpy(grown + 8 * PER, &last, 8);
    t->fp[1 * 2 + 1] = grown;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_RC(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, NULL, &t->bad, &err), SC_EFORMAT,
                 &err);
    assert_non_null(strstr(err.msg, "rank 3: epoch 5: sample 15: field '/v' holds 9 bytes, "
                                    "more than its largest at open (4)"));
    t->fp[1 * 2 + 1] = t->v[1];
    free(grown);
}

/* A user augmentation that records what it was called with, and fails on sample `bad`. */
typedef struct calls {
    uint64_t n, id[B], seed[B], bad;
    unsigned char v0[B];
} calls;

static int record(void *arg, uint64_t epoch, uint64_t sample, uint64_t seed,
                  void *const *fields, char *msg, size_t msglen)
{
    calls *c = arg;
    if (sample == c->bad) {
        snprintf(msg, msglen, "no good");
        return 1;
    }
    assert_int_equal(epoch, EPOCH);
    assert_int_equal(*(const int32_t *)fields[0], (int32_t)sample); /* its own row */
    c->v0[c->n] = *(const unsigned char *)fields[1];                /* its own values */
    c->id[c->n] = sample;
    c->seed[c->n++] = seed;
    return 0;
}

static void test_augmentation(void **state)
{
    fixture *t = *state;
    lay_out(t);
    calls c = {.bad = UINT64_MAX};
    sc_transform tf = {.name = "aug", .version = "2", .augment = record, .arg = &c};
    t->s.o.tf = &tf;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, NULL, &t->bad, &err), &err);
    assert_int_equal(c.n, B);
    for (uint64_t k = 0; k < B; k++) {
        assert_int_equal(c.id[k], t->ids[k]);
        assert_int_equal(c.seed[k], sc__rng_key(SEED, EPOCH, SC__PURPOSE_AUGMENT, t->ids[k]));
        assert_int_equal(c.v0[k], (unsigned char)t->ids[k]);
    }
    c = (calls){.bad = t->ids[2]};
    SC_ASSERT_RC(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, NULL, &t->bad, &err), SC_ETRANSFORM,
                 &err);
    char want[128];
    snprintf(want, sizeof want, "epoch 5: batch 0: sample %llu: augmentation of 'aug' version "
             "2 failed: no good", (unsigned long long)t->ids[2]);
    assert_non_null(strstr(err.msg, want));
    t->s.o.tf = NULL;
}

/* Shard sh's /v as JPEGs: an 8 x 8 image a sample, its green the sample's id. */
static unsigned char *jpeg_blob(sc__jpeg *j, uint32_t sh, unsigned char *enc[PER],
                                size_t len[PER])
{
    uint64_t total = 0;
    for (uint32_t r = 0; r < PER; r++) {
        uint8_t img[3 * 8 * 8];
        for (int i = 0; i < 3 * 64; i++)
            img[i] = (uint8_t)(i < 64 ? (uint64_t)i * 4 : i < 128 ? id_of(sh, r) * 9 : 40);
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc__jpeg_encode(j, img, 3, 8, 8, 90, &enc[r], &len[r], &err), &err);
        total += len[r];
    }
    unsigned char *b = malloc(8 * (PER + 1) + total);
    uint64_t at = 0;
    for (uint32_t r = 0; r <= PER; r++) {
        memcpy(b + 8 * r, &at, 8);
        if (r < PER) {
            memcpy(b + 8 * (PER + 1) + at, enc[r], len[r]);
            at += len[r];
        }
    }
    return b;
}

static void test_jpeg_decode(void **state)
{
    fixture *t = *state;
    sc_error err = SC_ERROR_INIT;
    sc__jpeg *j = NULL;
    sc_features f;
    sc_features_get(&f);
    if (!f.jpeg)
        skip(); /* a build without JPEG; with it, the decoder must come up */
    SC_ASSERT_OK(sc__jpeg_new(&j, &err), &err);
    unsigned char *enc[NSH][PER], *blob[NSH];
    size_t len[NSH][PER];
    for (uint32_t sh = 0; sh < NSH; sh++) {
        blob[sh] = jpeg_blob(j, sh, enc[sh], len[sh]);
        t->fp[sh * 2 + 1] = blob[sh];
    }
    t->s.o.crop[1] = sc__crop_default(4, 4);
    lay_out(t);
    assert_int_equal(t->s.vlen[1], 0); /* delivered as fixed-shape images */
    assert_int_equal(t->s.fsb[1], 3 * 4 * 4);
    sc__image *mine = NULL; /* the producer's decoder, made at its first image */
    SC_ASSERT_OK(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, &mine, &t->bad, &err), &err);
    assert_non_null(mine);
    for (uint64_t k = 0; k < B; k++) {
        uint8_t want[48];
        uint64_t id = t->ids[k];
        uint64_t seed = sc__rng_key(SEED, EPOCH, SC__PURPOSE_DECODE + 1, id);
        SC_ASSERT_OK(sc__jpeg_decode_crop(j, enc[order[k][0]][order[k][1]],
                                          len[order[k][0]][order[k][1]], &t->s.crop[1], seed, 3,
                                          want, &err), &err);
        assert_memory_equal(t->slot.host + t->s.fval[1] + k * 48, want, 48);
    }
    /* Sample 10 (shard 0, row 0, position 1) damaged: named, with its shard and field. */
    memset(blob[0] + 8 * (PER + 1), 0, len[0][0]);
    assert_int_equal(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, &mine, &t->bad, &err),
                     SC_EFORMAT);
    if (!strstr(err.msg, "rank 3: epoch 5: sample 10 (shard 0): field '/v'"))
        fail_msg("the message names no sample: '%s'", err.msg);
    const char *next = "(SC_BAD_SAMPLE=skip replaces it; `shardcache scan --decode` lists "
                       "every bad sample for SC_SKIP_LIST)"; /* it ends with the next step */
    if (strlen(err.msg) < strlen(next) || strcmp(err.msg + strlen(err.msg) - strlen(next), next))
        fail_msg("the message ends with no next step: '%s'", err.msg);
    assert_int_equal(t->bad, 10);
    /* SC_BAD_SAMPLE=skip: slot 1 holds another sample of shard 0, decoded as itself. */
    t->s.o.skip_bad = 1;
    t->s.o.log_level = -1;
    SC_ASSERT_OK(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, &mine, &t->bad, &err), &err);
    assert_int_equal(t->slot.nreplaced, 1);
    assert_int_equal(t->slot.replaced[1], SC_REPLACED_BAD);
    assert_int_equal(t->slot.stands_for[1], 10);
    uint64_t by = t->slot.ids[1];
    assert_true(by == 11 || by == 12);
    for (uint64_t k = 0; k < B; k++)
        assert_int_equal(t->slot.replaced[k], k == 1 ? SC_REPLACED_BAD : 0);
    uint8_t want[48], first[48];
    SC_ASSERT_OK(sc__jpeg_decode_crop(j, enc[0][by - 10], len[0][by - 10], &t->s.crop[1],
                                      sc__rng_key(SEED, EPOCH, SC__PURPOSE_DECODE + 1, by), 3,
                                      want, &err), &err);
    assert_memory_equal(t->slot.host + t->s.fval[1] + 48, want, 48);
    assert_int_equal(((const int32_t *)t->slot.host)[2], (int32_t)by); /* every field its own */
    memcpy(first, want, sizeof first);
    memset(t->slot.host, 0, t->s.slot_bytes);
    SC_ASSERT_OK(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, &mine, &t->bad, &err), &err);
    assert_int_equal(t->slot.ids[1], by); /* the same replacement, the same bytes */
    assert_memory_equal(t->slot.host + t->s.fval[1] + 48, first, 48);
    /* The whole shard bad: nothing can stand in, and the message says so. */
    memset(blob[0] + 8 * (PER + 1), 0, len[0][0] + len[0][1] + len[0][2]);
    assert_int_equal(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, &mine, &t->bad, &err),
                     SC_EFORMAT);
    if (!strstr(err.msg, "sample 10 (shard 0) is bad, and no other sample of its shard"))
        fail_msg("'%s'", err.msg);
    t->s.o.skip_bad = 0;
    sc__image_free(mine);
    sc__jpeg_free(j);
    for (uint32_t sh = 0; sh < NSH; sh++) {
        t->fp[sh * 2 + 1] = t->v[sh];
        free(blob[sh]);
        for (uint32_t r = 0; r < PER; r++)
            free(enc[sh][r]);
    }
    t->s.o.crop[1] = (sc__crop){0};
}

/* A skip list's sample is replaced without being read; replacements stay off the list. */
static void test_skip_list(void **state)
{
    fixture *t = *state;
    lay_out(t);
    uint64_t ids[] = {14, 15};
    char *why[] = {"", ""};
    sc__skiplist l = {2, ids, why};
    t->s.o.skip = &l;
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__batch_build(&t->s, &t->e, 0, &t->slot, NULL, NULL, &t->bad, &err), &err);
    /* Position 0 is 15 (shard 1, row 2): only 13 is neither it nor listed. */
    assert_int_equal(t->slot.replaced[0], SC_REPLACED_LISTED);
    assert_int_equal(t->slot.stands_for[0], 15);
    assert_int_equal(t->slot.ids[0], 13);
    assert_int_equal(((const int32_t *)t->slot.host)[0], 13);
    assert_int_equal(t->slot.nreplaced, 1);
    t->s.o.skip = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout),
        cmocka_unit_test(test_build_puts_every_sample),
        cmocka_unit_test(test_too_long_a_sample_is_named),
        cmocka_unit_test(test_augmentation),
        cmocka_unit_test(test_jpeg_decode),
        cmocka_unit_test(test_skip_list),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
