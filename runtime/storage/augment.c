/*
 * augment.c - SC_AUGMENT's stages: parsed once at open into index maps and
 * value tables, then run per sample in one pass (augment.h).
 */
#include "augment.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

enum { AUG_CROP, AUG_HFLIP, AUG_VFLIP, AUG_NORM, AUG_NCHW, AUG_NHWC };
enum { PAD_CONSTANT, PAD_EDGE, PAD_REFLECT, PAD_SYMMETRIC };

static const char *const aug_names[] = {"random_crop", "random_horizontal_flip",
                                        "random_vertical_flip", "normalize", "to_nchw",
                                        "to_nhwc"};
static const char *const pad_names[] = {"constant", "edge", "reflect", "symmetric"};

typedef struct stage {
    int kind;
    uint32_t in_h, in_w;  /* the image this stage takes */
    uint32_t h, w;        /* crop: its size */
    uint32_t pad[4];      /* crop: left, top, right, bottom (torchvision's order) */
    int mode;             /* crop: PAD_* */
    double p;             /* flips: the probability */
} stage;

struct sc__aug {
    int n;
    stage st[SC__AUG_STAGES];
    uint32_t c, h0, w0, h, w; /* channels; the stored and the delivered image's sides */
    int hwc_in, hwc_out, esize;
    sc__dtype dtype;          /* delivered: uint8, or float after normalize */
    uint32_t lut[SC__AUG_CHANNELS][256];             /* a stored value's delivered bits */
    uint32_t fill[SC__AUG_STAGES][SC__AUG_CHANNELS]; /* a constant pad's, per stage */
};

/* A float's bits, and as IEEE half precision rounded to nearest even (torch's .half()). */
static uint32_t aug_f32(float f)
{
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    return x;
}

static uint32_t aug_f16(float f)
{
    uint32_t x = aug_f32(f), sign = x >> 16 & 0x8000, e = x >> 23 & 0xff, m = x & 0x7fffff;
    int32_t he = (int32_t)e - 127 + 15;
    if (e == 0xff)
        return sign | 0x7c00 | (m ? 0x200 : 0);
    if (he >= 31)
        return sign | 0x7c00;
    if (he < -10)
        return sign;
    uint32_t shift = he > 0 ? 13 : (uint32_t)(14 - he); /* a subnormal half keeps fewer bits */
    uint32_t mant = he > 0 ? m : m | 0x800000, half = 1u << (shift - 1);
    uint32_t h = sign | (he > 0 ? (uint32_t)he << 10 : 0) | mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1);
    return h + (rem > half || (rem == half && (h & 1))); /* a carry moves into the exponent */
}

/* ---- parsing ------------------------------------------------------------------- */

#define ARG_GROUPS 8
#define ARG_VALUES 16

/* One argument: key= (or positional: key "") and its values, as written. */
typedef struct arg {
    char key[24];
    int n;
    char val[ARG_VALUES][32];
} arg;

typedef struct args {
    int n;
    arg a[ARG_GROUPS];
} args;

static const char *aug_skip(const char *p, const char *end)
{
    while (p && p < end && (isspace((unsigned char)*p) || *p == ','))
        p++;
    return p;
}

/* One scalar token into g; NULL when there is no room. */
static const char *aug_token(const char *p, const char *end, arg *g)
{
    size_t len = 0;
    while (p + len < end && !strchr(",()[]", p[len]))
        len++;
    if (g->n == ARG_VALUES)
        return NULL;
    while (len && isspace((unsigned char)p[len - 1]))
        len--;
    snprintf(g->val[g->n++], sizeof g->val[0], "%.*s", (int)len, p);
    p += len;
    while (p < end && isspace((unsigned char)*p))
        p++;
    return p;
}

/* An identifier followed by '=' at p: its length, else 0. */
static size_t aug_key(const char *p, const char *end)
{
    size_t len = 0;
    while (p + len < end && (isalnum((unsigned char)p[len]) || p[len] == '_'))
        len++;
    const char *q = p + len;
    while (q < end && isspace((unsigned char)*q))
        q++;
    return len && q < end && *q == '=' ? (size_t)(q + 1 - p) : 0;
}

