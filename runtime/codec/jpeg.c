/*
 * jpeg.c - JPEG samples through libjpeg-turbo (see jpeg.h).
 *
 * A random resized crop needs only part of the image at the output's
 * resolution.  libjpeg-turbo can decode at 1/8..1 of the full size in
 * eighths, for a fraction of the cost (its IDCT then skips coefficients),
 * and, through its libjpeg API, only some columns (jpeg_crop_scanline,
 * to whole iMCUs) and rows (jpeg_skip_scanlines, which skips the IDCT and
 * colour conversion of rows above the crop; rows below are never read):
 * the decode runs at the scale resample.c chooses, over the region it
 * reads, and its resample takes the crop from there.  TurboJPEG's API
 * encodes.
 */
#include "jpeg.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "orient.h"
#include "pixels.h"

#ifndef SC_HAVE_JPEG

static int jpeg_missing(sc_error *err)
{
    return sc__seterr(err, SC_ENOTSUP, "this shardcache was built without libjpeg-turbo, so it "
                      "neither decodes nor encodes JPEG samples: install Debian's "
                      "libturbojpeg0-dev and build again (SC_WITH_JPEG=ON makes its absence an "
                      "error)");
}

int sc__jpeg_new(sc__jpeg **out, sc_error *err)
{
    *out = NULL;
    return jpeg_missing(err);
}

void sc__jpeg_free(sc__jpeg *j)
{
    (void)j;
}

int sc__jpeg_info(sc__jpeg *j, const void *src, size_t n, uint32_t *w, uint32_t *h,
                  int *channels, sc_error *err)
{
    (void)j, (void)src, (void)n, (void)w, (void)h, (void)channels;
    return jpeg_missing(err);
}

int sc__jpeg_decode_crop(sc__jpeg *j, const void *src, size_t n, const sc__crop *crop,
                         uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    (void)j, (void)src, (void)n, (void)crop, (void)seed, (void)channels, (void)out;
    return jpeg_missing(err);
}

int sc__jpeg_encode(sc__jpeg *j, const uint8_t *planar, int channels, uint32_t w, uint32_t h,
                    int quality, unsigned char **dst, size_t *n, sc_error *err)
{
    (void)j, (void)planar, (void)channels, (void)w, (void)h, (void)quality, (void)dst, (void)n;
    return jpeg_missing(err);
}

#else /* SC_HAVE_JPEG */

#include <setjmp.h>
#include <stdio.h> /* before jpeglib.h, which uses FILE */
#include <jpeglib.h>
#include <jerror.h> /* after jpeglib.h */
#include <turbojpeg.h>

/* libjpeg's errors, and its warnings (a corrupt image: no half-decoded sample), jump here. */
typedef struct jpeg_trap {
    struct jpeg_error_mgr mgr;
    jmp_buf at;
} jpeg_trap;

struct sc__jpeg {
    tjhandle enc;
    struct jpeg_decompress_struct cinfo; /* the region decode's (libjpeg API) */
    jpeg_trap trap;
    int has_cinfo;
    char why[JMSG_LENGTH_MAX];
    unsigned char *img; /* the decoded region, interleaved, or the image to encode */
    size_t img_cap;     /* its bytes */
    unsigned char *up;  /* the decoded image turned upright (SC_DECODE_EXIF) */
    size_t up_cap;
    sc__resampler *rs;
    int scales[16][2];  /* libjpeg-turbo's scales, num / denom */
    int nscales;
};

static int jpeg_fail(tjhandle t, int code, const char *what, sc_error *err)
{
    return sc__seterr(err, code, "%s: %s", what, tjGetErrorStr2(t));
}

static void jpeg_on_error(j_common_ptr c)
{
    longjmp(((jpeg_trap *)c->err)->at, 1);
}

/*
 * A warning is corrupt data libjpeg would decode around: an error here,
 * but for stray bytes before a marker (after the last scan, in some
 * ImageNet files), which leave every pixel as encoded.
 */
