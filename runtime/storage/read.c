/*
 * read.c - a shard's bytes from the source (see read.h).
 */
#define _GNU_SOURCE /* O_DIRECT's EINVAL, posix_fadvise */
#include "read.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chunks.h"
#include "fields.h"
#include "h5.h"
#include "io.h"
#include "log.h"
#include "mem.h"
#include "source.h"
#include "vlen.h"

#define STAMP SC__STAMP_WORDS /* words of a file's stamp */

/* Reads `count` samples from `first` of an open dataset into buf. */
static int read_rows(hid_t d, const sc__field *f, uint64_t first, uint64_t count,
                            void *buf, const char *path, uint64_t shard, sc_error *err)
{
    hsize_t start[H5S_MAX_RANK] = {0}, cnt[H5S_MAX_RANK];
    cnt[0] = count;
    start[0] = first;
    for (int i = 0; i < f->ndims; i++)
        cnt[i + 1] = f->dims[i];
    hid_t fs = H5Dget_space(d), ft = H5Dget_type(d);
    hid_t mt = ft >= 0 ? sc__h5_mem_type(ft, f->dtype) : H5I_INVALID_HID;
    int nd = f->ndims + 1 - (ft >= 0 && sc__h5_string_width(ft)); /* a string's width is no axis */
    hid_t ms = f->no_axis ? H5Scopy(fs) : H5Screate_simple(nd, cnt, NULL); /* no axis: all of it */
    herr_t h = fs < 0 || ms < 0 || mt < 0 ? -1
               : f->no_axis ? H5Sselect_all(fs)
                            : H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, cnt, NULL);
    if (h >= 0)
        h = H5Dread(d, mt, ms, fs, H5P_DEFAULT, buf);
    /* Said before the closes, which clear HDF5's error stack, its reason. */
    int rc = h < 0 ? sc__h5_err(err, SC_EHDF5,
                                "source '%s': reading shard %llu of field '%s' failed",
                                path, (unsigned long long)shard, f->name)
                   : SC_OK;
    if (mt >= 0)
        H5Tclose(mt);
    if (ft >= 0)
        H5Tclose(ft);
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    return rc;
}

/*
 * Testing builds: a source as slow as a busy shared filesystem, for the
 * benchmarks of transfers between nodes (SC_TEST_SOURCE_MBPS=R: each
 * process reads R MB/s).  It sleeps under the HDF5 lock, as a slow read
 * would block there.
 */
#ifdef SC_TESTING
static void read_throttle(const sc_dataset *ds, uint64_t shard, const sc__field *fields,
                            int nfields)
{
    if (ds->slow_bps <= 0.0)
        return;
    uint64_t bytes = 0;
    for (int i = 0; i < nfields; i++)
        bytes += sc__part_bytes(ds, &fields[i], i, shard);
    double s = (double)bytes / ds->slow_bps;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}
#else
#define read_throttle(ds, shard, fields, nfields) ((void)0)
#endif

/*
 * An O_DIRECT descriptor of the file open at fd (buffered), or -1: where
 * the filesystem refuses (tmpfs, some network filesystems) the bytes come
 * through the page cache, read ahead (POSIX_FADV_SEQUENTIAL), and the log
 * says so once a process, naming the file.
 */
static int read_open_direct(const sc_dataset *ds, int fd, const char *path)
{
    static _Atomic int said;
    int dfd = sc__io_open_direct(fd, O_RDONLY);
    if (dfd >= 0)
        return dfd;
    int why = errno;
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    if (!atomic_exchange(&said, 1))
        sc__log(ds->log_level, SC__LOG_INFO, ds->rank,
                "source file '%s': its filesystem refuses O_DIRECT (%s): reading it through "
                "the page cache", path, strerror(why));
    return -1;
}

/*
 * A file of fewer bytes is read buffered: its page-cache pages cost less
 * than the two more system calls a direct read makes (open, mincore).
 */
