/*
 * source.c - opening and reading source datasets (layouts A and B).
 */
#include "source.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chunks.h"
#include "augment.h"
#include "config.h"
#include "decode.h"
#include "error.h"
#include "h5.h"
#include "hash.h"
#include "io.h"
#include "log.h"
#include "manifest.h"
#include "mem.h"
#include "vlen.h"

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "sc_dataset keeps hid_t as int64_t");

#define STAMP SC__STAMP_WORDS                       /* words of a file's stamp */
#define STAMP_BYTES (SC__STAMP_WORDS * sizeof(uint64_t))

/* ---- a growable byte buffer for the fingerprint ---------------------------- */

typedef struct bytes {
    unsigned char *p;
    size_t len, cap;
    int oom;
} bytes;

static void source_put(bytes *b, const void *data, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
}

static void source_put_u64(bytes *b, uint64_t v)
{
    unsigned char le[8];
    sc__put_u64(le, v);
    source_put(b, le, 8);
}

static void source_put_str(bytes *b, const char *s)
{
    source_put_u64(b, strlen(s));
    source_put(b, s, strlen(s));
}

/* A field's name, type and sample shape, as the fingerprint sees them. */
static void source_put_field(bytes *b, const sc__field *f)
{
    source_put_str(b, f->name);
    source_put_u64(b, (uint64_t)f->dtype);
    source_put_u64(b, (uint64_t)f->ndims);
    for (int d = 0; d < f->ndims; d++)
        source_put_u64(b, f->dims[d]);
    if (f->no_axis) /* (flags added later: fingerprints without them stay as they were) */
        source_put_u64(b, UINT64_MAX);
    if (f->vlen)
        source_put_u64(b, UINT64_MAX - 1);
}

/* A file's stamp (SC__STAMP_WORDS, source.h), as the fingerprint and a direct read take it. */
static void source_stamp(const struct stat *st, uint64_t *stamp)
{
    stamp[0] = (uint64_t)st->st_size;
    stamp[1] = (uint64_t)st->st_mtim.tv_sec * 1000000000u + (uint64_t)st->st_mtim.tv_nsec;
    stamp[2] = (uint64_t)st->st_ino;
    stamp[3] = (uint64_t)st->st_ctim.tv_sec * 1000000000u + (uint64_t)st->st_ctim.tv_nsec;
}

/*
 * Path and stamp of one file, as the fingerprint sees it; the stamp into
 * stamp[SC__STAMP_WORDS] when asked.
 */
static int source_put_file(bytes *b, const char *path, uint64_t *stamp, sc_error *err)
{
    struct stat st;
    char real[PATH_MAX];
    if (stat(path, &st) != 0)
        return sc__seterr(err, SC_EIO, "source file '%s': %s", path, strerror(errno));
    uint64_t now[SC__STAMP_WORDS];
    source_stamp(&st, now);
    source_put_str(b, realpath(path, real) ? real : path);
    for (int i = 0; i < SC__STAMP_WORDS; i++)
        source_put_u64(b, now[i]);
    if (stamp)
        memcpy(stamp, now, sizeof now);
    return SC_OK;
}

/* ---- fields ------------------------------------------------------------------ */

typedef struct name_list {
    char names[SC_MAX_FIELDS][256];
    int n, too_many;
    char skipped[512]; /* datasets left out for their type, named with it */
    int nskipped;
} name_list;

/* A variable-length sequence type's element dtype: numbers only (h5py's vlen_dtype). */
static sc__dtype source_vlen_dtype(hid_t t)
{
    hid_t base = H5Tget_super(t);
    sc__dtype dt = base >= 0 && !sc__h5_string_width(base) && H5Tis_variable_str(t) <= 0
                       ? sc__h5_dtype(base)
                       : SC__DT_INVALID;
    if (base >= 0)
        H5Tclose(base);
    return dt;
}

/* A dataset of a type shardcache cannot carry: named, with its type, in l->skipped. */
static int source_skips(hid_t group, const char *name, name_list *l)
{
    hid_t d = H5Dopen2(group, name, H5P_DEFAULT);
    hid_t t = d < 0 ? H5I_INVALID_HID : H5Dget_type(d);
    int skip = t >= 0 && sc__h5_dtype(t) == SC__DT_INVALID &&
               (H5Tget_class(t) != H5T_VLEN || source_vlen_dtype(t) == SC__DT_INVALID);
    if (skip) {
        char words[128];
        size_t used = strlen(l->skipped);
        sc__h5_type_words(t, words, sizeof words);
        snprintf(l->skipped + used, sizeof l->skipped - used, "%s'/%s' (%s, not carried)",
                 l->nskipped ? ", " : "", name, words);
        l->nskipped++;
    }
    if (t >= 0)
        H5Tclose(t);
    if (d >= 0)
        H5Dclose(d);
    return skip;
}

/* Written against HDF5 1.10's API (Debian 12), which 1.12+ still provides. */
static herr_t source_collect_dataset(hid_t group, const char *name, const H5L_info_t *info,
                                     void *data)
{
    name_list *l = data;
    H5O_info_t oi;
    (void)info;
    if (H5Oget_info_by_name2(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0)
        return -1;
    if (oi.type == H5O_TYPE_GROUP) { /* not searched: its datasets are named by path */
        size_t used = strlen(l->skipped);
        snprintf(l->skipped + used, sizeof l->skipped - used, "%s'/%s' (a group: name its "
                 "datasets by path, /%s/...)", l->nskipped++ ? ", " : "", name, name);
        return 0;
    }
    if (oi.type != H5O_TYPE_DATASET || source_skips(group, name, l))
        return 0;
    if (l->n == SC_MAX_FIELDS) {
        l->too_many = 1;
        return 1;
    }
    snprintf(l->names[l->n++], 256, "/%s", name);
    return 0;
}

/* The fields to load: the configured list, or every dataset in "/". */
static int source_field_names(hid_t file, const char *path, const char *wanted,
                              name_list *l, sc_error *err)
{
    memset(l, 0, sizeof *l);
    if (wanted && *wanted) {
        const char *p = wanted;
        while (*p) {
            size_t len = strcspn(p, ",");
            if (len == 0 || len >= 255 || l->n == SC_MAX_FIELDS)
                return sc__seterr(err, SC_EINVAL,
                                  "SC_FIELDS='%s': empty, too long or more than "
                                  "%d names", wanted, SC_MAX_FIELDS);
            snprintf(l->names[l->n++], 256, "%s%.*s", *p == '/' ? "" : "/",
                     (int)len, p);
            p += len + (p[len] == ',');
        }
        return SC_OK;
    }
    hsize_t idx = 0;
    if (H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, &idx, source_collect_dataset, l) < 0)
        return sc__h5_err(err, SC_EHDF5, "source '%s': cannot list its datasets", path);
    if (l->too_many)
        return sc__seterr(err, SC_EINVAL,
                          "source '%s' has more than %d datasets; choose the "
                          "fields with SC_FIELDS",
                          path, SC_MAX_FIELDS);
    if (l->n == 0)
        return sc__seterr(err, SC_EINVAL, "source '%s' has no field shardcache can carry in '/'%s%s",
                          path, l->nskipped ? "; left out: " : "", l->skipped);
    return SC_OK;
}

/*
 * Describes one field of an open file; *n gets its first dimension.  The
 * caller holds the HDF5 lock.
 */
