/*
 * Bad samples under mpiexec -n 1, 2 and 4: a vlen uint8 /img of JPEGs
 * (each a flat colour of its id, so any crop of it shows whose it is)
 * with some images damaged, decoded every epoch (SC_DECODE=jpeg).
 *
 * - SC_BAD_SAMPLE=skip, randomized (SC_TEST_SEED: sizes, seed, which are
 *   bad): every good sample delivered once with its own bytes (its pixels
 *   and /y), every bad one never, each stood for by exactly one slot
 *   flagged replaced that holds another good sample of its shard; the
 *   verdict ok, with the skips and replacements counted apart and no
 *   duplicate; the same replacements on a second job with the same seed.
 * - SC_SKIP_LIST: the listed samples (the bad ones and a good one) are
 *   replaced without being decoded, even under SC_BAD_SAMPLE=error; a
 *   list for another dataset, or with an id out of range, is refused at
 *   open naming the file and the line.
 * - A skip that could find no replacement in its shard (a shard of one
 *   sample under skip, a shard listed whole) is refused at open.
 * - SC_BAD_SAMPLE=error: rank 0 stops on a bad image of epoch 1; the other
 *   ranks end epoch 1, run epoch 2, and then epoch 1's verdict names rank
 *   0, the sample and epoch 1, and epoch 2's says it cannot be verified
 *   because of that stop (it said "rank 0 closed its loader before epoch 3").
 * A failed assertion aborts the job (CMOCKA_TEST_ABORT): no rank hangs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "dataset_impl.h"
#include "jpeg.h"
#include "plan_state.h"
#include "sc_h5test.h"
#include "sc_test.h"
#include "source.h"

static int rank, size;
static char dir[1024];

enum { SIDE = 16, OUT = 8, B = 4 };

/* Sample id's flat colour, channel c. */
static uint8_t colour(uint64_t id, int c)
{
    return (uint8_t)(20 + (id * (7 + 5 * (uint64_t)c)) % 200);
}

