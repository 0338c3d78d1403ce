/*
 * Source datasets under mpiexec -n 1, 2 and 4: layout A read through
 * MPI-IO (one hyperslab per field), layout B from a directory and from a
 * list, a directory's saved manifest, the fingerprint's sensitivity, and every bad input named by file
 * and field.
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
#include "synth.h"

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

static void test_layout_a(void **state)
{
    (void)state;
    char p[1200];
    path_of(p, "a.h5");
    if (rank == 0) {
        uint16_t *img = malloc(1000 * 6 * sizeof *img);
        int64_t lab[1000];
        for (int i = 0; i < 1000 * 6; i++)
            img[i] = (uint16_t)i;
        for (int i = 0; i < 1000; i++)
            lab[i] = i;
        uint64_t di[3] = {1000, 2, 3}, dl[1] = {1000};
        assert_int_equal(sc_t_write(p, "/labels", H5T_NATIVE_INT64, 1, dl, lab, 1), 0);
        assert_int_equal(sc_t_write(p, "/images", H5T_NATIVE_UINT16, 3, di, img, 0), 0);
        free(img);
    }
    MPI_Barrier(MPI_COMM_WORLD);

    sc_config c = config(p);
    c.shard_size = 128;
    sc_dataset *ds;
    sc_error err;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
    sc_dataset_info in;
    SC_ASSERT_OK(sc_dataset_get_info(ds, &in), NULL);
    assert_int_equal(in.layout, 'A');
    assert_int_equal(in.nsamples, 1000);
    assert_int_equal(in.nshards, 8);
    assert_int_equal(in.nfields, 2);
    assert_int_equal(in.sample_bytes, 12 + 8);
    sc_field_info f0, f1;
    SC_ASSERT_OK(sc_dataset_field(ds, 0, &f0), NULL);
    SC_ASSERT_OK(sc_dataset_field(ds, 1, &f1), NULL);
    assert_string_equal(f0.name, "/images"); /* fields come sorted by name */
    assert_string_equal(f0.dtype, "uint16");
    assert_int_equal(f0.ndims, 2);
    assert_int_equal(f0.dims[1], 3);
    assert_string_equal(f1.dtype, "int64");
    assert_int_equal(f1.ndims, 0);
    const uint64_t *sizes, *first;
    sc_dataset_shard_sizes(ds, &sizes);
    sc_dataset_shard_offsets(ds, &first);
    assert_int_equal(sizes[7], 1000 - 7 * 128);
    assert_int_equal(first[8], 1000);

    /* Each rank reads a different shard: the bytes are the file's. */
    uint64_t k = (uint64_t)rank % 8;
    uint16_t img[128 * 6];
    int64_t lab[128];
    void *bufs[2] = {img, lab};
    SC_ASSERT_OK(sc_dataset_read_shard(ds, k, bufs, &err), &err);
    for (uint64_t i = 0; i < sizes[k]; i++) {
        assert_int_equal(lab[i], (int64_t)(first[k] + i));
        assert_int_equal(img[i * 6 + 5], (uint16_t)((first[k] + i) * 6 + 5));
    }
    SC_ASSERT_RC(sc_dataset_read_shard(ds, 8, bufs, &err), SC_EINVAL, &err);
    sc_plan_params pp;
    SC_ASSERT_OK(sc__dataset_plan_params(ds, &c, 4, 2, &pp), NULL);
    assert_int_equal(pp.nshards, 8);
    assert_int_equal(pp.fingerprint, in.fingerprint);

    /* SC_FIELDS picks a subset. */
    snprintf(c.fields, sizeof c.fields, "labels");
    sc_dataset *only;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &only, &err), &err);
    sc_dataset_info oi;
    sc_dataset_get_info(only, &oi);
    assert_int_equal(oi.nfields, 1);
    assert_int_equal(oi.sample_bytes, 8);
    assert_int_not_equal(oi.fingerprint, in.fingerprint);
    sc_dataset_close(only);
    sc_dataset_close(ds);
}