static int source_describe(hid_t file, const char *path, const char *name, int no_axis,
                           sc__field *f, uint64_t *n, hid_t *dset_out, sc_error *err)
{
    hid_t d = H5I_INVALID_HID, t = H5I_INVALID_HID, s = H5I_INVALID_HID;
    hsize_t dims[H5S_MAX_RANK];
    int rc = SC_OK;

    if (H5Lexists(file, name, H5P_DEFAULT) <= 0)
        return sc__seterr(err, SC_EINVAL, "source '%s' has no field '%s'", path, name);
    if ((d = H5Dopen2(file, name, H5P_DEFAULT)) < 0)
        return sc__h5_err(err, SC_EHDF5, "source '%s': cannot open field '%s'", path, name);
    t = H5Dget_type(d);
    s = H5Dget_space(d);
    int nd = s < 0 ? -1 : H5Sget_simple_extent_ndims(s);
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->no_axis = no_axis;
    int axis = !no_axis; /* the sample axis: 1 dimension or none */
    f->dtype = t < 0 ? SC__DT_INVALID : sc__h5_dtype(t);
    if (t >= 0 && f->dtype == SC__DT_INVALID && H5Tget_class(t) == H5T_VLEN)
        f->dtype = source_vlen_dtype(t), f->vlen = 1;
    size_t width = t < 0 ? 0 : sc__h5_string_width(t);
    if (t < 0 || s < 0 || nd < 0) {
        rc = sc__h5_err(err, SC_EHDF5, "source '%s': cannot read field '%s'", path, name);
    } else if (f->dtype == SC__DT_INVALID) {
        char words[128];
        sc__h5_type_words(t, words, sizeof words);
        rc = sc__seterr(err, SC_EINVAL,
                        "source '%s': field '%s' has an unsupported type, %s; shardcache "
                        "reads integers, IEEE floats of 2, 4 and 8 bytes, bool (h5py's), "
                        "fixed-length strings and variable-length sequences of numbers",
                        path, name, words);
    } else if (f->vlen && nd != axis) {
        rc = sc__seterr(err, SC_EINVAL,
                        "source '%s': field '%s' holds variable-length sequences in %d "
                        "dimensions; such a field needs %s", path, name, nd,
                        axis ? "exactly one, the sample axis" : "none (one sample a file)");
    } else if (nd < axis || nd - axis + (width > 0) > SC_MAX_DIMS) {
        rc = sc__seterr(err, SC_EINVAL,
                        "source '%s': field '%s' has %d dimensions%s; a field needs "
                        "%d to %d (%s)",
                        path, name, nd, width ? " and a string's width" : "", axis,
                        SC_MAX_DIMS + axis,
                        axis ? "samples first; SC_SAMPLE_AXIS=none reads a file as one sample"
                             : "one sample, SC_SAMPLE_AXIS=none");
    } else {
        H5Sget_simple_extent_dims(s, dims, NULL);
        dims[nd] = width; /* a string's bytes: the sample's last dimension */
        f->ndims = nd - axis + (width > 0);
        f->sample_bytes = sc__dtype_size(f->dtype);
        for (int i = 0; i < f->ndims; i++) {
            f->dims[i] = dims[i + axis];
            f->sample_bytes *= f->dims[i];
        }
        *n = axis ? dims[0] : 1;
        f->sample_bytes *= !f->vlen; /* the largest sample's, once the lengths are known */
        if (*n == 0)
            rc = sc__seterr(err, SC_EINVAL, "source '%s': field '%s' is empty (0 samples)",
                            path, name);
        else if (f->sample_bytes == 0 && !f->vlen)
            rc = sc__seterr(err, SC_EINVAL, "source '%s': field '%s' has a zero-sized "
                            "sample shape", path, name);
    }
    if (s >= 0)
        H5Sclose(s);
    if (t >= 0)
        H5Tclose(t);
    if (rc == SC_OK && dset_out)
        *dset_out = d;
    else
        H5Dclose(d);
    return rc;
}

/* A field's type and sample shape in words: "uint8 samples of 3 x 64 x 64", "a float16 scalar". */
static void source_field_words(const sc__field *f, char *buf, size_t n)
{
    int used = snprintf(buf, n, f->vlen    ? "variable-length %s sequences"
                                : f->ndims ? "%s samples of "
                                           : "%s scalars",
                        sc__dtype_name(f->dtype));
    for (int d = 0; d < f->ndims && used > 0 && (size_t)used < n; d++)
        used += snprintf(buf + used, n - (size_t)used, "%s%llu", d ? " x " : "",
                         (unsigned long long)f->dims[d]);
}

static int source_same_field(const sc__field *a, const sc__field *b)
{
    return a->dtype == b->dtype && a->ndims == b->ndims && a->no_axis == b->no_axis &&
           a->vlen == b->vlen &&
           memcmp(a->dims, b->dims, sizeof a->dims) == 0;
}

static hid_t source_open_file(const char *path, MPI_Comm comm, int parallel, sc_error *err)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (parallel)
        H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    if (f < 0)
        sc__h5_err(err, SC_EHDF5, "source '%s' cannot be opened as HDF5", path);
    return f;
}

/* ---- layouts ------------------------------------------------------------------- */

/* Says once (rank 0) which datasets and groups "every field" left out, and why. */
static void source_note_skipped(const sc_dataset *ds, const sc_config *cfg, const name_list *l)
{
    if (l->nskipped && ds->rank == 0)
        sc__log(cfg->log_level, SC__LOG_WARN, ds->rank,
                "source '%s': left out %s; SC_FIELDS chooses the fields", ds->path,
                l->skipped);
}

/*
 * A compressed field whose chunks HDF5 decodes (inside H5Dread, under its
 * lock: one producer at a time): the note saying why (rank 0, notes set),
 * and a refusal when a filter it must run is one this HDF5 cannot load,
 * named.  The caller holds the HDF5 lock.
 */
static int source_check_decoder(const char *path, hid_t d, const sc__field *f,
                                const sc_config *cfg, int notes, sc_error *err)
{
    sc__chunking c;
    if (sc__chunks_direct(d, f, &c) || !c.why)
        return SC_OK;
    sc__chunks_missing(d, &c);
    /*
     * Refused at open even when the filter is optional (h5py declares LZF
     * so): every chunk written through it would fail mid-epoch, which is
     * worse than not starting.
     */
    if (c.missing == SC__FILTER_LZF)
        return sc__seterr(err, SC_ENOTSUP, "source '%s': field '%s' is compressed with h5py's "
                          "LZF, which shardcache decodes only in chunks of whole samples in this "
                          "machine's byte order (%s) and this HDF5 library cannot load: rewrite "
                          "it with gzip, or with chunks of whole samples", path, f->name, c.why);
    if (c.missing)
        return sc__seterr(err, SC_ENOTSUP, "source '%s': field '%s' needs HDF5 filter %u (%s), "
                          "which this HDF5 library cannot load, and shardcache does not decode "
                          "it here (%s): put the filter's plugin in HDF5_PLUGIN_PATH, or rewrite "
                          "the field with gzip or lzf", path, f->name, c.missing,
                          sc__filter_name(c.missing), c.why);
    if (notes && c.filter)
        sc__log(cfg->log_level, SC__LOG_WARN, 0,
                "source '%s': field '%s' uses HDF5 filter %u (%s), which shardcache does not "
                "run itself: its chunks go through HDF5's filters, one producer at a time "
                "(chunks with gzip, shuffle or lzf alone decode in every producer at once)",
                path, f->name, c.filter, sc__filter_name(c.filter));
    else if (notes)
        sc__log(cfg->log_level, SC__LOG_WARN, 0,
                "source '%s': field '%s' is compressed, but %s: its chunks decompress inside "
                "HDF5, one producer at a time (chunks of whole samples, in this machine's byte "
                "order, decode in every producer at once)", path, f->name, c.why);
    return SC_OK;
}

/*
 * The samples a chunk of dataset d holds when it is chunked and filtered
 * (compressed): a shard that cuts through one decompresses all of it.
 * 0 for any other layout.  The caller holds the HDF5 lock.
 */
static uint64_t source_chunk_rows(hid_t d)
{
    hid_t dcpl = H5Dget_create_plist(d);
    hsize_t cdims[H5S_MAX_RANK];
    uint64_t rows = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CHUNKED &&
                            H5Pget_nfilters(dcpl) > 0 && H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims) > 0
                        ? (uint64_t)cdims[0]
                        : 0;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return rows;
}

/*
 * Layout A: the decoder's check for each field (every rank: they refuse
 * alike) and, on rank 0, its note and a warning for each compressed field
 * whose chunks the shards split, since every shard that touches a chunk
 * decompresses all of it.  The caller holds the HDF5 lock.
 */
static int source_note_chunks(const sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    for (int i = 0; i < ds->nfields; i++) {
        int rc = source_check_decoder(ds->path, ds->dset[i], &ds->fields[i], cfg, ds->rank == 0,
                                      err);
        if (rc != SC_OK)
            return rc;
        uint64_t rows = ds->rank == 0 ? source_chunk_rows(ds->dset[i]) : 0;
        if (rows && ds->shard_size % rows != 0)
            sc__log(cfg->log_level, SC__LOG_WARN, ds->rank,
                    "source '%s': field '%s' is compressed in chunks of %llu rows, and "
                    "shards of %llu samples cut through them: each shard that shares a chunk "
                    "decompresses all of it; SC_SHARD_SIZE=%llu (any multiple of %llu) aligns "
                    "them, for stage (--shard-size) and the job alike (another shard size is "
                    "another cache)",
                    ds->path, ds->fields[i].name, (unsigned long long)rows,
                    (unsigned long long)ds->shard_size,
                    (unsigned long long)(ds->shard_size < rows ? rows
                                                               : ds->shard_size / rows * rows),
                    (unsigned long long)rows);
    }
    return SC_OK;
}

/*
 * Variable-length field i's n samples from sample `at` on (a file's, in
 * layout B): their lengths into its offsets, grown to hold them, and the
 * largest into `into`, the dataset's description of it.  The lock is held.
 */
static int source_learn_lengths(sc_dataset *ds, hid_t d, const char *path, int i, uint64_t at,
                                uint64_t n, sc__field *into, sc_error *err)
{
    uint64_t *off = realloc(ds->vlen_off[i], sizeof *off * (at + n + 1));
    if (!off)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    ds->vlen_off[i] = off;
    off[0] = at ? off[0] : 0;
    int rc = sc__vlen_lengths(d, path, into, n, off + at + 1, err);
    for (uint64_t k = at; rc == SC_OK && k < at + n; k++) {
        into->sample_bytes = off[k + 1] > into->sample_bytes ? off[k + 1] : into->sample_bytes;
        off[k + 1] += off[k];
    }
    return rc;
}

/*
 * A sample's bytes in fields f[n]: a fixed field's, a variable-length
 * field's mean and its offset (what a shard holds).  ds->vlen_off is
 * indexed as f.
 */
