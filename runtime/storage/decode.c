/*
 * decode.c - SC_DECODE: which fields are decoded, and when (see decode.h).
 */
#include "decode.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "hash.h"
#include "vlen.h"

#define DECODE_NAME "shardcache-decode-once"

/* SC_DECODE for one open source: made at its open, read-only after. */
struct sc__decode {
    unsigned char mode[SC_MAX_FIELDS]; /* per source field, SC__DECODE_* */
    uint32_t size;                     /* the decoded images' side */
    int channels;                      /* and planes: 1 or 3 */
    int exif;                          /* 1: turned upright by their EXIF orientation */
    int n;                             /* the source's fields, as scanned */
    sc__field src[SC_MAX_FIELDS];
    const char *path;                  /* the source's, for messages: the dataset's */
    sc_transform tf;                   /* decode-once's; tf.shard NULL: none decoded once */
    const sc__skiplist *skip;          /* samples decode-once leaves undecoded; NULL: none */
    char version[64];
};

/* One item of the list: its field (empty: every other one) and its decoder, or NULL. */
static const char *decode_item(const char *item, size_t len, char *field, size_t n, int *mode)
{
    const char *eq = memchr(item, '=', len);
    size_t flen = eq ? (size_t)(eq - item) : 0;
    const char *dec = eq ? eq + 1 : item;
    size_t dlen = len - (size_t)(dec - item);
    snprintf(field, n, "%.*s", (int)flen, item);
    *mode = dlen == 4 && !memcmp(dec, "jpeg", 4)        ? SC__DECODE_EPOCH
            : dlen == 9 && !memcmp(dec, "jpeg-once", 9) ? SC__DECODE_ONCE
                                                        : SC__DECODE_NONE;
    return *mode == SC__DECODE_NONE ? dec : NULL;
}

/* Source field i's name matches `field` ("/x" and "x" alike). */
static int decode_names(const sc__field *f, const char *field)
{
    return sc__field_named(f->name, field, strlen(field));
}

static int decode_takes(const sc__field *f)
{
    return f->vlen && f->dtype == SC__DT_U8;
}

/* One item applied to the source fields: named, or every variable-length uint8 one left. */
static int decode_apply(sc__decode *d, const char *field, int mode, sc_error *err)
{
    int hit = 0;
    for (int i = 0; i < d->n; i++) {
        const sc__field *f = &d->src[i];
        if (field[0] ? !decode_names(f, field) : !decode_takes(f) || d->mode[i])
            continue;
        if (d->mode[i])
            return sc__seterr(err, SC_EINVAL, "source '%s': SC_DECODE names field '%s' twice",
                              d->path, f->name);
        if (!decode_takes(f))
            return sc__seterr(err, SC_EINVAL, "source '%s': SC_DECODE names field '%s', which "
                              "holds %s %s samples; a decoder takes variable-length uint8 "
                              "fields (encoded bytes, h5py's vlen_dtype(uint8))", d->path,
                              f->name, f->vlen ? "variable-length" : "fixed-shape",
                              sc__dtype_name(f->dtype));
        d->mode[i] = (unsigned char)mode;
        hit = 1;
    }
    for (int i = 0; !hit && !field[0] && i < d->n; i++)
        hit = d->mode[i] != 0; /* a bare one with every field named: nothing left */
    if (!hit)
        return sc__seterr(err, SC_EINVAL, "source '%s': SC_DECODE%s%s%s: %s", d->path,
                          field[0] ? " names field '" : "", field, field[0] ? "'" : "",
                          field[0] ? "the source has no such field (SC_FIELDS chooses them)"
                                   : "the source has no variable-length uint8 field");
    return SC_OK;
}

/* The list's named items first, then its bare ones (for every field not named). */
static int decode_parse(sc__decode *d, const char *spec, sc_error *err)
{
    int rc = SC_OK;
    for (int bare = 0; bare < 2; bare++)
        for (const char *p = spec; rc == SC_OK && *p;) {
            size_t len = strcspn(p, ",");
            char field[256];
            int mode;
            const char *bad = decode_item(p, len, field, sizeof field, &mode);
            if (!bad && !field[0] && p[0] == '=')
                rc = sc__seterr(err, SC_EINVAL, "SC_DECODE='%s': '%.*s' names no field", spec,
                                (int)len, p);
            else if (bad)
                rc = sc__seterr(err, SC_EINVAL, "SC_DECODE='%s': unknown decoder '%.*s' (jpeg: "
                                "every epoch; jpeg-once: once, into the cache)", spec,
                                (int)(len - (size_t)(bad - p)), bad);
            else if ((field[0] == 0) == bare)
                rc = decode_apply(d, field, mode, err);
            p += len + (p[len] == ',');
        }
    return rc;
}

