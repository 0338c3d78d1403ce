/*
 * fields.c - a source's fields: found, described, checked, made final (see fields.h).
 */
#include "fields.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chunks.h"
#include "decode.h"
#include "h5.h"
#include "hash.h"
#include "invariant.h"
#include "log.h"
#include "vec.h"
#include "vlen.h"

/* ---- found and described ------------------------------------------------------- */

/* A variable-length sequence type's element dtype: numbers only (h5py's vlen_dtype). */
static sc__dtype fields_vlen_dtype(hid_t t)
{
    hid_t base = H5Tget_super(t);
    sc__dtype dt = base >= 0 && !sc__h5_string_width(base) && H5Tis_variable_str(t) <= 0
                       ? sc__h5_dtype(base)
                       : SC__DT_INVALID;
    if (base >= 0)
        H5Tclose(base);
    return dt;
}

/* Names a dataset or link "every field" leaves out in l->skipped, with why. */
static void fields_note(sc__fields_names *l, const char *name, const char *why)
{
    size_t used = strlen(l->skipped);
    snprintf(l->skipped + used, sizeof l->skipped - used, "%s'/%s' (%s)",
             l->nskipped++ ? ", " : "", name, why);
}

/*
 * A dataset of a type shardcache cannot carry, which "every field" leaves
 * out.  A scalar is not left out: it is a one-sample file's label as often
 * as a file's metadata, and which of the two only the user knows.
 */
static int fields_skips(hid_t group, const char *name, sc__fields_names *l)
{
    hid_t d = H5Dopen2(group, name, H5P_DEFAULT);
    hid_t t = d < 0 ? H5I_INVALID_HID : H5Dget_type(d);
    int skip = t >= 0 && sc__h5_dtype(t) == SC__DT_INVALID &&
               (H5Tget_class(t) != H5T_VLEN || fields_vlen_dtype(t) == SC__DT_INVALID);
    if (skip) {
        char words[160];
        sc__h5_type_words(t, words, sizeof words - 16);
        strcat(words, ", not carried");
        fields_note(l, name, words);
    }
    if (t >= 0)
        H5Tclose(t);
    if (d >= 0)
        H5Dclose(d);
    return skip;
}