/*
 * A stage's arguments: "32, 4" (positional scalars), "padding=4",
 * "mean=(0.5, 0.5, 0.5)" or "mean=0.5,0.5,0.5" (a key's values run to the
 * next key), "[...]" alike.  0, or -1 when malformed.
 */
static int aug_args(const char *p, const char *end, args *out)
{
    memset(out, 0, sizeof *out);
    for (p = aug_skip(p, end); p < end; p = aug_skip(p, end)) {
        size_t k = aug_key(p, end);
        if (out->n == ARG_GROUPS)
            return -1;
        arg *g = &out->a[out->n++];
        if (k) {
            size_t klen = strcspn(p, "= \t");
            snprintf(g->key, sizeof g->key, "%.*s", (int)klen, p);
            p = aug_skip(p + k, end);
        }
        if (p < end && (*p == '(' || *p == '[')) {
            char close = *p == '(' ? ')' : ']';
            p = aug_skip(p + 1, end);
            while (p && p < end && *p != close)
                p = strchr("()[]", *p) ? NULL : aug_skip(aug_token(p, end, g), end);
            if (!p || p == end)
                return -1;
            p++;
            continue;
        }
        if (p == end || !(p = aug_token(p, end, g)))
            return -1;
        /* A key's bare values run on to the next key. */
        while (k && (p = aug_skip(p, end)) < end && !aug_key(p, end) && !strchr("()[]", *p))
            if (!(p = aug_token(p, end, g)))
                return -1;
        if (p < end && strchr("()[]", *p))
            return -1;
    }
    return 0;
}

/* The stage name: torchvision's (RandomCrop) or snake case (random_crop), any case. */
static int aug_kind(const char *name, size_t len)
{
    char want[32], have[32];
    size_t n = 0;
    for (size_t i = 0; i < len && n + 1 < sizeof have; i++)
        if (name[i] != '_')
            have[n++] = (char)tolower((unsigned char)name[i]);
    have[n] = 0;
    for (int k = 0; k < (int)(sizeof aug_names / sizeof aug_names[0]); k++) {
        size_t m = 0;
        for (const char *q = aug_names[k]; *q; q++)
            if (*q != '_')
                want[m++] = *q;
        want[m] = 0;
        if (!strcmp(want, have))
            return k;
    }
    return -1;
}

/* ---- a stage's arguments into its fields ----------------------------------------- */

typedef struct build {
    const char *spec;
    int index; /* 1-based, for messages */
    const args *args;
    unsigned used; /* bit per group: read by the stage */
    sc_error *err;
} build;

static int aug_bad(build *b, const char *fmt, const char *what, const char *why)
{
    char detail[512];
    snprintf(detail, sizeof detail, fmt, what, why);
    return sc__seterr(b->err, SC_EINVAL, "SC_AUGMENT='%s': stage %d: %s", b->spec, b->index,
                      detail);
}

/* The group named key, or the pos-th positional one (pos < 0: none), else NULL. */
static const arg *aug_find(build *b, const char *key, int pos)
{
    for (int i = 0, seen = 0; i < b->args->n; i++) {
        const arg *g = &b->args->a[i];
        if (g->key[0] ? !strcmp(g->key, key) : seen++ == pos) {
            b->used |= 1u << i;
            return g;
        }
    }
    return NULL;
}

static int aug_number(build *b, const char *key, const char *text, double *v)
{
    char *end;
    *v = strtod(text, &end);
    if (end == text || *end || *v != *v)
        return aug_bad(b, "%s: '%s' is not a number", key, text);
    return SC_OK;
}

/* Up to max numbers of key (or positional pos) into v; *n how many (0: absent). */
static int aug_numbers(build *b, const char *key, int pos, double *v, int max, int *n)
{
    const arg *g = aug_find(b, key, pos);
    *n = g ? g->n : 0;
    char most[32];
    snprintf(most, sizeof most, "at most %d", max);
    if (*n > max)
        return aug_bad(b, "%s: too many values (%s)", key, most);
    for (int i = 0; i < *n; i++)
        if (aug_number(b, key, g->val[i], &v[i]) != SC_OK)
            return SC_EINVAL;
    return SC_OK;
}