static uint64_t source_mean_bytes(const sc_dataset *ds, const sc__field *f, int n)
{
    uint64_t sum = 0, per = ds->nsamples ? ds->nsamples : 1;
    for (int i = 0; i < n; i++)
        sum += !f[i].vlen ? f[i].sample_bytes : 8 + ds->vlen_off[i][ds->nsamples] / per;
    return sum;
}

/*
 * SC_SHARD_SIZE, or for auto sc_shard_size_auto() of the scan: the samples
 * and the source's mean sample bytes (before any transform, so that the cut
 * is the source's alone), in layout A rounded down to whole chunks of its
 * compressed fields (at least one: ds->chunk_unit, sc__shard_chunk_unit).
 * Every rank computes it from the same scan and the file's own chunking.
 * The caller holds the HDF5 lock.
 */
static uint64_t source_shard_size(sc_dataset *ds, const sc_config *cfg)
{
    if (cfg->shard_size != SC_SHARD_AUTO)
        return cfg->shard_size;
    uint64_t b = source_mean_bytes(ds, ds->fields, ds->nfields), rows[SC_MAX_FIELDS] = {0},
             cost[SC_MAX_FIELDS] = {0};
    uint64_t size = sc_shard_size_auto(ds->nsamples, b);
    for (int i = 0; ds->layout == 'A' && i < ds->nfields; i++)
        if ((rows[i] = source_chunk_rows(ds->dset[i])) &&
            __builtin_mul_overflow(rows[i], ds->fields[i].sample_bytes, &cost[i]))
            cost[i] = UINT64_MAX;
    uint64_t unit = ds->chunk_unit = sc__shard_chunk_unit(b, rows, cost, ds->nfields);
    if (!unit)
        return size;
    size = size < unit ? unit : size / unit * unit;
    return size < ds->nsamples || !ds->nsamples ? size : ds->nsamples;
}

static int source_open_layout_a(sc_dataset *ds, const sc_config *cfg, bytes *fp,
                                sc_error *err)
{
    int size = ds->world, rc;
    name_list names;
    if (cfg->shard_size == 0)
        return sc__seterr(err, SC_EINVAL, "source '%s': SC_SHARD_SIZE is 0", ds->path);
    if (cfg->sample_axis == SC_SAMPLE_AXIS_NONE)
        return sc__seterr(err, SC_EINVAL, "source '%s' is one HDF5 file (layout A), whose "
                          "datasets count samples along their first dimension; "
                          "SC_SAMPLE_AXIS=none is for a directory of one-sample files",
                          ds->path);
    /*
     * A shared file is read through MPI-IO when several ranks share it, but
     * only where MPI may be called from any thread: the loader reads shards
     * from its producer threads while the caller's thread is in MPI.  Under
     * a lower thread level each rank opens the file read-only on its own
     * (the POSIX driver), which needs no MPI at all.
     */
    int level = MPI_THREAD_SINGLE;
    MPI_Query_thread(&level);
    int parallel = size > 1 && level == MPI_THREAD_MULTIPLE;
    if ((ds->file = source_open_file(ds->path, ds->comm, parallel, err)) < 0)
        return err ? err->code : SC_EHDF5;
    if ((rc = source_field_names(ds->file, ds->path, cfg->fields, &names, err)) == SC_OK)
        source_note_skipped(ds, cfg, &names);
    if (rc != SC_OK)
        return rc;
    for (int i = 0; i < names.n; i++) {
        uint64_t n = 0;
        rc = source_describe(ds->file, ds->path, names.names[i], 0, &ds->fields[i], &n,
                             &ds->dset[i], err);
        if (rc == SC_OK && ds->fields[i].vlen)
            rc = source_learn_lengths(ds, ds->dset[i], ds->path, i, 0, n, &ds->fields[i], err);
        if (rc != SC_OK)
            return rc;
        ds->nfields = i + 1;
        if (i == 0)
            ds->nsamples = n;
        else if (n != ds->nsamples)
            return sc__seterr(err, SC_EINVAL,
                              "source '%s': field '%s' has %llu samples but '%s' "
                              "has %llu; fields must share their first dimension: name "
                              "the sample fields in SC_FIELDS (a metadata dataset such "
                              "as a class list is then left alone)",
                              ds->path, names.names[i], (unsigned long long)n,
                              names.names[0], (unsigned long long)ds->nsamples);
    }
    ds->shard_size = source_shard_size(ds, cfg);
    ds->nshards = ds->nsamples / ds->shard_size + (ds->nsamples % ds->shard_size != 0);
    if (ds->nshards > UINT32_MAX)
        return sc__seterr(err, SC_EOVERFLOW, "source '%s': %llu shards is too many; "
                          "raise SC_SHARD_SIZE", ds->path,
                          (unsigned long long)ds->nshards);
    ds->shard_sizes = malloc(sizeof *ds->shard_sizes * ds->nshards);
    if (!ds->shard_sizes)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    for (uint64_t k = 0; k < ds->nshards; k++) {
        uint64_t left = ds->nsamples - k * ds->shard_size;
        ds->shard_sizes[k] = left < ds->shard_size ? left : ds->shard_size;
    }
    if ((rc = source_note_chunks(ds, cfg, err)) != SC_OK)
        return rc;
    source_put_u64(fp, ds->shard_size);
    return source_put_file(fp, ds->path, NULL, err);
}

/* Layout B's file list: a directory's *.h5 / *.hdf5, or a text file of paths. */
static int source_cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int source_add_file(sc_dataset *ds, uint64_t *cap, const char *path, sc_error *err)
{
    if (ds->nfiles == *cap) {
        uint64_t ncap = *cap ? *cap * 2 : 64;
        char **f = realloc(ds->files, sizeof *f * ncap);
        if (!f)
            return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
        ds->files = f;
        *cap = ncap;
    }
    if (!(ds->files[ds->nfiles] = strdup(path)))
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    ds->nfiles++;
    return SC_OK;
}