/* Every shard of `ds`, field by field, into one buffer per field. */
static unsigned char **read_all(sc_dataset *ds)
{
    sc_dataset_info in;
    sc_dataset_get_info(ds, &in);
    const uint64_t *first;
    sc_dataset_shard_offsets(ds, &first);
    unsigned char **all = calloc((size_t)in.nfields, sizeof *all);
    for (int f = 0; f < in.nfields; f++) {
        sc_field_info fi;
        sc_dataset_field(ds, f, &fi);
        all[f] = malloc(in.nsamples * fi.sample_bytes);
    }
    for (uint64_t k = 0; k < in.nshards; k++) {
        void *bufs[SC_MAX_FIELDS];
        for (int f = 0; f < in.nfields; f++) {
            sc_field_info fi;
            sc_dataset_field(ds, f, &fi);
            bufs[f] = all[f] + first[k] * fi.sample_bytes;
        }
        sc_error err;
        SC_ASSERT_OK(sc_dataset_read_shard(ds, k, bufs, &err), &err);
    }
    return all;
}

/*
 * Compressed sources (gzip with the shuffle filter, LZF), in both layouts,
 * in chunks that do and do not align with the shards: every shard's bytes
 * equal the same dataset stored raw.
 */
static void test_compressed_sources(void **state)
{
    (void)state;
    static const struct { uint64_t compress, chunk; char layout; } cases[] = {
        {SC__SYNTH_GZIP, 100, 'A'}, {SC__SYNTH_GZIP, 128, 'A'}, {SC__SYNTH_LZF, 77, 'A'},
        {SC__SYNTH_LZF, 0, 'B'},    {SC__SYNTH_GZIP, 50, 'B'},  {SC__SYNTH_RAW, 64, 'A'}};
    char raw[1200], p[1200];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char name[64];
        snprintf(name, sizeof name, "raw-%c", cases[i].layout);
        path_of(raw, name);
        snprintf(name, sizeof name, "z%zu-%c", i, cases[i].layout);
        path_of(p, name);
        if (rank == 0) {
            sc__synth_params sp = SC__SYNTH_PARAMS_INIT;
            sp.samples = 1000, sp.ndims = 2, sp.dims[0] = 3, sp.dims[1] = 5;
            sp.layout = cases[i].layout, sp.shard_size = 128, sp.seed = 4;
            sc_error err;
            sp.out = raw;
            SC_ASSERT_OK(sc__dataset_make(&sp, NULL, NULL, &err), &err);
            sp.out = p, sp.compress = cases[i].compress, sp.chunk = cases[i].chunk;
            SC_ASSERT_OK(sc__dataset_make(&sp, NULL, NULL, &err), &err);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        sc_config a = config(raw), b = config(p);
        a.shard_size = b.shard_size = 128;
        sc_dataset *da, *db;
        sc_error err;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &a, &da, &err), &err);
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &b, &db, &err), &err);
        unsigned char **x = read_all(da), **y = read_all(db);
        assert_memory_equal(x[0], y[0], 1000 * 15); /* /images, uint8 3x5 */
        assert_memory_equal(x[1], y[1], 1000 * 8);  /* /labels */
        for (int f = 0; f < 2; f++)
            free(x[f]), free(y[f]);
        free(x), free(y);
        sc_dataset_close(da);
        sc_dataset_close(db);
        MPI_Barrier(MPI_COMM_WORLD);
    }
    /*
     * HDF5 writes what the raw path must not take as it is: a big-endian
     * field (H5Dread converts it) and edge chunks left unfiltered
     * (H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS, with a filter mask of 0).
     */
    for (int v = 0; v < 2; v++) {
        path_of(p, v ? "edge.h5" : "be.h5");
        int64_t lab[1000];
        for (int i = 0; i < 1000; i++)
            lab[i] = i * 7919 % 1000;
        if (rank == 0) {
            hid_t f = H5Fcreate(p, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
            hsize_t dims[1] = {1000}, chunk[1] = {128};
            hid_t sp = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
            H5Pset_chunk(dcpl, 1, chunk);
            H5Pset_shuffle(dcpl);
            H5Pset_deflate(dcpl, 4);
            if (v)
                H5Pset_chunk_opts(dcpl, H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS);
            hid_t ds = H5Dcreate2(f, "/labels", v ? H5T_STD_I64LE : H5T_STD_I64BE, sp,
                                  H5P_DEFAULT, dcpl, H5P_DEFAULT);
            assert_true(H5Dwrite(ds, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, lab) >= 0);
            H5Dclose(ds), H5Pclose(dcpl), H5Sclose(sp), H5Fclose(f);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        sc_config ec = config(p);
        ec.shard_size = 100;
        sc_dataset *de;
        sc_error eerr;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &ec, &de, &eerr), &eerr);
        unsigned char **all = read_all(de);
        assert_memory_equal(all[0], lab, sizeof lab);
        free(all[0]), free(all);
        sc_dataset_close(de);
        MPI_Barrier(MPI_COMM_WORLD);
    }

    /* A damaged compressed chunk is named (file, field, chunk), never served. */
    path_of(p, "z1-A"); /* gzip, chunks of 128 rows */
    if (rank == 0) {
        hid_t f = H5Fopen(p, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(f, "/images", H5P_DEFAULT);
        hsize_t off[3] = {128, 0, 0}, size = 0;
        haddr_t addr = 0;
        unsigned mask = 0;
        assert_true(H5Dget_chunk_info_by_coord(d, off, &mask, &addr, &size) >= 0);
        H5Dclose(d);
        H5Fclose(f);
        int fd = open(p, O_WRONLY);
        unsigned char junk[16];
        memset(junk, 0x5a, sizeof junk);
        assert_int_equal(pwrite(fd, junk, sizeof junk, (off_t)(addr + size / 2)), 16);
        close(fd);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    sc_config zc = config(p);
    zc.shard_size = 128;
    sc_dataset *dz;
    sc_error zerr;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &zc, &dz, &zerr), &zerr);
    unsigned char zi[128 * 15], zl[128 * 8];
    void *zb[2] = {zi, zl};
    SC_ASSERT_RC(sc_dataset_read_shard(dz, 1, zb, &zerr), SC_EFORMAT, &zerr);
    assert_non_null(strstr(zerr.msg, "field '/images', chunk at row 128 (shard 1)"));
    assert_non_null(strstr(zerr.msg, "damaged chunk"));
    SC_ASSERT_OK(sc_dataset_read_shard(dz, 0, zb, &zerr), &zerr); /* its neighbour is fine */
    sc_dataset_close(dz);
    MPI_Barrier(MPI_COMM_WORLD);

    /* A codec that is not one is refused by name. */
    sc__synth_params sp = SC__SYNTH_PARAMS_INIT;
    sp.samples = 10, sp.out = p, sp.compress = 7;
    sc_error err;
    SC_ASSERT_RC(sc__dataset_make(&sp, NULL, NULL, &err), SC_EINVAL, &err);
    assert_non_null(strstr(err.msg, "compression 7"));
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
}