/* A whole number in [lo, hi]. */
static int aug_whole(build *b, const char *key, double v, double lo, double hi, uint32_t *out)
{
    char range[64];
    snprintf(range, sizeof range, "a whole number from %.0f to %.0f", lo, hi);
    if (v != (double)(long long)v || v < lo || v > hi)
        return aug_bad(b, "%s must be %s", key, range);
    *out = (uint32_t)v;
    return SC_OK;
}

/* A word of key among names[n]: its index, default dflt when absent. */
static int aug_word(build *b, const char *key, const char *const *names, int n, int dflt,
                    int *out)
{
    const arg *g = aug_find(b, key, -1);
    *out = dflt;
    if (!g)
        return SC_OK;
    for (int i = 0; g->n == 1 && i < n; i++)
        if (!strcmp(g->val[0], names[i]))
            return *out = i, SC_OK;
    return aug_bad(b, "%s: '%s' is not one this build knows", key, g->n ? g->val[0] : "");
}

/* ---- the stages, at open: shapes and checks ----------------------------------------- */

typedef struct shape {
    uint32_t c, h, w;
    int hwc, normed;
    double fill[SC__AUG_STAGES]; /* a constant pad's value */
    int fill_normed[SC__AUG_STAGES];
} shape;

/* RandomCrop(size, padding=None, fill=0, padding_mode="constant"). */
static int aug_crop(build *b, stage *st, shape *sh)
{
    double size[2], pad[4] = {0}, fill = 0;
    int ns, np, nf, rc = aug_numbers(b, "size", 0, size, 2, &ns);
    if (rc == SC_OK && !ns)
        return aug_bad(b, "%s needs its %s", "random_crop", "size: random_crop(32)");
    if (rc == SC_OK)
        rc = aug_numbers(b, "padding", 1, pad, 4, &np);
    if (rc == SC_OK && np == 3)
        rc = aug_bad(b, "padding: %s %s", "one, two (left/right, top/bottom) or four",
                     "(left, top, right, bottom) values");
    if (rc == SC_OK)
        rc = aug_numbers(b, "fill", -1, &fill, 1, &nf);
    if (rc == SC_OK)
        rc = aug_word(b, "padding_mode", pad_names, 4, PAD_CONSTANT, &st->mode);
    uint32_t p[4];
    for (int i = 0; rc == SC_OK && i < 4; i++) /* one value: all sides; two: l/r, t/b */
        rc = aug_whole(b, "padding", pad[np == 1 ? 0 : np == 2 ? i % 2 : i], 0, SC__AUG_SIDE,
                       &p[i]);
    for (int i = 0; rc == SC_OK && i < ns; i++)
        rc = aug_whole(b, "size", size[i], 1, SC__AUG_SIDE, i ? &st->w : &st->h);
    if (rc != SC_OK)
        return rc;
    if (ns == 1)
        st->w = st->h;
    memcpy(st->pad, p, sizeof p);
    uint64_t ph = (uint64_t)sh->h + p[1] + p[3], pw = (uint64_t)sh->w + p[0] + p[2];
    char what[160];
    snprintf(what, sizeof what, "random_crop's %u x %u crop and the image padded to "
             "%llu x %llu (height x width)", st->h, st->w, (unsigned long long)ph,
             (unsigned long long)pw);
    if (st->h > ph || st->w > pw)
        return aug_bad(b, "%s: %s", what, "the crop is larger than the padded image "
                       "(SC_AUGMENT_LAYOUT says which dimensions are height and width)");
    uint32_t lim = st->mode == PAD_REFLECT ? 1 : 0; /* reflect repeats no edge: pad < side */
    if (st->mode != PAD_CONSTANT &&
        (p[0] + lim > sh->w || p[2] + lim > sh->w || p[1] + lim > sh->h || p[3] + lim > sh->h))
        return aug_bad(b, "%s: %s", what, "padding this wide cannot mirror the image once");
    if (sh->normed ? 0 : fill != (double)(int)fill || fill < 0 || fill > 255)
        return aug_bad(b, "%s: %s", "fill", "before normalize a uint8 image's fill is a whole "
                       "number from 0 to 255");
    sh->fill[b->index - 1] = fill;
    sh->fill_normed[b->index - 1] = sh->normed;
    sh->h = st->h, sh->w = st->w;
    return SC_OK;
}