/* path by rank 0: /img (JPEGs of ids first.., the i-th damaged where bad[i]), /y (the ids). */
static void write_source_at(const char *path, uint64_t first, uint64_t n,
                            const unsigned char *bad)
{
    if (rank == 0) {
        sc__jpeg *j = NULL;
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc__jpeg_new(&j, &err), &err);
        hvl_t *v = calloc(n, sizeof *v);
        int64_t *y = malloc(sizeof *y * n);
        for (uint64_t i = 0; i < n; i++) {
            uint64_t id = first + i;
            uint8_t img[3 * SIDE * SIDE];
            for (int c = 0; c < 3; c++)
                memset(img + c * SIDE * SIDE, colour(id, c), SIDE * SIDE);
            unsigned char *enc;
            size_t len;
            SC_ASSERT_OK(sc__jpeg_encode(j, img, 3, SIDE, SIDE, 95, &enc, &len, &err), &err);
            if (bad[i])
                memset(enc + 2, 0, len - 2); /* its start of image, then nothing of one */
            v[i].p = enc, v[i].len = len;
            y[i] = (int64_t)id;
        }
        hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
        hid_t t = H5Tvlen_create(H5T_NATIVE_UINT8);
        hsize_t dims[1] = {n};
        hid_t sp = H5Screate_simple(1, dims, NULL);
        hid_t d = H5Dcreate2(f, "img", t, sp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        assert_true(d >= 0 && H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
        H5Dclose(d), H5Sclose(sp), H5Tclose(t), H5Fclose(f);
        assert_int_equal(sc_t_write(path, "y", H5T_NATIVE_INT64, 1, &n, y, 0), 0);
        for (uint64_t i = 0; i < n; i++)
            free(v[i].p);
        free(v), free(y);
        sc__jpeg_free(j);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/* dir/<tag>.h5: samples 0..n-1. */
static void write_source(const char *path, uint64_t n, const unsigned char *bad)
{
    write_source_at(path, 0, n, bad);
}

typedef struct job {
    uint64_t n, shard, seed;
    const uint64_t *offs; /* [nshards + 1]: the shards' first samples, or NULL: runs of shard */
    unsigned char *bad;  /* [n] damaged */
    uint64_t *repl;      /* [n]: epoch 0's replacement of each skipped sample */
    char src[1200];
} job;

static const char *decoder = "jpeg"; /* SC_DECODE's for /img: every epoch, or "jpeg-once" */

/* Fields: /img decoded to 3 x OUT x OUT, /y int64. */
static sc_config job_config(const job *jb, int skip)
{
    sc_config c = sc_t_config(jb->src, dir, jb->shard, B, jb->seed);
    snprintf(c.decode, sizeof c.decode, "img=%s", decoder);
    c.decode_size = OUT;
    c.remainder = SC_REMAINDER_PAD;
    c.bad_sample = skip ? SC_BAD_SAMPLE_SKIP : SC_BAD_SAMPLE_ERROR;
    c.log_level = -1;
    return c;
}

/* Slot k holds sample ids[k]'s bytes: its colour in every pixel, its /y. */
static void check_slot(const sc_batch *b, uint64_t k)
{
    uint64_t id = b->ids[k];
    const uint8_t *px = (const uint8_t *)b->data[0] + k * 3 * OUT * OUT;
    assert_int_equal(((const int64_t *)b->data[1])[k], (int64_t)id);
    for (int c = 0; c < 3; c++)
        for (int i = 0; i < OUT * OUT; i++)
            if (abs((int)px[c * OUT * OUT + i] - (int)colour(id, c)) > 3)
                fail_msg("sample %llu, channel %d, pixel %d: %u, not its colour %u",
                         (unsigned long long)id, c, i, px[c * OUT * OUT + i], colour(id, c));
}

/* The shard of id: runs of jb->shard (the last shorter), or as jb->offs says. */
static uint64_t shard_of(const job *jb, uint64_t id)
{
    uint64_t s = 0;
    while (jb->offs && jb->offs[s + 1] <= id)
        s++;
    return jb->offs ? s : id / jb->shard;
}

/*
 * One epoch on every rank: per sample, deliveries (not as replacements)
 * and the slots standing for it, summed over ranks; the job's verdict.
 */
static void run_epoch(sc_loader *ld, job *jb, uint64_t e, uint64_t *got, uint64_t *stood,
                      sc_exactly_once *v)
{
    memset(got, 0, sizeof *got * jb->n);
    memset(stood, 0, sizeof *stood * jb->n);
    uint64_t *repl = malloc(sizeof *repl * jb->n);
    for (uint64_t i = 0; i < jb->n; i++)
        repl[i] = UINT64_MAX;
    SC_ASSERT_OK(sc_epoch_begin(ld, e, NULL), NULL);
    sc_batch b;
    int rc;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        uint64_t nrep = 0;
        for (uint64_t k = 0; k < b.size; k++) {
            check_slot(&b, k);
            assert_false(jb->bad[b.ids[k]]); /* a bad image is never delivered */
            nrep += b.replaced[k] != 0;
            if (k >= b.size - b.padded)
                continue;
            if (!b.replaced[k]) {
                got[b.ids[k]]++;
                continue;
            }
            uint64_t was = b.stands_for[k];
            assert_int_equal(b.replaced[k], SC_REPLACED_BAD);
            assert_true(jb->bad[was]);
            assert_int_equal(shard_of(jb, was), shard_of(jb, b.ids[k]));
            stood[was]++;
            repl[was] = b.ids[k];
        }
        assert_int_equal(nrep, b.nreplaced);
        SC_ASSERT_OK(sc_batch_release(ld, &b), NULL);
    }
    if (rc != SC_END_OF_EPOCH)
        fail_msg("rank %d: epoch %llu: %s", rank, (unsigned long long)e,
                 sc_loader_last_error(ld));
    MPI_Allreduce(MPI_IN_PLACE, got, (int)jb->n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, stood, (int)jb->n, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, repl, (int)jb->n, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    if (e == 0)
        memcpy(jb->repl, repl, sizeof *repl * jb->n);
    free(repl);
    sc_epoch_summary rep;
    SC_ASSERT_OK(sc_epoch_wait(ld, e, &rep), NULL);
    *v = rep.exactly_once;
}

/* A random job: nbad damaged images, at most one a shard (a shard all bad cannot stand in). */
static void make_job(job *jb, const char *tag, uint64_t seed)
{
    srand((unsigned)seed);
    jb->n = 40 + (uint64_t)(rand() % 60);
    jb->shard = 4 + (uint64_t)(rand() % 6);
    jb->n += jb->n % jb->shard == 1; /* a last shard of one sample: skip is refused (below) */
    jb->seed = (uint64_t)rand();
    jb->bad = calloc(jb->n, 1);
    jb->repl = malloc(sizeof *jb->repl * jb->n);
    uint64_t nsh = (jb->n + jb->shard - 1) / jb->shard, nbad = 1 + (uint64_t)(rand() % 4);
    for (uint64_t i = 0; i < nbad; i++) {
        uint64_t sh = (uint64_t)rand() % nsh, first = sh * jb->shard;
        uint64_t len = (sh + 1 == nsh ? jb->n : first + jb->shard) - first;
        int free_shard = 1;
        for (uint64_t id = first; id < first + len; id++)
            free_shard &= !jb->bad[id];
        if (free_shard && len > 1)
            jb->bad[first + (uint64_t)rand() % len] = 1;
    }
    snprintf(jb->src, sizeof jb->src, "%s/%s.h5", dir, tag);
    write_source(jb->src, jb->n, jb->bad);
}

/* A job of n good samples in shards of `shard`, its source written as dir/tag.h5. */
static void clean_job(job *jb, uint64_t n, uint64_t shard, uint64_t seed, const char *tag)
{
    *jb = (job){.n = n, .shard = shard, .seed = seed};
    jb->bad = calloc(n, 1);
    jb->repl = calloc(n, sizeof *jb->repl);
    snprintf(jb->src, sizeof jb->src, "%s/%s.h5", dir, tag);
    write_source(jb->src, n, jb->bad);
}

/* The test is skipped (not passed) on a build without libjpeg-turbo. */
static void need_jpeg(void)
{
    sc_features f;
    sc_features_get(&f);
    if (!f.jpeg)
        skip();
}

static uint64_t count_bad(const job *jb)
{
    uint64_t k = 0;
    for (uint64_t i = 0; i < jb->n; i++)
        k += jb->bad[i];
    return k;
}

static void free_job(job *jb)
{
    free(jb->bad);
    free(jb->repl);
}

/* `shardcache verify` (beside this program) accepts the trail and names the skips. */
static void verify_trail(const job *jb, const char *audit, uint64_t skips)
{
    if (rank == 0) {
        char self[1024] = "", cmd[4096], out[8192] = "";
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        assert_true(k > 0 && strrchr(self, '/'));
        *strrchr(self, '/') = '\0';
        snprintf(cmd, sizeof cmd, "'%s/shardcache' verify --audit-dir '%s' --plan-seed %llu "
                 "--samples %llu --shard-size %llu --batch %d --remainder pad --mode sticky "
                 "--exchange 0.1 2>&1", self,
                 audit, (unsigned long long)jb->seed, (unsigned long long)jb->n,
                 (unsigned long long)jb->shard, B);
        FILE *p = popen(cmd, "r");
        assert_non_null(p);
        size_t got = fread(out, 1, sizeof out - 1, p);
        out[got] = '\0';
        int status = pclose(p);
        char want[160];
        snprintf(want, sizeof want, "0 duplicated, 0 skipped; %llu skipped with a reason "
                 "(%llu do not decode, 0 in the skip list), %llu replacements",
                 (unsigned long long)skips, (unsigned long long)skips,
                 (unsigned long long)skips);
        if (status != 0 || !strstr(out, "exactly-once: ok") || !strstr(out, want))
            fail_msg("%s\n%s\nwants '%s'", cmd, out, want);
        for (uint64_t id = 0; id < jb->n; id++) {
            snprintf(want, sizeof want, "epoch 0: sample %llu skipped (does not decode)",
                     (unsigned long long)id);
            if (jb->bad[id] && !strstr(out, want))
                fail_msg("%s names no '%s'", out, want);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_skip_replaces_bad_samples(void **state)
{
    (void)state;
    need_jpeg();
    uint64_t seed = sc_test_seed();
    job jb;
    make_job(&jb, "skip", seed);
    uint64_t nbad = count_bad(&jb), *got = malloc(8 * jb.n), *stood = malloc(8 * jb.n);
    uint64_t *first = malloc(8 * jb.n);
    char audit[1100];
    snprintf(audit, sizeof audit, "%s/audit", dir);
    for (int run = 0; run < 2; run++) {
        sc_config c = job_config(&jb, 1);
        if (run == 0)
            snprintf(c.audit_dir, sizeof c.audit_dir, "%s", audit);
        sc_loader *ld = NULL;
        SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, NULL), NULL);
        for (uint64_t e = 0; e < (run ? 1u : 2u); e++) {
            sc_exactly_once v;
            run_epoch(ld, &jb, e, got, stood, &v);
            for (uint64_t id = 0; id < jb.n; id++) {
                if (got[id] != !jb.bad[id] || stood[id] != jb.bad[id])
                    fail_msg("seed %llu: epoch %llu: sample %llu (%s) delivered %llu times, "
                             "stood for %llu times", (unsigned long long)seed,
                             (unsigned long long)e, (unsigned long long)id,
                             jb.bad[id] ? "bad" : "good", (unsigned long long)got[id],
                             (unsigned long long)stood[id]);
            }
            if (!v.verified || !v.ok || v.skipped_bad != nbad || v.replacements != nbad ||
                v.duplicated || v.skipped || v.skipped_listed || v.stopped ||
                v.delivered != jb.n - nbad)
                fail_msg("seed %llu: epoch %llu: verdict ok %d, %llu delivered, %llu skipped "
                         "bad (want %llu), %llu replacements, %llu duplicated: %s",
                         (unsigned long long)seed, (unsigned long long)e, v.ok,
                         (unsigned long long)v.delivered, (unsigned long long)v.skipped_bad,
                         (unsigned long long)nbad, (unsigned long long)v.replacements,
                         (unsigned long long)v.duplicated, v.detail);
            assert_non_null(strstr(v.detail, "skipped with a reason"));
        }
        if (run == 0)
            memcpy(first, jb.repl, 8 * jb.n);
        else /* the same seed, the same replacements */
            assert_memory_equal(first, jb.repl, 8 * jb.n);
        assert_int_equal(sc_loader_close(ld), SC_OK);
        if (run == 0)
            verify_trail(&jb, audit, 2 * nbad);
    }
    free(got), free(stood), free(first);
    free_job(&jb);
}

/* The dataset's fingerprint as a loader with c opens it. */
static uint64_t fingerprint_of(const sc_config *c)
{
    sc_loader *ld = NULL;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, c, &ld, NULL), NULL);
    sc_dataset_info di;
    sc_dataset_get_info(sc_loader_dataset(ld), &di);
    sc_loader_close(ld);
    return di.samples_fingerprint;
}

static void write_list(const char *path, uint64_t fp, const job *jb, uint64_t extra)
{
    if (rank == 0) {
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fprintf(f, "# shardcache skip list 1\n# fingerprint %016llx\n# source %s\n\n",
                (unsigned long long)fp, jb->src);
        for (uint64_t id = 0; id < jb->n; id++)
            if (jb->bad[id])
                fprintf(f, "%llu\tdamaged: not a JPEG\n", (unsigned long long)id);
        fprintf(f, "%llu\n", (unsigned long long)extra);
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static void test_skip_list(void **state)
{
    (void)state;
    need_jpeg();
    job jb;
    make_job(&jb, strcmp(decoder, "jpeg") ? "listed-once" : "listed", 7); /* a file of its own */
    uint64_t extra = 0;
    while (jb.bad[extra] || jb.bad[extra + 1])
        extra += 2; /* a good one, its shard not all listed */
    sc_config c = job_config(&jb, 0); /* error: a listed image is never decoded */
    uint64_t fp = fingerprint_of(&c);
    char list[1300];
    snprintf(list, sizeof list, "%s/skip.txt", dir);
    write_list(list, fp, &jb, extra);
    c = job_config(&jb, 0);
    SC_ASSERT_OK(sc_config_set(&c, "SC_SKIP_LIST", list, NULL), NULL);
    sc_loader *ld = NULL;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, NULL), NULL);
    SC_ASSERT_OK(sc_epoch_begin(ld, 0, NULL), NULL);
    sc_batch b;
    int rc;
    uint64_t listed = 0;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK) {
        for (uint64_t k = 0; k < b.size - b.padded; k++) {
            check_slot(&b, k);
            if (b.replaced[k]) {
                assert_int_equal(b.replaced[k], SC_REPLACED_LISTED);
                assert_true(jb.bad[b.stands_for[k]] || b.stands_for[k] == extra);
                listed++;
            }
        }
        sc_batch_release(ld, &b);
    }
    if (rc != SC_END_OF_EPOCH)
        fail_msg("rank %d: %s", rank, sc_loader_last_error(ld));
    MPI_Allreduce(MPI_IN_PLACE, &listed, 1, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
    assert_int_equal(listed, count_bad(&jb) + 1);
    sc_epoch_summary rep;
    SC_ASSERT_OK(sc_epoch_wait(ld, 0, &rep), NULL);
    assert_true(rep.exactly_once.ok);
    assert_int_equal(rep.exactly_once.skipped_listed, count_bad(&jb) + 1);
    assert_int_equal(rep.exactly_once.skipped_bad, 0);
    sc_loader_close(ld);
    if (!strcmp(decoder, "jpeg-once")) { /* its cache holds no bad image to replace at delivery */
        sc_error err = SC_ERROR_INIT;
        c = job_config(&jb, 1);
        assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
        if (!strstr(err.msg, "SC_BAD_SAMPLE=skip") || !strstr(err.msg, "SC_SKIP_LIST"))
            fail_msg("'%s'", err.msg);
    }

    /* Another dataset's list, then an id out of range: refused at open, file and line. */
    write_list(list, fp ^ 1, &jb, extra);
    sc_error err = SC_ERROR_INIT;
    c = job_config(&jb, 0);
    SC_ASSERT_OK(sc_config_set(&c, "SC_SKIP_LIST", list, NULL), NULL);
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    if (!strstr(err.msg, list) || !strstr(err.msg, "line 2: made for the dataset of "
                                                    "fingerprint"))
        fail_msg("'%s'", err.msg);
    write_list(list, fp, &jb, jb.n);
    c = job_config(&jb, 0);
    SC_ASSERT_OK(sc_config_set(&c, "SC_SKIP_LIST", list, NULL), NULL);
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), SC_EINVAL);
    char want[64];
    snprintf(want, sizeof want, "line %llu: sample %llu is out of range",
             (unsigned long long)(5 + count_bad(&jb)), (unsigned long long)jb.n);
    if (!strstr(err.msg, list) || !strstr(err.msg, want))
        fail_msg("'%s' names no '%s'", err.msg, want);
    free_job(&jb);
}