static int source_list_files(sc_dataset *ds, int is_dir, sc_error *err)
{
    uint64_t cap = 0;
    char buf[SC_PATH_MAX + 512];
    int rc = SC_OK;
    if (is_dir) {
        DIR *d = opendir(ds->path);
        struct dirent *e;
        if (!d)
            return sc__seterr(err, SC_EIO, "source '%s': %s", ds->path, strerror(errno));
        while (rc == SC_OK && (e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if ((len > 3 && !strcmp(e->d_name + len - 3, ".h5")) ||
                (len > 5 && !strcmp(e->d_name + len - 5, ".hdf5"))) {
                snprintf(buf, sizeof buf, "%s/%s", ds->path, e->d_name);
                rc = source_add_file(ds, &cap, buf, err);
            }
        }
        closedir(d);
        if (rc == SC_OK && ds->nfiles > 1)
            qsort(ds->files, ds->nfiles, sizeof *ds->files, source_cmp_str);
    } else {
        FILE *f = fopen(ds->path, "r");
        if (!f)
            return sc__seterr(err, SC_EIO, "source '%s': %s", ds->path, strerror(errno));
        for (uint64_t line = 1; rc == SC_OK && fgets(buf, sizeof buf, f); line++) {
            buf[strcspn(buf, "\r\n")] = '\0';
            if (!buf[0] || buf[0] == '#')
                continue;
            struct stat st;
            if (stat(buf, &st) != 0 || !S_ISREG(st.st_mode))
                rc = sc__seterr(err, SC_EINVAL,
                                "source '%s' is neither an HDF5 file nor a list of "
                                "HDF5 files (line %llu: '%.200s' is not a file)",
                                ds->path, (unsigned long long)line, buf);
            else
                rc = source_add_file(ds, &cap, buf, err);
        }
        fclose(f);
    }
    if (rc == SC_OK && ds->nfiles == 0)
        rc = sc__seterr(err, SC_EINVAL, "source '%s' lists no HDF5 files", ds->path);
    return rc;
}

/*
 * Layout B: the decoder's check and notes (rank 0) for the first file;
 * the others hold the same fields, which the scan checks, and most likely
 * the same filters.  The caller holds the HDF5 lock.
 */
static int source_check_file(hid_t f, const char *path, const sc_dataset *ds,
                             const sc_config *cfg, sc_error *err)
{
    int rc = SC_OK;
    for (int i = 0; rc == SC_OK && i < ds->nfields; i++) {
        hid_t d = H5Dopen2(f, ds->fields[i].name, H5P_DEFAULT);
        if (d >= 0) {
            rc = source_check_decoder(path, d, &ds->fields[i], cfg, ds->rank == 0, err);
            H5Dclose(d);
        }
    }
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

/*
 * The saved scan's format: its version (bump it when sc__field or sc__dtype
 * changes, or which types "every field" takes: 3 carries float16, bool and
 * strings; 4, each file's stamp and fields' offsets; 6, the stamp's inode
 * and change time) and this build's size of the field descriptions it holds.
 */
#define SOURCE_MANIFEST_VERSION 6
#define SOURCE_MANIFEST_FORMAT \
    (((uint64_t)SOURCE_MANIFEST_VERSION << 32) | sizeof(((sc_dataset *)0)->fields))

/*
 * The key a saved scan is kept under: every file's real path and stamp
 * (files[len], as the fingerprint takes them).
 */
static uint64_t source_manifest_key(const void *files, size_t len)
{
    return sc__xxh64(files, len, 0);
}

/*
 * Whether a scan made for SC_FIELDS `saved` (its fields f[n]) is what an
 * open asking for `asked` would find: the same words, or names that are
 * those fields in their order ("images" or "/images").
 */
static int source_same_ask(const char *asked, const char *saved, const sc__field *f, int n)
{
    if (!strcmp(asked, saved))
        return 1;
    const char *p = asked;
    int i = 0;
    for (; *p && i < n; i++) {
        size_t len = strcspn(p, ","), slash = *p != '/';
        if (strlen(f[i].name) != len + slash || strncmp(f[i].name + slash, p, len) != 0)
            return 0;
        p += len + (p[len] == ',');
    }
    return *asked && !*p && i == n;
}

static const char *source_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* A successful scan as the manifest carries it, with `fields` for ds's own. */
static void source_put_scan(bytes *m, const sc_dataset *ds, const sc__field *fields, int n)
{
    source_put_u64(m, (uint64_t)(int64_t)SC_OK);
    source_put_str(m, "");
    source_put_u64(m, ds->fingerprint);
    source_put_u64(m, ds->nsamples);
    source_put_u64(m, (uint64_t)n);
    source_put_u64(m, (uint64_t)ds->from_manifest);
    source_put(m, fields, sizeof ds->fields); /* one build, one ABI */
    source_put_u64(m, ds->nfiles);
    for (uint64_t k = 0; k < ds->nfiles; k++) {
        source_put_str(m, ds->files[k]);
        source_put_u64(m, ds->file_sizes[k]);
        source_put(m, ds->file_stamp + STAMP * k, STAMP_BYTES);
        source_put(m, ds->file_off + (uint64_t)n * k, (size_t)n * sizeof *ds->file_off);
    }
    for (int i = 0; i < n; i++)
        if (fields[i].vlen)
            source_put(m, ds->vlen_off[i], sizeof *ds->vlen_off[i] * (ds->nsamples + 1));
}

/* Every file's real path and stamp, as the fingerprint takes them. */
static int source_put_files(sc_dataset *ds, bytes *b, sc_error *err)
{
    int rc = (ds->file_stamp = malloc(STAMP_BYTES * ds->nfiles + 1))
                 ? SC_OK
                 : sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    for (uint64_t k = 0; rc == SC_OK && k < ds->nfiles; k++)
        rc = source_put_file(b, ds->files[k], ds->file_stamp + STAMP * k, err);
    return rc == SC_OK && b->oom ? sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path)
                                 : rc;
}

/*
 * A scan parsed from a saved blob, freed: it holds no HDF5 ids, and
 * sc_dataset_close would take the HDF5 lock that its callers hold.
 */
static void source_free_saved(sc_dataset *s)
{
    for (uint64_t k = 0; s && k < s->nfiles; k++)
        free(s->files[k]);
    if (s) {
        free(s->files);
        free(s->file_sizes);
        free(s->file_stamp);
        free(s->file_off);
        for (int i = 0; i < SC_MAX_FIELDS; i++)
            free(s->vlen_off[i]);
    }
    free(s);
}

/* A saved blob's scan, and in *ask the SC_FIELDS it was made for; NULL when malformed. */
static sc_dataset *source_parse_saved(const unsigned char *blob, size_t len, const char **ask)
{
    uint64_t alen = len >= 8 ? sc__get_u64(blob) : UINT64_MAX;
    *ask = alen < len - 8 && !blob[8 + alen] ? (const char *)blob + 8 : NULL;
    sc_dataset *s = *ask ? calloc(1, sizeof *s) : NULL;
    if (s && sc__dataset_take_manifest(s, blob + 9 + alen, len - 9 - alen, NULL) != SC_OK) {
        source_free_saved(s);
        s = NULL;
    }
    return s;
}

/*
 * A saved blob's fields and sample counts into ds when it names ds's files
 * (by name: the key holds their real paths, however the directory is
 * spelled) and was made for the fields this open asks for: NULL, or why
 * not (in why[n] when it needs words of its own).  The blob: the SC_FIELDS
 * it was made for, then the scan as rank 0 sends it.
 */
static const char *source_take_saved(sc_dataset *ds, const sc_config *cfg,
                                     const unsigned char *blob, size_t len, char *why, size_t n)
{
    const char *ask;
    sc_dataset *s = source_parse_saved(blob, len, &ask);
    /* Its stamps are the files' own (the key says so, unless the blob was forged). */
    const char *no = s && s->nfiles == ds->nfiles &&
                             !memcmp(s->file_stamp, ds->file_stamp, STAMP_BYTES * ds->nfiles)
                         ? NULL
                         : "it is damaged";
    for (uint64_t k = 0; !no && k < ds->nfiles; k++)
        no = strcmp(source_base(s->files[k]), source_base(ds->files[k])) ? "it names other files"
                                                                          : NULL;
    if (!no && s->fields[0].no_axis != (cfg->sample_axis == SC_SAMPLE_AXIS_NONE))
        no = s->fields[0].no_axis ? "it was saved for SC_SAMPLE_AXIS=none"
                                  : "it was saved for SC_SAMPLE_AXIS=first";
    if (!no && !source_same_ask(cfg->fields, ask, s->fields, s->nfields)) {
        snprintf(why, n, "it was saved for SC_FIELDS='%.100s'", ask);
        no = why;
    }
    if (!no) {
        memcpy(ds->fields, s->fields, sizeof ds->fields);
        ds->nfields = s->nfields;
        ds->nsamples = s->nsamples;
        ds->file_sizes = s->file_sizes;
        s->file_sizes = NULL;
        ds->file_off = s->file_off; /* where the fields lie: the files are as they were */
        s->file_off = NULL;
        memcpy(ds->vlen_off, s->vlen_off, sizeof ds->vlen_off);
        memset(s->vlen_off, 0, sizeof s->vlen_off);
        ds->from_manifest = 1;
    }
    source_free_saved(s);
    return no;
}

/*
 * What changed since a manifest saved for other files was written, in
 * why[n]: the first file added, gone or rewritten (by name; its stamp
 * against the saved one) and how many so differ; or NULL when the
 * names and stamps agree (the directory itself moved: the key holds real
 * paths).
 */
static const char *source_what_changed(const sc_dataset *ds, const unsigned char *blob,
                                       size_t len, char *why, size_t n)
{
    const char *ask, *first = NULL, *how = NULL;
    sc_dataset *s = source_parse_saved(blob, len, &ask);
    uint64_t i = 0, j = 0, changed = 0;
    while (s && (i < ds->nfiles || j < s->nfiles)) {
        int c = i == ds->nfiles ? 1 : j == s->nfiles ? -1
                : strcmp(source_base(ds->files[i]), source_base(s->files[j]));
        const char *name = c > 0 ? s->files[j] : ds->files[i];
        const char *now = c < 0 ? "is new" : c > 0 ? "is gone"
                          : memcmp(ds->file_stamp + STAMP * i, s->file_stamp + STAMP * j, STAMP_BYTES)
                              ? "was rewritten"
                                                                                        : NULL;
        if (now && !changed++) {
            first = name;
            how = now;
        }
        i += c <= 0;
        j += c >= 0;
    }
    if (changed) {
        char more[64] = "";
        if (changed > 1)
            snprintf(more, sizeof more, "; %llu of the files changed", (unsigned long long)changed);
        snprintf(why, n, "'%.300s' %s since it was saved%s", first, how, more);
    }
    source_free_saved(s);
    return changed ? why : NULL;
}

/*
 * Layout B from a directory: the scan saved beside its files (manifest.c)
 * when it still describes them (their key: ds->manifest_key), and then the
 * decoder's notes for the first file.  One that does not fit is named,
 * with why (rank 0), and the caller scans.  The HDF5 lock is held.
 */
static int source_reuse_manifest(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    int rc = SC_OK;
    const char *why = NULL;
    char words[512];
    size_t len = 0;
    int stale = 0;
    unsigned char *blob = sc__manifest_load(ds->path, ds->manifest_key, SOURCE_MANIFEST_FORMAT,
                                            &len, &why, &stale);
    if (blob && stale) /* whole and trusted, but saved for other files: which? */
        why = source_what_changed(ds, blob, len, words, sizeof words) ? words : why;
    else if (blob)
        why = source_take_saved(ds, cfg, blob, len, words, sizeof words);
    if (why && ds->rank == 0)
        sc__log(cfg->log_level, SC__LOG_WARN, ds->rank,
                "source '%s': not using its saved manifest (%s): opening its %llu files; "
                "`shardcache stage` with this job's settings saves a new one", ds->path, why,
                (unsigned long long)ds->nfiles);
    if (ds->from_manifest) {
        hid_t f = H5Fopen(ds->files[0], H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f >= 0) {
            rc = source_check_file(f, ds->files[0], ds, cfg, err);
            H5Fclose(f);
        }
        H5Eclear2(H5E_DEFAULT);
    }
    free(blob);
    return rc;
}

/* Saves the scan of a layout-B directory beside its files (see dataset.h). */
int sc_dataset_save_manifest(const sc_dataset *ds, sc_error *err)
{
    if (!ds)
        return sc__seterr(err, SC_EINVAL, "sc_dataset_save_manifest: NULL dataset");
    if (ds->layout != 'B' || !ds->is_dir)
        return sc__seterr(err, SC_EINVAL, "source '%s': only a directory of files (layout B) "
                          "has a manifest", ds->path);
    if (!ds->manifest_key)
        return sc__seterr(err, SC_EINVAL, "source '%s': rank %d did not scan its files: rank 0 "
                          "saves their manifest", ds->path, ds->rank);
    /* The SC_FIELDS asked for, then the scan: the source's own fields, not a transform's. */
    bytes b = {0};
    int tf = ds->tf && ds->tf->shard;
    source_put_u64(&b, strlen(ds->asked));
    source_put(&b, ds->asked, strlen(ds->asked) + 1);
    source_put_scan(&b, ds, tf ? ds->src : ds->fields, tf ? ds->nsrc : ds->nfields);
    /* Under the key of the files as scanned, not as they are now: one rewritten
       since the open must not be vouched for by what the open found. */
    int rc = b.oom ? sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path)
                   : sc__manifest_store(ds->path, ds->manifest_key, SOURCE_MANIFEST_FORMAT, b.p,
                                        b.len, err);
    free(b.p);
    return rc;
}