/* RandomHorizontalFlip(p=0.5), RandomVerticalFlip(p=0.5). */
static int aug_flip(build *b, stage *st)
{
    int n;
    int rc = aug_numbers(b, "p", 0, &st->p, 1, &n);
    if (rc == SC_OK && !n)
        st->p = 0.5;
    if (rc == SC_OK && !(st->p >= 0 && st->p <= 1))
        rc = aug_bad(b, "%s %s", "p", "must be from 0 to 1");
    return rc;
}

/* ToTensor's /255, then Normalize(mean, std) per channel, into float32 or float16. */
static int aug_norm(build *b, sc__aug *a, shape *sh)
{
    static const char *const types[] = {"float32", "float16"};
    double mean[SC__AUG_CHANNELS], sd[SC__AUG_CHANNELS];
    int nm, ns, t, rc = sh->normed ? aug_bad(b, "%s %s", "normalize", "comes once") : SC_OK;
    if (rc == SC_OK)
        rc = aug_numbers(b, "mean", 0, mean, SC__AUG_CHANNELS, &nm);
    if (rc == SC_OK)
        rc = aug_numbers(b, "std", 1, sd, SC__AUG_CHANNELS, &ns);
    if (rc == SC_OK)
        rc = aug_word(b, "dtype", types, 2, 0, &t);
    if (rc != SC_OK)
        return rc;
    char want[64];
    snprintf(want, sizeof want, "one value, or one per channel (%u)", sh->c);
    if ((nm != 1 && nm != (int)sh->c) || (ns != 1 && ns != (int)sh->c))
        return aug_bad(b, "normalize: mean and std: %s, %s", want, "as mean=0.5,std=0.25");
    for (uint32_t c = 0; c < sh->c; c++) {
        float m = (float)mean[nm == 1 ? 0 : c], s = (float)sd[ns == 1 ? 0 : c];
        if (s == 0 || s != s || m != m)
            return aug_bad(b, "normalize: %s %s", "a std of 0 (or not a number)",
                           "divides by zero");
        for (int v = 0; v < 256; v++) {
            float f = ((float)v / 255.0f - m) / s; /* ToTensor, then Normalize: in float32 */
            a->lut[c][v] = t ? aug_f16(f) : aug_f32(f);
        }
    }
    a->dtype = t ? SC__DT_F16 : SC__DT_F32;
    sh->normed = 1;
    return SC_OK;
}

static int aug_layout(build *b, int kind, shape *sh)
{
    if (sh->hwc == (kind == AUG_NHWC))
        return aug_bad(b, "%s: the images are %s already (SC_AUGMENT_LAYOUT gives the stored "
                       "layout)", aug_names[kind], sh->hwc ? "channels last" : "channels first");
    sh->hwc = kind == AUG_NHWC;
    return SC_OK;
}

/* One stage of spec, [p, end), into a->st[a->n]. */
static int aug_stage(sc__aug *a, const char *spec, const char *p, const char *end, shape *sh,
                     sc_error *err)
{
    const char *open = memchr(p, '(', (size_t)(end - p));
    const char *name_end = open ? open : end;
    while (name_end > p && isspace((unsigned char)name_end[-1]))
        name_end--;
    int kind = aug_kind(p, (size_t)(name_end - p));
    if (kind < 0)
        return sc__seterr(err, SC_EINVAL, "SC_AUGMENT='%s': stage %d: unknown stage '%.*s' "
                          "(random_crop, random_horizontal_flip, random_vertical_flip, "
                          "normalize, to_nchw, to_nhwc)", spec, a->n + 1, (int)(name_end - p), p);
    if (a->n == SC__AUG_STAGES)
        return sc__seterr(err, SC_EINVAL, "SC_AUGMENT='%s': more than %d stages", spec,
                          SC__AUG_STAGES);
    args g = {0};
    const char *close = end;
    while (open && close > open && isspace((unsigned char)close[-1]))
        close--;
    if (open && (close[-1] != ')' || aug_args(open + 1, close - 1, &g) != 0))
        return sc__seterr(err, SC_EINVAL, "SC_AUGMENT='%s': stage %d: '%.*s': malformed "
                          "arguments", spec, a->n + 1, (int)(end - p), p);
    stage *st = &a->st[a->n++];
    *st = (stage){.kind = kind, .in_h = sh->h, .in_w = sh->w};
    build b = {spec, a->n, &g, 0, err};
    int rc = kind == AUG_CROP                        ? aug_crop(&b, st, sh)
             : kind == AUG_HFLIP || kind == AUG_VFLIP ? aug_flip(&b, st)
             : kind == AUG_NORM                       ? aug_norm(&b, a, sh)
                                                      : aug_layout(&b, kind, sh);
    for (int i = 0; rc == SC_OK && i < g.n; i++)
        if (!(b.used >> i & 1))
            rc = sc__seterr(err, SC_EINVAL, "SC_AUGMENT='%s': stage %d: %s takes no argument "
                            "%s%s%s", spec, a->n, aug_names[kind], g.a[i].key[0] ? "'" : "",
                            g.a[i].key[0] ? g.a[i].key : "this many positional ones",
                            g.a[i].key[0] ? "'" : "");
    return rc;
}

