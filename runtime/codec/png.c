/*
 * png.c - PNG samples through libspng (see png.h).
 *
 * PNG has no reduced-scale decode: the whole image is decoded (every
 * byte of it is checked), then sc__resample_plan at full size (no
 * scales) and sc__resample take the crop, as for a JPEG.
 */
#include "png.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "orient.h"
#include "pixels.h"

#ifndef SC_HAVE_PNG

static int png_missing(sc_error *err)
{
    return sc__seterr(err, SC_ENOTSUP, "this shardcache was built without libspng, so it does "
                      "not decode PNG samples: install Debian's libspng-dev and build again "
                      "(SC_WITH_PNG=ON makes its absence an error)");
}

int sc__png_new(sc__png **out, sc_error *err)
{
    *out = NULL;
    return png_missing(err);
}

void sc__png_free(sc__png *p)
{
    (void)p;
}

int sc__png_info(sc__png *p, const void *src, size_t n, uint32_t *w, uint32_t *h, int *channels,
                 sc_error *err)
{
    (void)p, (void)src, (void)n, (void)w, (void)h, (void)channels;
    return png_missing(err);
}

int sc__png_decode_crop(sc__png *p, const void *src, size_t n, const sc__crop *crop,
                        uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    (void)p, (void)src, (void)n, (void)crop, (void)seed, (void)channels, (void)out;
    return png_missing(err);
}

#else /* SC_HAVE_PNG */

#include <spng.h>

struct sc__png {
    unsigned char *img; /* the decoded image, ch values a pixel */
    size_t img_cap;
    unsigned char *up;  /* it turned upright (SC_DECODE_EXIF) */
    size_t up_cap;
    sc__resampler *rs;
};

int sc__png_new(sc__png **out, sc_error *err)
{
    sc__png *p = calloc(1, sizeof *p);
    *out = NULL;
    if (!p)
        return sc__seterr(err, SC_ENOMEM, "no memory for a PNG decoder");
    int rc = sc__resampler_new(&p->rs, err);
    if (rc != SC_OK) {
        sc__png_free(p);
        return rc;
    }
    *out = p;
    return SC_OK;
}

void sc__png_free(sc__png *p)
{
    if (!p)
        return;
    free(p->img);
    free(p->up);
    sc__resampler_free(p->rs);
    free(p);
}

/* A decoder over src[n] with its header read and checked: a size, not too many pixels. */
static int png_open(const void *src, size_t n, spng_ctx **ctx, struct spng_ihdr *h,
                    sc_error *err)
{
    if (!(*ctx = spng_ctx_new(0)))
        return sc__seterr(err, SC_ENOMEM, "no memory for a PNG decoder");
    int e = spng_set_png_buffer(*ctx, src, n);
    if (!e)
        e = spng_get_ihdr(*ctx, h);
    if (e)
        return sc__seterr(err, SC_EFORMAT, "not a PNG image libspng can read: %s",
                          spng_strerror(e));
    if ((uint64_t)h->width * h->height > SC__IMAGE_MAX_PIXELS)
        return sc__seterr(err, SC_EFORMAT, "a PNG image of %ux%u pixels: shardcache decodes "
                          "images of 1 to %llu pixels", h->width, h->height,
                          (unsigned long long)SC__IMAGE_MAX_PIXELS);
    return SC_OK;
}

int sc__png_info(sc__png *p, const void *src, size_t n, uint32_t *w, uint32_t *h, int *channels,
                 sc_error *err)
{
    if (!p || !src)
        return sc__seterr(err, SC_EINVAL, "sc__png_info: no decoder or no image");
    spng_ctx *ctx = NULL;
    struct spng_ihdr ih;
    int rc = png_open(src, n, &ctx, &ih, err);
    if (rc == SC_OK) {
        *w = ih.width;
        *h = ih.height;
        *channels = ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE ||
                    ih.color_type == SPNG_COLOR_TYPE_GRAYSCALE_ALPHA ? 1 : 3;
    }
    spng_ctx_free(ctx);
    return rc;
}