/*
 * Layout B groups runs of small files into shards of at most SC_SHARD_SIZE
 * samples and cuts a bigger file into pieces of that many (its last piece
 * the rest, which the files after it may join): random file sizes and
 * shard sizes, the shards counted here independently, and every sample of
 * every shard read back carrying its own id's bytes.
 */
static void test_layout_b_groups_small_files(void **state)
{
    (void)state;
    char sub[1200];
    path_of(sub, "grouped");
    unsigned seed = (unsigned)time(NULL);
    MPI_Bcast(&seed, 1, MPI_UNSIGNED, 0, MPI_COMM_WORLD);
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
        uint64_t want = 0;
        for (uint64_t k = 0, n = 0; k < nfiles; k++) { /* count the runs and pieces */
            if (k && n + sizes[k] <= most) {
                n += sizes[k];
                continue;
            }
            uint64_t left = sizes[k];
            for (; left > most; left -= most)
                want++;
            want++, n = left;
        }
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
 * Files of 6, 1 and 2 samples make three shards at SC_SHARD_SIZE 3 (0-2,
 * 3-5, 6-8) and at 4 (0-3, 4-6, 7-8): the same count, shard 1 of the same
 * size, other samples.  The fingerprint (which names the cache) must tell
 * them apart, and apart from the files grouped without a cut.
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

/* A stand-in for Blosc (id 32001), registered only while a file that needs it is written. */
static size_t fake_blosc(unsigned flags, size_t nv, const unsigned cv[], size_t nbytes,
                         size_t *buf_size, void **buf)
{
    (void)flags, (void)nv, (void)cv, (void)buf_size, (void)buf;
    return nbytes;
}

/* `path` with /x chunked through a mandatory filter 32001 this process then forgets. */
static void write_needing_blosc(const char *path)
{
    const H5Z_class2_t cls = {H5Z_CLASS_T_VERS, 32001, 1, 1, "fake blosc", NULL, NULL,
                              fake_blosc};
    assert_true(H5Zregister(&cls) >= 0);
    hsize_t dims[1] = {40}, chunk[1] = {10};
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(1, dims, NULL), dcpl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(H5Pset_chunk(dcpl, 1, chunk) >= 0);
    assert_true(H5Pset_filter(dcpl, 32001, H5Z_FLAG_MANDATORY, 0, NULL) >= 0);
    int32_t x[40] = {0};
    hid_t d = H5Dcreate2(f, "/x", H5T_NATIVE_INT32, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(d >= 0 && H5Dwrite(d, H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, x) >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Fclose(f);
    assert_true(H5Zunregister(32001) >= 0);
}

/* Opening `source` fails on every rank with `code` and all the words. */
static void expect_refused(const char *source, const char *fields, int code,
                           const char *w1, const char *w2)
{
    sc_config c = config(source);
    if (fields)
        snprintf(c.fields, sizeof c.fields, "%s", fields);
    sc_dataset *ds = (sc_dataset *)0x1;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err);
    if (rc != code || !strstr(err.msg, w1) || !strstr(err.msg, w2))
        print_error("rank %d: %s: got %s '%s', want %s with '%s', '%s'\n", rank, source,
                    sc_status_name(rc), err.msg, sc_status_name(code), w1, w2);
    assert_int_equal(rc, code);
    assert_null(ds);
    assert_non_null(strstr(err.msg, w1));
    assert_non_null(strstr(err.msg, w2));
}

static void test_bad_sources(void **state)
{
    (void)state;
    char missing[1200], text[1200], dims[1200], str[1200], empty[1200], trunc[1200],
        good[1200], mixed[1200];
    path_of(missing, "missing.h5");
    path_of(text, "notes.bin");
    path_of(dims, "dims.h5");
    path_of(str, "strings.h5");
    path_of(empty, "empty.h5");
    path_of(trunc, "truncated.h5");
    path_of(good, "a.h5");
    path_of(mixed, "mixed.h5");
    if (rank == 0) {
        FILE *f = fopen(text, "w");
        fputs("\x89 this is not HDF5 and not a list\n", f);
        fclose(f);
        uint64_t d10[1] = {10}, d11[1] = {11}, d0[2] = {0, 3};
        sc_t_write(dims, "/a", H5T_NATIVE_INT32, 1, d10, NULL, 1);
        sc_t_write(dims, "/b", H5T_NATIVE_INT32, 1, d11, NULL, 0);
        hid_t vs = H5Tcopy(H5T_C_S1);
        H5Tset_size(vs, H5T_VARIABLE);
        sc_t_write(str, "/names", vs, 1, d10, NULL, 1);
        /*
         * Carried: float16 (made as h5py makes it), a fixed-length string;
         * not carried: bfloat16 (another 2-byte float), a variable-length
         * string, an enum that is not bool.
         */
        sc_t_write(mixed, "/x", H5T_NATIVE_INT32, 1, d10, NULL, 1);
        hid_t half = H5Tcopy(H5T_IEEE_F32LE), bf16 = H5Tcopy(H5T_IEEE_F32LE);
        H5Tset_fields(half, 15, 10, 5, 0, 10);
        H5Tset_size(half, 2);
        H5Tset_ebias(half, 15);
        sc_t_write(mixed, "/half", half, 1, d10, NULL, 0);
        H5Tset_fields(bf16, 15, 7, 8, 0, 7);
        H5Tset_size(bf16, 2);
        sc_t_write(mixed, "/bf16", bf16, 1, d10, NULL, 0);
        hid_t s8 = H5Tcopy(H5T_C_S1), e3 = H5Tenum_create(H5T_NATIVE_INT8);
        H5Tset_size(s8, 8);
        sc_t_write(mixed, "/names", s8, 1, d10, NULL, 0);
        sc_t_write(mixed, "/vnames", vs, 1, d10, NULL, 0);
        for (signed char v = 0; v < 3; v++)
            H5Tenum_insert(e3, v == 0 ? "RED" : v == 1 ? "GREEN" : "BLUE", &v);
        sc_t_write(mixed, "/colour", e3, 1, d10, NULL, 0);
        H5Tclose(half);
        H5Tclose(bf16);
        H5Tclose(s8);
        H5Tclose(e3);
        H5Tclose(vs);
        sc_t_write(empty, "/x", H5T_NATIVE_UINT8, 2, d0, NULL, 1);
        /* A big file cut in half, as a failed copy leaves it. */
        uint64_t big[1] = {100000};
        sc_t_write(trunc, "/x", H5T_NATIVE_DOUBLE, 1, big, NULL, 1);
        struct stat st;
        stat(trunc, &st);
        assert_int_equal(truncate(trunc, st.st_size / 2), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    expect_refused(missing, NULL, SC_EIO, missing, "No such file");
    /* Layout B is scanned by rank 0 alone; the others hear its verdict. */
    expect_refused(text, NULL, SC_EINVAL, "neither an HDF5 file nor a list",
                   rank == 0 ? text : "rank 0 could not open the source");
    expect_refused(good, "/images,/nope", SC_EINVAL, good, "no field '/nope'");
    expect_refused(dims, NULL, SC_EINVAL, "field '/b' has 11 samples but '/a' has 10",
                   dims);
    /* Named in SC_FIELDS, an unsupported type is refused, named in words. */
    expect_refused(str, "/names", SC_EINVAL,
                   "field '/names' has an unsupported type, a variable-length string", str);
    expect_refused(mixed, "/bf16", SC_EINVAL, "field '/bf16' has an unsupported type, a 2-byte "
                   "float;", "IEEE floats of 2, 4 and 8 bytes");
    expect_refused(mixed, "/colour", SC_EINVAL, "an enum of 3 values over int8", "bool");
    /* With SC_FIELDS empty ("every field") those are left out, not fatal... */
    {
        sc_config c = config(mixed);
        sc_dataset *ds = NULL;
        sc_error err = SC_ERROR_INIT;
        SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), &err);
        sc_dataset_info di;
        sc_field_info fi;
        sc_dataset_get_info(ds, &di);
        assert_int_equal(di.nfields, 3);
        sc_dataset_field(ds, 0, &fi);
        assert_string_equal(fi.name, "/half");
        assert_string_equal(fi.dtype, "float16");
        assert_int_equal(fi.sample_bytes, 2);
        sc_dataset_field(ds, 1, &fi); /* a string: bytes, its width the last dimension */
        assert_string_equal(fi.name, "/names");
        assert_string_equal(fi.dtype, "uint8");
        assert_int_equal(fi.ndims, 1);
        assert_int_equal(fi.dims[0], 8);
        sc_dataset_field(ds, 2, &fi);
        assert_string_equal(fi.name, "/x");
        sc_dataset_close(ds);
    }
    /* ...and a file with no field it can carry says what it left out. */
    expect_refused(str, NULL, SC_EINVAL, "no field shardcache can carry",
                   rank == 0 || size == 1 ? "a variable-length string" : str);
    expect_refused(empty, NULL, SC_EINVAL, "field '/x' is empty", empty);
    expect_refused(trunc, NULL, SC_EHDF5, trunc, "cannot be opened as HDF5");
    /* A filter neither shardcache nor this HDF5 can run, in either layout: named at open. */
    char blosc[1200], bdir[1200], bpart[1300];
    path_of(blosc, "blosc.h5");
    path_of(bdir, "blosc-b");
    snprintf(bpart, sizeof bpart, "%s/part.h5", bdir);
    if (rank == 0) {
        mkdir(bdir, 0777);
        write_needing_blosc(blosc);
        write_needing_blosc(bpart);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    expect_refused(blosc, NULL, SC_ENOTSUP, "field '/x' needs HDF5 filter 32001 (Blosc)",
                   "HDF5_PLUGIN_PATH");
    expect_refused(bdir, NULL, SC_ENOTSUP,
                   rank == 0 ? "filter 32001 (Blosc)" : "rank 0 could not open the source",
                   "HDF5_PLUGIN_PATH");
    sc_config c = config("");
    sc_dataset *ds;
    sc_error err;
    SC_ASSERT_RC(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err), SC_EINVAL, &err);
    assert_non_null(strstr(err.msg, "SC_SOURCE"));
}

/* A changed source has another fingerprint, so stale caches are not used. */
/*
 * A source missing on one rank only (one node's mount): every rank fails,
 * naming why, instead of the others waiting for rank 0's manifest forever.
 */
static void test_source_missing_on_one_rank(void **state)
{
    (void)state;
    char sub[1200], part[1300], missing[1200];
    path_of(sub, "b-one");
    path_of(missing, "b-not-here");
    snprintf(part, sizeof part, "%s/part-0.h5", sub);
    if (rank == 0) {
        uint64_t n = 8;
        mkdir(sub, 0777);
        assert_int_equal(sc_t_write(part, "/x", H5T_NATIVE_INT32, 1, &n, NULL, 1), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    int lost = rank == size - 1 && size > 1;
    sc_config c = config(lost ? missing : sub);
    sc_dataset *ds = (sc_dataset *)0x1;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_dataset_open(MPI_COMM_WORLD, &c, &ds, &err);
    if (size == 1) {
        assert_int_equal(rc, SC_OK);
        sc_dataset_close(ds);
        return;
    }
    assert_int_equal(rc, SC_EIO);
    assert_null(ds);
    assert_non_null(strstr(err.msg, lost ? "No such file" : "another rank could not find the source"));
}

static void test_fingerprint_follows_the_source(void **state)
{
    (void)state;
    char p[1200];
    path_of(p, "fp.h5");
    uint64_t d[1] = {50};
    if (rank == 0)
        sc_t_write(p, "/x", H5T_NATIVE_INT32, 1, d, NULL, 1);
    MPI_Barrier(MPI_COMM_WORLD);
    sc_config c = config(p);
    c.shard_size = 10;
    sc_dataset *ds;
    sc_dataset_info a, b, s;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, NULL), NULL);
    sc_dataset_get_info(ds, &a);
    sc_dataset_close(ds);
    c.shard_size = 11;
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, NULL), NULL);
    sc_dataset_get_info(ds, &s);
    sc_dataset_close(ds);
    assert_int_not_equal(a.fingerprint, s.fingerprint); /* shard size counts */
    c.shard_size = 10;
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0) {
        /* Same size, same content: only the modification time moves. */
        struct timespec t[2] = {{0, UTIME_NOW}, {12345, 678}};
        assert_int_equal(utimensat(AT_FDCWD, p, t, 0), 0);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    SC_ASSERT_OK(sc_dataset_open(MPI_COMM_WORLD, &c, &ds, NULL), NULL);
    sc_dataset_get_info(ds, &b);
    sc_dataset_close(ds);
    assert_int_not_equal(a.fingerprint, b.fingerprint);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    sc_t_tmpdir(dir, sizeof dir, "source");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layout_a),
        cmocka_unit_test(test_layout_b_dir_and_list),
        cmocka_unit_test(test_layout_b_groups_small_files),
        cmocka_unit_test(test_layout_b_cut_fingerprints),
        cmocka_unit_test(test_layout_b_manifest),
        cmocka_unit_test(test_layout_b_file_changed_after_open),
        cmocka_unit_test(test_layout_b_forged_manifest),
        cmocka_unit_test(test_compressed_sources),
        cmocka_unit_test(test_bad_sources),
        cmocka_unit_test(test_source_missing_on_one_rank),
        cmocka_unit_test(test_fingerprint_follows_the_source),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