/* The stored image's channels and sides, by its layout. */
static int aug_input(const char *spec, const sc__field *in, int hwc, shape *sh, sc_error *err)
{
    if (in->vlen || in->dtype != SC__DT_U8 || in->ndims != 3)
        return sc__seterr(err, SC_EINVAL, "SC_AUGMENT='%s': field '%s' is not a fixed-shape "
                          "3-D uint8 image (it holds %s %s samples of %d dimensions)", spec,
                          in->name, in->vlen ? "variable-length" : "fixed-shape",
                          sc__dtype_name(in->dtype), in->ndims);
    *sh = (shape){.c = (uint32_t)in->dims[hwc ? 2 : 0], .hwc = hwc,
                  .h = (uint32_t)in->dims[hwc ? 0 : 1], .w = (uint32_t)in->dims[hwc ? 1 : 2]};
    uint64_t c = in->dims[hwc ? 2 : 0], h = in->dims[hwc ? 0 : 1], w = in->dims[hwc ? 1 : 2];
    if (c < 1 || c > SC__AUG_CHANNELS || h < 1 || h > SC__AUG_SIDE || w < 1 || w > SC__AUG_SIDE)
        return sc__seterr(err, SC_EINVAL, "SC_AUGMENT='%s': field '%s' as %s is %llu channels "
                          "of %llu x %llu: images of 1 to %d channels and sides of 1 to %d",
                          spec, in->name, hwc ? "H x W x C (SC_AUGMENT_LAYOUT=hwc)"
                                              : "C x H x W (SC_AUGMENT_LAYOUT=chw)",
                          (unsigned long long)c, (unsigned long long)h, (unsigned long long)w,
                          SC__AUG_CHANNELS, SC__AUG_SIDE);
    return SC_OK;
}

/* Value tables: identity for uint8; each pad's fill in the delivered type. */
static void aug_tables(sc__aug *a, const shape *sh, int normed)
{
    a->esize = (int)sc__dtype_size(a->dtype);
    for (uint32_t c = 0; !normed && c < a->c; c++)
        for (int v = 0; v < 256; v++)
            a->lut[c][v] = (uint32_t)v;
    for (int s = 0; s < a->n; s++)
        for (uint32_t c = 0; c < a->c; c++) {
            double f = sh->fill[s];
            a->fill[s][c] = !sh->fill_normed[s] ? a->lut[c][(int)f]
                            : a->dtype == SC__DT_F16 ? aug_f16((float)f)
                                                     : aug_f32((float)f);
        }
}

int sc__aug_compile(const char *spec, const sc__field *in, int hwc, sc__aug **out,
                    sc_error *err)
{
    *out = NULL;
    shape sh;
    int rc = aug_input(spec, in, hwc, &sh, err);
    sc__aug *a = rc == SC_OK ? calloc(1, sizeof *a) : NULL;
    if (rc == SC_OK && !a)
        return sc__seterr(err, SC_ENOMEM, "SC_AUGMENT: no memory");
    if (rc != SC_OK)
        return rc;
    *a = (sc__aug){.c = sh.c, .h0 = sh.h, .w0 = sh.w, .hwc_in = hwc, .dtype = SC__DT_U8};
    for (const char *p = spec; rc == SC_OK && *p;) {
        size_t len = strcspn(p, ";");
        const char *s = p, *e = p + len;
        while (s < e && isspace((unsigned char)*s))
            s++;
        if (s < e)
            rc = aug_stage(a, spec, s, e, &sh, err);
        p = e + (*e == ';');
    }
    if (rc == SC_OK && a->n == 0)
        rc = sc__seterr(err, SC_EINVAL, "SC_AUGMENT='%s': no stage", spec);
    if (rc != SC_OK) {
        free(a);
        return rc;
    }
    a->h = sh.h, a->w = sh.w, a->hwc_out = sh.hwc;
    aug_tables(a, &sh, sh.normed);
    *out = a;
    return SC_OK;
}