#define READ_DIRECT_MIN ((uint64_t)256 << 10)

/* n bytes at off of the file open at fd (and dfd: read.h) into buf: sc__io_pread's words. */
static const char *read_bytes(int fd, int dfd, void *buf, uint64_t n, uint64_t off)
{
    if (dfd < 0) /* buffered: the whole range read ahead at once, in flight together */
        (void)posix_fadvise(fd, (off_t)off, (off_t)n, POSIX_FADV_WILLNEED);
    return sc__io_pread_direct(fd, dfd, buf, n, off);
}

/*
 * Descriptors of dataset d's file (buffered into *fd, direct into *dfd or
 * -1), the very file HDF5 has open: its own descriptor reopened.  0, or -1
 * where HDF5's driver has no descriptor (MPI-IO).  The HDF5 lock is held.
 */
static int read_fds(const sc_dataset *ds, hid_t d, const char *path, int *fd, int *dfd)
{
    *fd = *dfd = -1;
    if (ds->layout == 'A' && ds->mpio) /* one producer alone in a collective would hang */
        return -1;
    hid_t file = H5Iget_file_id(d), fapl = file >= 0 ? H5Fget_access_plist(file) : -1;
    void *h = NULL;
    if (fapl >= 0 && H5Pget_driver(fapl) == H5FD_SEC2 &&
        H5Fget_vfd_handle(file, H5P_DEFAULT, &h) >= 0 && h) {
        char at[64];
        snprintf(at, sizeof at, "/proc/self/fd/%d", *(int *)h);
        *fd = open(at, O_RDONLY | O_CLOEXEC);
    }
    if (*fd >= 0)
        *dfd = read_open_direct(ds, *fd, path);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (file >= 0)
        H5Fclose(file);
    H5Eclear2(H5E_DEFAULT);
    return *fd >= 0 ? 0 : -1;
}

/*
 * A contiguous field's rows read by their offset in the file, outside HDF5
 * and its lock, direct where the filesystem allows (io.h): H5Dread would
 * read them one producer at a time, through fresh page-cache pages.
 * READ_VIA_HDF5 when they do not lie in the file as delivered, or HDF5's
 * driver has no descriptor.  Called without the lock.
 */
#define READ_VIA_HDF5 1
static int read_contiguous(const sc_dataset *ds, hid_t d, const sc__field *f, uint64_t first,
                           uint64_t count, void *buf, const char *path, uint64_t shard,
                           sc_error *err)
{
    hsize_t dims[H5S_MAX_RANK] = {0};
    int fd = -1, dfd = -1;
    uint64_t at = UINT64_MAX;
    sc__h5_lock();
    hid_t sp = f->vlen || f->no_axis ? H5I_INVALID_HID : H5Dget_space(d);
    if (sp >= 0 && H5Sget_simple_extent_dims(sp, dims, NULL) > 0)
        at = sc__source_raw_offset(d, f, dims[0]);
    if (sp >= 0)
        H5Sclose(sp);
    if (at != UINT64_MAX)
        read_fds(ds, d, path, &fd, &dfd);
    sc__h5_unlock();
    if (fd < 0)
        return READ_VIA_HDF5;
    const char *why = read_bytes(fd, dfd, buf, count * f->sample_bytes,
                                 at + first * f->sample_bytes);
    if (dfd >= 0)
        close(dfd);
    close(fd);
    return why ? sc__seterr(err, SC_EIO, "source '%s': shard %llu of field '%s': %s", path,
                            (unsigned long long)shard, f->name, why)
               : SC_OK;
}

/*
 * One field's rows of an open dataset, called without the lock: chunk by
 * chunk, decoded outside the lock (chunks.c), where the filters allow;
 * else one H5Dread under it.
 */
