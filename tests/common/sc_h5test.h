/*
 * sc_h5test.h - building small HDF5 source files inside tests, and a
 * per-test scratch directory.
 */
#ifndef SC_H5TEST_H
#define SC_H5TEST_H

#include <hdf5.h>
#include <stdint.h>

#include "shardcache.h"

/* Writes dataset `name` of `type` with dims[0..nd) from buf (NULL: zeros). */
int sc_t_write(const char *path, const char *name, hid_t type, int nd,
               const uint64_t *dims, const void *buf, int truncate_file);

/*
 * Self-checking samples: /x is int32 [n][width] with x[i][j] =
 * sc_t_xval(first + i, j), /y is int64 [n] holding each sample's global id,
 * so that any delivered sample can be checked from its id alone.
 */
int32_t sc_t_xval(uint64_t id, int j);
int sc_t_write_samples(const char *path, uint64_t first, uint64_t n, int width);
/* The same, each field in chunks of `rows` samples through HDF5's own shuffle and deflate. */
int sc_t_write_samples_z(const char *path, uint64_t first, uint64_t n, int width, uint64_t rows);

/*
 * Adds /z to such a file: a variable-length int32 field whose sample
 * holds sc_t_zlen(id) elements (0 to 8), element j sc_t_xval(id, 1000 + j).
 */
uint64_t sc_t_zlen(uint64_t id);
int sc_t_write_vlen(const char *path, uint64_t first, uint64_t n);

/*
 * 1 if every sample of a delivered batch (data[0] the x, data[1] the y of
 * sc_t_write_samples, and data[2] the z of sc_t_write_vlen when the batch
 * has a third field) carries its own id's bytes and lies below nsamples;
 * else 0, naming the first that does not in why.
 */
struct sc_batch;
int sc_t_samples_ok(const struct sc_batch *b, int width, uint64_t nsamples, char *why,
                    size_t whylen);

/* A fresh directory under $TMPDIR or /tmp, the same on every rank of comm. */
void sc_t_tmpdir(char *out, size_t n, const char *tag);

/* rm -rf, for the tmpdir above. */
void sc_t_rmtree(const char *path);

/*
 * Starts an MPI test program of the loader (MPI_THREAD_FUNNELED, as a
 * trainer would): this rank and the world's size, and a fresh tmpdir.
 */
void sc_t_mpi_start(int *argc, char ***argv, int *rank, int *size, char *dir, size_t n,
                    const char *tag);

/* dir/src.h5 into src[n], written by rank 0 with samples 0..nsamples-1 (aborts if it cannot). */
void sc_t_shared_source(char *src, size_t n, const char *dir, uint64_t nsamples, int width);

/*
 * A test loader's settings: the defaults (and SC_* environment), `source`,
 * a fresh cache directory under `dir` at every call (tests never see each
 * other's caches), shards of `shard_size`, batches of `batch`, `seed`, host
 * memory, no log lines.
 */
sc_config sc_t_config(const char *source, const char *dir, uint64_t shard_size,
                      uint64_t batch, uint64_t seed);

/* 1 if `flag` is nonzero on any rank of MPI_COMM_WORLD (collective). */
int sc_t_any(int flag);

/*
 * Ends an MPI test program: the job fails if any rank's cmocka group
 * failed, rank 0 removes `tmpdir` (may be NULL), and MPI is finalized.
 * Returns the exit status for main().
 */
int sc_t_mpi_finish(int failed, const char *tmpdir);

#endif
