/*
 * cache.c - the node-local shard cache.
 *
 * One directory per (dataset fingerprint, node-local rank), one HDF5 file
 * per shard entry.  An entry is written under a temporary name, its
 * checksum and then its "complete" mark written last, and renamed into
 * place: a writer that dies mid-entry leaves only a temporary file, which
 * the next open removes.  An entry that does not open, lacks the mark, was
 * made for another dataset or shard, has the wrong size, or fails its
 * XXH64 checksum is never served: it is deleted, counted as a repair,
 * logged, and the shard is read from the source again.
 *
 * Why a file per entry rather than one HDF5 file per rank: HDF5 1.10 has no
 * journal, so a process killed while writing into a shared file can leave
 * the whole file unreadable; with one file per entry a crash costs at most
 * the entry being written, and rename() makes publication atomic.  A lock
 * file (flock) keeps two live processes out of one directory; the second
 * uses a private directory and says so.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "evict.h"
#include "fault.h"
#include "hash.h"
#include "log.h"
#include "source.h"

#define CHECKSUM_SEED UINT64_C(0x7363616368653031) /* "scache01" */

struct sc_cache {
    sc_dataset *ds;
    char dir[SC_PATH_MAX];
    int lock_fd, rank, local_rank, log_level;
    sc_cache_check check;
    sc__evict *ev;
    sc_cache_stats st;
};