static void jpeg_on_message(j_common_ptr c, int level)
{
    if (level < 0 && c->err->msg_code != JWRN_EXTRANEOUS_DATA)
        longjmp(((jpeg_trap *)c->err)->at, 1);
}

int sc__jpeg_new(sc__jpeg **out, sc_error *err)
{
    sc__jpeg *j = calloc(1, sizeof *j);
    *out = NULL;
    if (!j)
        return sc__seterr(err, SC_ENOMEM, "no memory for a JPEG decoder");
    j->enc = tjInitCompress();
    j->cinfo.err = jpeg_std_error(&j->trap.mgr);
    j->trap.mgr.error_exit = jpeg_on_error;
    j->trap.mgr.emit_message = jpeg_on_message;
    if (!setjmp(j->trap.at)) { /* only out of memory fails it */
        jpeg_create_decompress(&j->cinfo);
        j->has_cinfo = 1;
    }
    int n = 0;
    tjscalingfactor *f = tjGetScalingFactors(&n);
    for (int i = 0; f && i < n && j->nscales < 16; i++)
        j->scales[j->nscales][0] = f[i].num, j->scales[j->nscales++][1] = f[i].denom;
    if (!j->enc || !j->has_cinfo || sc__resampler_new(&j->rs, err) != SC_OK) {
        int rc = sc__seterr(err, SC_ENOMEM, "libjpeg-turbo: %s", tjGetErrorStr2(NULL));
        sc__jpeg_free(j);
        return rc;
    }
    *out = j;
    return SC_OK;
}

void sc__jpeg_free(sc__jpeg *j)
{
    if (!j)
        return;
    if (j->enc)
        tjDestroy(j->enc);
    if (j->has_cinfo)
        jpeg_destroy_decompress(&j->cinfo);
    free(j->img);
    free(j->up);
    sc__resampler_free(j->rs);
    free(j);
}

/* j->img with room for n bytes. */
static int jpeg_room(sc__jpeg *j, size_t n, sc_error *err)
{
    j->img = sc__scratch(j->img, &j->img_cap, n);
    return j->img ? SC_OK : sc__seterr(err, SC_ENOMEM, "no memory for a %zu-byte image", n);
}

/* One image read through libjpeg: its header, then (with a crop) the crop's rectangle. */
typedef struct jpeg_job {
    const sc__crop *crop; /* NULL: the header alone */
    uint64_t seed;
    int ch;                /* the output's channels */
    uint32_t W, H;         /* the header's */
    int orient;            /* its EXIF orientation when the crop asks for it, else 1 */
    J_COLOR_SPACE space;
    int decoding;          /* past the header: a failure is a damaged image */
    int rc;                /* SC_OK, or a refusal of the header (in err) */
    sc__rect r;            /* the crop, drawn from the seed */
    sc__region g;          /* the scale it is decoded at and the region the resample reads */
    JDIMENSION x0, w;      /* columns [x0, x0 + w) decoded */
    JDIMENSION y0, y1;     /* and rows */
} jpeg_job;

/* A header shardcache decodes: a size, not too many pixels. */
static int jpeg_check(const jpeg_job *job, sc_error *err)
{
    if (job->W == 0 || job->H == 0)
        return sc__seterr(err, SC_EFORMAT, "not a JPEG image libjpeg-turbo can read: no size");
    if ((uint64_t)job->W * job->H > SC__IMAGE_MAX_PIXELS)
        return sc__seterr(err, SC_EFORMAT, "a JPEG image of %ux%u pixels: shardcache decodes "
                          "images of 1 to %llu pixels", job->W, job->H,
                          (unsigned long long)SC__IMAGE_MAX_PIXELS);
    return SC_OK;
}

/*
 * The crop, its scale and region, and the columns to decode: the region's
 * and 16 more each side (an iMCU at most), never read: libjpeg-turbo
 * 2.1's fancy upsampling leaves the edge columns of a cropped row
 * undefined where the row starts or ends inside the image.
 */