/*
 * Where a field's bytes lie in its file exactly as shardcache delivers
 * them, for a read without HDF5 (source_read_direct): contiguous,
 * allocated and whole, in the file itself (not external), in this
 * machine's byte order; else UINT64_MAX.  The caller holds the HDF5 lock.
 */
static uint64_t source_raw_offset(hid_t d, const sc__field *f, uint64_t n)
{
    if (f->vlen)
        return UINT64_MAX; /* its values lie in the heap, one object each */
    hid_t t = H5Dget_type(d);
    hid_t mt = t >= 0 ? sc__h5_mem_type(t, f->dtype) : H5I_INVALID_HID;
    int as_delivered = mt >= 0 && H5Tequal(t, mt) > 0;
    if (mt >= 0)
        H5Tclose(mt);
    if (t >= 0)
        H5Tclose(t);
    H5Eclear2(H5E_DEFAULT);
    return as_delivered ? sc__h5_raw_offset(d, n * f->sample_bytes) : UINT64_MAX;
}

/* Field i of file k in layout B's scan: described, checked against file 0's, its place kept. */
static int source_scan_field(sc_dataset *ds, hid_t f, uint64_t k, int i, const name_list *names,
                             int no_axis, sc_error *err)
{
    const char *path = ds->files[k];
    sc__field fld;
    uint64_t n = 0;
    hid_t d = H5I_INVALID_HID;
    int rc = source_describe(f, path, names->names[i], no_axis, &fld, &n, &d, err);
    if (rc == SC_OK && k == 0) {
        ds->fields[i] = fld;
        ds->nfields = i + 1;
    } else if (rc == SC_OK && !source_same_field(&fld, &ds->fields[i])) {
        char now[160], was[160];
        source_field_words(&fld, now, sizeof now);
        source_field_words(&ds->fields[i], was, sizeof was);
        rc = sc__seterr(err, SC_EINVAL, "source file '%s': field '%s' holds %s, but in '%s' %s",
                        path, fld.name, now, ds->files[0], was);
    }
    if (rc == SC_OK && i == 0)
        ds->file_sizes[k] = n;
    else if (rc == SC_OK && n != ds->file_sizes[k])
        rc = sc__seterr(err, SC_EINVAL, "source file '%s': field '%s' has %llu samples but '%s' "
                        "has %llu%s", path, fld.name, (unsigned long long)n, names->names[0],
                        (unsigned long long)ds->file_sizes[k],
                        no_axis ? "" : " (when each file is one sample whose datasets have no "
                                       "sample axis: SC_SAMPLE_AXIS=none)");
    if (rc == SC_OK && fld.vlen)
        rc = source_learn_lengths(ds, d, path, i, ds->nsamples, n, &ds->fields[i], err);
    if (rc == SC_OK)
        ds->file_off[k * (uint64_t)names->n + (uint64_t)i] = source_raw_offset(d, &fld, n);
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

/* Layout B without a manifest: every file opened, its fields described and checked. */
static int source_open_files(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    int rc = SC_OK, no_axis = cfg->sample_axis == SC_SAMPLE_AXIS_NONE;
    name_list names;
    ds->file_sizes = malloc(sizeof *ds->file_sizes * ds->nfiles);
    if (!ds->file_sizes)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    for (uint64_t k = 0; rc == SC_OK && k < ds->nfiles; k++) {
        const char *path = ds->files[k];
        hid_t f = source_open_file(path, MPI_COMM_SELF, 0, err);
        if (f < 0)
            return err ? err->code : SC_EHDF5;
        if (k == 0 && (rc = source_field_names(f, path, cfg->fields, &names, err)) == SC_OK) {
            source_note_skipped(ds, cfg, &names);
            ds->file_off = malloc(sizeof *ds->file_off * ds->nfiles * (uint64_t)names.n);
            rc = ds->file_off ? SC_OK : sc__seterr(err, SC_ENOMEM, "source '%s': no memory",
                                                    ds->path);
        }
        for (int i = 0; rc == SC_OK && i < names.n; i++)
            rc = source_scan_field(ds, f, k, i, &names, no_axis, err);
        if (rc == SC_OK && k == 0)
            rc = source_check_file(f, path, ds, cfg, err);
        H5Fclose(f);
        if (rc == SC_OK && __builtin_add_overflow(ds->nsamples, ds->file_sizes[k], &ds->nsamples))
            rc = sc__seterr(err, SC_EOVERFLOW, "source '%s': more than 2^64 samples", ds->path);
    }
    return rc;
}

/*
 * Layout B's shards: runs of consecutive files of at most `most` samples
 * together (a file of more is a shard of its own, never cut), so that a
 * directory of one sample per file makes shards like layout A's, each
 * one cache entry and one unit of ownership.  The file after run [k, end).
 */
static uint64_t source_group_end(const sc_dataset *ds, uint64_t k, uint64_t most)
{
    uint64_t n = ds->file_sizes[k++];
    while (k < ds->nfiles && n + ds->file_sizes[k] <= most)
        n += ds->file_sizes[k++];
    return k;
}

static uint64_t source_count_groups(const sc_dataset *ds, uint64_t most)
{
    uint64_t n = 0;
    for (uint64_t k = 0; k < ds->nfiles; k = source_group_end(ds, k, most))
        n++;
    return n;
}

static int source_group_files(sc_dataset *ds, uint64_t most, sc_error *err)
{
    ds->nshards = source_count_groups(ds, most);
    ds->shard_size = most;
    ds->shard_sizes = malloc(sizeof *ds->shard_sizes * ds->nshards);
    ds->file_first = malloc(sizeof *ds->file_first * (ds->nshards + 1));
    if (!ds->shard_sizes || !ds->file_first)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    uint64_t k = 0;
    for (uint64_t s = 0; s < ds->nshards; s++) {
        uint64_t end = source_group_end(ds, k, most);
        ds->file_first[s] = k;
        for (ds->shard_sizes[s] = 0; k < end; k++)
            ds->shard_sizes[s] += ds->file_sizes[k];
    }
    ds->file_first[ds->nshards] = ds->nfiles;
    return SC_OK;
}

/*
 * Layout B's scan: the files listed and stat()ed once (their bytes are the
 * fingerprint's, and a directory's manifest key), then their fields and
 * sample counts from the directory's saved manifest when it fits, else
 * from the files themselves.
 */
static int source_open_layout_b(sc_dataset *ds, const sc_config *cfg, int is_dir,
                                bytes *fp, sc_error *err)
{
    int rc;
    if ((rc = source_list_files(ds, is_dir, err)) != SC_OK)
        return rc;
    if (ds->nfiles > UINT32_MAX)
        return sc__seterr(err, SC_EOVERFLOW, "source '%s': too many files", ds->path);
    if (cfg->shard_size == 0)
        return sc__seterr(err, SC_EINVAL, "source '%s': SC_SHARD_SIZE is 0", ds->path);
    bytes files = {0};
    rc = source_put_files(ds, &files, err);
    if (rc == SC_OK && is_dir) {
        ds->manifest_key = source_manifest_key(files.p, files.len);
        snprintf(ds->asked, sizeof ds->asked, "%s", cfg->fields);
        rc = source_reuse_manifest(ds, cfg, err);
    }
    if (rc == SC_OK && !ds->from_manifest)
        rc = source_open_files(ds, cfg, err);
    if (rc == SC_OK)
        source_put(fp, files.p, files.len);
    uint64_t most = rc == SC_OK ? source_shard_size(ds, cfg) : 1;
    if (rc == SC_OK && source_count_groups(ds, most) < ds->nfiles)
        source_put_u64(fp, most); /* it groups files: a new size is a new dataset */
    free(files.p);
    return rc;
}

/*
 * Layout B's manifest, from rank 0 to all (mpi/node.c sends it): its
 * status (and message), then the fingerprint, the fields, and every file
 * with its sample count, so that a job of R ranks opens each file once at
 * start-up, not R times.
 */
int sc__dataset_manifest(const sc_dataset *ds, int rc, const char *msg, void **buf,
                         size_t *len)
{
    bytes m = {0};
    if (rc == SC_OK) {
        source_put_scan(&m, ds, ds->fields, ds->nfields);
    } else {
        source_put_u64(&m, (uint64_t)(int64_t)rc);
        source_put_str(&m, msg ? msg : "");
    }
    if (m.oom) {
        free(m.p);
        *buf = NULL;
        *len = 0;
        return SC_ENOMEM;
    }
    *buf = m.p;
    *len = m.len;
    return SC_OK;
}

/* A cursor over a received manifest: NULL once it runs past the end. */
typedef struct source_cursor {
    const unsigned char *p, *end;
} source_cursor;

static const unsigned char *source_take(source_cursor *c, uint64_t n)
{
    if (!c->p || n > (uint64_t)(c->end - c->p))
        return c->p = NULL;
    c->p += n;
    return c->p - n;
}

/* Whether file k's fields, where its scan found them, lie inside it. */
static int source_file_holds(const sc_dataset *ds, uint64_t k)
{
    const uint64_t *off = ds->file_off + k * (uint64_t)ds->nfields;
    for (int i = 0; i < ds->nfields; i++) {
        uint64_t bytes, end;
        if (off[i] != UINT64_MAX &&
            (ds->fields[i].vlen ||
             __builtin_mul_overflow(ds->file_sizes[k], ds->fields[i].sample_bytes, &bytes) ||
             __builtin_add_overflow(off[i], bytes, &end) || end > ds->file_stamp[STAMP * k]))
            return 0;
    }
    return 1;
}

/*
 * The manifest's files, each with its sample count (at least 1; they sum to
 * nsamples), stamp and fields' offsets (inside the file): a malformed one
 * must not size a read.
 */
static int source_take_files(sc_dataset *ds, source_cursor *c, uint64_t nfiles, sc_error *err)
{
    uint64_t cap = 0, nf = (uint64_t)ds->nfields, total = 0;
    int rc = SC_OK;
    for (uint64_t k = 0; rc == SC_OK && k < nfiles; k++) {
        const unsigned char *pl = source_take(c, 8);
        uint64_t plen = pl ? sc__get_u64(pl) : 0;
        const unsigned char *path = pl && plen < SC_PATH_MAX + 512 ? source_take(c, plen) : NULL;
        const unsigned char *sz = path ? source_take(c, 8) : NULL;
        const unsigned char *st = sz ? source_take(c, STAMP_BYTES) : NULL;
        const unsigned char *off = st ? source_take(c, 8 * nf) : NULL;
        char name[SC_PATH_MAX + 512];
        if (!off)
            return SC_EFORMAT;
        memcpy(name, path, plen);
        name[plen] = '\0';
        ds->file_sizes[k] = sc__get_u64(sz);
        memcpy(ds->file_stamp + STAMP * k, st, STAMP_BYTES); /* one build on every rank: its byte order */
        memcpy(ds->file_off + nf * k, off, 8 * nf);
        if (!ds->file_sizes[k] || __builtin_add_overflow(total, ds->file_sizes[k], &total) ||
            !source_file_holds(ds, k))
            return SC_EFORMAT;
        rc = source_add_file(ds, &cap, name, err);
    }
    return rc == SC_OK && total != ds->nsamples ? SC_EFORMAT : rc;
}

/*
 * A variable-length field's offsets from the manifest: from 0, never
 * falling, each sample a whole number of elements, the largest the
 * field's sample_bytes, and each file's samples no more bytes than the
 * file (its size is its stamp's, which the files' own stat confirmed):
 * they size every buffer the field passes through.
 */
static int source_take_lengths(sc_dataset *ds, source_cursor *c, int i)
{
    const sc__field *f = &ds->fields[i];
    uint64_t n = ds->nsamples, most = 0, esize = sc__dtype_size(f->dtype);
    const unsigned char *p = n < UINT64_MAX / 8 ? source_take(c, 8 * (n + 1)) : NULL;
    uint64_t *off = p ? malloc(8 * (n + 1)) : NULL;
    if (!off)
        return p ? SC_ENOMEM : SC_EFORMAT;
    memcpy(off, p, 8 * (n + 1)); /* one build on every rank: its byte order */
    int ok = off[0] == 0;
    for (uint64_t k = 0; ok && k < n; k++) {
        uint64_t len = off[k + 1] - off[k];
        ok = off[k + 1] >= off[k] && len % esize == 0;
        most = len > most ? len : most;
    }
    for (uint64_t k = 0, s = 0; ok && k < ds->nfiles; s += ds->file_sizes[k++])
        ok = off[s + ds->file_sizes[k]] - off[s] <= ds->file_stamp[STAMP * k];
    ds->vlen_off[i] = off;
    return ok && most == f->sample_bytes ? SC_OK : SC_EFORMAT;
}

/* Whether a field description that came from elsewhere holds together. */
static int source_field_sane(const sc__field *f)
{
    uint64_t bytes = sc__dtype_size(f->dtype);
    if (f->dtype == SC__DT_INVALID || !bytes || f->ndims < 0 || f->ndims > SC_MAX_DIMS ||
        (f->no_axis != 0 && f->no_axis != 1) ||
        !memchr(f->name, '\0', sizeof f->name))
        return 0;
    if (f->vlen)
        return f->vlen == 1 && f->ndims == 0 && f->sample_bytes % bytes == 0;
    for (int d = 0; d < f->ndims; d++)
        if (!f->dims[d] || __builtin_mul_overflow(bytes, f->dims[d], &bytes))
            return 0;
    return bytes == f->sample_bytes;
}

int sc__dataset_take_manifest(sc_dataset *ds, const void *buf, size_t len, sc_error *err)
{
    source_cursor c = {buf, (const unsigned char *)buf + len};
    const unsigned char *w = source_take(&c, 8);
    int status = w ? (int)(int64_t)sc__get_u64(w) : SC_EFORMAT;
    const unsigned char *ml = w ? source_take(&c, 8) : NULL;
    uint64_t mlen = ml ? sc__get_u64(ml) : 0;
    const unsigned char *msg = ml ? source_take(&c, mlen) : NULL;
    if (status != SC_OK)
        return sc__seterr(err, status, "rank %d: rank 0 could not open the source: %.*s",
                          ds->rank, msg ? (int)mlen : 0, msg ? (const char *)msg : "");
    const unsigned char *h = source_take(&c, 32);
    const unsigned char *f = h ? source_take(&c, sizeof ds->fields) : NULL;
    const unsigned char *nf = f ? source_take(&c, 8) : NULL;
    int rc = nf ? SC_OK : SC_EFORMAT;
    uint64_t nfiles = 0;
    if (rc == SC_OK) {
        ds->fingerprint = sc__get_u64(h);
        ds->nsamples = sc__get_u64(h + 8);
        uint64_t nf64 = sc__get_u64(h + 16);
        ds->nfields = nf64 >= 1 && nf64 <= SC_MAX_FIELDS ? (int)nf64 : 0;
        ds->from_manifest = sc__get_u64(h + 24) == 1;
        memcpy(ds->fields, f, sizeof ds->fields);
        for (int i = 0; i < ds->nfields; i++)
            ds->nfields = source_field_sane(&ds->fields[i]) ? ds->nfields : 0;
        nfiles = sc__get_u64(nf);
        rc = ds->nfields && nfiles <= UINT32_MAX ? SC_OK : SC_EFORMAT;
        if (rc == SC_OK) {
            ds->file_sizes = malloc(sizeof *ds->file_sizes * (nfiles + 1));
            ds->file_stamp = malloc(STAMP_BYTES * nfiles + 1);
            ds->file_off = malloc(sizeof *ds->file_off * (nfiles * (uint64_t)ds->nfields + 1));
        }
        rc = rc != SC_OK || (ds->file_sizes && ds->file_stamp && ds->file_off) ? rc : SC_ENOMEM;
    }
    if (rc == SC_OK)
        rc = source_take_files(ds, &c, nfiles, err);
    for (int i = 0; rc == SC_OK && i < ds->nfields; i++)
        rc = ds->fields[i].vlen ? source_take_lengths(ds, &c, i) : SC_OK;
    if (rc == SC_EFORMAT)
        return sc__seterr(err, rc, "rank %d: the source manifest from rank 0 is malformed",
                          ds->rank);
    return rc == SC_ENOMEM ? sc__seterr(err, rc, "rank %d: no memory for the manifest",
                                        ds->rank)
                           : rc;
}

/*
 * With a shard transform, the dataset delivers its declared outputs: they
 * replace fields[] (the source's move to src[]), and the fingerprint, which
 * keys the cache, takes in the transform's name, version and outputs.
 */
static int source_transform_fields(sc_dataset *ds, const sc_transform *tf, sc_error *err)
{
    if (!tf)
        return SC_OK;
    if (!tf->name || !*tf->name || !tf->version || !*tf->version)
        return sc__seterr(err, SC_EINVAL, "source '%s': a transform needs a name and a version "
                          "(they key the cache)", ds->path);
    if (!tf->shard)
        return SC_OK; /* augmentation only: the cached shards are the source's */
    if (tf->nout < 1 || tf->nout > SC_MAX_FIELDS)
        return sc__seterr(err, SC_EINVAL, "transform '%s': %d output fields (1 to %d)", tf->name,
                          tf->nout, SC_MAX_FIELDS);
    bytes fp = {0};
    source_put_u64(&fp, ds->fingerprint);
    source_put_str(&fp, tf->name);
    source_put_str(&fp, tf->version);
    memcpy(ds->src, ds->fields, sizeof ds->src);
    ds->nsrc = ds->nfields;
    for (int i = 0; i < tf->nout; i++) {
        const sc_field_info *o = &tf->out[i];
        sc__field *f = &ds->fields[i];
        memset(f, 0, sizeof *f);
        snprintf(f->name, sizeof f->name, "%s", o->name);
        f->dtype = sc__dtype_parse(o->dtype);
        f->ndims = o->ndims;
        if (!o->name[0] || f->dtype == SC__DT_INVALID || o->ndims < 0 || o->ndims > SC_MAX_DIMS) {
            free(fp.p);
            return sc__seterr(err, SC_EINVAL,
                              "transform '%s': output field %d ('%s', %s, %d dims) is not a "
                              "named numeric field of at most %d dimensions",
                              tf->name, i, o->name, o->dtype, o->ndims, SC_MAX_DIMS);
        }
        f->sample_bytes = sc__dtype_size(f->dtype);
        for (int d = 0; d < o->ndims; d++) {
            f->dims[d] = o->dims[d];
            f->sample_bytes *= o->dims[d];
        }
        /* Decode-once passes a variable-length field it does not decode through as is. */
        if (o->vlen && tf == &ds->decode_tf && ds->src[i].vlen)
            *f = ds->src[i];
        if (!f->sample_bytes && !f->vlen) {
            free(fp.p);
            return sc__seterr(err, SC_EINVAL, "transform '%s': output field '%s' is empty",
                              tf->name, o->name);
        }
        source_put_field(&fp, f);
    }
    ds->nfields = tf->nout;
    ds->tf = tf;
    int oom = fp.oom;
    ds->fingerprint = sc__xxh64(fp.p, fp.len, 0);
    free(fp.p);
    return oom ? sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path) : SC_OK;
}

