/*
 * Layout B sources under mpiexec -n 1, 2 and 4: a directory (its hidden
 * names left out) and a list of files (a path named twice refused, a
 * hard link opened, a missing relative path's base said), runs of small files grouped and large ones
 * cut into shards (and
 * the fingerprint that tells the cuts apart), a directory's saved
 * manifest, and a file changed after the open refused by name.
 */
#define _GNU_SOURCE /* memmem */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "hash.h"
#include "sc_h5test.h"
#include "sc_test.h"
#include "scan.h"
#include "source.h"

static int rank, size;
static char dir[1024];

static void path_of(char *out, const char *name)
{
    snprintf(out, 1200, "%s/%s", dir, name);
}

static sc_config config(const char *source)
{
    sc_config c;
    sc_config_init(&c, NULL);
    snprintf(c.source, sizeof c.source, "%s", source);
    return c;
}

static void test_layout_b_dir_and_list(void **state)
{
    (void)state;
    char sub[1200], list[1200];
    path_of(sub, "b");
    path_of(list, "b.txt");
    static const uint64_t n[3] = {10, 20, 5};
    if (rank == 0) {
        mkdir(sub, 0777);
        FILE *l = fopen(list, "w");
        for (int k = 0; k < 3; k++) {
            char f[1300];
            float x[20];
            for (int i = 0; i < 20; i++)
                x[i] = (float)(100 * k + i);
            snprintf(f, sizeof f, "%s/part-%d.h5", sub, k);
            assert_int_equal(sc_t_write(f, "/x", H5T_NATIVE_FLOAT, 1, &n[k], x, 1), 0);
            fprintf(l, "%s\n", f);
            if (k == 0) { /* hidden names, left out: macOS's AppleDouble, a hidden copy */
                snprintf(f, sizeof f, "%s/._part-0.h5", sub);
                static const char appledouble[] = "\x00\x05\x16\x07 not HDF5";
                FILE *junk = fopen(f, "w");
                assert_non_null(junk);
                assert_int_equal(fwrite(appledouble, 1, sizeof appledouble, junk),
                                 sizeof appledouble);
                fclose(junk);
                snprintf(f, sizeof f, "%s/.part-0.h5", sub);
                assert_int_equal(sc_t_write(f, "/x", H5T_NATIVE_FLOAT, 1, &n[k], x, 1), 0);
            }
        }
        fclose(l);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    sc_error err;
    uint64_t fps[2];
    const char *srcs[2] = {sub, list};
    for (int v = 0; v < 2; v++) {
        sc_config c = config(srcs[v]);
        c.shard_size = 20; /* no two files fit together, none is cut: a shard each */
        sc_dataset *ds;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
        sc_dataset_info in;
        sc_dataset_get_info(ds, &in);
        assert_int_equal(in.layout, 'B');
        assert_int_equal(in.nshards, 3);
        assert_int_equal(in.nfiles, 3);
        assert_int_equal(in.nsamples, 35);
        const uint64_t *sizes;
        sc_dataset_shard_sizes(ds, &sizes);
        assert_int_equal(sizes[1], 20);
        float x[20];
        void *bufs[1] = {x};
        SC_ASSERT_OK(sc_dataset_read_shard(ds, 2, bufs, &err), &err);
        assert_true(x[4] == 204.0f);
        fps[v] = in.fingerprint;
        sc_dataset_close(ds);
    }
    assert_int_equal(fps[0], fps[1]); /* the same files, however listed */

    /*
     * A path listed twice is refused, naming both; a hard link of a listed
     * file (a content-addressed store's identical files) is the dataset's
     * choice and opens; a relative path's base is said.
     */
    char twice[1200], f0[1300], hard[1200];
    path_of(twice, "twice.txt");
    path_of(hard, "hard-0.h5");
    snprintf(f0, sizeof f0, "%s/part-0.h5", sub);
    if (rank == 0) {
        FILE *l = fopen(twice, "w");
        fprintf(l, "%s\n%s/../b/part-1.h5\n%s/./part-0.h5\n", f0, sub, sub);
        fclose(l);
        assert_int_equal(link(f0, hard), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    sc_config c = config(twice);
    sc_dataset *ds = NULL;
    assert_int_equal(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), SC_EINVAL);
    if (!strstr(err.msg, "names one file twice") || !strstr(err.msg, f0) ||
        !strstr(err.msg, "/./part-0.h5"))
        fail_msg("'%s'", err.msg);
    if (rank == 0) {
        FILE *l = fopen(twice, "w");
        fprintf(l, "%s\n%s\n", f0, hard);
        fclose(l);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
    sc_dataset_info in;
    sc_dataset_get_info(ds, &in);
    assert_int_equal(in.nsamples, 2 * n[0]);
    sc_dataset_close(ds);
    if (rank == 0) {
        FILE *l = fopen(twice, "w");
        fprintf(l, "no-such-dir/part-0.h5\n");
        fclose(l);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), SC_EINVAL);
    if (!strstr(err.msg, "line 1: 'no-such-dir/part-0.h5' is not a file; a relative path is "
                         "from the working directory, '/"))
        fail_msg("'%s'", err.msg);
}

/*
 * The shards files of sizes[] make at SC_SHARD_SIZE `most`, worked out here
 * apart from the library: a file of more is cut into the fewest pieces of
 * at most `most`, as equal as they come; with `group`, a file joins the
 * shard before it (a run, or a cut file's last piece) while the sum fits.
 * Their sizes into wsize[]; returns their count.
 */
static uint64_t expected_shards(const uint64_t *sizes, uint64_t nfiles, uint64_t most, int group,
                                uint64_t *wsize)
{
    uint64_t want = 0;
    for (uint64_t k = 0; k < nfiles; k++) {
        if (group && k && wsize[want - 1] + sizes[k] <= most) {
            wsize[want - 1] += sizes[k];
            continue;
        }
        uint64_t pieces = (sizes[k] + most - 1) / most;
        for (uint64_t q = 0; q < pieces; q++)
            wsize[want++] = sizes[k] / pieces + (q < sizes[k] % pieces);
    }
    return want;
}

/*
 * Layout B groups runs of small files into shards of at most SC_SHARD_SIZE
 * samples and cuts a bigger file into the fewest pieces of at most that
 * many, as equal as they come (its last piece one the files after it may
 * join): random file sizes and shard sizes, every shard's size worked out
 * here independently, and every sample of every shard read back carrying
 * its own id's bytes.
 */
static void test_layout_b_groups_small_files(void **state)
{
    (void)state;
    char sub[1200];
    path_of(sub, "grouped");
    unsigned seed = (unsigned)sc_test_seed();
    srand(seed);
    uint64_t nfiles = 20 + (uint64_t)(rand() % 40), sizes[64], total = 0;
    for (uint64_t k = 0; k < nfiles; k++) {
        sizes[k] = rand() % 4 ? 1 + (uint64_t)(rand() % 6) : 1 + (uint64_t)(rand() % 40);
        if (rank == 0) {
            char f[1300];
            if (k == 0)
                mkdir(sub, 0777);
            snprintf(f, sizeof f, "%s/s-%03llu.h5", sub, (unsigned long long)k);
            assert_int_equal(sc_t_write_samples(f, total, sizes[k], 3), 0);
        }
        total += sizes[k];
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t fps[3];
    for (int v = 0; v < 3; v++) {
        uint64_t most = v == 0 ? 1 : v == 1 ? 2 + (uint64_t)(rand() % 30) : total;
        uint64_t wsize[64 * 40], want = expected_shards(sizes, nfiles, most, 1, wsize);
        sc_config c = config(sub);
        c.shard_size = most;
        sc_dataset *ds;
        sc_error err;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
        sc_dataset_info in;
        sc_dataset_get_info(ds, &in);
        if (in.nshards != want || in.nsamples != total || in.nfiles != nfiles)
            fail_msg("seed %u, SC_SHARD_SIZE %llu: %llu shards of %llu samples, want %llu of "
                     "%llu", seed, (unsigned long long)most, (unsigned long long)in.nshards,
                     (unsigned long long)in.nsamples, (unsigned long long)want,
                     (unsigned long long)total);
        const uint64_t *ss, *first;
        sc_dataset_shard_sizes(ds, &ss);
        sc_dataset_shard_offsets(ds, &first);
        for (uint64_t s = 0; s < in.nshards; s++)
            if (ss[s] != wsize[s])
                fail_msg("seed %u, SC_SHARD_SIZE %llu: shard %llu holds %llu samples, want "
                         "%llu", seed, (unsigned long long)most, (unsigned long long)s,
                         (unsigned long long)ss[s], (unsigned long long)wsize[s]);
        int32_t x[3 * 64 * 40];
        int64_t y[64 * 40];
        void *bufs[2] = {x, y};
        for (uint64_t s = rank; s < in.nshards; s += (uint64_t)size) {
            SC_ASSERT_OK(sc_dataset_read_shard(ds, s, bufs, &err), &err);
            for (uint64_t i = 0; i < ss[s]; i++) {
                uint64_t id = first[s] + i;
                if (y[i] != (int64_t)id || x[3 * i + 2] != sc_t_xval(id, 2))
                    fail_msg("seed %u, SC_SHARD_SIZE %llu: shard %llu sample %llu is not id "
                             "%llu's", seed, (unsigned long long)most, (unsigned long long)s,
                             (unsigned long long)i, (unsigned long long)id);
            }
        }
        fps[v] = in.fingerprint;
        sc_dataset_close(ds);
    }
    assert_int_not_equal(fps[0], fps[2]); /* grouped otherwise: another dataset */
}

/*
 * One file of `n` samples of ALONE_WIDTH int32s (and an int64 id each, from
 * `first`) whose /x has no storage yet: the shape of MLPerf's one-sample
 * files of megabytes without writing them (their bytes read as zeros).
 */
#define ALONE_WIDTH (262144 + 3) /* 1 MiB and 20 bytes a sample: not whole pages */
static int write_unallocated(const char *path, uint64_t first, uint64_t n)
{
    int64_t y[3];
    for (uint64_t i = 0; i < n; i++)
        y[i] = (int64_t)(first + i);
    hsize_t dx[2] = {n, ALONE_WIDTH}, dy[1] = {n};
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sx = H5Screate_simple(2, dx, NULL), sy = H5Screate_simple(1, dy, NULL);
    hid_t x = H5Dcreate2(f, "/x", H5T_NATIVE_INT32, sx, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    hid_t d = H5Dcreate2(f, "/y", H5T_NATIVE_INT64, sy, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    int rc = f < 0 || x < 0 || d < 0 ||
             H5Dwrite(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, y) < 0;
    H5Dclose(d);
    H5Dclose(x);
    H5Sclose(sy);
    H5Sclose(sx);
    H5Fclose(f);
    return rc ? -1 : 0;
}

/*
 * SC_SHARD_SIZE=auto never groups files of samples of 1 MiB or more (a
 * file after a shard's first would not land page-aligned: a bounce copy
 * instead of a direct read in place), and still cuts a larger file into
 * pieces: 520 one-sample files and two of 3 (auto: 2 a shard) make 524
 * shards, each file's samples its own; an explicit size still groups them,
 * and names another dataset.  SC_BAD_SAMPLE=skip without SC_DECODE (it
 * skips only an image that fails to decode) changes nothing: it grouped
 * them, and then refused the open for the one-sample shards.  Without the
 * two 3s, 520 shards, and the size reported is the largest shard's (1),
 * not the 2 auto would group to.
 */
static void test_layout_b_large_samples_alone(void **state)
{
    (void)state;
    char sub[1200];
    path_of(sub, "alone");
    uint64_t nfiles = 522, total = 0, sizes[522];
    for (uint64_t k = 0; k < nfiles; total += sizes[k], k++) {
        sizes[k] = k == 100 || k == 301 ? 3 : 1;
        char f[1300];
        snprintf(f, sizeof f, "%s/b-%03llu.h5", sub, (unsigned long long)k);
        if (rank == 0 && k == 0)
            mkdir(sub, 0777);
        if (rank == 0 && write_unallocated(f, total, sizes[k]) != 0)
            MPI_Abort(MPI_COMM_WORLD, 2); /* not a failed assert: the others would wait */
    }
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t most = sc_shard_size_auto(total, 4 * ALONE_WIDTH + 8), fp[3];
    assert_int_equal(most, 2); /* 526 samples: at least 256 shards */
    for (int v = 0; v < 3; v++) { /* auto, an explicit 2, auto with skip (nothing decoded) */
        sc_config c = config(sub);
        c.shard_size = v == 1 ? most : SC_SHARD_AUTO;
        c.bad_sample = v == 2 ? SC_BAD_SAMPLE_SKIP : c.bad_sample;
        sc_dataset *ds;
        sc_error err;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
        sc_dataset_info in;
        sc_dataset_get_info(ds, &in);
        const uint64_t *ss, *first;
        sc_dataset_shard_sizes(ds, &ss);
        sc_dataset_shard_offsets(ds, &first);
        uint64_t wsize[530], want = expected_shards(sizes, nfiles, most, v == 1, wsize);
        if (in.nshards != want || in.nsamples != total)
            fail_msg("SC_SHARD_SIZE %s: %llu shards of %llu samples, want %llu of %llu",
                     v == 1 ? "2" : v ? "auto, skip" : "auto", (unsigned long long)in.nshards,
                     (unsigned long long)in.nsamples, (unsigned long long)want,
                     (unsigned long long)total);
        for (uint64_t s = 0; s < in.nshards; s++)
            if (ss[s] != wsize[s])
                fail_msg("SC_SHARD_SIZE %s: shard %llu holds %llu samples, want %llu",
                         v == 1 ? "2" : v ? "auto, skip" : "auto", (unsigned long long)s,
                         (unsigned long long)ss[s],
                         (unsigned long long)wsize[s]);
        assert_int_equal(in.shard_size, most); /* auto: a piece of a 3 the largest */
        int64_t y[2];
        int32_t *x = malloc(sizeof *x * 2 * ALONE_WIDTH);
        void *bufs[2] = {x, y};
        for (uint64_t s = (uint64_t)rank; x && s < in.nshards; s += 97 * (uint64_t)size) {
            SC_ASSERT_OK(sc_dataset_read_shard(ds, s, bufs, &err), &err);
            for (uint64_t i = 0; i < ss[s]; i++)
                if (y[i] != (int64_t)(first[s] + i))
                    fail_msg("shard %llu sample %llu is id %lld, not %llu",
                             (unsigned long long)s, (unsigned long long)i, (long long)y[i],
                             (unsigned long long)(first[s] + i));
        }
        free(x);
        fp[v] = in.fingerprint;
        sc_dataset_close(ds);
    }
    assert_int_not_equal(fp[0], fp[1]);
    assert_int_equal(fp[0], fp[2]); /* skip without SC_DECODE: the same dataset */
    /* The one-sample files alone: auto still asks 2, and reports its largest shard, 1. */
    MPI_Barrier(MPI_COMM_WORLD);
    for (int k = 0; rank == 0 && k < 2; k++) {
        char f[1300];
        snprintf(f, sizeof f, "%s/b-%03d.h5", sub, k ? 301 : 100);
        if (unlink(f) != 0)
            MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(sc_shard_size_auto(520, 4 * ALONE_WIDTH + 8), 2);
    sc_config c = config(sub);
    sc_dataset *ds;
    sc_error err;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
    sc_dataset_info in;
    sc_dataset_get_info(ds, &in);
    assert_int_equal(in.nshards, 520);
    assert_int_equal(in.shard_size, 1);
    sc_dataset_close(ds);
    /*
     * A skip list on some ranks only (each reads it at its own path) makes
     * auto group their files (a listed sample needs another beside it):
     * the loader's open refuses, naming both counts, where the first plan
     * said only "shard count 520, this rank expects 260".
     */
    char list[1200];
    path_of(list, "alone-skip.txt");
    if (rank == 0) {
        FILE *f = fopen(list, "w");
        assert_non_null(f);
        fprintf(f, "# shardcache skip list 1\n# fingerprint %016llx\n7\n",
                (unsigned long long)in.samples_fingerprint);
        fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    c.batch_size = 2;
    if (rank > 0)
        SC_ASSERT_OK(sc_config_set(&c, "SC_SKIP_LIST", list, &err), &err);
    sc_loader *ld = NULL;
    int rc = sc_loader_open(MPI_COMM_WORLD, &c, &ld, &err);
    if (size == 1) {
        assert_int_equal(rc, SC_OK);
        sc_loader_close(ld);
        return;
    }
    assert_int_equal(rc, SC_EINVAL);
    if (!strstr(err.msg, rank ? "is 260 shards of up to 2 samples here, and 260 to 520 shards "
                                "of up to 1 to 2"
                              : "is 520 shards of up to 1 samples here, and 260 to 520"))
        fail_msg("rank %d: %s", rank, err.msg);
}

/*
 * Files of 6, 1 and 2 samples make three shards at SC_SHARD_SIZE 3 (0-2,
 * 3-5, 6-8) and at 4 (0-2, 3-6, 7-8: the 6 cut in halves, the 1 joining
 * the second): the same count, shard 0 the same, the others other
 * samples.  The fingerprint (which names the cache) must tell them apart,
 * and apart from the files grouped without a cut.
 */
static void test_layout_b_cut_fingerprints(void **state)
{
    (void)state;
    char sub[1200];
    path_of(sub, "cutfp");
    static const uint64_t n[3] = {6, 1, 2};
    if (rank == 0) {
        mkdir(sub, 0777);
        for (int k = 0, at = 0; k < 3; at += (int)n[k], k++) {
            char f[1300];
            snprintf(f, sizeof f, "%s/f%d.h5", sub, k);
            assert_int_equal(sc_t_write_samples(f, (uint64_t)at, n[k], 2), 0);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    static const uint64_t most[4] = {3, 4, 6, 9};
    uint64_t fp[4], shards[4];
    for (int v = 0; v < 4; v++) {
        sc_config c = config(sub);
        c.shard_size = most[v];
        sc_dataset *ds;
        sc_error err;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
        sc_dataset_info in;
        sc_dataset_get_info(ds, &in);
        fp[v] = in.fingerprint, shards[v] = in.nshards;
        sc_dataset_close(ds);
    }
    assert_int_equal(shards[0], 3);
    assert_int_equal(shards[1], 3);
    assert_int_equal(shards[2], 2); /* 6, then 1 + 2 grouped */
    assert_int_equal(shards[3], 1);
    for (int a = 0; a < 4; a++)
        for (int b = a + 1; b < 4; b++)
            if (fp[a] == fp[b])
                fail_msg("SC_SHARD_SIZE %llu and %llu: the same fingerprint",
                         (unsigned long long)most[a], (unsigned long long)most[b]);
}

/* Layout B file `k` of dir: n samples of /x, the float 100 * v + i for sample i. */
static void write_part(const char *dir_, int k, uint64_t n, int v)
{
    char f[1300];
    float x[64];
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)(100 * v + (int)i);
    int w = snprintf(f, sizeof f, "%s/part-%d.h5", dir_, k);
    assert_true(w > 0 && (size_t)w < sizeof f);
    assert_int_equal(sc_t_write(f, "/x", H5T_NATIVE_FLOAT, 1, &n, x, 1), 0);
}

/* Rank 0 makes dir_ with parts 0-2 of 10, 20 and 10 samples; every rank waits. */
static void write_three_parts(const char *dir_)
{
    if (rank == 0) {
        mkdir(dir_, 0777);
        for (int k = 0; k < 3; k++)
            write_part(dir_, k, k == 1 ? 20 : 10, k);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

/*
 * Opens the layout-B directory src (SC_FIELDS `fields`): its info and
 * file 1's sample 3 (id 13); rank 0 saves its manifest if asked, after running
 * `between` (rank 0, between the open and the save) when given.
 */
static sc_dataset_info open_bf(const char *src, const char *fields, int save, float *x3,
                               void (*between)(void))
{
    sc_config c = config(src);
    c.shard_size = 4; /* the files cut into pieces, the last ones joined by small files */
    snprintf(c.fields, sizeof c.fields, "%s", fields);
    sc_dataset *ds;
    sc_error err;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
    sc_dataset_info in;
    sc_dataset_get_info(ds, &in);
    const uint64_t *first, *sizes;
    sc_dataset_shard_offsets(ds, &first);
    sc_dataset_shard_sizes(ds, &sizes);
    uint64_t s = 0, id = 13; /* file 1's fourth sample: file 0 holds 10 */
    while (s + 1 < in.nshards && first[s + 1] <= id)
        s++;
    float x[64];
    void *bufs[1] = {x};
    SC_ASSERT_OK(sc_dataset_read_shard(ds, s, bufs, &err), &err);
    assert_true(id - first[s] < sizes[s]);
    *x3 = x[id - first[s]];
    if (save && rank == 0 && between)
        between();
    if (save && rank == 0)
        SC_ASSERT_OK(sc__scan_save(ds, &err), &err);
    if (save && rank != 0) /* only the scanning rank can */
        SC_ASSERT_RC(sc__scan_save(ds, &err), SC_EINVAL, &err);
    sc_dataset_close(ds);
    MPI_Barrier(MPI_COMM_WORLD);
    return in;
}

static sc_dataset_info open_b(const char *src, int save, float *x3)
{
    return open_bf(src, "", save, x3, NULL);
}

/*
 * A layout-B file rewritten after the open is refused at its read, naming
 * it, never served: read directly (contiguous: its size and mtime
 * differ, though its samples count the same) and through HDF5 (compressed:
 * its samples count otherwise).
 */
static void test_layout_b_file_changed_after_open(void **state)
{
    (void)state;
    char plain[1200], packed[1200], f1[1300], z1[1300];
    path_of(plain, "changed");
    path_of(packed, "changed-z");
    snprintf(f1, sizeof f1, "%s/part-1.h5", plain);
    snprintf(z1, sizeof z1, "%s/z-1.h5", packed);
    if (rank == 0) {
        mkdir(plain, 0777);
        mkdir(packed, 0777);
        for (int k = 0; k < 3; k++) {
            char z[1300];
            write_part(plain, k, 10, k);
            snprintf(z, sizeof z, "%s/z-%d.h5", packed, k);
            assert_int_equal(sc_t_write_samples_z(z, 10 * (uint64_t)k, 10, 2, 4), 0);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const char *dirs[2] = {plain, packed}, *files[2] = {f1, z1};
    for (int v = 0; v < 2; v++) {
        sc_config c = config(dirs[v]);
        c.shard_size = 10; /* a shard per file */
        sc_dataset *ds;
        sc_error err;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
        MPI_Barrier(MPI_COMM_WORLD);
        if (rank == 0 && v == 0) { /* the same count, other samples, written later */
            write_part(plain, 1, 10, 9);
            struct timespec later[2] = {{0, UTIME_OMIT}, {time(NULL) + 5, 0}};
            assert_int_equal(utimensat(AT_FDCWD, f1, later, 0), 0);
        }
        if (rank == 0 && v == 1)
            assert_int_equal(sc_t_write_samples_z(z1, 10, 11, 2, 4), 0);
        MPI_Barrier(MPI_COMM_WORLD);
        int64_t buf[64];
        void *bufs[2] = {buf, buf + 32};
        SC_ASSERT_RC(sc_dataset_read_shard(ds, 1, bufs, &err), SC_EIO, &err);
        assert_non_null(strstr(err.msg, files[v]));
        assert_non_null(strstr(err.msg, "changed since the dataset was opened"));
        SC_ASSERT_OK(sc_dataset_read_shard(ds, 2, bufs, &err), &err); /* the others still read */
        sc_dataset_close(ds);
    }
}

/* Rank 0: sets the sample counts the saved manifest of dir gives part-0 and part-1, its hash mended. */
static void forge_counts(const char *dir_, uint64_t c0, uint64_t c1)
{
    char man[1300];
    snprintf(man, sizeof man, "%s/.shardcache-manifest", dir_);
    FILE *f = fopen(man, "r+b");
    assert_non_null(f);
    unsigned char buf[8192];
    size_t n = fread(buf, 1, sizeof buf, f);
    assert_true(n > 40 && n < sizeof buf);
    const uint64_t counts[2] = {c0, c1};
    for (int k = 0; k < 2; k++) {
        char name[32];
        snprintf(name, sizeof name, "part-%d.h5", k);
        unsigned char *at = memmem(buf, n, name, strlen(name));
        assert_non_null(at);
        sc__put_u64(at + strlen(name), counts[k]);
    }
    sc__put_u64(buf + n - 8, sc__xxh64(buf, n - 8, 0));
    rewind(f);
    assert_int_equal(fwrite(buf, 1, n, f), n);
    fclose(f);
}

/*
 * A saved manifest whose hash holds but whose sample counts do not (a
 * forged or buggy one: counts that wrap around to the right total, a file
 * of none) is refused as damaged and the files are scanned: its counts
 * never size a read.
 */
static void test_layout_b_forged_manifest(void **state)
{
    (void)state;
    char sub[1200];
    path_of(sub, "forged");
    write_three_parts(sub);
    float v;
    assert_int_equal(open_b(sub, 1, &v).from_manifest, 0);
    assert_int_equal(open_b(sub, 0, &v).from_manifest, 1);
    const uint64_t forged[2][2] = {{(1ull << 63) + 5, (1ull << 63) + 25}, {30, 0}};
    for (int t = 0; t < 2; t++) {
        if (rank == 0)
            forge_counts(sub, forged[t][0], forged[t][1]);
        MPI_Barrier(MPI_COMM_WORLD);
        sc_dataset_info in = open_b(sub, 0, &v);
        assert_int_equal(in.from_manifest, 0);
        assert_int_equal(in.nsamples, 40);
        assert_true(v == 103.0f); /* shard 1's sample 3, read right */
        assert_int_equal(open_b(sub, 1, &v).from_manifest, 0); /* a good one, to forge again */
    }
}

static char rewrite_dir[1200];

/* A file rewritten between an open and its save. */
static void rewrite_part_2(void)
{
    write_part(rewrite_dir, 2, 9, 7);
}

/*
 * Part k of dir_ rewritten in place with n samples of value v, its size
 * and mtime kept, as `cp -p` of a file made elsewhere leaves it.
 */
static void rewrite_keeping_stamp(const char *dir_, int k, uint64_t n, int v)
{
    char other[1300], from[1400], to[1400];
    snprintf(other, sizeof other, "%s-new", dir_);
    mkdir(other, 0777);
    write_part(other, k, n, v);
    snprintf(from, sizeof from, "%s/part-%d.h5", other, k);
    snprintf(to, sizeof to, "%s/part-%d.h5", dir_, k);
    struct stat was, now;
    static char bytes[1 << 16];
    assert_int_equal(stat(to, &was), 0);
    int in = open(from, O_RDONLY), out = open(to, O_WRONLY | O_TRUNC);
    ssize_t len = read(in, bytes, sizeof bytes);
    assert_true(len > 0 && write(out, bytes, (size_t)len) == len);
    close(in);
    close(out);
    struct timespec t[2] = {was.st_atim, was.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, to, t, 0), 0);
    assert_int_equal(stat(to, &now), 0);
    assert_true(now.st_size == was.st_size && now.st_mtim.tv_nsec == was.st_mtim.tv_nsec &&
                now.st_mtim.tv_sec == was.st_mtim.tv_sec); /* the premise */
}

/*
 * A saved manifest is what the next open takes, with the same fingerprint,
 * counts and bytes; a file rewritten or added, a damaged manifest or one
 * another user could write, and the files are opened again, rightly.
 */
static void test_layout_b_manifest(void **state)
{
    (void)state;
    char sub[1200], man[1300];
    path_of(sub, "m");
    snprintf(man, sizeof man, "%s/.shardcache-manifest", sub);
    write_three_parts(sub);
    float v;
    sc_dataset_info a = open_b(sub, 1, &v), b = open_b(sub, 0, &v);
    assert_int_equal(a.from_manifest, 0);
    assert_int_equal(b.from_manifest, 1);
    assert_int_equal(a.fingerprint, b.fingerprint);
    assert_int_equal(b.nsamples, 40);
    assert_true(v == 103.0f);
    if (rank == 0) /* rewritten: other samples, another count */
        write_part(sub, 1, 7, 5);
    MPI_Barrier(MPI_COMM_WORLD);
    b = open_b(sub, 1, &v);
    assert_int_equal(b.from_manifest, 0);
    assert_int_equal(b.nsamples, 27);
    assert_true(v == 503.0f);
    assert_int_equal(open_b(sub, 0, &v).from_manifest, 1);
    if (rank == 0) /* the same size and mtime (cp -p): its stamp moved all the same */
        rewrite_keeping_stamp(sub, 1, 7, 6);
    MPI_Barrier(MPI_COMM_WORLD);
    b = open_b(sub, 0, &v);
    assert_int_equal(b.from_manifest, 0);
    assert_true(v == 603.0f);
    if (rank == 0) { /* one byte of the saved scan flipped */
        int fd = open(man, O_RDWR);
        unsigned char c;
        assert_int_equal(pread(fd, &c, 1, 100), 1);
        c ^= 0x10;
        assert_int_equal(pwrite(fd, &c, 1, 100), 1);
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    b = open_b(sub, 1, &v);
    assert_int_equal(b.from_manifest, 0);
    assert_int_equal(b.nsamples, 27);
    if (rank == 0)
        assert_int_equal(chmod(man, 0666), 0);
    MPI_Barrier(MPI_COMM_WORLD);
    assert_int_equal(open_b(sub, 0, &v).from_manifest, 0); /* others could write it */
    if (rank == 0) {
        assert_int_equal(chmod(man, 0644), 0);
        write_part(sub, 3, 4, 3);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    b = open_b(sub, 1, &v);
    assert_int_equal(b.from_manifest, 0);
    assert_int_equal(b.nfiles, 4);
    assert_int_equal(b.nshards, 9); /* files of 10, 7, 10, 4: 4+4+2, 4+3, 4+4+2, 4 */
    assert_int_equal(b.nsamples, 31);
    /* However the directory is spelled: the key holds the real paths. */
    char spelled[1300];
    snprintf(spelled, sizeof spelled, "%s/./", sub);
    assert_int_equal(open_b(spelled, 0, &v).from_manifest, 1);
    /* Taken for the fields it found, however they are asked for ("/x", "x")... */
    assert_int_equal(open_bf(sub, "/x", 0, &v, NULL).from_manifest, 1);
    assert_int_equal(open_bf(sub, "x", 0, &v, NULL).from_manifest, 1);
    /* ...but one made for named fields is not one for "every field". */
    open_bf(sub, "x", 1, &v, NULL);
    assert_int_equal(open_bf(sub, "/x", 0, &v, NULL).from_manifest, 1);
    assert_int_equal(open_b(sub, 0, &v).from_manifest, 0);
    /* A file rewritten after the open that saves: the saved scan is not vouched for. */
    snprintf(rewrite_dir, sizeof rewrite_dir, "%s", sub);
    open_bf(sub, "", 1, &v, rewrite_part_2);
    b = open_b(sub, 0, &v);
    assert_int_equal(b.from_manifest, 0);
    assert_int_equal(b.nsamples, 30);
    sc_error err = SC_ERROR_INIT;
    assert_int_equal(sc__scan_save(NULL, &err), SC_EINVAL);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sc_t_tmpdir(dir, sizeof dir, "layout-b");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_b_dir_and_list),
        cmocka_unit_test(test_layout_b_groups_small_files),
        cmocka_unit_test(test_layout_b_cut_fingerprints),
        cmocka_unit_test(test_layout_b_large_samples_alone),
        cmocka_unit_test(test_layout_b_manifest),
        cmocka_unit_test(test_layout_b_file_changed_after_open),
        cmocka_unit_test(test_layout_b_forged_manifest),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