static int read_field(const sc_dataset *ds, hid_t d, const sc__field *f, uint64_t first,
                      uint64_t count, void *buf, const char *path, uint64_t shard,
                      sc_error *err)
{
    int rc = read_contiguous(ds, d, f, first, count, buf, path, shard, err);
    if (rc != READ_VIA_HDF5)
        return rc;
    sc__chunking c;
    sc__h5_lock();
    int direct = sc__chunks_direct(d, f, &c);
    sc__h5_unlock();
    rc = direct ? sc__chunks_read(d, f, &c, first, count, buf, path, shard, err)
                : SC__CHUNK_UNSTORED;
    if (rc == SC__CHUNK_UNSTORED) { /* HDF5 reads what it must decode or fill */
        sc__h5_lock();
        rc = read_rows(d, f, first, count, buf, path, shard, err);
        sc__h5_unlock();
    }
    if (rc == SC_EHDF5 && !direct) { /* HDF5's own words name the plugins it tried */
        sc__h5_lock();
        sc__chunks_missing(d, &c);
        sc__h5_unlock();
        if (c.missing)
            rc = sc__seterr(err, SC_ENOTSUP, "source '%s': shard %llu of field '%s': a chunk "
                            "needs HDF5 filter %u (%s), which this HDF5 library cannot load: "
                            "put the filter's plugin in HDF5_PLUGIN_PATH", path,
                            (unsigned long long)shard, f->name, c.missing,
                            sc__filter_name(c.missing));
    }
    return rc;
}

/*
 * Field i's rows [first, first + count) of dataset d, as rows [row, row +
 * count) of a shard's buffer for it: at row's bytes, or into a
 * variable-length field's blob.  Called without the lock.
 */
static int read_part(const sc_dataset *ds, hid_t d, const sc__field *f, int i,
                            uint64_t first, uint64_t count, uint64_t row, uint64_t shard,
                            void *buf, const char *path, sc_error *err)
{
    if (f->vlen)
        return sc__vlen_read(d, f, first, count, ds->vlen_off[i] + ds->shard_first[shard],
                             ds->shard_sizes[shard], row, buf, path, shard,
                             ds->shard_first[shard], err);
    return read_field(ds, d, f, first, count, (unsigned char *)buf + row * f->sample_bytes,
                             path, shard, err);
}

/* Layout B: rows [first, first + count) of a file, as rows [row, ...) of a shard's buffers. */
typedef struct read_piece {
    uint64_t file, first, row, count;
} read_piece;

/*
 * Layout B: a file whose fields lie in it as delivered (file_off), read
 * with pread outside HDF5 and its lock, once its stamp (size, mtime,
 * inode, change time) says it is the file this open saw: an HDF5 open costs more than
 * reading a sample of tens of KiB, and one-sample files are read one each.
 * Direct where the filesystem allows (read_bytes).  READ_VIA_HDF5 when a
 * field is not so stored.
 */
static int read_direct(sc_dataset *ds, uint64_t shard, const read_piece *p,
                       const sc__field *fields, int nfields, void *const *bufs, sc_error *err)
{
    uint64_t file = p->file, row = p->row, n = p->count;
    const uint64_t *off = ds->file_off + file * (uint64_t)nfields;
    for (int i = 0; i < nfields; i++)
        if (off[i] == UINT64_MAX)
            return READ_VIA_HDF5;
    const char *path = ds->files[file], *why = NULL, *field = NULL;
    struct stat st;
    uint64_t now[SC__STAMP_WORDS] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC), dfd = -1;
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror(errno);
    else
        sc__fingerprint_stamp(&st, now);
    uint64_t bytes = 0;
    for (int i = 0; i < nfields; i++)
        bytes += n * fields[i].sample_bytes;
    if (!why && bytes >= READ_DIRECT_MIN)
        dfd = read_open_direct(ds, fd, path);
    if (!why && memcmp(now, ds->file_stamp + STAMP * file, sizeof now) != 0)
        why = "it changed since the dataset was opened";
    for (int i = 0; !why && i < nfields; i++) {
        field = fields[i].name;
        why = read_bytes(fd, dfd, (unsigned char *)bufs[i] + row * fields[i].sample_bytes,
                         n * fields[i].sample_bytes, off[i] + p->first * fields[i].sample_bytes);
    }
    if (dfd >= 0)
        close(dfd);
    if (fd >= 0)
        close(fd);
    if (!why)
        return SC_OK;
    return sc__seterr(err, SC_EIO, "source file '%s' (shard %llu)%s%s%s: %s", path,
                      (unsigned long long)shard, field ? ": field '" : "", field ? field : "",
                      field ? "'" : "", why);
}

