/*
 * source.c - opening a source: the steps mpi/node.c runs (new, scan, the
 * manifest rank 0 sends, finish), layouts A and B, the shard size, and
 * the close (see source.h).
 */
#include "source.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "chunks.h"
#include "config.h"
#include "decode.h"
#include "h5.h"
#include "hash.h"
#include "invariant.h"
#include "listdir.h"
#include "log.h"
#include "scan.h"

_Static_assert(sizeof(hid_t) == sizeof(int64_t), "sc_dataset keeps hid_t as int64_t");

#define STAMP SC__STAMP_WORDS /* words of a file's stamp */

/* ---- layout A ------------------------------------------------------------------- */

/*
 * The samples a chunk of dataset d holds when it is chunked and filtered
 * (compressed): a shard that cuts through one decompresses all of it.
 * 0 for any other layout.  The caller holds the HDF5 lock.
 */
static uint64_t source_chunk_rows(hid_t d)
{
    SC__ASSERT(sc__h5_held());
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

/* Whether dataset d is virtual (a VDS over other datasets).  The caller holds the lock. */
static int source_virtual(hid_t d)
{
    hid_t dcpl = H5Dget_create_plist(d);
    int v = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_VIRTUAL;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    return v;
}

/*
 * Layout A: the decoder's check for each field (every rank: they refuse
 * alike, and each HDF5 call here may be collective: a virtual dataset's
 * property list dups the file's communicator, and rank 0 asking alone hung
 * the open) and, on rank 0, its note and a warning for each compressed field
 * whose chunks the shards split, since every shard that touches a chunk
 * decompresses all of it.  The caller holds the HDF5 lock.
 */
static int source_note_chunks(const sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    SC__ASSERT(sc__h5_held());
    for (int i = 0; i < ds->nfields; i++) {
        if (ds->mpio && source_virtual(ds->dset[i]))
            return sc__seterr(err, SC_ENOTSUP, "source '%s': field '%s' is a virtual dataset "
                              "(HDF5 VDS), which this HDF5 does not read through MPI-IO (the "
                              "file is shared by %d ranks): name the files it maps as a "
                              "layout-B list (SC_SOURCE=a text file of their paths), or copy "
                              "its data into the file", ds->path, ds->fields[i].name, ds->world);
        int rc = sc__fields_check_decoder(ds->path, ds->dset[i], &ds->fields[i], cfg, ds->rank == 0,
                                      err);
        if (rc != SC_OK)
            return rc;
        /* On every rank: a virtual dataset's property list is collective under MPI-IO. */
        uint64_t rows = source_chunk_rows(ds->dset[i]);
        if (ds->rank == 0 && rows && ds->shard_size % rows != 0)
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
 * In layout A (its chunking is read) the caller holds the HDF5 lock.
 */
static uint64_t source_without_singles(const sc_dataset *ds, uint64_t size, uint64_t step);

static uint64_t source_shard_size(sc_dataset *ds, const sc_config *cfg)
{
    SC__ASSERT(ds->layout != 'A' || sc__h5_held());
    if (cfg->shard_size != SC_SHARD_AUTO)
        return cfg->shard_size;
    uint64_t b = source_mean_bytes(ds, ds->fields, ds->nfields), rows[SC_MAX_FIELDS] = {0},
             cost[SC_MAX_FIELDS] = {0};
    uint64_t size = sc_shard_size_auto(ds->nsamples, b);
    /*
     * Layout B never groups files of samples of 1 MiB or more: a direct
     * read lands in place only where the shard's bytes before it are whole
     * pages, so the files after a shard's first (one sample of 2.8 MB
     * each, say) went through a bounce copy, 43% of a cold epoch's user
     * CPU (docs/benchmarks.md); at 1 MiB a shard's own costs are small.
     * But a skipped sample's place is taken by another of its shard, which
     * a one-sample file alone lacks: skipping, they group as before.
     */
    int skips = sc__config_skips_bad(cfg);
    ds->files_alone = ds->layout == 'B' && b >= SC_SHARD_AUTO_MIN_BYTES && !skips &&
                      !cfg->skip_list;
    for (int i = 0; ds->layout == 'A' && i < ds->nfields; i++)
        if ((rows[i] = source_chunk_rows(ds->dset[i])) &&
            __builtin_mul_overflow(rows[i], ds->fields[i].sample_bytes, &cost[i]))
            cost[i] = UINT64_MAX;
    uint64_t unit = ds->chunk_unit = sc__shard_chunk_unit(b, rows, cost, ds->nfields);
    if (unit)
        size = size < unit ? unit : size / unit * unit;
    if (unit && (size >= ds->nsamples && ds->nsamples))
        return ds->nsamples;
    return skips ? source_without_singles(ds, size, unit ? unit : 1) : size;
}

static int source_open_layout_a(sc_dataset *ds, const sc_config *cfg, sc__fingerprint *fp,
                                sc_error *err)
{
    int size = ds->world, rc;
    sc__fields_names names;
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
    ds->mpio = parallel;
    if ((ds->file = sc__fields_open_file(ds->path, ds->comm, parallel, err)) < 0)
        return err ? err->code : SC_EHDF5;
    if ((rc = sc__fields_find(ds->file, ds->path, cfg->fields, &names, err)) == SC_OK)
        sc__fields_note_skipped(ds, cfg, &names);
    if (rc != SC_OK)
        return rc;
    for (int i = 0; i < names.n; i++) {
        uint64_t n = 0;
        rc = sc__fields_describe(ds->file, ds->path, names.names[i], 0, &ds->fields[i], &n,
                             &ds->dset[i], err);
        if (rc == SC_OK && ds->fields[i].vlen)
            rc = sc__fields_learn_lengths(ds, ds->dset[i], ds->path, i, 0, n, &ds->fields[i], err);
        if (rc != SC_OK)
            return rc;
        ds->a_off[i] = sc__source_raw_offset(ds->dset[i], &ds->fields[i], n);
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
    sc__fingerprint_u64(fp, ds->shard_size);
    return sc__fingerprint_file(fp, ds->path, NULL, err);
}

/* ---- layout B ------------------------------------------------------------------- */

/*
 * Layout B's file list: a directory's *.h5 / *.hdf5 (listdir.c), or a text
 * file of paths.
 */
static int source_list_files(sc_dataset *ds, int is_dir, sc_error *err)
{
    size_t cap = 0;
    char buf[SC_PATH_MAX + 512];
    int rc = SC_OK;
    if (is_dir) {
        rc = sc__listdir_hdf5(ds, err);
    } else {
        FILE *f = fopen(ds->path, "r");
        if (!f)
            return sc__seterr(err, SC_EIO, "source '%s': %s", ds->path, strerror(errno));
        for (uint64_t line = 1; rc == SC_OK && fgets(buf, sizeof buf, f); line++) {
            buf[strcspn(buf, "\r\n")] = '\0';
            if (!buf[0] || buf[0] == '#')
                continue;
            struct stat st;
            char cwd[SC_PATH_MAX];
            if (stat(buf, &st) != 0 || !S_ISREG(st.st_mode))
                rc = sc__seterr(err, SC_EINVAL,
                                "source '%s' is neither an HDF5 file nor a list of "
                                "HDF5 files (line %llu: '%.200s' is not a file%s%.200s%s)",
                                ds->path, (unsigned long long)line, buf,
                                buf[0] != '/' ? "; a relative path is from the working "
                                                "directory, '" : "",
                                buf[0] == '/' ? "" : getcwd(cwd, sizeof cwd) ? cwd : "unknown",
                                buf[0] != '/' ? "'" : "");
            else
                rc = sc__scan_add_file(ds, &cap, buf, err);
        }
        fclose(f);
    }
    if (rc == SC_OK && ds->nfiles == 0)
        rc = sc__seterr(err, SC_EINVAL, "source '%s' lists no HDF5 files", ds->path);
    return rc;
}

/* path with its empty and "." parts left out ("a//./b" is "a/b"): the text alone. */
static char *source_folded(const char *path)
{
    char *out = malloc(strlen(path) + 1), *o = out;
    for (const char *p = path; out && *p;) {
        size_t len = strcspn(p, "/");
        if (len && !(len == 1 && *p == '.')) {
            if (o > out || path[0] == '/')
                *o++ = '/';
            memcpy(o, p, len), o += len;
        }
        p += len + (p[len] == '/');
    }
    if (out)
        *o = '\0';
    return out;
}

typedef struct source_named {
    char *name; /* a listed path, folded */
    uint64_t stamp[STAMP], k; /* its stamp, its index */
} source_named;

static int source_cmp_name(const void *a, const void *b)
{
    const source_named *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->k > y->k) - (x->k < y->k);
}

static int source_cmp_stamp(const void *a, const void *b)
{
    const source_named *x = a, *y = b;
    int c = memcmp(x->stamp, y->stamp, sizeof x->stamp);
    return c ? c : (x->k > y->k) - (x->k < y->k);
}

/*
 * A list that names one path twice ("a.h5", "./a.h5") would deliver its
 * samples twice under two ids, each once: refused, naming both.  Two
 * names of one file (its stamp, inode and times, the same: a hard link,
 * or symlinks into a content-addressed store such as Hugging Face's
 * cache, which keeps identical files once) are the dataset's own choice,
 * said on rank 0.  A directory's names are distinct already.
 */
static int source_refuse_twice(const sc_dataset *ds, sc_error *err)
{
    if (ds->is_dir && ds->rank != 0)
        return SC_OK; /* nothing to refuse, nothing to say */
    source_named *v = calloc(ds->nfiles + 1, sizeof *v);
    int rc = v ? SC_OK : sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    for (uint64_t k = 0; rc == SC_OK && k < ds->nfiles; k++) {
        memcpy(v[k].stamp, ds->file_stamp + STAMP * k, sizeof v[k].stamp);
        v[k].k = k;
        if (!ds->is_dir && !(v[k].name = source_folded(ds->files[k])))
            rc = sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    }
    if (rc == SC_OK && !ds->is_dir) {
        qsort(v, ds->nfiles, sizeof *v, source_cmp_name);
        for (uint64_t k = 1; rc == SC_OK && k < ds->nfiles; k++)
            if (!strcmp(v[k - 1].name, v[k].name))
                rc = sc__seterr(err, SC_EINVAL, "source '%s' names one file twice, '%s' and "
                                "'%s': its samples would be delivered twice under two ids",
                                ds->path, ds->files[v[k - 1].k], ds->files[v[k].k]);
    }
    if (rc == SC_OK && ds->rank == 0) {
        qsort(v, ds->nfiles, sizeof *v, source_cmp_stamp);
        for (uint64_t k = 1; k < ds->nfiles; k++)
            if (!memcmp(v[k - 1].stamp, v[k].stamp, sizeof v[k].stamp))
                sc__log(ds->log_level, SC__LOG_WARN, 0, "source '%s': '%s' and '%s' are one "
                        "file (a hard link, or links into a store that keeps identical files "
                        "once): its samples are delivered under both names", ds->path,
                        ds->files[v[k - 1].k], ds->files[v[k].k]);
    }
    for (uint64_t k = 0; v && k < ds->nfiles; k++)
        free(v[k].name);
    free(v);
    return rc;
}

/* Every file's real path and stamp, as the fingerprint takes them; none twice. */
static int source_put_files(sc_dataset *ds, sc__fingerprint *b, sc_error *err)
{
    int rc = (ds->file_stamp = malloc(SC__STAMP_BYTES * ds->nfiles + 1))
                 ? SC_OK
                 : sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    for (uint64_t k = 0; rc == SC_OK && k < ds->nfiles; k++)
        rc = sc__fingerprint_file(b, ds->files[k], ds->file_stamp + STAMP * k, err);
    if (rc == SC_OK && b->oom)
        rc = sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    return rc == SC_OK ? source_refuse_twice(ds, err) : rc;
}

uint64_t sc__source_raw_offset(int64_t d, const sc__field *f, uint64_t n)
{
    SC__ASSERT(sc__h5_held());
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

/*
 * Field i of file k in layout B's scan: described, checked against file
 * 0's, its place kept, and its filters checked: a later file compressed
 * with a filter this HDF5 cannot load failed mid-epoch, hours in.  File
 * 0's notes say how its chunks decode (rank 0).
 */
static int source_scan_field(sc_dataset *ds, const sc_config *cfg, hid_t f, uint64_t k, int i,
                             const sc__fields_names *names, sc_error *err)
{
    const char *path = ds->files[k];
    int no_axis = cfg->sample_axis == SC_SAMPLE_AXIS_NONE;
    sc__field fld;
    uint64_t n = 0;
    hid_t d = H5I_INVALID_HID;
    int rc = sc__fields_describe(f, path, names->names[i], no_axis, &fld, &n, &d, err);
    if (rc == SC_OK && k == 0) {
        ds->fields[i] = fld;
        ds->nfields = i + 1;
    } else if (rc == SC_OK && !sc__field_same(&fld, &ds->fields[i])) {
        char now[160], was[160];
        sc__field_words(&fld, now, sizeof now);
        sc__field_words(&ds->fields[i], was, sizeof was);
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
    if (rc == SC_OK)
        rc = sc__fields_check_decoder(path, d, &ds->fields[i], cfg, k == 0 && ds->rank == 0, err);
    if (rc == SC_OK && fld.vlen)
        rc = sc__fields_learn_lengths(ds, d, path, i, ds->nsamples, n, &ds->fields[i], err);
    if (rc == SC_OK)
        ds->file_off[k * (uint64_t)names->n + (uint64_t)i] = sc__source_raw_offset(d, &fld, n);
    if (d >= 0)
        H5Dclose(d);
    return rc;
}

/* Layout B without a manifest: every file opened, its fields described and checked. */
static int source_open_files(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    int rc = SC_OK;
    sc__fields_names names;
    ds->file_sizes = malloc(sizeof *ds->file_sizes * ds->nfiles);
    if (!ds->file_sizes)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    for (uint64_t k = 0; rc == SC_OK && k < ds->nfiles; k++) {
        const char *path = ds->files[k];
        hid_t f = sc__fields_open_file(path, MPI_COMM_SELF, 0, err);
        if (f < 0)
            return err ? err->code : SC_EHDF5;
        if (k == 0 && (rc = sc__fields_find(f, path, cfg->fields, &names, err)) == SC_OK) {
            sc__fields_note_skipped(ds, cfg, &names);
            ds->file_off = malloc(sizeof *ds->file_off * ds->nfiles * (uint64_t)names.n);
            rc = ds->file_off ? SC_OK : sc__seterr(err, SC_ENOMEM, "source '%s': no memory",
                                                    ds->path);
        }
        for (int i = 0; rc == SC_OK && i < names.n; i++)
            rc = source_scan_field(ds, cfg, f, k, i, &names, err);
        H5Fclose(f);
        if (rc == SC_OK && __builtin_add_overflow(ds->nsamples, ds->file_sizes[k], &ds->nsamples))
            rc = sc__seterr(err, SC_EOVERFLOW, "source '%s': more than 2^64 samples", ds->path);
    }
    return rc;
}

/*
 * Layout B's shards: runs of whole files of at most `most` samples, and a
 * file of more cut into the fewest pieces of at most `most`, as equal as
 * they come (the first f % p one sample longer), so that a shard, and with
 * it the memory a loader holds per shard and the shuffle window counted in
 * shards, stays near the shard size however the files were written
 * (MLPerf's resnet50 files hold 1,251 samples, 143 MB).  Equal pieces let
 * one shard's buffer serve the next: a cut into five of 234 samples and a
 * rest of 81 left the stream's pool full of short buffers that a full
 * piece could not use, and about one load in seven faulted fresh memory
 * in, every epoch.  Pieces ignore the files' chunking: a compressed chunk
 * that straddles two pieces is decompressed for each.  A file's last
 * piece may be joined by the files after it.  From file k, row r: the
 * samples of the shard that starts there, with *k and *r moved to where
 * the next one starts.
 */
static uint64_t source_group_next(const sc_dataset *ds, uint64_t *k, uint64_t *r,
                                  uint64_t most)
{
    uint64_t f = ds->file_sizes[*k];
    if (f > most) {
        uint64_t p = f / most + (f % most != 0), base = f / p, rem = f % p;
        uint64_t j = *r < rem * (base + 1) ? *r / (base + 1) : rem + (*r - rem * (base + 1)) / base;
        uint64_t piece = base + (j < rem);
        if (j + 1 < p) { /* a piece of a large file, not its last */
            *r += piece;
            return piece;
        }
    }
    uint64_t n = f - *r;
    for (*r = 0, ++*k; !ds->files_alone && *k < ds->nfiles && ds->file_sizes[*k] <= most - n;
         ++*k)
        n += ds->file_sizes[*k];
    return n;
}

/*
 * SC_BAD_SAMPLE=skip replaces a sample that does not decode by another of
 * its shard, and the open refuses a shard of one sample.  auto's size is
 * raised a step at a time (layout A: a chunk's rows) to the first that
 * leaves none: layout A's last shard where N % size is 1, layout B's file
 * of one sample that joins no other (the 521st of 521 in pairs, or one
 * before a file of three).  After SOURCE_SINGLE_STEPS steps it doubles
 * instead (a file of one before files of 70 joins one only at 71), as
 * often again; where none is found the open's check names the shard.  A
 * size is tried in one pass over the files.
 */
#define SOURCE_SINGLE_STEPS 32

static int source_has_single(const sc_dataset *ds, uint64_t most)
{
    if (ds->layout == 'A')
        return most == 1 || (most < ds->nsamples && ds->nsamples % most == 1);
    for (uint64_t k = 0, r = 0; k < ds->nfiles;)
        if (source_group_next(ds, &k, &r, most) == 1)
            return 1;
    return 0;
}

static uint64_t source_without_singles(const sc_dataset *ds, uint64_t size, uint64_t step)
{
    for (uint64_t t = 0, m = size; t < 2 * SOURCE_SINGLE_STEPS && m <= UINT32_MAX; t++) {
        if (ds->layout == 'A' && m >= ds->nsamples)
            return ds->nsamples > 1 ? ds->nsamples : size;
        if (!source_has_single(ds, m))
            return m;
        m = t + 1 < SOURCE_SINGLE_STEPS ? m + step : 2 * m;
    }
    return size;
}

static uint64_t source_count_groups(const sc_dataset *ds, uint64_t most)
{
    uint64_t n = 0;
    for (uint64_t k = 0, r = 0; k < ds->nfiles; source_group_next(ds, &k, &r, most))
        n++;
    return n;
}

static int source_group_files(sc_dataset *ds, uint64_t most, sc_error *err)
{
    ds->nshards = source_count_groups(ds, most);
    if (ds->nshards > UINT32_MAX) /* as layout A's: plans number shards in 32 bits */
        return sc__seterr(err, SC_EOVERFLOW, "source '%s': %llu shards of %llu samples, more "
                          "than 2^32 - 1: raise SC_SHARD_SIZE", ds->path,
                          (unsigned long long)ds->nshards, (unsigned long long)most);
    ds->shard_sizes = malloc(sizeof *ds->shard_sizes * ds->nshards);
    ds->file_first = malloc(sizeof *ds->file_first * ds->nshards);
    ds->file_row = malloc(sizeof *ds->file_row * ds->nshards);
    if (!ds->shard_sizes || !ds->file_first || !ds->file_row)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    uint64_t top = 0;
    for (uint64_t s = 0, k = 0, r = 0; s < ds->nshards; s++) {
        ds->file_first[s] = k;
        ds->file_row[s] = r;
        ds->shard_sizes[s] = source_group_next(ds, &k, &r, most);
        top = ds->shard_sizes[s] > top ? ds->shard_sizes[s] : top;
    }
    ds->shard_size = ds->files_alone ? top : most; /* alone: the largest file or piece */
    return SC_OK;
}

/*
 * The shard size, where it decides which samples a shard holds: a size
 * that groups files (as before files were cut), or, marked apart, one that
 * cuts some (a cut layout can have as many shards as files, and the same
 * count under two sizes: the count alone would let one's cache entries
 * pass for the other's), and whether files alone are never grouped.
 * Where every file is a shard, no size.
 */
static void source_fingerprint_shards(const sc_dataset *ds, uint64_t most, sc__fingerprint *fp)
{
    int cuts = 0;
    for (uint64_t k = 0; k < ds->nfiles && !cuts; k++)
        cuts = ds->file_sizes[k] > most;
    if (cuts) {
        sc__fingerprint_str(fp, "files cut into equal shards of at most");
        sc__fingerprint_u64(fp, most);
        if (ds->files_alone) /* the pieces alike, the runs after them not */
            sc__fingerprint_str(fp, "and never grouped");
    } else if (source_count_groups(ds, most) < ds->nfiles) {
        sc__fingerprint_u64(fp, most);
    }
}

/*
 * Layout B's scan: the files listed and stat()ed once (their bytes are the
 * fingerprint's, and a directory's manifest key), then their fields and
 * sample counts from the directory's saved manifest when it fits, else
 * from the files themselves.
 */
static int source_open_layout_b(sc_dataset *ds, const sc_config *cfg, int is_dir,
                                sc__fingerprint *fp, sc_error *err)
{
    int rc;
    if ((rc = source_list_files(ds, is_dir, err)) != SC_OK)
        return rc;
    if (ds->nfiles > UINT32_MAX)
        return sc__seterr(err, SC_EOVERFLOW, "source '%s': too many files", ds->path);
    if (cfg->shard_size == 0)
        return sc__seterr(err, SC_EINVAL, "source '%s': SC_SHARD_SIZE is 0", ds->path);
    sc__fingerprint files = {0};
    rc = source_put_files(ds, &files, err);
    if (rc == SC_OK && is_dir) {
        ds->manifest_key = sc__scan_key(files.p, files.len);
        snprintf(ds->asked, sizeof ds->asked, "%s", cfg->fields);
        rc = sc__scan_reuse(ds, cfg, err);
    }
    if (rc == SC_OK && !ds->from_manifest)
        rc = source_open_files(ds, cfg, err);
    if (rc == SC_OK)
        sc__fingerprint_put(fp, files.p, files.len);
    if (rc == SC_OK)
        source_fingerprint_shards(ds, source_shard_size(ds, cfg), fp);
    free(files.p);
    return rc;
}

/* ---- the steps ------------------------------------------------------------------ */

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
    ds->log_level = cfg->log_level;
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
    sc__fingerprint fp = {0};
    int rc = SC_OK;
    sc__h5_lock();
    ds->layout = !ds->is_dir && H5Fis_hdf5(ds->path) > 0 ? 'A' : 'B';
    H5Eclear2(H5E_DEFAULT);
    sc__fingerprint_put(&fp, &ds->layout, 1);
    /* Layout B: rank 0 alone scans the files, then tells everyone. */
    int scans = !sc__dataset_shared(ds) || ds->rank == 0;
    if (ds->layout == 'A')
        rc = source_open_layout_a(ds, cfg, &fp, err);
    else if (scans)
        rc = source_open_layout_b(ds, cfg, ds->is_dir, &fp, err);
    sc__h5_unlock();

    if (rc == SC_OK && scans) {
        for (int i = 0; i < ds->nfields; i++)
            sc__fingerprint_field(&fp, &ds->fields[i]);
        if (fp.oom)
            rc = sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
        ds->fingerprint = sc__fingerprint_hash(&fp);
    }
    free(fp.p);
    return rc;
}

int sc__dataset_shared(const sc_dataset *ds)
{
    return ds->layout == 'B' && ds->world > 1;
}

/* Layout B's manifest, from rank 0 to all (scan.c's bytes; mpi/node.c sends them). */
int sc__dataset_manifest(const sc_dataset *ds, int rc, const char *msg, void **buf,
                         size_t *len)
{
    return sc__scan_encode(ds, rc, msg, buf, len);
}

int sc__dataset_take_manifest(sc_dataset *ds, const void *buf, size_t len, sc_error *err)
{
    return sc__scan_decode(ds, buf, len, err);
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
            "%llu shards of up to %s%s%s; the rule is in docs/api.md)",
            ds->path, (unsigned long long)ds->shard_size, (unsigned long long)ds->nsamples,
            source_bytes_words(b, each, sizeof each), (unsigned long long)ds->nshards,
            source_bytes_words(b * ds->shard_size, shard, sizeof shard), chunks,
            ds->files_alone ? ", no shard spans files: samples of 1 MiB or more" : "");
}

/*
 * The samples' fingerprint (dataset_impl.h): layout A's file and stamp,
 * layout B's files as named below the source, with their stamps and
 * sample counts, on every rank alike (B's come from rank 0's scan).
 */
static int source_samples_fp(sc_dataset *ds, sc_error *err)
{
    sc__fingerprint fp = {0};
    int rc = SC_OK;
    size_t base = strlen(ds->path);
    sc__fingerprint_put(&fp, &ds->layout, 1);
    sc__fingerprint_u64(&fp, ds->nsamples);
    if (ds->layout == 'A')
        rc = sc__fingerprint_file(&fp, ds->path, NULL, err);
    for (uint64_t k = 0; ds->layout == 'B' && k < ds->nfiles; k++) {
        const char *f = ds->files[k];
        sc__fingerprint_str(&fp, ds->is_dir && !strncmp(f, ds->path, base) ? f + base : f);
        for (int i = 0; i < STAMP; i++)
            sc__fingerprint_u64(&fp, ds->file_stamp[STAMP * k + i]);
        sc__fingerprint_u64(&fp, ds->file_sizes[k]);
    }
    if (rc == SC_OK && fp.oom)
        rc = sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    ds->samples_fp = sc__fingerprint_hash(&fp);
    free(fp.p);
    return rc;
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
    rc = source_samples_fp(ds, err);
    if (rc == SC_OK)
        rc = sc__fields_setup(ds, cfg, err);
    if (rc == SC_OK)
        ds->sample_bytes = source_mean_bytes(ds, ds->fields, ds->nfields);
    return rc;
}

uint64_t sc__dataset_view(const sc_dataset *ds)
{
    if (ds->layout == 'A' || !ds->nfiles)
        return ds->fingerprint;
    uint64_t stamp[3][STAMP] = {{0}}, pick[3] = {0, ds->nfiles / 2, ds->nfiles - 1};
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (stat(ds->files[pick[i]], &st) == 0)
            sc__fingerprint_stamp(&st, stamp[i]);
    }
    return sc__xxh64(stamp, sizeof stamp, 0);
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
    sc__scan_free(ds);
    free(ds->shard_sizes);
    free(ds->shard_first);
    free(ds->file_first);
    free(ds->file_row);
    sc__aug_free(ds->aug);
    sc__decode_free(ds->decode);
    sc__skiplist_free(&ds->skip);
    free(ds);
    return SC_OK;
}

/* ---- what the open found ------------------------------------------------------- */

int sc_dataset_get_info(const sc_dataset *ds, sc_dataset_info *out)
{
    if (!ds || !out)
        return SC_EINVAL;
    *out = (sc_dataset_info){ds->layout, ds->nsamples, ds->nshards, ds->shard_size,
                             ds->sample_bytes, ds->nfields, ds->fingerprint,
                             (uint64_t)ds->from_manifest, ds->layout == 'B' ? ds->nfiles : 1,
                             ds->samples_fp, {0}};
    return SC_OK;
}

int sc_dataset_field(const sc_dataset *ds, int i, sc_field_info *out)
{
    if (!ds || !out || i < 0 || i >= ds->nfields)
        return SC_EINVAL;
    sc__field_info(&ds->fields[i], out);
    return SC_OK;
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

int sc__dataset_plan_params(const sc_dataset *ds, const sc_config *cfg,
                           uint32_t world_size, uint64_t epoch,
                           sc_plan_params *out)
{
    if (!ds || !cfg || !out)
        return SC_EINVAL;
    *out = sc__config_plan_params(cfg, ds->shard_sizes, ds->nshards, ds->fingerprint,
                                  world_size, epoch);
    return SC_OK;
}
