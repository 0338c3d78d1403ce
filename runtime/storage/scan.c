/*
 * scan.c - a layout-B scan as bytes: sent to the other ranks, saved beside
 * the files, taken back (see scan.h).
 */
#include "scan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fields.h"
#include "formats.h"
#include "h5.h"
#include "hash.h"
#include "log.h"
#include "manifest.h"
#include "vec.h"

#define STAMP SC__STAMP_WORDS /* words of a file's stamp */
#define STAMP_BYTES SC__STAMP_BYTES

/*
 * The saved scan's format: its version (base/formats.h) and this build's
 * size of the field descriptions it holds.
 */
#define SCAN_MANIFEST_FORMAT \
    (((uint64_t)SC__SCAN_VERSION << 32) | sizeof(((sc_dataset *)0)->fields))

uint64_t sc__scan_key(const void *files, size_t len)
{
    return sc__xxh64(files, len, 0);
}

int sc__scan_add_file(sc_dataset *ds, size_t *cap, const char *path, sc_error *err)
{
    char **f = sc__vec_grow(ds->files, cap, ds->nfiles + 1, sizeof *f);
    if (!f)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    ds->files = f;
    if (!(ds->files[ds->nfiles] = strdup(path)))
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path);
    ds->nfiles++;
    return SC_OK;
}

/*
 * Whether a scan made for SC_FIELDS `saved` (its fields f[n]) is what an
 * open asking for `asked` would find: the same words, or names that are
 * those fields in their order ("images" or "/images").
 */
static int scan_same_ask(const char *asked, const char *saved, const sc__field *f, int n)
{
    if (!strcmp(asked, saved))
        return 1;
    sc__fields_names l;
    sc_error ignored;
    if (!*asked || sc__fields_parse(asked, &l, &ignored) != SC_OK || l.n != n)
        return 0;
    for (int i = 0; i < n; i++)
        if (strcmp(l.names[i], f[i].name) != 0)
            return 0;
    return 1;
}