static int mkdirs(const char *path)
{
    char tmp[SC_PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(tmp, 0777) != 0 && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(tmp, 0777) != 0 && errno != EEXIST ? -1 : 0;
}

static void entry_path(const sc_cache *c, uint64_t shard, char *out, size_t n)
{
    snprintf(out, n, "%s/s%llu.h5", c->dir, (unsigned long long)shard);
}

/* Takes the directory's lock; *busy is 1 if another live process holds it. */
static int lock_dir(sc_cache *c, int *busy, sc_error *err)
{
    char path[SC_PATH_MAX + 16];
    *busy = 0;
    if (mkdirs(c->dir) != 0)
        return sc__seterr(err, SC_EIO, "cache directory '%s': %s", c->dir,
                          strerror(errno));
    snprintf(path, sizeof path, "%s/lock", c->dir);
    c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (c->lock_fd < 0)
        return sc__seterr(err, SC_EIO, "cache lock '%s': %s", path, strerror(errno));
    if (flock(c->lock_fd, LOCK_EX | LOCK_NB) == 0)
        return SC_OK;
    int e = errno;
    close(c->lock_fd);
    c->lock_fd = -1;
    if (e == EWOULDBLOCK) {
        *busy = 1;
        return SC_OK;
    }
    return sc__seterr(err, SC_EIO, "cache lock '%s': %s", path, strerror(e));
}

/* Deletes an entry that cannot be served, and says so. */
static void repair(sc_cache *c, uint64_t shard, const char *why)
{
    char path[SC_PATH_MAX + 32];
    entry_path(c, shard, path, sizeof path);
    unlink(path);
    sc__evict_remove(c->ev, (uint32_t)shard);
    c->st.repairs++;
    sc__log(c->log_level, SC__LOG_WARN, c->rank,
            "cache entry '%s' (shard %llu) dropped, %s; reading the shard from the "
            "source again",
            path, (unsigned long long)shard, why);
}

/* Learns what an earlier run left: entries, and temporaries of crashed writers. */
static int scan(sc_cache *c, sc_error *err)
{
    DIR *d = opendir(c->dir);
    struct dirent *e;
    if (!d)
        return sc__seterr(err, SC_EIO, "cache directory '%s': %s", c->dir, strerror(errno));
    while ((e = readdir(d))) {
        unsigned long long shard;
        char tail[16] = "";
        int n = sscanf(e->d_name, "s%llu.h5%15s", &shard, tail);
        if (n < 1)
            continue;
        if (n == 2 || shard >= c->ds->nshards) {
            char path[SC_PATH_MAX + 300];
            snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
            unlink(path);
            c->st.repairs++;
            sc__log(c->log_level, SC__LOG_WARN, c->rank,
                    "removed '%s': %s", path,
                    n == 2 ? "an incomplete entry left by a writer that died"
                           : "an entry for a shard this dataset does not have");
            continue;
        }
        const uint32_t *victims;
        uint64_t nv;
        int rc = sc__evict_admit(c->ev, (uint32_t)shard, sc__shard_bytes(c->ds, shard),
                                 &victims, &nv);
        for (uint64_t i = 0; i < nv; i++) {
            char path[SC_PATH_MAX + 32];
            entry_path(c, victims[i], path, sizeof path);
            unlink(path);
            c->st.evictions++;
        }
        if (rc == SC_ENOMEM) {
            closedir(d);
            return sc__seterr(err, SC_ENOMEM, "cache '%s': no memory", c->dir);
        }
    }
    closedir(d);
    return SC_OK;
}

int sc_cache_open(sc_dataset *ds, MPI_Comm comm, const sc_config *cfg,
                  sc_cache **out, sc_error *err)
{
    MPI_Comm node;
    int rc;

    if (!ds || !cfg || !out)
        return sc__seterr(err, SC_EINVAL, "sc_cache_open: NULL argument");
    *out = NULL;
    sc_cache *c = calloc(1, sizeof *c);
    if (!c)
        return sc__seterr(err, SC_ENOMEM, "no memory for a cache");
    c->ds = ds;
    c->lock_fd = -1;
    c->check = cfg->cache_check;
    c->log_level = cfg->log_level;
    MPI_Comm_rank(comm, &c->rank);
    /* Ranks sharing a node share its local disk; their local rank names the dir. */
    int m = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node);
    if (m != MPI_SUCCESS) {
        free(c);
        return sc__mpi_err(err, m, "MPI_Comm_split_type", __FILE__, __LINE__);
    }
    MPI_Comm_rank(node, &c->local_rank);
    MPI_Comm_free(&node);

    const char *base = cfg->cache_dir[0] ? cfg->cache_dir : getenv("SLURM_TMPDIR");
    if (!base || !*base)
        base = getenv("TMPDIR");
    if (!base || !*base)
        base = "/tmp";
    if (snprintf(c->dir, sizeof c->dir, "%s/shardcache-%016llx-l%d", base,
                 (unsigned long long)ds->fingerprint, c->local_rank) >= (int)sizeof c->dir - 32) {
        free(c);
        return sc__seterr(err, SC_EINVAL, "cache directory '%s' is too long", base);
    }
    int busy = 0;
    rc = lock_dir(c, &busy, err);
    if (rc == SC_OK && busy) {
        char shared[SC_PATH_MAX];
        snprintf(shared, sizeof shared, "%s", c->dir);
        int n = snprintf(c->dir, sizeof c->dir, "%s-p%ld", shared, (long)getpid());
        (void)n; /* the base was checked to leave 32 bytes of room */
        sc__log(c->log_level, SC__LOG_WARN, c->rank,
                "cache '%s' is in use by another process on this node; using the "
                "private (cold) cache '%s' instead",
                shared, c->dir);
        rc = lock_dir(c, &busy, err);
        if (rc == SC_OK && busy)
            rc = sc__seterr(err, SC_EIO, "cache '%s' is locked", c->dir);
    }
    if (rc == SC_OK && (rc = sc__evict_new(cfg->cache_policy, cfg->cache_bytes, &c->ev)) != SC_OK)
        sc__seterr(err, rc, "no memory for the cache index");
    if (rc == SC_OK)
        rc = scan(c, err);
    if (rc != SC_OK) {
        sc_cache_close(c);
        return rc;
    }
    *out = c;
    return sc__errok(err);
}

int sc_cache_close(sc_cache *c)
{
    if (!c)
        return SC_OK;
    if (c->lock_fd >= 0)
        close(c->lock_fd); /* releases the flock */
    sc__evict_free(c->ev);
    free(c);
    return SC_OK;
}

static uint64_t checksum(const sc_dataset *ds, uint64_t shard, void *const *bufs)
{
    sc__xxh64_state s;
    sc__xxh64_init(&s, CHECKSUM_SEED);
    for (int i = 0; i < ds->nfields; i++)
        sc__xxh64_update(&s, bufs[i], ds->shard_sizes[shard] * ds->fields[i].sample_bytes);
    return sc__xxh64_final(&s);
}