/* The centre square, resized: what a decode-once field caches. */
static sc__crop decode_centre(const sc__decode *d)
{
    return (sc__crop){d->size, d->size, {1.0, 1.0}, {1.0, 1.0}, 0, d->channels, d->exif};
}

/* Decode-once's shard transform: decoded fields into images, every other one as it is
   (a variable-length one as its blob: the cache keeps its offsets and values). */
static int decode_shard(void *arg, uint64_t shard, uint64_t first, uint64_t n,
                        const void *const *in, void *const *out, char *msg, size_t msglen)
{
    const sc__decode *d = arg;
    sc__crop crop = decode_centre(d);
    uint64_t image = sc__crop_bytes(&crop);
    sc_error e = SC_ERROR_INIT;
    sc__image *j = NULL;
    int rc = sc__image_new(&j, &e);
    (void)shard;
    for (int i = 0; rc == SC_OK && i < d->n; i++) {
        const unsigned char *blob = in[i];
        if (d->mode[i] != SC__DECODE_ONCE) {
            memcpy(out[i], blob, d->src[i].vlen ? sc__vlen_blob_bytes(blob, n)
                                                 : n * d->src[i].sample_bytes);
            continue;
        }
        for (uint64_t k = 0; rc == SC_OK && k < n; k++) {
            uint64_t at = sc__vlen_off(blob, k), len = sc__vlen_off(blob, k + 1) - at;
            if (sc__skiplist_find(d->skip, first + k) >= 0) { /* never delivered */
                memset((unsigned char *)out[i] + k * image, 0, image);
                continue;
            }
            rc = sc__image_decode_crop(j, sc__vlen_values(blob, n) + at, len, &crop, 0,
                                       d->channels,
                                      (unsigned char *)out[i] + k * image, &e);
            if (rc != SC_OK)
                snprintf(msg, msglen, "sample %llu: field '%s' (%llu bytes): %s (`shardcache "
                         "scan --decode` lists every bad sample for SC_SKIP_LIST)",
                         (unsigned long long)(first + k), d->src[i].name,
                         (unsigned long long)len, e.msg);
        }
    }
    if (rc != SC_OK && !msg[0])
        snprintf(msg, msglen, "%s", e.msg);
    sc__image_free(j);
    return rc != SC_OK;
}

/* Mirrors one CHW uint8 image of `planes` planes left to right. */
static void decode_mirror(unsigned char *img, uint32_t side, int planes)
{
    for (uint64_t row = 0; row < (uint64_t)planes * side; row++)
        for (uint32_t x = 0, y = side - 1; x < y; x++, y--) {
            unsigned char *p = img + row * side, t = p[x];
            p[x] = p[y];
            p[y] = t;
        }
}

/* Decode-once's augmentation: each decoded image flipped on one bit of its seed. */
static int decode_flip(void *arg, uint64_t epoch, uint64_t sample, uint64_t seed,
                       void *const *fields, char *msg, size_t msglen)
{
    const sc__decode *d = arg;
    (void)epoch, (void)sample, (void)msg, (void)msglen;
    for (int i = 0; i < d->n; i++)
        if (d->mode[i] == SC__DECODE_ONCE && (seed >> 63))
            decode_mirror(fields[i], d->size, d->channels);
    return 0;
}

void sc__decode_image(const sc__decode *d, const sc__field *f, sc__field *out)
{
    sc__crop c = decode_centre(d);
    *out = (sc__field){.dtype = SC__DT_U8, .ndims = 3,
                       .dims = {(uint64_t)sc__crop_planes(&c), c.height, c.width},
                       .sample_bytes = sc__crop_bytes(&c)};
    snprintf(out->name, sizeof out->name, "%s", f->name);
}