/*
 * Decode-once with the skip list: the listed images are never decoded into
 * the cache (a bad one would fail its shard), and replaced at delivery as
 * every epoch's are; SC_BAD_SAMPLE=skip, which it cannot honour, refused.
 */
static void test_skip_list_decode_once(void **state)
{
    decoder = "jpeg-once";
    test_skip_list(state);
    decoder = "jpeg";
}

/* A sample rank 0 reads in `epoch` of a job with c (its first shard's first sample). */
static uint64_t owned_by_rank0(const sc_config *c, uint64_t e0, uint64_t e1)
{
    sc_dataset *ds = NULL;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, c, &ds, NULL), NULL);
    sc_plan *plan[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++) {
        sc_plan_params p;
        SC_ASSERT_OK(sc__dataset_plan_params(ds, c, (uint32_t)size, i ? e1 : e0, &p), NULL);
        SC_ASSERT_OK(sc__plan_at(&p, NULL, &plan[i], NULL), NULL);
    }
    uint64_t id = 0, n = ds->nsamples;
    for (; id < n; id++) {
        uint32_t o0 = UINT32_MAX, o1 = UINT32_MAX;
        sc_plan_sample_owner(plan[0], ds->shard_first, id, &o0);
        sc_plan_sample_owner(plan[1], ds->shard_first, id, &o1);
        if (o0 == 0 && o1 == 0)
            break;
    }
    sc_plan_free(plan[0]), sc_plan_free(plan[1]);
    sc_dataset_close(ds);
    assert_true(id < n); /* the seed is fixed: one exists on 1, 2 and 4 ranks */
    return id;
}

