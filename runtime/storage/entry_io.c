/*
 * entry_io.c - a cache entry's file: written (a temporary made exclusive
 * and held, its HDF5 layout, the fields' bytes, the header that marks it
 * complete, the rename into place) and read back (opened without
 * following a link, its header decoded and matched to the shard and the
 * dataset, its fields read, mapped, or copied when another user owns it).
 * The bytes only: whether an entry may be served without its checksum,
 * the index and the counters are the cache's (cache.c).
 */
#include "entry_io.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "error.h"
#include "fault.h"
#include "h5.h"
#include "io.h"

/* pread()/pwrite() until done (io.h); 0 on success. */
static int entry_full_io(int fd, void *buf, uint64_t n, uint64_t off, int write)
{
    return (write ? sc__io_pwrite(fd, buf, n, off) : sc__io_pread(fd, buf, n, off)) ? -1 : 0;
}

/* Whether `name` in directory dfd is the very file open at fd (never following a link). */
static int entry_same_file(int fd, int dfd, const char *name)
{
    struct stat a, b;
    return fstat(fd, &a) == 0 && fstatat(dfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
           a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * Room for the entry, first: on a full filesystem HDF5's close fails and
 * keeps the file's id to the end of the process (its library then loops
 * at exit, "infinite loop closing library").  Refused here, the shard is
 * served from the source, as after a failed write.  Another writer may
 * still fill the disk between this and the write.
 */
static int entry_room(int fd, const sc_dataset *ds, uint64_t shard, const char *shown,
                      sc_error *err)
{
    struct statvfs v;
    uint64_t need = 0;
    for (int i = 0; i < ds->nfields; i++)
        need += sc__field_bytes(ds, i, shard);
    need = SC__ENTRY_DISK(need, ds->nfields) + 65536; /* and HDF5's flush, with slack */
    if (fstatvfs(fd, &v) != 0 || (uint64_t)v.f_bavail * v.f_frsize >= need)
        return SC_OK;
    return sc__seterr(err, SC_EIO, "cache entry '%s' (shard %llu): write failed: %s (%llu "
                      "bytes free, the entry needs about %llu)", shown, (unsigned long long)shard,
                      strerror(ENOSPC), (unsigned long long)v.f_bavail * v.f_frsize,
                      (unsigned long long)need);
}

/*
 * The entry's HDF5 layout in the file at `at` (ours, made by the caller):
 * one contiguous dataset a field, space only, their offsets and sizes into
 * h; the bytes go in by pwrite afterwards, outside the HDF5 lock.
 */
static int entry_layout(const sc_dataset *ds, uint64_t shard, const char *at,
                        const char *shown, sc__entry *h, sc_error *err)
{
    sc__h5_lock();
    hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    H5Pset_userblock(fcpl, SC__ENTRY_BYTES);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_layout(dcpl, H5D_CONTIGUOUS);
    H5Pset_alloc_time(dcpl, H5D_ALLOC_TIME_EARLY); /* an offset exists at once */
    /* Truncates the file the caller made, exclusive and 0600, and holds. */
    errno = 0;
    hid_t f = H5Fcreate(at, H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    int sys = f < 0 ? errno : 0; /* why, in the system's words (read-only, full...) */
    int bad = f < 0;
    for (int i = 0; !bad && i < ds->nfields; i++) {
        char name[16];
        hsize_t n = sc__field_bytes(ds, i, shard);
        snprintf(name, sizeof name, "f%d", i);
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, name, H5T_NATIVE_UINT8, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        bad = d < 0;
        haddr_t off = bad ? HADDR_UNDEF : H5Dget_offset(d);
        bad = bad || off == HADDR_UNDEF;
        h->off[i] = (uint64_t)off;
        h->bytes[i] = n;
        if (d >= 0)
            H5Dclose(d);
        H5Sclose(sp);
    }
    if (f >= 0 && H5Fclose(f) < 0)
        bad = 1;
    H5Pclose(dcpl);
    H5Pclose(fcpl);
    int rc = bad ? sc__h5_err(err, SC_EHDF5, "cache entry '%s' (shard %llu): write failed%s%s",
                              shown, (unsigned long long)shard, sys ? ": " : "",
                              sys ? strerror(sys) : "")
                 : SC_OK;
    sc__h5_unlock();
    return rc;
}

/* The fields' bytes and the header into the held file `fd`, and its mode. */
static int entry_fill(const sc__cache_place *pl, int nfields, int fd, void *const *bufs,
                      const sc__entry *h, const char *shown, sc_error *err)
{
    unsigned char block[SC__ENTRY_BYTES];
    sc__entry_encode(h, block);
    if (fchmod(fd, pl->group ? 0640 : 0600) != 0)
        return sc__seterr(err, SC_EIO, "cache entry '%s': %s", shown, strerror(errno));
    /*
     * The fields direct (io.h): a buffered write would fault a fresh
     * page-cache page in for every page of the entry, on the training
     * path.  (HDF5 will not align the fields to pages behind a 512-byte
     * user block, so they go through io.c's bounce buffer, which stays
     * in the CPU's cache.)  The header after them, as before: the
     * complete mark.
     */
    int dfd = sc__io_open_direct(fd, O_WRONLY);
    const char *why = NULL;
    int i = 0;
    for (; !why && i < nfields; i++)
        why = sc__io_pwrite_direct(fd, dfd, bufs[i], h->bytes[i], h->off[i]);
    if (dfd >= 0)
        close(dfd);
    if (why)
        return sc__seterr(err, SC_EIO, "cache entry '%s': writing field %d: %s", shown, i - 1,
                          why);
    if (entry_full_io(fd, block, SC__ENTRY_BYTES, 0, 1) != 0)
        return sc__seterr(err, SC_EIO, "cache entry '%s': writing its header: %s", shown,
                          strerror(errno));
    return SC_OK;
}

/* The held file `fd`, named tmp, published as name: checked to be it after the rename. */
static int entry_publish(const sc__cache_place *pl, int fd, const char *tmp, const char *name,
                         sc_error *err)
{
    if (renameat(pl->dfd, tmp, pl->dfd, name) != 0)
        return sc__seterr(err, SC_EIO, "cache entry '%s/%s': rename failed: %s", pl->dir,
                          name, strerror(errno));
    if (!entry_same_file(fd, pl->dfd, name)) { /* swapped before the rename */
        unlinkat(pl->dfd, name, 0);
        return sc__seterr(err, SC_EIO, "cache entry '%s/%s': replaced as it was published",
                          pl->dir, name);
    }
    return SC_OK;
}

int sc__entry_io_write(const sc__cache_place *pl, const sc_dataset *ds, uint64_t shard,
                    void *const *bufs, uint64_t sum, uint64_t job, sc_error *err)
{
    char name[32], tmp[96], at[128], shown[SC_PATH_MAX + 96];
    sc__entry h = {shard, ds->fingerprint, sum, (uint64_t)ds->nfields, {0}, {0}, job};
    static _Atomic unsigned long writers; /* names each writer's temporary */
    sc__entry_name(shard, name, sizeof name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lu", name, (long)getpid(),
             (unsigned long)atomic_fetch_add(&writers, 1));
    snprintf(shown, sizeof shown, "%s/%s", pl->dir, tmp);
    /*
     * HDF5 creates by path: this one reaches the directory held open,
     * wherever its name points now (a name swapped since the open reaches
     * nothing of ours).
     */
    snprintf(at, sizeof at, "/proc/self/fd/%d/%s", pl->dfd, tmp);
    /*
     * Made here first, 0600 and exclusive, and held: HDF5 would create it
     * 0666 less the umask, which a group member could open for writing
     * before it is published; every write and the rename are checked to
     * reach this very file.
     */
    int own = openat(pl->dfd, tmp, O_CREAT | O_EXCL | O_NOFOLLOW | O_RDWR | O_CLOEXEC, 0600);
    if (own < 0)
        return sc__seterr(err, SC_EIO, "cache entry '%s' (shard %llu): %s", shown,
                          (unsigned long long)shard, strerror(errno));
    int rc = entry_room(own, ds, shard, shown, err);
    if (rc == SC_OK)
        rc = entry_layout(ds, shard, at, shown, &h, err);
    if (rc == SC_OK && sc__fault("cache-writer-dies"))
        raise(SIGKILL); /* test hook: the writer dies with data but no mark */
    if (rc == SC_OK && !entry_same_file(own, pl->dfd, tmp))
        rc = sc__seterr(err, SC_EIO, "cache entry '%s': replaced while it was written (by "
                        "someone who may write the cache directory)", shown);
    if (rc == SC_OK)
        rc = entry_fill(pl, ds->nfields, own, bufs, &h, shown, err);
    if (rc == SC_OK)
        rc = entry_publish(pl, own, tmp, name, err);
    if (close(own) != 0 && rc == SC_OK)
        rc = sc__seterr(err, SC_EIO, "cache entry '%s': %s", shown, strerror(errno));
    if (rc != SC_OK)
        unlinkat(pl->dfd, tmp, 0);
    return rc;
}

/* The entry open at fd mapped read-only into m: NULL, or why not. */
static const char *entry_map(int fd, const struct stat *st, const sc__entry *h, int nfields,
                             sc__mapping *m)
{
    m->len = (size_t)st->st_size;
    m->base = mmap(NULL, m->len, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (m->base == MAP_FAILED) {
        m->base = NULL;
        return "it cannot be mapped";
    }
    for (int i = 0; i < nfields; i++)
        m->field[i] = (const unsigned char *)m->base + h->off[i];
    return NULL;
}

/* The fields of the entry open at fd read into memory of m's own: NULL, or why not. */
static const char *entry_copy(int fd, const sc__entry *h, int nfields, sc__mapping *m)
{
    uint64_t total = 0;
    for (int i = 0; i < nfields; i++)
        total += h->bytes[i];
    unsigned char *p = malloc(total ? total : 1);
    if (!p)
        return "there is no memory to read it";
    m->base = p;
    m->len = (size_t)total;
    m->copied = 1;
    for (int i = 0; i < nfields; p += h->bytes[i], i++) {
        m->field[i] = p;
        if (entry_full_io(fd, p, h->bytes[i], h->off[i], 0))
            return "its data does not read back"; /* truncated meanwhile */
    }
    return NULL;
}

const char *sc__entry_io_read(int dirfd, const sc_dataset *ds, uint64_t shard, void *const *bufs,
                           sc__mapping *m, sc__entry *h, struct stat *st, int *foreign)
{
    unsigned char block[SC__ENTRY_BYTES];
    const char *why = NULL;
    char name[32];

    sc__entry_name(shard, name, sizeof name);
    int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* a symlink: repaired */
    if (fd < 0 || fstat(fd, st) != 0)
        why = "it cannot be opened";
    else if (entry_full_io(fd, block, SC__ENTRY_BYTES, 0, 0) || sc__entry_decode(block, h))
        why = "it has no complete mark (or a damaged header)";
    else if (h->shard != shard)
        why = "it belongs to another shard";
    else if (h->fingerprint != ds->fingerprint || h->nfields != (uint64_t)ds->nfields)
        why = "it belongs to another dataset";
    *foreign = !why && st->st_uid != getuid();
    for (int i = 0; !why && i < ds->nfields; i++) {
        uint64_t want = sc__field_bytes(ds, i, shard);
        if (h->bytes[i] != want)
            why = "a field has the wrong size";
        else if (h->off[i] < SC__ENTRY_BYTES || h->off[i] + want > (uint64_t)st->st_size)
            why = "it is truncated";
        else if (!m && entry_full_io(fd, bufs[i], want, h->off[i], 0))
            why = "its data does not read back";
    }
    if (!why && m)
        why = *foreign ? entry_copy(fd, h, ds->nfields, m) : entry_map(fd, st, h, ds->nfields, m);
    if (fd >= 0)
        close(fd);
    return why;
}