static void jpeg_plan(sc__jpeg *j, jpeg_job *job)
{
    uint32_t W, H; /* upright */
    sc__orient_size(job->orient, job->W, job->H, &W, &H);
    job->r = sc__crop_draw(job->crop, W, H, job->seed);
    sc__resample_plan(&job->r, job->crop, W, H, (const int(*)[2])j->scales, j->nscales, &job->g);
    const sc__region *g = &job->g;
    if (job->orient != 1) { /* the whole image at g's scale, turned upright after */
        sc__orient_size(job->orient, g->sw, g->sh, &W, &H);
        job->x0 = 0, job->w = W, job->y0 = 0, job->y1 = H;
        return;
    }
    job->x0 = g->x0 > 16 ? g->x0 - 16 : 0;
    job->w = (g->x1 + 16 < g->sw ? g->x1 + 16 : g->sw) - job->x0;
    job->y0 = g->y0, job->y1 = g->y1;
}

/*
 * Reads the rows [y0, y1) (ch values a pixel) into j->img; a CMYK row, or
 * an RGB one for 1 plane, through a row after them, converted as PIL
 * converts it (PIL's "L" of a colour JPEG is the luma of its RGB, not
 * libjpeg's Y: they differ by up to 14 levels where the RGB clips).
 */
static int jpeg_rows(sc__jpeg *j, jpeg_job *job)
{
    struct jpeg_decompress_struct *c = &j->cinfo;
    int in = c->out_color_components; /* libjpeg's values a pixel: 1, 3 or 4 */
    size_t row = (size_t)job->w * (size_t)job->ch;
    size_t rows = job->y1 - job->y0;
    size_t extra = in != job->ch ? (size_t)in * job->w : 0;
    if (!(j->img = sc__scratch(j->img, &j->img_cap, row * rows + extra)))
        return 0;
    if (job->y0 > 0)
        jpeg_skip_scanlines(c, job->y0);
    while (c->output_scanline < job->y1) {
        JSAMPROW r = j->img + (size_t)(c->output_scanline - job->y0) * row;
        JSAMPROW px = extra ? j->img + row * rows : r;
        jpeg_read_scanlines(c, &px, 1);
        if (in == 4)
            sc__cmyk_row(px, job->w, job->ch);
        else if (extra)
            sc__luma_row(px, job->w);
        if (extra)
            memcpy(r, px, row);
    }
    return 1;
}

/*
 * Reads src's header into job and, with a crop that the header passes,
 * decodes the crop's rows and columns (libjpeg widens x0 and w to whole
 * iMCUs) into j->img, job->ch values a pixel.  NULL, or libjpeg's reason
 * (in j->why); either way the decompressor is left ready for the next image.
 */
static const char *jpeg_run(sc__jpeg *j, const void *src, size_t n, jpeg_job *job,
                            sc_error *err)
{
    struct jpeg_decompress_struct *c = &j->cinfo;
    if (setjmp(j->trap.at)) {
        c->err->format_message((j_common_ptr)c, j->why);
        jpeg_abort_decompress(c);
        return j->why;
    }
    jpeg_mem_src(c, src, (unsigned long)n);
    jpeg_read_header(c, TRUE);
    job->W = c->image_width;
    job->H = c->image_height;
    job->space = c->jpeg_color_space;
    job->decoding = 1;
    if ((job->rc = jpeg_check(job, err)) != SC_OK || !job->crop) {
        jpeg_abort_decompress(c);
        return NULL;
    }
    jpeg_plan(j, job);
    /* libjpeg turns YCCK into CMYK; PIL's RGB and luma are made from that (pixels.h) */
    c->out_color_space = job->space == JCS_CMYK || job->space == JCS_YCCK ? JCS_CMYK
                         : job->space == JCS_GRAYSCALE && job->ch == 1   ? JCS_GRAYSCALE
                                                                         : JCS_RGB;
    c->scale_num = (unsigned)job->g.num;
    c->scale_denom = (unsigned)job->g.denom;
    jpeg_start_decompress(c);
    jpeg_crop_scanline(c, &job->x0, &job->w);
    int ok = jpeg_rows(j, job);
    jpeg_abort_decompress(c); /* the rows below the crop are never decoded */
    return ok ? NULL : "no memory for the image";
}