/* The verdict on epoch e names rank 0, sample bad, and `want` in its detail. */
static void check_stopped(sc_loader *ld, uint64_t e, uint64_t bad, const char *want)
{
    sc_epoch_summary rep;
    int rc = sc_epoch_wait(ld, e, &rep);
    if (rc != SC_OK)
        fail_msg("rank %d: epoch %llu's verdict: %s", rank, (unsigned long long)e,
                 sc_loader_last_error(ld));
    const sc_exactly_once *v = &rep.exactly_once;
    assert_true(v->verified && !v->ok);
    assert_int_equal(v->epoch, e);
    assert_int_equal(v->stopped, 1);
    assert_int_equal(v->stopped_rank, 0);
    assert_int_equal(v->stopped_sample, bad);
    if (!strstr(v->detail, want))
        fail_msg("rank %d: epoch %llu: '%s' names no '%s'", rank, (unsigned long long)e,
                 v->detail, want);
}

/*
 * Rank 0 stops on a bad image in epoch 1; the others end epoch 1, run all
 * of epoch 2 (its plan was out) and only then ask: epoch 1's verdict names
 * rank 0, the sample and epoch 1; epoch 2's says it cannot be verified
 * because of that stop (it said "rank 0 closed its loader before epoch
 * 3"); epoch 3 is refused, not waited for.
 */
