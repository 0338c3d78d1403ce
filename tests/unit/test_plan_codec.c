/*
 * The plan's wire format: round trips byte for byte, and rejects every
 * truncation, every single-byte corruption, a wrong version, trailing bytes
 * and a well-hashed plan that owns a shard twice.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats.h"
#include "plan_state.h"
#include "sc_test.h"

static sc_plan *make(uint64_t n, uint32_t R, sc_shuffle_mode mode)
{
    static uint64_t sizes[4096];
    for (uint64_t i = 0; i < n; i++)
        sizes[i] = 3 + i % 5;
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = sizes;
    p.nshards = n;
    p.world_size = R;
    p.seed = 1234;
    p.epoch = 9;
    p.batch_size = 2;
    p.mode = mode;
    p.exchange = 0.5;
    p.fingerprint = 0xabcdef;
    sc_plan *plan = NULL;
    sc_error err;
    SC_ASSERT_OK(sc_plan_create(&p, NULL, &plan, &err), &err);
    return plan;
}

static void test_roundtrip(void **state)
{
    (void)state;
    sc_plan *plan = make(4096, 13, SC_SHUFFLE_STICKY);
    void *buf;
    size_t len;
    sc_error err;
    SC_ASSERT_OK(sc_plan_encode(plan, &buf, &len, &err), &err);
    assert_int_equal(len, sc__plan_wire_bytes(13, 4096, plan->info.cuts));
    assert_int_equal(len, plan->info.bytes);
    sc_plan *back;
    SC_ASSERT_OK(sc_plan_decode(buf, len, &back, &err), &err);
    assert_memory_equal(&back->info, &plan->info, sizeof back->info);
    assert_memory_equal(back->order, plan->order, 4096 * sizeof *back->order);
    assert_memory_equal(back->owner, plan->owner, 4096 * sizeof *back->owner);
    sc_plan_free(back);
    sc_plan_free(plan);
    free(buf);
}

static void test_every_truncation_and_byte_flip(void **state)
{
    (void)state;
    sc_plan *plan = make(40, 3, SC_SHUFFLE_GLOBAL);
    void *buf;
    size_t len;
    SC_ASSERT_OK(sc_plan_encode(plan, &buf, &len, NULL), NULL);
    unsigned char *b = buf;
    sc_error err;
    sc_plan *out;

    for (size_t cut = 0; cut < len; cut++) {
        out = (sc_plan *)0x1;
        int rc = sc_plan_decode(b, cut, &out, &err);
        assert_int_equal(rc, SC_EFORMAT);
        assert_null(out);
    }
    for (size_t i = 0; i < len; i++) {
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (unsigned char)(1u << bit);
            out = (sc_plan *)0x1;
            int rc = sc_plan_decode(b, len, &out, &err);
            if (rc == SC_OK)
                print_error("byte %zu bit %d flipped: accepted\n", i, bit);
            assert_true(rc == SC_EFORMAT || rc == SC_EVERSION);
            assert_null(out);
            b[i] ^= (unsigned char)(1u << bit);
        }
    }
    SC_ASSERT_OK(sc_plan_decode(b, len, &out, &err), &err);
    sc_plan_free(out);

    unsigned char *longer = malloc(len + 1);
    memcpy(longer, b, len);
    longer[len] = 0;
    SC_ASSERT_RC(sc_plan_decode(longer, len + 1, &out, &err), SC_EFORMAT, &err);
    assert_non_null(strstr(err.msg, "extra bytes"));
    free(longer);

    b[4] = SC__PLAN_VERSION + 1; /* a future version */
    SC_ASSERT_RC(sc_plan_decode(b, len, &out, &err), SC_EVERSION, &err);
    char want[32];
    snprintf(want, sizeof want, "version %d", SC__PLAN_VERSION + 1);
    assert_non_null(strstr(err.msg, want));
    b[4] = SC__PLAN_VERSION;
    SC_ASSERT_RC(sc_plan_decode(b, 7, &out, &err), SC_EFORMAT, &err);
    SC_ASSERT_RC(sc_plan_decode("not a plan at all", 17, &out, &err), SC_EFORMAT, &err);
    assert_non_null(strstr(err.msg, "magic"));
    SC_ASSERT_RC(sc_plan_decode(NULL, 4, &out, &err), SC_EINVAL, &err);
    SC_ASSERT_RC(sc_plan_decode(b, len, NULL, &err), SC_EINVAL, &err);
    free(buf);
    sc_plan_free(plan);
}

/* A correct hash over wrong content: the structural checks still refuse. */
static void test_forged_duplicate_owner(void **state)
{
    (void)state;
    sc_plan *plan = make(40, 3, SC_SHUFFLE_GLOBAL);
    plan->order[1] = plan->order[0];
    SC_ASSERT_OK(sc__plan_seal(plan, NULL), NULL);
    sc_plan *out;
    sc_error err;
    SC_ASSERT_RC(sc_plan_decode(plan->wire, plan->wire_len, &out, &err),
                 SC_EFORMAT, &err);
    assert_non_null(strstr(err.msg, "owned twice"));
    sc_plan_free(plan);
}

/*
 * A well-hashed plan whose cut runs past its shard's end decodes (the
 * decoder sees no sizes), and the receiver's check against the sizes
 * refuses it: its samples would be the next shard's, served twice.
 */
static void test_forged_cut_past_its_shard(void **state)
{
    (void)state;
    uint64_t sizes[40], first[41] = {0};
    for (int i = 0; i < 40; i++)
        sizes[i] = 3 + (uint64_t)i % 5, first[i + 1] = first[i] + sizes[i];
    sc_plan *plan = make(40, 3, SC_SHUFFLE_GLOBAL), *out = NULL;
    sc_error err;
    assert_true(plan->info.cuts > 0); /* 3 ranks of uneven shards, batch 2: cut */
    SC_ASSERT_OK(sc__plan_check_pieces(plan, sizes, first, &err), &err);
    plan->cuts[0].hi = sizes[plan->cuts[0].shard] + 1;
    SC_ASSERT_OK(sc__plan_seal(plan, NULL), NULL);
    SC_ASSERT_OK(sc_plan_decode(plan->wire, plan->wire_len, &out, &err), &err);
    SC_ASSERT_RC(sc__plan_check_pieces(out, sizes, first, &err), SC_EPLAN, &err);
    assert_non_null(strstr(err.msg, "is not a range of its shard"));
    sc_plan_free(out);
    sc_plan_free(plan);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_every_truncation_and_byte_flip),
        cmocka_unit_test(test_forged_duplicate_owner),
        cmocka_unit_test(test_forged_cut_past_its_shard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