void sc__aug_free(sc__aug *a)
{
    free(a);
}

void sc__aug_output(const sc__aug *a, sc__field *out)
{
    out->dtype = a->dtype;
    out->ndims = 3;
    memset(out->dims, 0, sizeof out->dims);
    uint64_t d[3] = {a->c, a->h, a->w}, e[3] = {a->h, a->w, a->c};
    memcpy(out->dims, a->hwc_out ? e : d, sizeof d);
    out->sample_bytes = (uint64_t)a->c * a->h * a->w * (uint64_t)a->esize;
}

/* ---- per sample ------------------------------------------------------------------- */

static double aug_uniform(sc__rng *r)
{
    return (double)(sc__rng_next(r) >> 11) * 0x1.0p-53;
}

void sc__aug_draw(const sc__aug *a, uint64_t key, sc__aug_draws *d)
{
    sc__rng r;
    sc__rng_init(&r, key);
    memset(d, 0, sizeof *d);
    for (int s = 0; s < a->n; s++) {
        const stage *st = &a->st[s];
        if (st->kind == AUG_CROP) { /* torchvision: i (the top) first, then j */
            uint64_t ph = (uint64_t)st->in_h + st->pad[1] + st->pad[3];
            uint64_t pw = (uint64_t)st->in_w + st->pad[0] + st->pad[2];
            d->top[s] = (uint32_t)sc__rng_below(&r, ph - st->h + 1);
            d->left[s] = (uint32_t)sc__rng_below(&r, pw - st->w + 1);
        } else if (st->kind == AUG_HFLIP || st->kind == AUG_VFLIP) {
            d->flip[s] = aug_uniform(&r) < st->p;
        }
    }
}

/* A padded coordinate v (outside [0, n)) mirrored or clamped into the image. */
static int64_t aug_pad_index(int64_t v, int64_t n, int mode)
{
    if (mode == PAD_EDGE)
        return v < 0 ? 0 : n - 1;
    int64_t shift = mode == PAD_REFLECT ? 0 : 1;
    return v < 0 ? -v - shift : 2 * (n - 1) - v + shift;
}

/*
 * Output coordinate -> stored one along one axis (y: 0, x: 1), walking the
 * stages backwards; -(s + 1) when stage s's constant padding is there.
 */
static void aug_axis(const sc__aug *a, const sc__aug_draws *d, int x, int32_t *map, uint32_t n)
{
    for (uint32_t o = 0; o < n; o++) {
        int64_t v = o;
        for (int s = a->n - 1; s >= 0 && v >= 0; s--) {
            const stage *st = &a->st[s];
            int64_t side = x ? st->in_w : st->in_h;
            if (st->kind == AUG_CROP) {
                v += (int64_t)(x ? d->left[s] : d->top[s]) - st->pad[x ? 0 : 1];
                if ((v < 0 || v >= side) && st->mode == PAD_CONSTANT)
                    v = -(int64_t)s - 1;
                else if (v < 0 || v >= side)
                    v = aug_pad_index(v, side, st->mode);
            } else if (d->flip[s] && st->kind == (x ? AUG_HFLIP : AUG_VFLIP)) {
                v = side - 1 - v;
            }
        }
        map[o] = (int32_t)v;
    }
}

/* The stored element of channel c at (ys, xs), or the fill of the last pad over it. */
#define AUG_VALUE(T)                                                                      \
    (ys >= 0 && xs >= 0                                                                   \
         ? (T)a->lut[c][in[a->hwc_in ? ((uint64_t)ys * a->w0 + (uint64_t)xs) * a->c + c    \
                                     : ((uint64_t)c * a->h0 + (uint64_t)ys) * a->w0 +      \
                                           (uint64_t)xs]]                                  \
         : (T)a->fill[(ys < 0 ? -ys : 0) > (xs < 0 ? -xs : 0) ? -ys - 1 : -xs - 1][c])