static void test_error_names_rank_sample_epoch(void **state)
{
    (void)state;
    need_jpeg();
    job jb;
    clean_job(&jb, 64, 8, 11, "stop"); /* clean: to learn the plan */
    sc_config c = job_config(&jb, 0);
    uint64_t bad = owned_by_rank0(&c, 1, 2); /* the others never meet it */
    jb.bad[bad] = 1;
    snprintf(jb.src, sizeof jb.src, "%s/stop2.h5", dir);
    write_source(jb.src, jb.n, jb.bad);
    c = job_config(&jb, 0);
    sc_loader *ld = NULL;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, NULL), NULL);
    SC_ASSERT_OK(sc_epoch_begin(ld, 1, NULL), NULL); /* the first epoch begun may be any */
    sc_batch b;
    int rc;
    while ((rc = sc_batch_next(ld, &b)) == SC_OK)
        sc_batch_release(ld, &b);
    char want[160];
    snprintf(want, sizeof want, "epoch 1: sample %llu", (unsigned long long)bad);
    if (rank == 0) {
        assert_int_equal(rc, SC_EFORMAT);
        if (!strstr(sc_loader_last_error(ld), want))
            fail_msg("'%s' names no '%s'", sc_loader_last_error(ld), want);
    } else {
        assert_int_equal(rc, SC_END_OF_EPOCH);
        SC_ASSERT_OK(sc_epoch_begin(ld, 2, NULL), NULL);
        while ((rc = sc_batch_next(ld, &b)) == SC_OK)
            sc_batch_release(ld, &b);
        assert_int_equal(rc, SC_END_OF_EPOCH);
        snprintf(want, sizeof want, "rank 0 stopped in epoch 1 on sample %llu",
                 (unsigned long long)bad);
        check_stopped(ld, 1, bad, want);
        snprintf(want, sizeof want, "epoch 2 cannot be verified: rank 0 stopped in epoch 1 "
                 "on sample %llu", (unsigned long long)bad);
        check_stopped(ld, 2, bad, want);
        assert_int_not_equal(sc_epoch_begin(ld, 3, NULL), SC_OK);
    }
    sc_loader_close(ld);
    free_job(&jb);
}

