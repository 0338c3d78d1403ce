/*
 * test_readers.c - the readers below the source, on files each rank writes
 * for itself (HDF5, no dataset, no loader):
 * - variable-length fields (runtime/storage/vlen.c): every sample's length,
 *   from contiguous storage's sequence headers and from chunked storage
 *   through HDF5, the same; a shard's rows read into its blob (offsets
 *   from the shard's first sample, the values after them, rows placed
 *   where asked); a sample whose length is not the one learned at open
 *   refused, naming the file, field, sample and shard.
 * - chunk-by-chunk reads (runtime/storage/chunks.c): a shuffled, deflated
 *   field read here, rows that start and end inside chunks the same bytes
 *   as written, also where a later chunk was never written; and each
 *   field left to H5Dread says why (a filter not decoded here, chunks that
 *   split samples, another byte order, no filter at all).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "h5.h"
#include "sc_h5test.h"
#include "sc_test.h"
#include "vlen.h"

enum { N = 40, WIDTH = 3, ROWS = 8 };

static int rank, size;
static char dir[1024];

static void path_of(char *out, size_t n, const char *name)
{
    snprintf(out, n, "%s/r%d-%s", dir, rank, name);
}

/* /z of sc_t_write_vlen, as the source describes it. */
static sc__field zfield(void)
{
    sc__field f = {.name = "/z", .dtype = SC__DT_I32, .vlen = 1, .sample_bytes = 8 * 4};
    return f;
}