int sc__dataset_new(MPI_Comm comm, const sc_config *cfg, sc_dataset **out, sc_error *err)
{
    struct stat st;
    *out = NULL;
    if (!cfg->source[0])
        return sc__seterr(err, SC_EINVAL, "no source dataset: set SC_SOURCE");
    if (stat(cfg->source, &st) != 0)
        return sc__seterr(err, SC_EIO, "source '%s': %s", cfg->source, strerror(errno));
    sc_dataset *ds = calloc(1, sizeof *ds);
    if (!ds)
        return sc__seterr(err, SC_ENOMEM, "no memory for a dataset");
    ds->comm = comm;
    ds->file = H5I_INVALID_HID;
    ds->is_dir = S_ISDIR(st.st_mode);
    MPI_Comm_rank(comm, &ds->rank);
    MPI_Comm_size(comm, &ds->world);
    snprintf(ds->path, sizeof ds->path, "%s", cfg->source);
#ifdef SC_TESTING
    const char *mbps = getenv("SC_TEST_SOURCE_MBPS");
    ds->slow_bps = mbps ? 1e6 * strtod(mbps, NULL) : 0.0;
#endif
    *out = ds;
    return SC_OK;
}

int sc__dataset_scan(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    bytes fp = {0};
    int rc = SC_OK;
    sc__h5_lock();
    ds->layout = !ds->is_dir && H5Fis_hdf5(ds->path) > 0 ? 'A' : 'B';
    H5Eclear2(H5E_DEFAULT);
    source_put(&fp, &ds->layout, 1);
    /* Layout B: rank 0 alone scans the files, then tells everyone. */
    int scans = !sc__dataset_shared(ds) || ds->rank == 0;
    if (ds->layout == 'A')
        rc = source_open_layout_a(ds, cfg, &fp, err);
    else if (scans)
        rc = source_open_layout_b(ds, cfg, ds->is_dir, &fp, err);
    sc__h5_unlock();

    if (rc == SC_OK && scans) {
        for (int i = 0; i < ds->nfields; i++)
            source_put_field(&fp, &ds->fields[i]);
        if (fp.oom)
            rc = sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
        ds->fingerprint = sc__xxh64(fp.p, fp.len, 0);
    }
    free(fp.p);
    return rc;
}