/* Written against HDF5 1.10's API (Debian 12), which 1.12+ still provides. */
static herr_t fields_collect(hid_t group, const char *name, const H5L_info_t *info,
                                     void *data)
{
    sc__fields_names *l = data;
    H5O_info_t oi;
    if (H5Oget_info_by_name2(group, name, &oi, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
        if (info->type == H5L_TYPE_HARD) /* the file's own object: a real error */
            return -1;
        H5Eclear2(H5E_DEFAULT);
        fields_note(l, name, "a link that leads nowhere");
        return 0;
    }
    if (oi.type == H5O_TYPE_GROUP) { /* not searched: its datasets are named by path */
        char why[320];
        snprintf(why, sizeof why, "a group: name its datasets by path, /%.256s/...", name);
        fields_note(l, name, why);
        return 0;
    }
    if (oi.type != H5O_TYPE_DATASET || fields_skips(group, name, l))
        return 0;
    if (l->n == SC_MAX_FIELDS) {
        l->too_many = 1;
        return 1;
    }
    snprintf(l->names[l->n++], 256, "/%s", name);
    return 0;
}

/*
 * Blanks are dropped because "images, labels" is a habit from Python's
 * lists; a last name left empty ("x," or "x, ") is no name.
 */
int sc__fields_parse(const char *wanted, sc__fields_names *l, sc_error *err)
{
    memset(l, 0, sizeof *l);
    for (const char *p = wanted; *p;) {
        size_t len = strcspn(p, ",");
        const char *w = p + strspn(p, " \t");
        size_t wlen = len < (size_t)(w - p) ? 0 : len - (size_t)(w - p);
        while (wlen > 0 && (w[wlen - 1] == ' ' || w[wlen - 1] == '\t'))
            wlen--;
        if (wlen == 0 && !p[len] && l->n > 0)
            break;
        if (wlen == 0 || wlen >= 255 || l->n == SC_MAX_FIELDS)
            return sc__seterr(err, SC_EINVAL,
                              "SC_FIELDS='%s': empty, too long or more than "
                              "%d names", wanted, SC_MAX_FIELDS);
        snprintf(l->names[l->n++], 256, "%s%.*s", *w == '/' ? "" : "/", (int)wlen, w);
        p += len + (p[len] == ',');
    }
    return SC_OK;
}

/* Whether `name` in file is a link (soft or external): a dataset's other name, not its own. */
static int fields_is_link(hid_t file, const char *name)
{
    H5L_info_t li;
    return H5Lget_info(file, name, &li, H5P_DEFAULT) >= 0 && li.type != H5L_TYPE_HARD;
}

/*
 * Object `name`'s identity: the real path of the file it lies in (an
 * external link's file is opened anew at each lookup, under a new fileno)
 * hashed, and its address there.  0 where it cannot be opened.
 */
static int fields_identity(hid_t file, const char *name, uint64_t id[2])
{
    hid_t o = H5Oopen(file, name, H5P_DEFAULT);
    H5O_info_t oi;
    char in[SC_PATH_MAX], real[PATH_MAX];
    int ok = o >= 0 && H5Oget_info2(o, &oi, H5O_INFO_BASIC) >= 0 &&
             H5Fget_name(o, in, sizeof in) > 0;
    if (ok) {
        const char *p = realpath(in, real) ? real : in;
        id[0] = sc__xxh64(p, strlen(p), 0);
        id[1] = (uint64_t)oi.addr;
    }
    if (o >= 0)
        H5Oclose(o);
    return ok;
}

/*
 * Two names of one dataset ("x" and "//x", or "images" and a link to it)
 * would carry one field twice a batch: refused where SC_FIELDS names both;
 * in "every field" the link is left out, noted.
 */
static int fields_distinct(hid_t file, const char *path, const char *wanted,
                           sc__fields_names *l, sc_error *err)
{
    uint64_t id[SC_MAX_FIELDS][2];
    int known[SC_MAX_FIELDS];
    for (int i = 0; i < l->n; i++) {
        known[i] = fields_identity(file, l->names[i], id[i]);
        for (int j = 0; j < i && known[i]; j++) {
            if (!known[j] || id[j][0] != id[i][0] || id[j][1] != id[i][1])
                continue;
            if (wanted)
                return sc__seterr(err, SC_EINVAL, "SC_FIELDS='%s' names one dataset of '%s' "
                                  "twice, as '%s' and '%s'", wanted, path, l->names[j],
                                  l->names[i]);
            int drop = fields_is_link(file, l->names[i]) || !fields_is_link(file, l->names[j])
                           ? i : j, keep = i + j - drop;
            char why[320];
            snprintf(why, sizeof why, "another name of '%.256s'", l->names[keep]);
            fields_note(l, l->names[drop] + 1, why);
            int rest = l->n - drop - 1;
            memmove(l->names[drop], l->names[drop + 1], (size_t)rest * 256);
            memmove(id[drop], id[drop + 1], (size_t)rest * sizeof id[0]);
            memmove(&known[drop], &known[drop + 1], (size_t)rest * sizeof known[0]);
            l->n--, i--;
            break;
        }
    }
    H5Eclear2(H5E_DEFAULT);
    return SC_OK;
}

/* The fields to load: the configured list, or every dataset in "/". */
int sc__fields_find(hid_t file, const char *path, const char *wanted,
                    sc__fields_names *l, sc_error *err)
{
    if (wanted && *wanted) {
        int rc = sc__fields_parse(wanted, l, err);
        return rc == SC_OK ? fields_distinct(file, path, wanted, l, err) : rc;
    }
    memset(l, 0, sizeof *l);
    hsize_t idx = 0;
    if (H5Literate(file, H5_INDEX_NAME, H5_ITER_INC, &idx, fields_collect, l) < 0)
        return sc__h5_err(err, SC_EHDF5, "source '%s': cannot list its datasets", path);
    if (l->too_many)
        return sc__seterr(err, SC_EINVAL,
                          "source '%s' has more than %d datasets; choose the "
                          "fields with SC_FIELDS",
                          path, SC_MAX_FIELDS);
    if (l->n == 0)
        return sc__seterr(err, SC_EINVAL, "source '%s' has no field shardcache can carry in '/'%s%s",
                          path, l->nskipped ? "; left out: " : "", l->skipped);
    return fields_distinct(file, path, NULL, l, err);
}

/*
 * Field f's sample shape from its dataspace s of nd dimensions (a string's
 * width the last), refused where it cannot be one; *n gets its samples.
 */
static int fields_shape(hid_t s, const char *path, const char *name, int nd, size_t width,
                        sc__field *f, uint64_t *n, sc_error *err)
{
    int axis = !f->no_axis; /* the sample axis: 1 dimension or none */
    hsize_t dims[H5S_MAX_RANK];
    if (f->vlen && nd != axis)
        return sc__seterr(err, SC_EINVAL,
                          "source '%s': field '%s' holds variable-length sequences in %d "
                          "dimensions; such a field needs %s", path, name, nd,
                          axis ? "exactly one, the sample axis" : "none (one sample a file)");
    if (nd == 0 && axis) /* h5py's f["version"] = 3, or a one-sample file's label */
        return sc__seterr(err, SC_EINVAL,
                          "source '%s': field '%s' is a scalar (0 dimensions), not a value a "
                          "sample: leave it out (SC_FIELDS names the fields to load), or, "
                          "where each file of a directory is one sample, set "
                          "SC_SAMPLE_AXIS=none", path, name);
    if (nd < axis || nd - axis + (width > 0) > SC_MAX_DIMS)
        return sc__seterr(err, SC_EINVAL,
                          "source '%s': field '%s' has %d dimensions%s; a field needs "
                          "%d to %d (%s)",
                          path, name, nd, width ? " and a string's width" : "", axis,
                          SC_MAX_DIMS + axis,
                          axis ? "samples first; SC_SAMPLE_AXIS=none reads a file as one sample"
                               : "one sample, SC_SAMPLE_AXIS=none");
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
        return sc__seterr(err, SC_EINVAL, "source '%s': field '%s' is empty (0 samples)",
                          path, name);
    if (f->sample_bytes == 0 && !f->vlen)
        return sc__seterr(err, SC_EINVAL, "source '%s': field '%s' has a zero-sized "
                          "sample shape", path, name);
    return SC_OK;
}

/*
 * Describes one field of an open file; *n gets its first dimension.  The
 * caller holds the HDF5 lock.
 */
int sc__fields_describe(hid_t file, const char *path, const char *name, int no_axis,
                           sc__field *f, uint64_t *n, hid_t *dset_out, sc_error *err)
{
    SC__ASSERT(sc__h5_held());
    hid_t d = H5I_INVALID_HID, t = H5I_INVALID_HID, s = H5I_INVALID_HID;
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
    f->dtype = t < 0 ? SC__DT_INVALID : sc__h5_dtype(t);
    if (t >= 0 && f->dtype == SC__DT_INVALID && H5Tget_class(t) == H5T_VLEN)
        f->dtype = fields_vlen_dtype(t), f->vlen = 1;
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
    } else {
        rc = fields_shape(s, path, name, nd, width, f, n, err);
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

hid_t sc__fields_open_file(const char *path, MPI_Comm comm, int parallel, sc_error *err)
{
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (parallel)
        H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL);
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    if (f < 0) /* before H5Pclose, which clears HDF5's error stack ("truncated file: ...") */
        sc__h5_err(err, SC_EHDF5, "source '%s' cannot be opened as HDF5", path);
    H5Pclose(fapl);
    return f;
}

/* Says once (rank 0) which datasets and groups "every field" left out, and why. */
void sc__fields_note_skipped(const sc_dataset *ds, const sc_config *cfg, const sc__fields_names *l)
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
int sc__fields_check_decoder(const char *path, hid_t d, const sc__field *f,
                                const sc_config *cfg, int notes, sc_error *err)
{
    SC__ASSERT(sc__h5_held());
    sc__chunking c;
    if (sc__chunks_direct(d, f, &c))
        return SC_OK;
    sc__chunks_missing(d, &c); /* for any field: one sample a file and vlen ones too */
    if (!c.why && !c.missing)
        return SC_OK;
    const char *why = c.why ? c.why : f->vlen ? "a variable-length field, read through HDF5"
                                              : "one sample a file, read through HDF5";
    /*
     * Refused at open even when the filter is optional (h5py declares LZF
     * so): every chunk written through it would fail mid-epoch, which is
     * worse than not starting.
     */
    if (c.missing == SC__FILTER_LZF && c.why)
        return sc__seterr(err, SC_ENOTSUP, "source '%s': field '%s' is compressed with h5py's "
                          "LZF, which shardcache decodes only in chunks of whole samples in this "
                          "machine's byte order (%s) and this HDF5 library cannot load: rewrite "
                          "it with gzip, or with chunks of whole samples", path, f->name, c.why);
    if (c.missing)
        return sc__seterr(err, SC_ENOTSUP, "source '%s': field '%s' needs HDF5 filter %u (%s), "
                          "which this HDF5 library cannot load, and shardcache does not decode "
                          "it here (%s): put the filter's plugin in HDF5_PLUGIN_PATH, or rewrite "
                          "the field with gzip%s", path, f->name, c.missing,
                          sc__filter_name(c.missing), why,
                          c.missing == SC__FILTER_LZF ? "" : " or lzf");
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
 * Layout B from a saved scan: the decoder's check and notes (rank 0) for
 * the first file; the scan that saved it checked every file's filters.
 * The caller holds the HDF5 lock.
 */
int sc__fields_check_file(hid_t f, const char *path, const sc_dataset *ds,
                             const sc_config *cfg, sc_error *err)
{
    SC__ASSERT(sc__h5_held());
    int rc = SC_OK;
    for (int i = 0; rc == SC_OK && i < ds->nfields; i++) {
        hid_t d = H5Dopen2(f, ds->fields[i].name, H5P_DEFAULT);
        if (d >= 0) {
            rc = sc__fields_check_decoder(path, d, &ds->fields[i], cfg, ds->rank == 0, err);
            H5Dclose(d);
        }
    }
    H5Eclear2(H5E_DEFAULT);
    return rc;
}

/*
 * Variable-length field i's n samples from sample `at` on (a file's, in
 * layout B): their lengths into its offsets, grown to hold them, and the
 * largest into `into`, the dataset's description of it.  The lock is held.
 */
int sc__fields_learn_lengths(sc_dataset *ds, hid_t d, const char *path, int i, uint64_t at,
                                uint64_t n, sc__field *into, sc_error *err)
{
    if (at > UINT64_MAX / 16 || n > UINT64_MAX / 16 - at) /* a forged extent: no wrap below */
        return sc__seterr(err, SC_EFORMAT, "source '%s': file '%s' says field '%s' holds %llu "
                          "samples", ds->path, path, into->name, (unsigned long long)n);
    uint64_t *off = sc__vec_grow(ds->vlen_off[i], &ds->vlen_room[i], at + n + 1, sizeof *off);
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

/* ---- made final, and delivered -------------------------------------------------- */

/* The transform's outputs, as set in it or declared by its outputs() from the source's. */
static int fields_declared(const sc_dataset *ds, const sc_transform *tf, sc_field_info *out,
                           int *nout, sc_error *err)
{
    if (!tf->outputs) {
        *nout = tf->nout;
        if (tf->nout > 0 && tf->nout <= SC_MAX_FIELDS)
            memcpy(out, tf->out, (size_t)tf->nout * sizeof *out);
        return SC_OK;
    }
    sc_field_info in[SC_MAX_FIELDS];
    for (int i = 0; i < ds->nfields; i++)
        sc__field_info(&ds->fields[i], &in[i]);
    memset(out, 0, SC_MAX_FIELDS * sizeof *out);
    char msg[SC_ERROR_MSG_MAX] = "";
    *nout = 0;
    if (tf->outputs(tf->arg, in, ds->nfields, out, nout, msg, sizeof msg) != 0)
        return sc__seterr(err, SC_EINVAL, "source '%s': transform '%s' declares no outputs for "
                          "its fields: %s", ds->path, tf->name, msg[0] ? msg : "(no reason given)");
    return SC_OK;
}

/*
 * With a shard transform, the dataset delivers its declared outputs: they
 * replace fields[] (the source's move to src[]), and the fingerprint, which
 * keys the cache, takes in the transform's name, version and outputs.
 */
static int fields_transform(sc_dataset *ds, const sc_transform *tf, sc_error *err)
{
    if (!tf)
        return SC_OK;
    if (!tf->name || !*tf->name || !tf->version || !*tf->version)
        return sc__seterr(err, SC_EINVAL, "source '%s': a transform needs a name and a version "
                          "(they key the cache)", ds->path);
    if (!tf->shard)
        return SC_OK; /* augmentation only: the cached shards are the source's */
    sc_field_info outs[SC_MAX_FIELDS];
    int nout = 0, rc = fields_declared(ds, tf, outs, &nout, err);
    if (rc != SC_OK)
        return rc;
    if (nout < 1 || nout > SC_MAX_FIELDS)
        return sc__seterr(err, SC_EINVAL, "transform '%s': %d output fields (1 to %d)", tf->name,
                          nout, SC_MAX_FIELDS);
    sc__fingerprint fp = {0};
    sc__fingerprint_u64(&fp, ds->fingerprint);
    sc__fingerprint_str(&fp, tf->name);
    sc__fingerprint_str(&fp, tf->version);
    memcpy(ds->src, ds->fields, sizeof ds->src);
    ds->nsrc = ds->nfields;
    for (int i = 0; i < nout; i++) {
        const sc_field_info *o = &outs[i];
        sc__field *f = &ds->fields[i];
        memset(f, 0, sizeof *f);
        if (strlen(o->name) >= sizeof f->name) {
            free(fp.p);
            return sc__seterr(err, SC_EINVAL, "transform '%s': output field %d's name is %zu "
                              "bytes, more than the %zu a field's name holds",
                              tf->name, i, strlen(o->name), sizeof f->name - 1);
        }
        memcpy(f->name, o->name, strlen(o->name) + 1);
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
        if (o->vlen && tf == sc__decode_once(ds->decode) && ds->src[i].vlen)
            *f = ds->src[i];
        if (!f->sample_bytes && !f->vlen) {
            free(fp.p);
            return sc__seterr(err, SC_EINVAL, "transform '%s': output field '%s' is empty",
                              tf->name, o->name);
        }
        sc__fingerprint_field(&fp, f);
    }
    ds->nfields = nout;
    ds->tf = tf;
    int oom = fp.oom;
    ds->fingerprint = sc__fingerprint_hash(&fp);
    free(fp.p);
    return oom ? sc__seterr(err, SC_ENOMEM, "source '%s': no memory", ds->path) : SC_OK;
}

/* SC_AUGMENT against the delivered fields: those decoded every epoch refuse it. */
static int fields_augment(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    unsigned char epoch[SC_MAX_FIELDS] = {0};
    for (int i = 0; i < ds->nfields; i++)
        epoch[i] = sc__fields_crop(ds, i).width > 0;
    return sc__aug_setup(ds->path, ds->fields, ds->nfields, epoch, cfg, &ds->aug,
                         &ds->aug_field, err);
}

int sc__fields_setup(sc_dataset *ds, const sc_config *cfg, sc_error *err)
{
    int rc = SC_OK;
    if (cfg->skip_list && cfg->skip_list[0]) /* before decode-once, whose cache it keys */
        rc = sc__skiplist_load(cfg->skip_list, ds->samples_fp, ds->nsamples, &ds->skip, err);
    if (rc == SC_OK)
        rc = sc__decode_new(ds->path, ds->fields, ds->nfields, cfg, &ds->skip, &ds->decode, err);
    if (rc == SC_OK)
        rc = fields_transform(ds, sc__fields_shard_tf(ds, cfg), err);
    if (rc == SC_OK)
        rc = fields_augment(ds, cfg, err);
    return rc;
}

const sc_transform *sc__fields_shard_tf(const sc_dataset *ds, const sc_config *cfg)
{
    const sc_transform *once = sc__decode_once(ds->decode);
    return once ? once : cfg->transform;
}

int sc__fields_decodes_once(const sc_dataset *ds)
{
    return sc__decode_once(ds->decode) != NULL;
}

const sc__skiplist *sc__fields_skip(const sc_dataset *ds)
{
    return ds->skip.n ? &ds->skip : NULL;
}

sc__crop sc__fields_crop(const sc_dataset *ds, int i)
{
    /* fields[] are the source's: no transform, or decode-once's (which keeps their order) */
    int own = !ds->tf || !ds->tf->shard || ds->tf == sc__decode_once(ds->decode);
    return own ? sc__decode_epoch(ds->decode, i) : (sc__crop){0};
}

void sc__fields_decoded(const sc_dataset *ds, int i, sc__field *out)
{
    *out = ds->fields[i];
    if (sc__fields_crop(ds, i).width)
        sc__decode_image(ds->decode, &ds->fields[i], out);
}

const sc__aug *sc__fields_aug(const sc_dataset *ds, int i)
{
    return ds->aug && ds->aug_field == i ? ds->aug : NULL;
}

void sc__fields_augmented(const sc_dataset *ds, int i, sc__field *inout)
{
    const sc__aug *a = sc__fields_aug(ds, i);
    if (a)
        sc__aug_output(a, inout);
}