#define AUG_LOOP(T)                                                                       \
    do {                                                                                  \
        T *o = out;                                                                       \
        if (a->hwc_out)                                                                   \
            for (uint32_t y = 0; y < a->h; y++)                                           \
                for (uint32_t x = 0; x < a->w; x++)                                       \
                    for (uint32_t c = 0; c < a->c; c++) {                                 \
                        int32_t ys = ym[y], xs = xm[x];                                   \
                        *o++ = AUG_VALUE(T);                                              \
                    }                                                                     \
        else                                                                              \
            for (uint32_t c = 0; c < a->c; c++)                                           \
                for (uint32_t y = 0; y < a->h; y++)                                       \
                    for (uint32_t x = 0; x < a->w; x++) {                                 \
                        int32_t ys = ym[y], xs = xm[x];                                   \
                        *o++ = AUG_VALUE(T);                                              \
                    }                                                                     \
    } while (0)

void sc__aug_run(const sc__aug *a, const uint8_t *in, void *out, uint64_t key)
{
    int32_t ym[SC__AUG_SIDE], xm[SC__AUG_SIDE]; /* 64 KiB of a producer's stack */
    sc__aug_draws d;
    sc__aug_draw(a, key, &d);
    aug_axis(a, &d, 0, ym, a->h);
    aug_axis(a, &d, 1, xm, a->w);
    if (a->esize == 1)
        AUG_LOOP(uint8_t);
    else if (a->esize == 2)
        AUG_LOOP(uint16_t);
    else
        AUG_LOOP(uint32_t);
}

/* ---- the dataset's setting -------------------------------------------------------- */

/* The field spec names (FIELD= prefix: "/x" and "x" alike), or the one 3-D uint8 one. */
static int aug_field(const char *path, const sc__field *fields, int n, const char *spec,
                     const char *name, sc_error *err)
{
    int hit = -1, found = 0;
    for (int i = 0; i < n; i++) {
        const sc__field *f = &fields[i];
        int take = name[0] ? !strcmp(f->name + (f->name[0] == '/'), name + (name[0] == '/'))
                           : !f->vlen && f->dtype == SC__DT_U8 && f->ndims == 3;
        if (take)
            hit = i, found++;
    }
    if (found == 1)
        return hit;
    if (name[0])
        sc__seterr(err, SC_EINVAL, "source '%s': SC_AUGMENT='%s' names field '%s': the source "
                   "has no such field (SC_FIELDS chooses them)", path, spec, name);
    else
        sc__seterr(err, SC_EINVAL, "source '%s': SC_AUGMENT='%s': %s 3-D uint8 fields: name "
                   "one, as FIELD=%s", path, spec, found ? "several" : "the source has no",
                   spec);
    return -1;
}

int sc__aug_setup(const char *path, const sc__field *fields, int n, const unsigned char *epoch,
                  const sc_config *cfg, sc__aug **out, int *field, sc_error *err)
{
    const char *spec = cfg->augment, *open = spec + strcspn(spec, "(;");
    const char *eq = memchr(spec, '=', (size_t)(open - spec));
    char name[256];
    snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - spec) : 0, spec);
    *out = NULL;
    if (!spec[0])
        return SC_OK;
    if (cfg->transform && cfg->transform->augment)
        return sc__seterr(err, SC_EINVAL, "source '%s': SC_AUGMENT and transform '%s', which "
                          "augments too: augment in one place", path, cfg->transform->name);
    int f = aug_field(path, fields, n, spec, name, err);
    if (f < 0)
        return SC_EINVAL;
    sc__field in = fields[f];
    if (epoch[f]) /* its cached samples are JPEG bytes */
        return sc__seterr(err, SC_EINVAL, "source '%s': SC_AUGMENT='%s': field '%s' is decoded "
                          "every epoch (SC_DECODE=jpeg), which crops and flips itself; "
                          "jpeg-once's images can be augmented", path, spec, in.name);
    int rc = sc__aug_compile(eq ? eq + 1 : spec, &in, cfg->augment_layout == 1, out, err);
    if (rc != SC_OK)
        return sc__errctx(err, rc, "source '%s': field '%s'", path, in.name);
    *field = f;
    return SC_OK;
}