/* The same samples as sc_t_write_vlen's /z, in chunks of ROWS samples. */
static void write_vlen_chunked(const char *path)
{
    hvl_t v[N];
    int32_t all[N][8];
    for (uint64_t i = 0; i < N; i++) {
        v[i].len = sc_t_zlen(i);
        v[i].p = all[i];
        for (uint64_t j = 0; j < v[i].len; j++)
            all[i][j] = sc_t_xval(i, 1000 + (int)j);
    }
    hsize_t d = N, c = ROWS;
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t t = H5Tvlen_create(H5T_NATIVE_INT32), sp = H5Screate_simple(1, &d, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    assert_true(f >= 0 && H5Pset_chunk(dcpl, 1, &c) >= 0);
    hid_t ds = H5Dcreate2(f, "/z", t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    assert_true(H5Dwrite(ds, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(sp);
    H5Tclose(t);
    H5Fclose(f);
}

/* Each sample's bytes, from `path`'s /z. */
static void lengths_of(const char *path, uint64_t *len)
{
    sc__field f = zfield();
    sc_error err = SC_ERROR_INIT;
    sc__h5_lock();
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(fid, "/z", H5P_DEFAULT);
    int rc = sc__vlen_lengths(d, path, &f, N, len, &err);
    H5Dclose(d);
    H5Fclose(fid);
    sc__h5_unlock();
    SC_ASSERT_OK(rc, &err);
}

static void test_vlen_lengths(void **state)
{
    (void)state;
    char flat[1200], chunked[1200];
    path_of(flat, sizeof flat, "flat.h5");
    path_of(chunked, sizeof chunked, "chunked.h5");
    assert_int_equal(sc_t_write_samples(flat, 0, N, WIDTH), 0);
    assert_int_equal(sc_t_write_vlen(flat, 0, N), 0);
    write_vlen_chunked(chunked);
    uint64_t a[N], b[N];
    memset(a, 0xff, sizeof a);
    memset(b, 0xff, sizeof b);
    lengths_of(flat, a);    /* the sequence headers */
    lengths_of(chunked, b); /* HDF5, block by block */
    for (uint64_t i = 0; i < N; i++) {
        assert_int_equal(a[i], 4 * sc_t_zlen(i));
        assert_int_equal(b[i], 4 * sc_t_zlen(i));
    }
}

/*
 * Shard [first, first + n) of /z into a blob, in two reads (rows [0, cut)
 * and [cut, n)), with the dataset's offsets `off` as learned at open.
 */
static int read_shard(const char *path, const uint64_t *off, uint64_t first, uint64_t n,
                      uint64_t cut, unsigned char *blob, sc_error *err)
{
    sc__field f = zfield();
    sc__h5_lock();
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT), d = H5Dopen2(fid, "/z", H5P_DEFAULT);
    sc__h5_unlock();
    int rc = sc__vlen_read(d, &f, first, cut, off + first, n, 0, blob, path, 7, first, err);
    if (rc == SC_OK)
        rc = sc__vlen_read(d, &f, first + cut, n - cut, off + first, n, cut, blob, path, 7,
                           first, err);
    sc__h5_lock();
    H5Dclose(d);
    H5Fclose(fid);
    sc__h5_unlock();
    return rc;
}

static void test_vlen_read(void **state)
{
    (void)state;
    char flat[1200];
    path_of(flat, sizeof flat, "flat.h5");
    uint64_t len[N], off[N + 1] = {0};
    lengths_of(flat, len);
    for (uint64_t i = 0; i < N; i++)
        off[i + 1] = off[i] + len[i];
    enum { FIRST = 11, SHARD = 13, CUT = 5 };
    unsigned char blob[8 * (SHARD + 1) + 8 * 4 * SHARD];
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(read_shard(flat, off, FIRST, SHARD, CUT, blob, &err), &err);
    assert_int_equal(sc__vlen_off(blob, 0), 0);
    assert_int_equal(sc__vlen_blob_bytes(blob, SHARD),
                     8 * (SHARD + 1) + off[FIRST + SHARD] - off[FIRST]);
    for (uint64_t k = 0; k < SHARD; k++) {
        uint64_t id = FIRST + k, at = sc__vlen_off(blob, k);
        assert_int_equal(sc__vlen_off(blob, k + 1) - at, 4 * sc_t_zlen(id));
        const unsigned char *v = sc__vlen_values(blob, SHARD) + at;
        for (uint64_t j = 0; j < sc_t_zlen(id); j++) {
            int32_t x;
            memcpy(&x, v + 4 * j, 4);
            assert_int_equal(x, sc_t_xval(id, 1000 + (int)j));
        }
    }
    /* The file changed since open: sample 14 is said to be 4 bytes longer. */
    uint64_t grown[N + 1];
    memcpy(grown, off, sizeof grown);
    for (uint64_t i = 15; i <= N; i++)
        grown[i] += 4;
    SC_ASSERT_RC(read_shard(flat, grown, FIRST, SHARD, CUT, blob, &err), SC_EIO, &err);
    char want[1400];
    snprintf(want, sizeof want, "source '%s' changed since the dataset was opened: field '/z', "
             "sample 14 (shard 7) holds %llu bytes, not %llu", flat,
             (unsigned long long)(4 * sc_t_zlen(14)), (unsigned long long)(4 * sc_t_zlen(14) + 4));
    if (!strstr(err.msg, want))
        fail_msg("'%s' does not say '%s'", err.msg, want);
}

/* /x of a file, its hid open; closed by done(). */
static hid_t open_x(const char *path, const char *name)
{
    hid_t fid = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    assert_true(fid >= 0);
    hid_t d = H5Dopen2(fid, name, H5P_DEFAULT);
    H5Fclose(fid); /* the file stays open while d is */
    assert_true(d >= 0);
    return d;
}

static sc__field xfield(void)
{
    sc__field f = {.name = "/x", .dtype = SC__DT_I32, .ndims = 1, .dims = {WIDTH},
                   .sample_bytes = 4 * WIDTH};
    return f;
}

static void test_chunks_read(void **state)
{
    (void)state;
    char p[1200];
    path_of(p, sizeof p, "z.h5");
    assert_int_equal(sc_t_write_samples_z(p, 100, N, WIDTH, ROWS), 0);
    hid_t d = open_x(p, "/x");
    sc__field f = xfield();
    sc__chunking c;
    sc__h5_lock();
    int direct = sc__chunks_direct(d, &f, &c);
    sc__h5_unlock();
    assert_int_equal(direct, 1);
    assert_int_equal(c.rows, ROWS);
    assert_null(c.why);
    assert_int_equal(c.pipe.n, 2); /* shuffle, deflate */
    assert_int_equal(c.pipe.elem, 4);
    /* Rows 3..29: a chunk's tail, whole chunks, a chunk's head. */
    int32_t got[N * WIDTH];
    memset(got, 0, sizeof got);
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__chunks_read(d, &f, &c, 3, 27, got, p, 2, &err), &err);
    for (uint64_t i = 0; i < 27; i++)
        for (int j = 0; j < WIDTH; j++)
            assert_int_equal(got[i * WIDTH + (uint64_t)j], sc_t_xval(100 + 3 + i, j));
    H5Dclose(d);
}

/* A chunked dataset of ROWS-row chunks with `filter` (and deflate), only its first chunk written. */
static void write_part(const char *path, hid_t type, int fletcher, hsize_t chunk1)
{
    hsize_t d[2] = {N, WIDTH}, c[2] = {ROWS, chunk1}, cnt[2] = {ROWS, WIDTH}, at[2] = {0, 0};
    int32_t x[ROWS * WIDTH];
    for (int i = 0; i < ROWS * WIDTH; i++)
        x[i] = sc_t_xval((uint64_t)i / WIDTH, i % WIDTH);
    hid_t f = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    hid_t sp = H5Screate_simple(2, d, NULL), ms = H5Screate_simple(2, cnt, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, 2, c);
    if (fletcher)
        H5Pset_fletcher32(dcpl);
    H5Pset_deflate(dcpl, 1);
    hid_t ds = H5Dcreate2(f, "/x", type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Sselect_hyperslab(sp, H5S_SELECT_SET, at, NULL, cnt, NULL);
    assert_true(H5Dwrite(ds, H5T_NATIVE_INT32, ms, sp, H5P_DEFAULT, x) >= 0);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(ms);
    H5Sclose(sp);
    H5Fclose(f);
}

static void test_written_chunk_of_a_partial_field(void **state)
{
    (void)state;
    char p[1200];
    path_of(p, sizeof p, "part.h5");
    write_part(p, H5T_NATIVE_INT32, 0, WIDTH);
    hid_t d = open_x(p, "/x");
    sc__field f = xfield();
    sc__chunking c;
    sc__h5_lock();
    assert_int_equal(sc__chunks_direct(d, &f, &c), 1);
    sc__h5_unlock();
    int32_t got[N * WIDTH];
    sc_error err = SC_ERROR_INIT;
    SC_ASSERT_OK(sc__chunks_read(d, &f, &c, 0, ROWS, got, p, 0, &err), &err);
    assert_int_equal(got[WIDTH + 1], sc_t_xval(1, 1));
    /*
     * Rows reaching into chunk 1, never written, come back as
     * SC__CHUNK_UNSTORED (the caller's H5Dread then reads the fill value);
     * HDF5 1.10's H5Dget_chunk_storage_size fails there, which was an error.
     */
    assert_int_equal(sc__chunks_read(d, &f, &c, ROWS, ROWS, got, p, 0, &err),
                     SC__CHUNK_UNSTORED);
    H5Dclose(d);
}

/* Why `path`'s /x is left to H5Dread; *filter the first filter H5Dread must run. */
static const char *why_not(const char *path, unsigned *filter)
{
    hid_t d = open_x(path, "/x");
    sc__field f = xfield();
    sc__chunking c;
    sc__h5_lock();
    int direct = sc__chunks_direct(d, &f, &c);
    sc__h5_unlock();
    H5Dclose(d);
    assert_int_equal(direct, 0);
    assert_int_equal(c.rows, 0);
    *filter = c.filter;
    return c.why;
}

static void test_fields_left_to_hdf5_say_why(void **state)
{
    (void)state;
    char p[1200];
    unsigned filter = 0;
    path_of(p, sizeof p, "why.h5");
    write_part(p, H5T_NATIVE_INT32, 1, WIDTH);
    assert_string_equal(why_not(p, &filter), "a filter shardcache does not decode");
    assert_int_equal(filter, H5Z_FILTER_FLETCHER32);
    write_part(p, H5T_NATIVE_INT32, 0, 1);
    assert_string_equal(why_not(p, &filter), "its chunks split samples");
    write_part(p, H5T_STD_I32BE, 0, WIDTH);
    assert_string_equal(why_not(p, &filter), "it is stored in another byte order than it is read");
    assert_int_equal(sc_t_write_samples(p, 0, N, WIDTH), 0); /* contiguous: nothing to say */
    assert_null(why_not(p, &filter));
    assert_int_equal(filter, 0);
}

int main(int argc, char **argv)
{
    sc_t_mpi_start(&argc, &argv, &rank, &size, dir, sizeof dir, "readers");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vlen_lengths),
        cmocka_unit_test(test_vlen_read),
        cmocka_unit_test(test_chunks_read),
        cmocka_unit_test(test_written_chunk_of_a_partial_field),
        cmocka_unit_test(test_fields_left_to_hdf5_say_why),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    return sc_t_mpi_finish(failed, dir);
}