/* The transform for decode-once fields: every source field out, those decoded. */
static void decode_once(sc__decode *d)
{
    sc_transform *t = &d->tf;
    /* today's settings keep the version their caches were written under */
    char skip[40] = "";
    if (d->skip) /* its zero images are another cache's: never served to a job without it */
        snprintf(skip, sizeof skip, " skip %016llx",
                 (unsigned long long)sc__xxh64(d->skip->ids, sizeof *d->skip->ids * d->skip->n,
                                               0));
    snprintf(d->version, sizeof d->version, "1 jpeg centre %u%s%s%s", d->size,
             d->channels == 1 ? " L" : "", d->exif ? " exif" : "", skip);
    *t = (sc_transform){.name = DECODE_NAME, .version = d->version, .nout = d->n,
                        .shard = decode_shard, .augment = decode_flip, .arg = d};
    for (int i = 0; i < d->n; i++) {
        const sc__field *f = &d->src[i];
        sc_field_info *o = &t->out[i];
        sc__field out = *f;
        if (d->mode[i] == SC__DECODE_ONCE)
            sc__decode_image(d, f, &out);
        o->vlen = (uint64_t)out.vlen; /* one not decoded passes through, as its blob */
        snprintf(o->name, sizeof o->name, "%s", out.name);
        snprintf(o->dtype, sizeof o->dtype, "%s", sc__dtype_name(out.dtype));
        o->ndims = out.ndims;
        memcpy(o->dims, out.dims, sizeof o->dims);
    }
}

/* SC_DECODE read into d; decode-once's transform made when a field asks for it. */
static int decode_setup(sc__decode *d, const sc_config *cfg, sc_error *err)
{
    if (cfg->decode_size < 1 || cfg->decode_size > 8192)
        return sc__seterr(err, SC_EINVAL, "SC_DECODE_SIZE=%llu: the decoded images' side must "
                          "be 1 to 8192 pixels", (unsigned long long)cfg->decode_size);
    if (cfg->decode_channels != 1 && cfg->decode_channels != 3)
        return sc__seterr(err, SC_EINVAL, "SC_DECODE_CHANNELS=%d: the decoded images are 3 "
                          "planes (RGB, PIL's convert(\"RGB\")) or 1 (PIL's convert(\"L\"))",
                          cfg->decode_channels);
    d->size = (uint32_t)cfg->decode_size;
    d->channels = cfg->decode_channels;
    d->exif = cfg->decode_exif;
    int rc = decode_parse(d, cfg->decode, err), once = 0, mode = 0;
    for (int i = 0; i < d->n; i++)
        once |= d->mode[i] == SC__DECODE_ONCE, mode |= d->mode[i];
    if (rc == SC_OK && mode && cfg->transform)
        rc = sc__seterr(err, SC_EINVAL, "source '%s': SC_DECODE and transform '%s' together: "
                        "decode in the transform instead (its input is the field's offsets "
                        "and values, vlen.h)", d->path, cfg->transform->name);
    sc__image *j = NULL;
    if (rc == SC_OK && (rc = sc__image_new(&j, err)) != SC_OK) /* a build without JPEG says so */
        sc__errctx(err, rc, "source '%s': SC_DECODE='%s'", d->path, cfg->decode);
    sc__image_free(j);
    if (rc == SC_OK && once)
        decode_once(d);
    return rc;
}

int sc__decode_new(const char *path, const sc__field *fields, int n, const sc_config *cfg,
                   const sc__skiplist *skip, sc__decode **out, sc_error *err)
{
    *out = NULL;
    if (!cfg->decode[0])
        return SC_OK;
    sc__decode *d = calloc(1, sizeof *d);
    if (!d)
        return sc__seterr(err, SC_ENOMEM, "source '%s': no memory for SC_DECODE", path);
    d->path = path;
    d->n = n;
    d->skip = skip && skip->n ? skip : NULL;
    memcpy(d->src, fields, sizeof *fields * (size_t)n);
    int rc = decode_setup(d, cfg, err);
    if (rc != SC_OK)
        free(d);
    else
        *out = d;
    return rc;
}

void sc__decode_free(sc__decode *d)
{
    free(d);
}

const sc_transform *sc__decode_once(const sc__decode *d)
{
    return d && d->tf.shard ? &d->tf : NULL;
}

sc__crop sc__decode_epoch(const sc__decode *d, int i)
{
    int epoch = d && i < d->n && d->mode[i] == SC__DECODE_EPOCH;
    if (!epoch)
        return (sc__crop){0};
    sc__crop c = sc__crop_default(d->size, d->size);
    c.channels = d->channels, c.exif = d->exif;
    return c;
}