/*
 * 16-bit grayscale to ch bytes a pixel, in place: PIL reads it as mode
 * "I" and converts that by clipping to 255, not scaling (a 1-plane pass
 * forward, a 3-plane one backward, each pixel read before it is written).
 */
static void png_gray16(uint8_t *px, size_t n, int ch)
{
    for (size_t k = 0; k < n; k++) {
        size_t i = ch == 1 ? k : n - 1 - k;
        uint16_t v;
        memcpy(&v, px + 2 * i, 2); /* libspng's host order */
        uint8_t c = v > 255 ? 255 : (uint8_t)v;
        if (ch == 1)
            px[i] = c;
        else
            px[3 * i] = px[3 * i + 1] = px[3 * i + 2] = c;
    }
}

/* The whole image into p->img, ch values a pixel as PIL converts it, or SC_EFORMAT. */
static int png_pixels(sc__png *p, spng_ctx *ctx, const struct spng_ihdr *h, int ch,
                      sc_error *err)
{
    int gray16 = h->color_type == SPNG_COLOR_TYPE_GRAYSCALE && h->bit_depth == 16;
    int fmt = gray16 ? SPNG_FMT_PNG : SPNG_FMT_RGB8;
    size_t px = (size_t)h->width * h->height, len = 0;
    int e = spng_decoded_image_size(ctx, fmt, &len);
    if (e)
        return sc__seterr(err, SC_EFORMAT, "a damaged PNG image: %s", spng_strerror(e));
    if (!(p->img = sc__scratch(p->img, &p->img_cap, len > 3 * px ? len : 3 * px)))
        return sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u PNG image", h->width,
                          h->height);
    if ((e = spng_decode_image(ctx, p->img, len, fmt, 0)))
        return sc__seterr(err, SC_EFORMAT, "a damaged PNG image: %s", spng_strerror(e));
    if (gray16)
        png_gray16(p->img, px, ch);
    else if (ch == 1)
        sc__luma_row(p->img, px);
    return SC_OK;
}

/* The image's eXIf orientation (read after the decode: the chunk may follow the data). */
static int png_orientation(spng_ctx *ctx)
{
    struct spng_exif x = {0};
    return spng_get_exif(ctx, &x) ? 1 : sc__exif_orientation((unsigned char *)x.data, x.length);
}

/* Turns p->img (w x h) upright by orientation o, *w and *h to its new size; p->img after. */
static int png_upright(sc__png *p, int o, uint32_t *w, uint32_t *h, int ch, sc_error *err)
{
    if (!(p->up = sc__scratch(p->up, &p->up_cap, (size_t)*w * *h * (size_t)ch)))
        return sc__seterr(err, SC_ENOMEM, "no memory for a %ux%u image", *w, *h);
    sc__orient(p->img, *w, *h, ch, o, p->up);
    sc__orient_size(o, *w, *h, w, h);
    unsigned char *t = p->img;
    size_t cap = p->img_cap;
    p->img = p->up, p->img_cap = p->up_cap;
    p->up = t, p->up_cap = cap;
    return SC_OK;
}

int sc__png_decode_crop(sc__png *p, const void *src, size_t n, const sc__crop *crop,
                        uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    if (!p || !src || !crop || !out || (channels != 1 && channels != 3))
        return sc__seterr(err, SC_EINVAL, "sc__png_decode_crop: no decoder, image or output");
    spng_ctx *ctx = NULL;
    struct spng_ihdr ih;
    int rc = png_open(src, n, &ctx, &ih, err);
    if (rc == SC_OK)
        rc = png_pixels(p, ctx, &ih, channels, err);
    uint32_t W = ih.width, H = ih.height;
    int o = rc == SC_OK && crop->exif ? png_orientation(ctx) : 1;
    spng_ctx_free(ctx);
    if (rc == SC_OK && o != 1)
        rc = png_upright(p, o, &W, &H, channels, err);
    if (rc != SC_OK)
        return rc;
    sc__rect r = sc__crop_draw(crop, W, H, seed);
    sc__region g;
    sc__resample_plan(&r, crop, W, H, NULL, 0, &g);
    return sc__resample(p->rs, p->img, W, 0, 0, channels, &g, &r, W, H, crop, out, err);
}

#endif /* SC_HAVE_PNG */