/* Opening c fails with SC_EINVAL, its message naming want. */
static void refused(const sc_config *c, const char *want)
{
    sc_loader *ld = NULL;
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc_loader_open(MPI_COMM_WORLD, c, &ld, &err), SC_EINVAL);
    if (!strstr(err.msg, want))
        fail_msg("'%s' names no '%s'", err.msg, want);
}

/*
 * A skip with no replacement is refused at open, naming its shard (it was
 * met in the middle of an epoch, after batches): under SC_BAD_SAMPLE=skip
 * a last shard of one sample, and a shard the skip list leaves one sample
 * of; with a skip list alone, a shard it lists whole (a list crossing two
 * shards that keeps a sample of each opens).  17 samples in shards of 4:
 * 0-3, 4-7, ..., 12-15, 16 (a shard for each of 4 ranks).
 */
static void test_unreplaceable_refused_at_open(void **state)
{
    (void)state;
    need_jpeg();
    job jb;
    clean_job(&jb, 17, 4, 5, "lonely");
    sc_config c = job_config(&jb, 1);
    refused(&c, "SC_BAD_SAMPLE=skip replaces a skipped sample by another of its shard, and "
                "shard 4 of source");
    refused(&c, "(1 sample from sample 16; SC_SHARD_SIZE=4) has only that one sample");
    refused(&c, "two samples or more not skipped (SC_SHARD_SIZE=auto looks for one), or");

    c = job_config(&jb, 0);
    uint64_t fp = fingerprint_of(&c);
    char list[1300];
    snprintf(list, sizeof list, "%s/lonely.txt", dir);
    jb.bad[4] = jb.bad[5] = jb.bad[6] = 1;
    write_list(list, fp, &jb, 7); /* 4, 5, 6 and 7: shard 1 whole */
    SC_ASSERT_OK(sc_config_set(&c, "SC_SKIP_LIST", list, NULL), NULL);
    refused(&c, "SC_SKIP_LIST replaces a skipped sample by another of its shard, and shard 1 "
                "of source");
    refused(&c, "(4 samples from sample 4; SC_SHARD_SIZE=4) has every sample in the skip list");
    write_list(list, fp, &jb, 3); /* 3, 4, 5 and 6: shards 0 and 1 keep one each */
    sc_loader *ld = NULL;
    SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, NULL), NULL);
    sc_loader_close(ld);
    c = job_config(&jb, 1); /* but under skip, shard 1's one left could be bad too */
    SC_ASSERT_OK(sc_config_set(&c, "SC_SKIP_LIST", list, NULL), NULL);
    refused(&c, "shard 1 of source");
    refused(&c, "has 3 of its 4 samples in the skip list, and the one left could not be "
                "replaced were it bad too");
    free_job(&jb);
}