int sc__dataset_shared(const sc_dataset *ds)
{
    return ds->layout == 'B' && ds->world > 1;
}

/* Bytes in words: "96 KiB", "12.0 MiB". */
static const char *source_bytes_words(uint64_t n, char *buf, size_t len)
{
    static const char *unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
    double x = (double)n;
    int u = 0;
    while (x >= 1024.0 && u < 4)
        x /= 1024.0, u++;
    snprintf(buf, len, u && x < 100.0 ? "%.1f %s" : "%.0f %s", x, unit[u]);
    return buf;
}

/*
 * Rank 0's one line on what SC_SHARD_SIZE=auto chose, and from what: the
 * size names the cache (another size is another dataset), so a job says it.
 */
static void source_note_auto(const sc_dataset *ds, const sc_config *cfg)
{
    uint64_t b = source_mean_bytes(ds, ds->fields, ds->nfields);
    char each[32], shard[32], chunks[64] = "";
    if (ds->chunk_unit)
        snprintf(chunks, sizeof chunks, ", whole compressed chunks of %llu rows",
                 (unsigned long long)ds->chunk_unit);
    sc__log(cfg->log_level, SC__LOG_WARN, 0,
            "source '%s': shard size %llu samples (SC_SHARD_SIZE=auto: %llu samples of %s, "
            "%llu shards of up to %s%s; the rule is in docs/api.md)",
            ds->path, (unsigned long long)ds->shard_size, (unsigned long long)ds->nsamples,
            source_bytes_words(b, each, sizeof each), (unsigned long long)ds->nshards,
            source_bytes_words(b * ds->shard_size, shard, sizeof shard), chunks);
}

int sc__dataset_finish(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    int rc = ds->layout == 'B' ? source_group_files(ds, source_shard_size(ds, cfg), err) : SC_OK;
    if (rc != SC_OK)
        return rc;
    if (cfg->shard_size == SC_SHARD_AUTO && ds->rank == 0)
        source_note_auto(ds, cfg);
    if (!(ds->shard_first = malloc(sizeof *ds->shard_first * (ds->nshards + 1))))
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    ds->shard_first[0] = 0;
    for (uint64_t k = 0; k < ds->nshards; k++)
        ds->shard_first[k + 1] = ds->shard_first[k] + ds->shard_sizes[k];
    const sc_transform *tf = NULL;
    rc = sc__decode_setup(ds, cfg, &tf, err);
    if (rc == SC_OK)
        rc = source_transform_fields(ds, tf, err);
    if (rc == SC_OK)
        rc = sc__augment_setup(ds, cfg, err);
    if (rc == SC_OK)
        ds->sample_bytes = source_mean_bytes(ds, ds->fields, ds->nfields);
    return rc;
}

int sc_dataset_close(sc_dataset *ds)
{
    if (!ds)
        return SC_OK;
    sc__h5_lock();
    for (int i = 0; i < SC_MAX_FIELDS; i++)
        if (ds->dset[i] > 0)
            H5Dclose(ds->dset[i]);
    if (ds->file >= 0)
        H5Fclose(ds->file);
    sc__h5_unlock();
    for (uint64_t k = 0; k < ds->nfiles; k++)
        free(ds->files[k]);
    free(ds->files);
    free(ds->shard_sizes);
    free(ds->shard_first);
    free(ds->file_sizes);
    free(ds->file_first);
    free(ds->file_stamp);
    free(ds->file_off);
    for (int i = 0; i < SC_MAX_FIELDS; i++)
        free(ds->vlen_off[i]);
    sc__aug_free(ds->aug);
    free(ds);
    return SC_OK;
}