int sc__jpeg_info(sc__jpeg *j, const void *src, size_t n, uint32_t *w, uint32_t *h,
                  int *channels, sc_error *err)
{
    if (!j || !src || n > ULONG_MAX)
        return sc__seterr(err, SC_EINVAL, "sc__jpeg_info: no decoder or no image");
    jpeg_job job = {0};
    const char *why = jpeg_run(j, src, n, &job, err);
    if (why)
        return sc__seterr(err, SC_EFORMAT, "not a JPEG image libjpeg-turbo can read: %s", why);
    *w = job.W;
    *h = job.H;
    *channels = job.space == JCS_GRAYSCALE ? 1 : 3;
    return job.rc;
}

/* Where a JPEG's bytes end, and its EXIF block (APP1 "Exif"), if any. */
typedef struct jpeg_span {
    size_t end;                /* just past its end-of-image marker */
    const unsigned char *exif; /* the TIFF block, or NULL */
    size_t exif_n;
} jpeg_span;

/*
 * The next marker's code at or after b[*i], *i left just past it; -1 at
 * the data's end.  As libjpeg's next_marker: bytes before an 0xFF are
 * skipped, 0xFF fill bytes too, and inside a scan 0xFF 0x00 (a stuffed
 * byte) and 0xFF 0xD0-D7 (restart markers) are the scan's data, so the
 * same skip walks over an entropy-coded segment to the marker that ends it.
 */
static int jpeg_next_marker(const unsigned char *b, size_t n, size_t *i)
{
    while (*i < n) {
        const unsigned char *p = memchr(b + *i, 0xFF, n - *i);
        if (!p)
            break;
        size_t k = (size_t)(p - b) + 1;
        while (k < n && b[k] == 0xFF)
            k++;
        *i = k + 1;
        if (k < n && b[k] != 0x00 && (b[k] < 0xD0 || b[k] > 0xD7))
            return b[k];
    }
    *i = n;
    return -1;
}

/*
 * Walks src from its start-of-image marker to its end-of-image marker:
 * marker segments by their lengths (an EXIF thumbnail's own markers inside
 * APP1 are skipped with it), scans by their data.  The region decode never
 * reads the rows below the crop, so a truncated image would decode
 * whenever its crop missed the lost rows: this refuses it at every epoch,
 * and bytes after the end (some files carry kilobytes) are left out.
 * NULL, or what is wrong.
 */
static const char *jpeg_walk(const unsigned char *b, size_t n, jpeg_span *sp)
{
    size_t i = 2; /* past SOI */
    for (int m; (m = jpeg_next_marker(b, n, &i)) >= 0;) {
        if (m == 0xD9) {
            sp->end = i;
            return NULL;
        }
        if (m == 0xD8 || m == 0x01) /* no length (libjpeg refuses a second SOI itself) */
            continue;
        if (i + 2 > n)
            break;
        size_t len = (size_t)b[i] << 8 | b[i + 1];
        if (len < 2)
            return "with a marker segment of length < 2 (damaged)";
        if (m == 0xE1 && !sp->exif && len >= 8 && i + len <= n && !memcmp(b + i + 2, "Exif\0", 6))
            sp->exif = b + i + 8, sp->exif_n = len - 8;
        i += len;
    }
    return "with no end-of-image marker (truncated)";
}

/* A decode of the whole image (jpeg_plan's, under an EXIF orientation) turned upright and
   resampled. */
static int jpeg_upright(sc__jpeg *j, const jpeg_job *job, const sc__crop *crop, uint8_t *out,
                        sc_error *err)
{
    const sc__region *g = &job->g;
    if (!(j->up = sc__scratch(j->up, &j->up_cap, (size_t)g->sw * g->sh * (size_t)job->ch)))
        return sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u image", g->sw, g->sh);
    sc__orient(j->img, job->w, job->y1, job->ch, job->orient, j->up);
    uint32_t W, H;
    sc__orient_size(job->orient, job->W, job->H, &W, &H);
    return sc__resample(j->rs, j->up, g->sw, 0, 0, job->ch, g, &job->r, W, H, crop, out, err);
}