/*
 * SC_SHARD_SIZE=auto under SC_BAD_SAMPLE=skip leaves no shard of one sample
 * (each needs another to stand in): it opened shards of one where the
 * count asked for it and refused itself, "choose an SC_SHARD_SIZE".
 * Layout A, 17 samples: auto's 1 a shard becomes 3 (2 leaves a last of
 * one).  Layout B, files of 1, 3, 1, 1, 3, 1, 1 samples twice over: 4,
 * grouped 1+3, 1+1, 3+1, 1+1, 3, 1+3, 1+1 (at 2 and 3 a file of one is left
 * alone before a 3).  And files of 1 and 70 samples, four times over: no
 * size up to 32 lets a 1 join the 70 after it, so auto doubles, to 128:
 * 72, 71, 71, 70.  A bad sample in each is replaced from its own shard,
 * and the epochs are exactly-once.
 */
static void test_auto_leaves_no_single_under_skip(void **state)
{
    (void)state;
    need_jpeg();
    static const uint64_t mixed[][14] = {{1, 3, 1, 1, 3, 1, 1, 1, 3, 1, 1, 3, 1, 1},
                                         {1, 70, 1, 70, 1, 70, 1, 70}};
    static const uint64_t n[] = {17, 22, 284}, size[] = {3, 4, 128}, nsh[] = {6, 7, 4};
    for (int layout = 0; layout < 3; layout++) {
        const uint64_t *files = layout ? mixed[layout - 1] : NULL;
        uint64_t nfiles = layout == 1 ? 14 : 8;
        job jb = {.n = n[layout], .seed = 9};
        jb.bad = calloc(jb.n, 1), jb.repl = calloc(jb.n, sizeof *jb.repl);
        jb.bad[layout ? 8 : 5] = 1;
        if (layout == 0) {
            snprintf(jb.src, sizeof jb.src, "%s/auto17.h5", dir);
            write_source(jb.src, jb.n, jb.bad);
        } else {
            snprintf(jb.src, sizeof jb.src, "%s/autoB%d", dir, layout);
            if (rank == 0)
                mkdir(jb.src, 0777);
            for (uint64_t k = 0, first = 0; k < nfiles; first += files[k], k++) {
                char f[1300];
                snprintf(f, sizeof f, "%s/b-%02llu.h5", jb.src, (unsigned long long)k);
                write_source_at(f, first, files[k], jb.bad + first);
            }
        }
        sc_config c = job_config(&jb, 1);
        c.shard_size = SC_SHARD_AUTO;
        sc_loader *ld = NULL;
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err), &err);
        const sc_dataset *ds = sc_loader_dataset(ld);
        sc_dataset_info in;
        sc_dataset_get_info(ds, &in);
        const uint64_t *ss;
        sc_dataset_shard_sizes(ds, &ss);
        assert_int_equal(in.shard_size, size[layout]);
        assert_int_equal(in.nshards, nsh[layout]);
        for (uint64_t s = 0; s < in.nshards; s++)
            assert_true(ss[s] >= 2);
        jb.shard = in.shard_size;
        sc_dataset_shard_offsets(ds, &jb.offs);
        uint64_t *got = malloc(8 * jb.n), *stood = malloc(8 * jb.n);
        for (uint64_t e = 0; e < 2; e++) {
            sc_exactly_once v;
            run_epoch(ld, &jb, e, got, stood, &v);
            for (uint64_t id = 0; id < jb.n; id++)
                if (got[id] != !jb.bad[id] || stood[id] != jb.bad[id])
                    fail_msg("case %d: epoch %llu: sample %llu delivered %llu times, stood "
                             "for %llu", layout, (unsigned long long)e,
                             (unsigned long long)id, (unsigned long long)got[id],
                             (unsigned long long)stood[id]);
            assert_true(v.verified && v.ok && v.skipped_bad == 1 && v.replacements == 1);
        }
        assert_int_equal(sc_loader_close(ld), SC_OK);
        free(got), free(stood);
        free_job(&jb);
    }
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "bad_samples");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skip_replaces_bad_samples),
        cmocka_unit_test(test_skip_list),
        cmocka_unit_test(test_skip_list_decode_once),
        cmocka_unit_test(test_error_names_rank_sample_epoch),
        cmocka_unit_test(test_unreplaceable_refused_at_open),
        cmocka_unit_test(test_auto_leaves_no_single_under_skip),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
