/*
 * Source datasets under mpiexec -n 1, 2 and 4: layout A read through
 * MPI-IO (one hyperslab per field), compressed sources, the fingerprint's
 * sensitivity, and every bad input named by file and field (layout B's
 * own: test_layout_b.c).
 */
#define _GNU_SOURCE /* utimensat */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sc_h5test.h"
#include "sc_test.h"
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
        cmocka_unit_test(test_compressed_sources),
        cmocka_unit_test(test_bad_sources),
        cmocka_unit_test(test_source_missing_on_one_rank),
        cmocka_unit_test(test_fingerprint_follows_the_source),
    };
    return sc_t_mpi_finish(cmocka_run_group_tests(tests, NULL, NULL), dir);
}