/* Layout B: a piece of a shard from one file, each field checked against the dataset's. */
static int read_file(sc_dataset *ds, uint64_t shard, const read_piece *p,
                     const sc__field *fields, int nfields, void *const *bufs, sc_error *err)
{
    uint64_t file = p->file;
    const char *path = ds->files[file];
    int rc = read_direct(ds, shard, p, fields, nfields, bufs, err);
    if (rc != READ_VIA_HDF5)
        return rc;
    sc__h5_lock();
    hid_t f = sc__fields_open_file(path, MPI_COMM_SELF, 0, err);
    sc__h5_unlock();
    rc = f < 0 ? (err ? err->code : SC_EHDF5) : SC_OK;
    for (int i = 0; rc == SC_OK && i < nfields; i++) {
        sc__field now;
        uint64_t n = 0;
        hid_t d = H5I_INVALID_HID;
        sc__h5_lock();
        rc = sc__fields_describe(f, path, fields[i].name, fields[i].no_axis, &now, &n, &d, err);
        sc__h5_unlock();
        if (rc == SC_OK && (!sc__field_same(&now, &fields[i]) || n != ds->file_sizes[file]))
            rc = sc__seterr(err, SC_EIO,
                            "source file '%s' (shard %llu) changed since the "
                            "dataset was opened: field '%s'",
                            path, (unsigned long long)shard, now.name);
        if (rc == SC_OK)
            rc = read_part(ds, d, &fields[i], i, p->first, p->count, p->row, shard, bufs[i],
                           path, err);
        sc__h5_lock();
        if (d >= 0)
            H5Dclose(d);
        sc__h5_unlock();
    }
    sc__h5_lock();
    if (f >= 0)
        H5Fclose(f);
    sc__h5_unlock();
    return rc;
}

/* Layout B: a shard's run of files (or its piece of one), one after another into the same buffers. */
static int read_files(sc_dataset *ds, uint64_t shard, const sc__field *fields,
                             int nfields, void *const *bufs, sc_error *err)
{
    int rc = SC_OK;
    read_piece p = {ds->file_first[shard], ds->file_row[shard], 0, 0};
    for (uint64_t left = ds->shard_sizes[shard]; rc == SC_OK && left > 0; p.file++, p.first = 0) {
        p.count = ds->file_sizes[p.file] - p.first < left ? ds->file_sizes[p.file] - p.first : left;
        rc = read_file(ds, shard, &p, fields, nfields, bufs, err);
        p.row += p.count, left -= p.count;
    }
    return rc;
}

/* The source's own fields of one shard (src[], or fields[] without a transform). */
static int read_source(sc_dataset *ds, uint64_t shard, const sc__field *fields, int nfields,
                              void *const *bufs, sc_error *err)
{
    int rc = SC_OK;
    if (ds->layout == 'A') {
        for (int i = 0; rc == SC_OK && i < nfields; i++)
            rc = read_part(ds, ds->dset[i], &fields[i], i, ds->shard_first[shard],
                                  ds->shard_sizes[shard], 0, shard, bufs[i], ds->path, err);
    } else {
        rc = read_files(ds, shard, fields, nfields, bufs, err);
    }
    if (rc == SC_OK) {
        sc__h5_lock();
        read_throttle(ds, shard, fields, nfields);
        sc__h5_unlock();
    }
    return rc;
}