/* Reads `count` samples from `first` of an open dataset into buf. */
static int source_read_rows(hid_t d, const sc__field *f, uint64_t first, uint64_t count,
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
    if (mt >= 0)
        H5Tclose(mt);
    if (ft >= 0)
        H5Tclose(ft);
    int rc = h < 0 ? sc__h5_err(err, SC_EHDF5,
                                "source '%s': reading shard %llu of field '%s' failed",
                                path, (unsigned long long)shard, f->name)
                   : SC_OK;
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
static void source_throttle(const sc_dataset *ds, uint64_t shard, const sc__field *fields,
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
#define source_throttle(ds, shard, fields, nfields) ((void)0)
#endif

/*
 * One field's rows of an open dataset, called without the lock: chunk by
 * chunk, decoded outside the lock (chunks.c), where the filters allow;
 * else one H5Dread under it.
 */
static int source_read_field(hid_t d, const sc__field *f, uint64_t first, uint64_t count,
                             void *buf, const char *path, uint64_t shard, sc_error *err)
{
    sc__chunking c;
    sc__h5_lock();
    int direct = sc__chunks_direct(d, f, &c);
    sc__h5_unlock();
    int rc = direct ? sc__chunks_read(d, f, &c, first, count, buf, path, shard, err)
                    : SC__CHUNK_UNSTORED;
    if (rc == SC__CHUNK_UNSTORED) { /* HDF5 reads what it must decode or fill */
        sc__h5_lock();
        rc = source_read_rows(d, f, first, count, buf, path, shard, err);
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
static int source_read_part(const sc_dataset *ds, hid_t d, const sc__field *f, int i,
                            uint64_t first, uint64_t count, uint64_t row, uint64_t shard,
                            void *buf, const char *path, sc_error *err)
{
    if (f->vlen)
        return sc__vlen_read(d, f, first, count, ds->vlen_off[i] + ds->shard_first[shard],
                             ds->shard_sizes[shard], row, buf, path, shard,
                             ds->shard_first[shard], err);
    return source_read_field(d, f, first, count, (unsigned char *)buf + row * f->sample_bytes,
                             path, shard, err);
}

/*
 * Layout B: a file whose fields lie in it as delivered (file_off), read
 * with pread outside HDF5 and its lock, once its stamp (size, mtime,
 * inode, change time) says it is the file this open saw: an HDF5 open costs more than
 * reading a sample of tens of KiB, and one-sample files are read one each.
 * SOURCE_VIA_HDF5 when a field is not so stored.
 */
#define SOURCE_VIA_HDF5 1
static int source_read_direct(sc_dataset *ds, uint64_t shard, uint64_t file, uint64_t row,
                              const sc__field *fields, int nfields, void *const *bufs,
                              sc_error *err)
{
    const uint64_t *off = ds->file_off + file * (uint64_t)nfields, n = ds->file_sizes[file];
    for (int i = 0; i < nfields; i++)
        if (off[i] == UINT64_MAX)
            return SOURCE_VIA_HDF5;
    const char *path = ds->files[file], *why = NULL, *field = NULL;
    struct stat st;
    uint64_t now[SC__STAMP_WORDS] = {0};
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) != 0)
        why = strerror(errno);
    else
        source_stamp(&st, now);
    if (!why && memcmp(now, ds->file_stamp + STAMP * file, sizeof now) != 0)
        why = "it changed since the dataset was opened";
    for (int i = 0; !why && i < nfields; i++) {
        field = fields[i].name;
        why = sc__io_pread(fd, (unsigned char *)bufs[i] + row * fields[i].sample_bytes,
                               n * fields[i].sample_bytes, off[i]);
    }
    if (fd >= 0)
        close(fd);
    if (!why)
        return SC_OK;
    return sc__seterr(err, SC_EIO, "source file '%s' (shard %llu)%s%s%s: %s", path,
                      (unsigned long long)shard, field ? ": field '" : "", field ? field : "",
                      field ? "'" : "", why);
}

/* Layout B: one file of a shard, each field checked against the dataset's, read at `row`. */
static int source_read_file(sc_dataset *ds, uint64_t shard, uint64_t file, uint64_t row,
                            const sc__field *fields, int nfields, void *const *bufs,
                            sc_error *err)
{
    const char *path = ds->files[file];
    int rc = source_read_direct(ds, shard, file, row, fields, nfields, bufs, err);
    if (rc != SOURCE_VIA_HDF5)
        return rc;
    sc__h5_lock();
    hid_t f = source_open_file(path, MPI_COMM_SELF, 0, err);
    sc__h5_unlock();
    rc = f < 0 ? (err ? err->code : SC_EHDF5) : SC_OK;
    for (int i = 0; rc == SC_OK && i < nfields; i++) {
        sc__field now;
        uint64_t n = 0;
        hid_t d = H5I_INVALID_HID;
        sc__h5_lock();
        rc = source_describe(f, path, fields[i].name, fields[i].no_axis, &now, &n, &d, err);
        sc__h5_unlock();
        if (rc == SC_OK && (!source_same_field(&now, &fields[i]) || n != ds->file_sizes[file]))
            rc = sc__seterr(err, SC_EIO,
                            "source file '%s' (shard %llu) changed since the "
                            "dataset was opened: field '%s'",
                            path, (unsigned long long)shard, now.name);
        if (rc == SC_OK)
            rc = source_read_part(ds, d, &fields[i], i, 0, n, row, shard, bufs[i], path, err);
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

/* Layout B: a shard's run of files, one after another into the same buffers. */
static int source_read_files(sc_dataset *ds, uint64_t shard, const sc__field *fields,
                             int nfields, void *const *bufs, sc_error *err)
{
    int rc = SC_OK;
    uint64_t row = 0;
    for (uint64_t k = ds->file_first[shard]; rc == SC_OK && k < ds->file_first[shard + 1]; k++) {
        rc = source_read_file(ds, shard, k, row, fields, nfields, bufs, err);
        row += ds->file_sizes[k];
    }
    return rc;
}

/* The source's own fields of one shard (src[], or fields[] without a transform). */
static int source_read_source(sc_dataset *ds, uint64_t shard, const sc__field *fields, int nfields,
                              void *const *bufs, sc_error *err)
{
    int rc = SC_OK;
    if (ds->layout == 'A') {
        for (int i = 0; rc == SC_OK && i < nfields; i++)
            rc = source_read_part(ds, ds->dset[i], &fields[i], i, ds->shard_first[shard],
                                  ds->shard_sizes[shard], 0, shard, bufs[i], ds->path, err);
    } else {
        rc = source_read_files(ds, shard, fields, nfields, bufs, err);
    }
    if (rc == SC_OK) {
        sc__h5_lock();
        source_throttle(ds, shard, fields, nfields);
        sc__h5_unlock();
    }
    return rc;
}

static int source_read_transformed(sc_dataset *ds, uint64_t shard, void *const *bufs, sc_error *err)
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
    int rc = source_read_source(ds, shard, ds->src, ds->nsrc, in, err);
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
    return ds->tf ? source_read_transformed(ds, shard, bufs, err)
                  : source_read_source(ds, shard, ds->fields, ds->nfields, bufs, err);
}

int sc_dataset_get_info(const sc_dataset *ds, sc_dataset_info *out)
{
    if (!ds || !out)
        return SC_EINVAL;
    *out = (sc_dataset_info){ds->layout, ds->nsamples, ds->nshards, ds->shard_size,
                             ds->sample_bytes, ds->nfields, ds->fingerprint,
                             (uint64_t)ds->from_manifest, ds->layout == 'B' ? ds->nfiles : 1,
                             {0}};
    return SC_OK;
}

void sc__field_info(const sc__field *f, sc_field_info *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", f->name);
    snprintf(out->dtype, sizeof out->dtype, "%s", sc__dtype_name(f->dtype));
    out->ndims = f->ndims;
    memcpy(out->dims, f->dims, sizeof out->dims);
    out->sample_bytes = f->sample_bytes;
    out->vlen = (uint64_t)f->vlen;
}

int sc_dataset_field(const sc_dataset *ds, int i, sc_field_info *out)
{
    if (!ds || !out || i < 0 || i >= ds->nfields)
        return SC_EINVAL;
    sc__field_info(&ds->fields[i], out);
    return SC_OK;
}

int sc__vlen_disagrees(const sc_dataset *ds, uint64_t shard, const void *const *bufs)
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

int sc_dataset_shard_bytes(const sc_dataset *ds, uint64_t shard, int i, uint64_t *bytes)
{
    if (!ds || !bytes || shard >= ds->nshards || i < 0 || i >= ds->nfields)
        return SC_EINVAL;
    *bytes = sc__field_bytes(ds, i, shard);
    return SC_OK;
}

int sc_dataset_shard_sizes(const sc_dataset *ds, const uint64_t **sizes)
{
    if (!ds || !sizes)
        return SC_EINVAL;
    *sizes = ds->shard_sizes;
    return SC_OK;
}

int sc_dataset_shard_offsets(const sc_dataset *ds, const uint64_t **first)
{
    if (!ds || !first)
        return SC_EINVAL;
    *first = ds->shard_first;
    return SC_OK;
}

int sc_dataset_plan_params(const sc_dataset *ds, const sc_config *cfg,
                           uint32_t world_size, uint64_t epoch,
                           sc_plan_params *out)
{
    if (!ds || !cfg || !out)
        return SC_EINVAL;
    sc_plan_params p = SC_PLAN_PARAMS_INIT;
    p.shard_sizes = ds->shard_sizes;
    p.nshards = ds->nshards;
    p.world_size = world_size;
    p.seed = cfg->seed;
    p.epoch = epoch;
    p.batch_size = cfg->batch_size;
    p.remainder = cfg->remainder;
    p.mode = cfg->mode;
    p.exchange = cfg->exchange;
    p.partitions = cfg->partitions;
    p.fingerprint = ds->fingerprint;
    *out = p;
    return SC_OK;
}