static int attr_u64(hid_t obj, const char *name, uint64_t v)
{
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(obj, name, H5T_NATIVE_UINT64, sp, H5P_DEFAULT, H5P_DEFAULT);
    herr_t h = a < 0 ? -1 : H5Awrite(a, H5T_NATIVE_UINT64, &v);
    if (a >= 0)
        H5Aclose(a);
    H5Sclose(sp);
    return h < 0 ? -1 : 0;
}

static int read_attr(hid_t obj, const char *name, uint64_t *v)
{
    if (H5Aexists(obj, name) <= 0)
        return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    herr_t h = a < 0 ? -1 : H5Aread(a, H5T_NATIVE_UINT64, v);
    if (a >= 0)
        H5Aclose(a);
    return h < 0 ? -1 : 0;
}

/* Writes one entry: temporary file, data, checksum, mark, rename. */
static int write_entry(sc_cache *c, uint64_t shard, void *const *bufs, sc_error *err)
{
    const sc_dataset *ds = c->ds;
    char tmp[SC_PATH_MAX + 64], path[SC_PATH_MAX + 32];
    int bad = 0;
    entry_path(c, shard, path, sizeof path);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    uint64_t sum = checksum(ds, shard, bufs);

    sc__h5_lock();
    hid_t f = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    bad = f < 0;
    for (int i = 0; !bad && i < ds->nfields; i++) {
        char name[16];
        hsize_t n = ds->shard_sizes[shard] * ds->fields[i].sample_bytes;
        snprintf(name, sizeof name, "f%d", i);
        hid_t sp = H5Screate_simple(1, &n, NULL);
        hid_t d = H5Dcreate2(f, name, H5T_NATIVE_UINT8, sp, H5P_DEFAULT, H5P_DEFAULT,
                             H5P_DEFAULT);
        bad = d < 0 || H5Dwrite(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT,
                                bufs[i]) < 0;
        if (d >= 0)
            H5Dclose(d);
        H5Sclose(sp);
    }
    bad = bad || attr_u64(f, "shard", shard) || attr_u64(f, "fingerprint", ds->fingerprint) ||
          attr_u64(f, "checksum", sum);
    if (!bad && sc__fault("cache-writer-dies")) {
        H5Fflush(f, H5F_SCOPE_GLOBAL);
        raise(SIGKILL); /* test hook: the writer dies before the mark */
    }
    bad = bad || attr_u64(f, "complete", 1);
    if (f >= 0 && H5Fclose(f) < 0)
        bad = 1;
    int rc = bad ? sc__h5_err(err, SC_EHDF5, "cache entry '%s' (shard %llu): write failed",
                              tmp, (unsigned long long)shard)
                 : SC_OK;
    sc__h5_unlock();
    if (rc == SC_OK && rename(tmp, path) != 0)
        rc = sc__seterr(err, SC_EIO, "cache entry '%s': rename failed: %s", path,
                        strerror(errno));
    if (rc != SC_OK)
        unlink(tmp);
    return rc;
}