static int read_transformed(sc_dataset *ds, uint64_t shard, void *const *bufs, sc_error *err)
{
    const sc_transform *tf = ds->tf;
    uint64_t n = ds->shard_sizes[shard], at[SC_MAX_FIELDS + 1] = {0};
    /* Each input 8-aligned: a transform may read a blob's uint64 offsets, or
       int64 samples after a variable-length field's odd count of bytes. */
    for (int i = 0; i < ds->nsrc; i++)
        at[i + 1] = (at[i] + sc__part_bytes(ds, &ds->src[i], i, shard) + 7) / 8 * 8;
    unsigned char *scratch = sc__big_alloc(at[ds->nsrc] + 1);
    if (!scratch)
        return sc__seterr(err, SC_ENOMEM, "source '%s': shard %llu: no memory to transform it",
                          ds->path, (unsigned long long)shard);
    void *in[SC_MAX_FIELDS];
    for (int i = 0; i < ds->nsrc; i++)
        in[i] = scratch + at[i];
    int rc = read_source(ds, shard, ds->src, ds->nsrc, in, err);
    char msg[256] = "";
    if (rc == SC_OK && tf->shard(tf->arg, shard, ds->shard_first[shard], n,
                                 (const void *const *)in, bufs, msg, sizeof msg) != 0)
        rc = sc__seterr(err, SC_ETRANSFORM,
                        "source '%s': shard %llu (samples %llu..%llu): transform '%s' "
                        "version %s failed: %s",
                        ds->path, (unsigned long long)shard,
                        (unsigned long long)ds->shard_first[shard],
                        (unsigned long long)(ds->shard_first[shard] + n - 1), tf->name,
                        tf->version, msg[0] ? msg : "(no reason given)");
    free(scratch);
    return rc;
}

int sc_dataset_read_shard(sc_dataset *ds, uint64_t shard, void *const *bufs,
                          sc_error *err)
{
    if (!ds || !bufs)
        return sc__seterr(err, SC_EINVAL, "sc_dataset_read_shard: NULL argument");
    if (shard >= ds->nshards)
        return sc__seterr(err, SC_EINVAL, "source '%s': shard %llu of %llu",
                          ds->path, (unsigned long long)shard,
                          (unsigned long long)ds->nshards);
    return ds->tf ? read_transformed(ds, shard, bufs, err)
                  : read_source(ds, shard, ds->fields, ds->nfields, bufs, err);
}

int sc__read_vlen_disagrees(const sc_dataset *ds, uint64_t shard, const void *const *bufs)
{
    uint64_t n = ds->shard_sizes[shard], first = ds->shard_first[shard];
    for (int i = 0; i < ds->nfields; i++) {
        if (!ds->fields[i].vlen)
            continue; /* (its vlen_off is NULL: no arithmetic on it) */
        const uint64_t *off = ds->vlen_off[i] + first;
        for (uint64_t k = 0; k <= n; k++)
            if (sc__vlen_off(bufs[i], k) != off[k] - off[0])
                return i;
    }
    return -1;
}

void sc__read_skews(const sc_dataset *ds, uint64_t shard, uint64_t *skew)
{
    for (int i = 0; i < ds->nfields; i++) {
        const sc__field *f = &ds->fields[i];
        uint64_t at = UINT64_MAX;
        if (ds->tf || f->vlen || shard >= ds->nshards) {
            /* a transform's output or a blob: never read in place */
        } else if (ds->layout == 'A') {
            at = ds->a_off[i]; /* from the open: a cache hit's load takes no HDF5 lock */
            at = at == UINT64_MAX ? at : at + ds->shard_first[shard] * f->sample_bytes;
        } else if (ds->file_off) {
            at = ds->file_off[ds->file_first[shard] * (uint64_t)ds->nfields + (uint64_t)i];
            at = at == UINT64_MAX ? at : at + ds->file_row[shard] * f->sample_bytes;
        }
        skew[i] = at == UINT64_MAX ? 0 : at % SC__IO_ALIGN;
    }
}
