#include "sc_h5test.h"

#include "shardcache.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Chunks of `rows` samples (0: contiguous), shuffle + deflate 4 when chunked. */
static uint64_t sc_t_chunk_rows;

int sc_t_write(const char *path, const char *name, hid_t type, int nd,
               const uint64_t *dims, const void *buf, int truncate_file)
{
    hsize_t d[8];
    size_t n = H5Tget_size(type);
    for (int i = 0; i < nd; i++) {
        d[i] = dims[i];
        n *= dims[i];
    }
    hid_t f = truncate_file ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)
                            : H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    if (f < 0)
        return -1;
    void *zeros = buf ? NULL : calloc(1, n + 1);
    hid_t sp = H5Screate_simple(nd, d, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (sc_t_chunk_rows && d[0]) {
        hsize_t c[8];
        memcpy(c, d, sizeof c[0] * (size_t)nd);
        c[0] = sc_t_chunk_rows < d[0] ? sc_t_chunk_rows : d[0];
        H5Pset_chunk(dcpl, nd, c);
        H5Pset_shuffle(dcpl);
        H5Pset_deflate(dcpl, 4);
    }
    hid_t ds = H5Dcreate2(f, name, type, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    herr_t h = n == 0 ? 0 : H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf ? buf : zeros);
    H5Dclose(ds);
    H5Sclose(sp);
    H5Fclose(f);
    free(zeros);
    return h < 0 ? -1 : 0;
}

void sc_t_tmpdir(char *out, size_t n, const char *tag)
{
    int rank;
    long stamp = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0)
        stamp = (long)getpid();
    MPI_Bcast(&stamp, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    const char *base = getenv("TMPDIR");
    snprintf(out, n, "%s/sc-test-%s-%ld", base && *base ? base : "/tmp", tag, stamp);
    if (rank == 0) {
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", out, out);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot make %s\n", out);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

void sc_t_rmtree(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", path);
}

void sc_t_mpi_start(int *argc, char ***argv, int *rank, int *size, char *dir, size_t n,
                    const char *tag)
{
    int provided;
    MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    sc_t_tmpdir(dir, n, tag);
}

void sc_t_shared_source(char *src, size_t n, const char *dir, uint64_t nsamples, int width)
{
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    snprintf(src, n, "%s/src.h5", dir);
    if (rank == 0 && sc_t_write_samples(src, 0, nsamples, width) != 0)
        MPI_Abort(MPI_COMM_WORLD, 2);
    MPI_Barrier(MPI_COMM_WORLD);
}

int sc_t_any(int flag)
{
    int mine = flag != 0, any = 0;
    MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

int sc_t_mpi_finish(int failed, const char *tmpdir)
{
    int rank, any = sc_t_any(failed);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Barrier(MPI_COMM_WORLD);
    if (rank == 0 && tmpdir)
        sc_t_rmtree(tmpdir);
    MPI_Finalize();
    return any ? 1 : 0;
}

int32_t sc_t_xval(uint64_t id, int j)
{
    return (int32_t)(id * 2654435761u + (uint64_t)j * 40503u);
}

int sc_t_write_samples(const char *path, uint64_t first, uint64_t n, int width)
{
    int32_t *x = malloc(sizeof *x * n * (uint64_t)width + 1);
    int64_t *y = malloc(sizeof *y * n + 1);
    int rc = x && y ? 0 : -1;
    for (uint64_t i = 0; !rc && i < n; i++) {
        y[i] = (int64_t)(first + i);
        for (int j = 0; j < width; j++)
            x[i * (uint64_t)width + (uint64_t)j] = sc_t_xval(first + i, j);
    }
    uint64_t dx[2] = {n, (uint64_t)width}, dy[1] = {n};
    if (!rc)
        rc = sc_t_write(path, "/x", H5T_NATIVE_INT32, 2, dx, x, 1);
    if (!rc)
        rc = sc_t_write(path, "/y", H5T_NATIVE_INT64, 1, dy, y, 0);
    free(x);
    free(y);
    return rc;
}

int sc_t_write_samples_z(const char *path, uint64_t first, uint64_t n, int width, uint64_t rows)
{
    sc_t_chunk_rows = rows;
    int rc = sc_t_write_samples(path, first, n, width);
    sc_t_chunk_rows = 0;
    return rc;
}

uint64_t sc_t_zlen(uint64_t id)
{
    return id * 7919 % 9;
}

int sc_t_write_vlen(const char *path, uint64_t first, uint64_t n)
{
    hvl_t *v = calloc(n + 1, sizeof *v);
    int32_t *all = malloc(sizeof *all * 8 * (n + 1));
    int rc = v && all ? 0 : -1;
    for (uint64_t i = 0; !rc && i < n; i++) {
        v[i].len = sc_t_zlen(first + i);
        v[i].p = all + 8 * i;
        for (uint64_t j = 0; j < v[i].len; j++)
            all[8 * i + j] = sc_t_xval(first + i, 1000 + (int)j);
    }
    hid_t t = H5Tvlen_create(H5T_NATIVE_INT32);
    if (!rc)
        rc = sc_t_write(path, "/z", t, 1, &n, v, 0);
    H5Tclose(t);
    free(v);
    free(all);
    return rc;
}

/* Sample k of a batch's variable-length z (field 2): its id's elements. */
static int sc_t_z_ok(const sc_batch *b, uint64_t k)
{
    const uint64_t *off = b->offsets[2];
    const unsigned char *values = b->data[2];
    uint64_t n = sc_t_zlen(b->ids[k]);
    int good = off[k + 1] - off[k] == n * sizeof(int32_t);
    for (uint64_t j = 0; good && j < n; j++) {
        int32_t e;
        memcpy(&e, values + off[k] + j * sizeof e, sizeof e);
        good = e == sc_t_xval(b->ids[k], 1000 + (int)j);
    }
    return good;
}

int sc_t_samples_ok(const sc_batch *b, int width, uint64_t nsamples, char *why, size_t whylen)
{
    const int32_t *x = b->data[0];
    const int64_t *y = b->data[1];
    for (uint64_t k = 0; k < b->size; k++) {
        int good = b->ids[k] < nsamples && y[k] == (int64_t)b->ids[k];
        for (int j = 0; good && j < width; j++)
            good = x[k * (uint64_t)width + (uint64_t)j] == sc_t_xval(b->ids[k], j);
        if (good && b->nfields > 2)
            good = b->offsets[2] && sc_t_z_ok(b, k);
        if (!good) {
            snprintf(why, whylen, "epoch %llu batch %llu: sample %llu has another's bytes",
                     (unsigned long long)b->epoch, (unsigned long long)b->index,
                     (unsigned long long)b->ids[k]);
            return 0;
        }
    }
    return 1;
}

sc_config sc_t_config(const char *source, const char *dir, uint64_t shard_size, uint64_t batch,
                      uint64_t seed)
{
    static int ncache;
    sc_config c;
    sc_config_init(&c, NULL);
    snprintf(c.source, sizeof c.source, "%s", source);
    snprintf(c.cache_dir, sizeof c.cache_dir, "%s/cache%d", dir, ncache++);
    c.shard_size = shard_size;
    c.batch_size = batch;
    c.seed = seed;
    c.device = SC_DEVICE_HOST;
    c.log_level = 0;
    return c;
}