/* Whether a crop's settings hold together. */
static int jpeg_crop_ok(const sc__crop *crop, int channels)
{
    return crop && (channels == 1 || channels == 3) && crop->width && crop->height &&
           crop->scale[0] > 0 && crop->scale[0] <= crop->scale[1] && crop->scale[1] <= 1 &&
           crop->ratio[0] > 0 && crop->ratio[0] <= crop->ratio[1] && crop->ratio[1] < 1e6;
}

int sc__jpeg_decode_crop(sc__jpeg *j, const void *src, size_t n, const sc__crop *crop,
                         uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    if (!out || !jpeg_crop_ok(crop, channels))
        return sc__seterr(err, SC_EINVAL, "a JPEG decode needs an output of 1 or 3 channels and "
                          "a size, a scale range within (0, 1] and a positive ratio range");
    if (!j || !src || n > ULONG_MAX)
        return sc__seterr(err, SC_EINVAL, "sc__jpeg_decode_crop: no decoder or no image");
    const unsigned char *b = src;
    jpeg_span sp = {.end = n};
    const char *bad = n >= 2 && b[0] == 0xFF && b[1] == 0xD8 ? jpeg_walk(b, n, &sp) : NULL;
    if (bad)
        return sc__seterr(err, SC_EFORMAT, "a JPEG image %s", bad);
    jpeg_job job = {.crop = crop, .seed = seed, .ch = channels, .orient = 1};
    if (crop->exif)
        job.orient = sc__exif_orientation(sp.exif, sp.exif_n);
    const char *why = jpeg_run(j, src, sp.end, &job, err);
    if (why)
        return sc__seterr(err, SC_EFORMAT, "%s: %s", job.decoding ? "a damaged JPEG image"
                          : "not a JPEG image libjpeg-turbo can read", why);
    if (job.rc != SC_OK)
        return job.rc;
    if (job.orient == 1)
        return sc__resample(j->rs, j->img, job.w, job.x0, job.y0, channels, &job.g, &job.r,
                            job.W, job.H, crop, out, err);
    return jpeg_upright(j, &job, crop, out, err);
}

int sc__jpeg_encode(sc__jpeg *j, const uint8_t *planar, int channels, uint32_t w, uint32_t h,
                    int quality, unsigned char **dst, size_t *n, sc_error *err)
{
    *dst = NULL;
    if (!j || (channels != 1 && channels != 3) || !w || !h || w > INT32_MAX / 3 ||
        h > INT32_MAX / 3 || quality < 1 || quality > 100)
        return sc__seterr(err, SC_EINVAL, "a JPEG encode of %d channels, %ux%u, quality %d: "
                          "1 or 3 channels, quality 1-100", channels, w, h, quality);
    size_t px = (size_t)w * h;
    int rc = jpeg_room(j, px * channels, err);
    for (size_t i = 0; rc == SC_OK && i < px; i++) /* planar to interleaved */
        for (int k = 0; k < channels; k++)
            j->img[i * channels + k] = planar[(size_t)k * px + i];
    unsigned char *buf = NULL;
    unsigned long len = 0;
    if (rc == SC_OK && tjCompress2(j->enc, j->img, (int)w, 0, (int)h,
                                   channels == 3 ? TJPF_RGB : TJPF_GRAY, &buf, &len,
                                   channels == 3 ? TJSAMP_420 : TJSAMP_GRAY, quality, 0) != 0)
        rc = jpeg_fail(j->enc, SC_EINVAL, "libjpeg-turbo could not encode an image", err);
    if (rc == SC_OK && !(*dst = malloc(len ? len : 1)))
        rc = sc__seterr(err, SC_ENOMEM, "no memory for a %lu-byte JPEG image", len);
    if (rc == SC_OK) {
        memcpy(*dst, buf, len);
        *n = len;
    }
    tjFree(buf);
    return rc;
}

#endif /* SC_HAVE_JPEG */