static const char *scan_base(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* ---- the bytes --------------------------------------------------------------- */

/* A successful scan as the manifest carries it, with `fields` for ds's own. */
static void scan_put(sc__fingerprint *m, const sc_dataset *ds, const sc__field *fields, int n)
{
    sc__fingerprint_u64(m, (uint64_t)(int64_t)SC_OK);
    sc__fingerprint_str(m, "");
    sc__fingerprint_u64(m, ds->fingerprint);
    sc__fingerprint_u64(m, ds->nsamples);
    sc__fingerprint_u64(m, (uint64_t)n);
    sc__fingerprint_u64(m, (uint64_t)ds->from_manifest);
    sc__fingerprint_put(m, fields, sizeof ds->fields); /* one build, one ABI */
    sc__fingerprint_u64(m, ds->nfiles);
    for (uint64_t k = 0; k < ds->nfiles; k++) {
        sc__fingerprint_str(m, ds->files[k]);
        sc__fingerprint_u64(m, ds->file_sizes[k]);
        sc__fingerprint_put(m, ds->file_stamp + STAMP * k, STAMP_BYTES);
        sc__fingerprint_put(m, ds->file_off + (uint64_t)n * k, (size_t)n * sizeof *ds->file_off);
    }
    for (int i = 0; i < n; i++)
        if (fields[i].vlen)
            sc__fingerprint_put(m, ds->vlen_off[i], sizeof *ds->vlen_off[i] * (ds->nsamples + 1));
}

/*
 * Layout B's manifest, from rank 0 to all (mpi/node.c sends it): its
 * status (and message), then the fingerprint, the fields, and every file
 * with its sample count, so that a job of R ranks opens each file once at
 * start-up, not R times.
 */
int sc__scan_encode(const sc_dataset *ds, int rc, const char *msg, void **buf, size_t *len)
{
    sc__fingerprint m = {0};
    if (rc == SC_OK) {
        scan_put(&m, ds, ds->fields, ds->nfields);
    } else {
        sc__fingerprint_u64(&m, (uint64_t)(int64_t)rc);
        sc__fingerprint_str(&m, msg ? msg : "");
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
typedef struct scan_cursor {
    const unsigned char *p, *end;
} scan_cursor;

static const unsigned char *scan_take(scan_cursor *c, uint64_t n)
{
    if (!c->p || n > (uint64_t)(c->end - c->p))
        return c->p = NULL;
    c->p += n;
    return c->p - n;
}

/* Whether file k's fields, where its scan found them, lie inside it. */
static int scan_file_holds(const sc_dataset *ds, uint64_t k)
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
static int scan_take_files(sc_dataset *ds, scan_cursor *c, uint64_t nfiles, sc_error *err)
{
    size_t cap = 0;
    uint64_t nf = (uint64_t)ds->nfields, total = 0;
    int rc = SC_OK;
    for (uint64_t k = 0; rc == SC_OK && k < nfiles; k++) {
        const unsigned char *pl = scan_take(c, 8);
        uint64_t plen = pl ? sc__get_u64(pl) : 0;
        const unsigned char *path = pl && plen < SC_PATH_MAX + 512 ? scan_take(c, plen) : NULL;
        const unsigned char *sz = path ? scan_take(c, 8) : NULL;
        const unsigned char *st = sz ? scan_take(c, STAMP_BYTES) : NULL;
        const unsigned char *off = st ? scan_take(c, 8 * nf) : NULL;
        char name[SC_PATH_MAX + 512];
        if (!off)
            return SC_EFORMAT;
        memcpy(name, path, plen);
        name[plen] = '\0';
        ds->file_sizes[k] = sc__get_u64(sz);
        memcpy(ds->file_stamp + STAMP * k, st, STAMP_BYTES); /* one build on every rank: its byte order */
        memcpy(ds->file_off + nf * k, off, 8 * nf);
        if (!ds->file_sizes[k] || __builtin_add_overflow(total, ds->file_sizes[k], &total) ||
            !scan_file_holds(ds, k))
            return SC_EFORMAT;
        rc = sc__scan_add_file(ds, &cap, name, err);
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
static int scan_take_lengths(sc_dataset *ds, scan_cursor *c, int i)
{
    const sc__field *f = &ds->fields[i];
    uint64_t n = ds->nsamples, most = 0, esize = sc__dtype_size(f->dtype);
    const unsigned char *p = n < UINT64_MAX / 8 ? scan_take(c, 8 * (n + 1)) : NULL;
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

int sc__scan_decode(sc_dataset *ds, const void *buf, size_t len, sc_error *err)
{
    scan_cursor c = {buf, (const unsigned char *)buf + len};
    const unsigned char *w = scan_take(&c, 8);
    int status = w ? (int)(int64_t)sc__get_u64(w) : SC_EFORMAT;
    const unsigned char *ml = w ? scan_take(&c, 8) : NULL;
    uint64_t mlen = ml ? sc__get_u64(ml) : 0;
    const unsigned char *msg = ml ? scan_take(&c, mlen) : NULL;
    if (status != SC_OK)
        return sc__seterr(err, status, "rank %d: rank 0 could not open the source: %.*s",
                          ds->rank, msg ? (int)mlen : 0, msg ? (const char *)msg : "");
    const unsigned char *h = scan_take(&c, 32);
    const unsigned char *f = h ? scan_take(&c, sizeof ds->fields) : NULL;
    const unsigned char *nf = f ? scan_take(&c, 8) : NULL;
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
            ds->nfields = sc__field_sane(&ds->fields[i]) ? ds->nfields : 0;
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
        rc = scan_take_files(ds, &c, nfiles, err);
    for (int i = 0; rc == SC_OK && i < ds->nfields; i++)
        rc = ds->fields[i].vlen ? scan_take_lengths(ds, &c, i) : SC_OK;
    if (rc == SC_EFORMAT)
        return sc__seterr(err, rc, "rank %d: the source manifest from rank 0 is malformed",
                          ds->rank);
    return rc == SC_ENOMEM ? sc__seterr(err, rc, "rank %d: no memory for the manifest",
                                        ds->rank)
                           : rc;
}

/* ---- saved beside the files (manifest.c) ------------------------------------------ */

void sc__scan_free(sc_dataset *ds)
{
    for (uint64_t k = 0; k < ds->nfiles; k++)
        free(ds->files[k]);
    free(ds->files);
    free(ds->file_sizes);
    free(ds->file_stamp);
    free(ds->file_off);
    for (int i = 0; i < SC_MAX_FIELDS; i++)
        free(ds->vlen_off[i]);
}

/*
 * A scan parsed from a saved blob, freed: it holds no HDF5 ids, and
 * sc_dataset_close would take the HDF5 lock that its callers hold.
 */
static void scan_free_saved(sc_dataset *s)
{
    if (s)
        sc__scan_free(s);
    free(s);
}

/* A saved blob's scan, and in *ask the SC_FIELDS it was made for; NULL when malformed. */
static sc_dataset *scan_parse_saved(const unsigned char *blob, size_t len, const char **ask)
{
    uint64_t alen = len >= 8 ? sc__get_u64(blob) : UINT64_MAX;
    *ask = alen < len - 8 && !blob[8 + alen] ? (const char *)blob + 8 : NULL;
    sc_dataset *s = *ask ? calloc(1, sizeof *s) : NULL;
    if (s && sc__scan_decode(s, blob + 9 + alen, len - 9 - alen, NULL) != SC_OK) {
        scan_free_saved(s);
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
static const char *scan_take_saved(sc_dataset *ds, const sc_config *cfg,
                                     const unsigned char *blob, size_t len, char *why, size_t n)
{
    const char *ask;
    sc_dataset *s = scan_parse_saved(blob, len, &ask);
    /* Its stamps are the files' own (the key says so, unless the blob was forged). */
    const char *no = s && s->nfiles == ds->nfiles &&
                             !memcmp(s->file_stamp, ds->file_stamp, STAMP_BYTES * ds->nfiles)
                         ? NULL
                         : "it is damaged";
    for (uint64_t k = 0; !no && k < ds->nfiles; k++)
        no = strcmp(scan_base(s->files[k]), scan_base(ds->files[k])) ? "it names other files"
                                                                          : NULL;
    if (!no && s->fields[0].no_axis != (cfg->sample_axis == SC_SAMPLE_AXIS_NONE))
        no = s->fields[0].no_axis ? "it was saved for SC_SAMPLE_AXIS=none"
                                  : "it was saved for SC_SAMPLE_AXIS=first";
    if (!no && !scan_same_ask(cfg->fields, ask, s->fields, s->nfields)) {
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
    scan_free_saved(s);
    return no;
}

/*
 * What changed since a manifest saved for other files was written, in
 * why[n]: the first file added, gone or rewritten (by name; its stamp
 * against the saved one) and how many so differ; or NULL when the
 * names and stamps agree (the directory itself moved: the key holds real
 * paths).
 */
static const char *scan_what_changed(const sc_dataset *ds, const unsigned char *blob,
                                       size_t len, char *why, size_t n)
{
    const char *ask, *first = NULL, *how = NULL;
    sc_dataset *s = scan_parse_saved(blob, len, &ask);
    uint64_t i = 0, j = 0, changed = 0;
    while (s && (i < ds->nfiles || j < s->nfiles)) {
        int c = i == ds->nfiles ? 1 : j == s->nfiles ? -1
                : strcmp(scan_base(ds->files[i]), scan_base(s->files[j]));
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
    scan_free_saved(s);
    return changed ? why : NULL;
}

/*
 * Layout B from a directory: the scan saved beside its files (manifest.c)
 * when it still describes them (their key: ds->manifest_key), and then the
 * decoder's notes for the first file.  One that does not fit is named,
 * with why (rank 0), and the caller scans.  The HDF5 lock is held.
 */
int sc__scan_reuse(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    int rc = SC_OK;
    const char *why = NULL;
    char words[512];
    size_t len = 0;
    int stale = 0;
    unsigned char *blob = sc__manifest_load(ds->path, ds->manifest_key, SCAN_MANIFEST_FORMAT,
                                            &len, &why, &stale);
    if (blob && stale) /* whole and trusted, but saved for other files: which? */
        why = scan_what_changed(ds, blob, len, words, sizeof words) ? words : why;
    else if (blob)
        why = scan_take_saved(ds, cfg, blob, len, words, sizeof words);
    if (why && ds->rank == 0)
        sc__log(cfg->log_level, SC__LOG_WARN, ds->rank,
                "source '%s': not using its saved manifest (%s): opening its %llu files; "
                "`shardcache stage` with this job's settings saves a new one", ds->path, why,
                (unsigned long long)ds->nfiles);
    if (ds->from_manifest) {
        hid_t f = H5Fopen(ds->files[0], H5F_ACC_RDONLY, H5P_DEFAULT);
        if (f >= 0) {
            rc = sc__fields_check_file(f, ds->files[0], ds, cfg, err);
            H5Fclose(f);
        }
        H5Eclear2(H5E_DEFAULT);
    }
    free(blob);
    return rc;
}

/* Saves the scan of a layout-B directory beside its files (see dataset.h). */
int sc__scan_save(const sc_dataset *ds, sc_error *err)
{
    if (!ds)
        return sc__seterr(err, SC_EINVAL, "sc__scan_save: NULL dataset");
    if (ds->layout != 'B' || !ds->is_dir)
        return sc__seterr(err, SC_EINVAL, "source '%s': only a directory of files (layout B) "
                          "has a manifest", ds->path);
    if (!ds->manifest_key)
        return sc__seterr(err, SC_EINVAL, "source '%s': rank %d did not scan its files: rank 0 "
                          "saves their manifest", ds->path, ds->rank);
    /* The SC_FIELDS asked for, then the scan: the source's own fields, not a transform's. */
    sc__fingerprint b = {0};
    int tf = ds->tf && ds->tf->shard;
    sc__fingerprint_u64(&b, strlen(ds->asked));
    sc__fingerprint_put(&b, ds->asked, strlen(ds->asked) + 1);
    scan_put(&b, ds, tf ? ds->src : ds->fields, tf ? ds->nsrc : ds->nfields);
    /* Under the key of the files as scanned, not as they are now: one rewritten
       since the open must not be vouched for by what the open found. */
    int rc = b.oom ? sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path)
                   : sc__manifest_store(ds->path, ds->manifest_key, SCAN_MANIFEST_FORMAT, b.p,
                                        b.len, err);
    free(b.p);
    return rc;
}