/* Reads one entry; returns NULL on success, or why it cannot be served. */
static const char *read_entry(sc_cache *c, uint64_t shard, void *const *bufs)
{
    const sc_dataset *ds = c->ds;
    char path[SC_PATH_MAX + 32];
    const char *why = NULL;
    uint64_t v = 0, sum = 0;
    entry_path(c, shard, path, sizeof path);

    sc__h5_lock();
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f < 0)
        why = "it does not open as HDF5 (truncated or damaged)";
    else if (read_attr(f, "complete", &v) || v != 1)
        why = "it has no complete mark";
    else if (read_attr(f, "shard", &v) || v != shard)
        why = "it belongs to another shard";
    else if (read_attr(f, "fingerprint", &v) || v != ds->fingerprint)
        why = "it belongs to another dataset";
    else if (read_attr(f, "checksum", &sum))
        why = "it has no checksum";
    for (int i = 0; !why && i < ds->nfields; i++) {
        char name[16];
        hsize_t n = 0, want = ds->shard_sizes[shard] * ds->fields[i].sample_bytes;
        snprintf(name, sizeof name, "f%d", i);
        hid_t d = H5Lexists(f, name, H5P_DEFAULT) > 0 ? H5Dopen2(f, name, H5P_DEFAULT) : -1;
        hid_t sp = d < 0 ? -1 : H5Dget_space(d);
        if (sp < 0 || H5Sget_simple_extent_ndims(sp) != 1 ||
            H5Sget_simple_extent_dims(sp, &n, NULL) < 0 || n != want)
            why = "a field is missing or has the wrong size";
        else if (H5Dread(d, H5T_NATIVE_UINT8, H5S_ALL, H5S_ALL, H5P_DEFAULT, bufs[i]) < 0)
            why = "its data does not read back (truncated or damaged)";
        if (sp >= 0)
            H5Sclose(sp);
        if (d >= 0)
            H5Dclose(d);
    }
    if (f >= 0)
        H5Fclose(f);
    H5Eclear2(H5E_DEFAULT);
    sc__h5_unlock();

    int verified = sc__evict_flag(c->ev, (uint32_t)shard);
    if (!why && (c->check == SC_CACHE_CHECK_ALWAYS || !verified)) {
        if (checksum(ds, shard, bufs) != sum)
            why = "its checksum does not match its bytes";
        else
            sc__evict_set_flag(c->ev, (uint32_t)shard, 1);
    }
    return why;
}

int sc_cache_read(sc_cache *c, uint64_t shard, void *const *bufs, sc_error *err)
{
    if (!c || !bufs)
        return sc__seterr(err, SC_EINVAL, "sc_cache_read: NULL argument");
    if (shard >= c->ds->nshards)
        return sc__seterr(err, SC_EINVAL, "cache '%s': shard %llu of %llu", c->dir,
                          (unsigned long long)shard, (unsigned long long)c->ds->nshards);
    uint64_t bytes = sc__shard_bytes(c->ds, shard);

    if (sc__evict_has(c->ev, (uint32_t)shard)) {
        const char *why = read_entry(c, shard, bufs);
        if (!why) {
            sc__evict_touch(c->ev, (uint32_t)shard);
            c->st.hits++;
            c->st.bytes_from_cache += bytes;
            return sc__errok(err);
        }
        repair(c, shard, why);
    }

    int rc = sc_dataset_read_shard(c->ds, shard, bufs, err);
    if (rc != SC_OK)
        return rc;
    c->st.misses++;
    c->st.bytes_from_source += bytes;

    const uint32_t *victims;
    uint64_t nv;
    rc = sc__evict_admit(c->ev, (uint32_t)shard, bytes, &victims, &nv);
    for (uint64_t i = 0; i < nv; i++) {
        char path[SC_PATH_MAX + 32];
        entry_path(c, victims[i], path, sizeof path);
        unlink(path);
        c->st.evictions++;
    }
    if (rc == SC_EOVERFLOW) /* bigger than the whole cache: serve, don't keep */
        return sc__errok(err);
    if (rc != SC_OK)
        return sc__seterr(err, rc, "cache '%s': no memory for its index", c->dir);
    sc_error werr = SC_ERROR_INIT;
    if (write_entry(c, shard, bufs, &werr) != SC_OK) {
        /* The bytes in bufs are right; only the copy failed (disk full?). */
        sc__evict_remove(c->ev, (uint32_t)shard);
        sc__log(c->log_level, SC__LOG_WARN, c->rank, "not cached: %s", werr.msg);
    } else {
        sc__evict_set_flag(c->ev, (uint32_t)shard, 1);
    }
    return sc__errok(err);
}

int sc_cache_plan_ahead(sc_cache *c, const uint32_t *shards, uint64_t n)
{
    if (!c || (n && !shards))
        return SC_EINVAL;
    return sc__evict_future(c->ev, shards, n);
}

int sc_cache_get_stats(const sc_cache *c, sc_cache_stats *out)
{
    if (!c || !out)
        return SC_EINVAL;
    *out = c->st;
    out->entries = sc__evict_count(c->ev);
    out->bytes_cached = sc__evict_bytes(c->ev);
    return SC_OK;
}

const char *sc_cache_dir(const sc_cache *c)
{
    return c ? c->dir : "";
}
