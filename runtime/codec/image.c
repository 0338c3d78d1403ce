/*
 * image.c - encoded image samples by their signature (see image.h).
 */
#include "image.h"

#include <stdlib.h>
#include <string.h>

#include "jpeg.h"
#include "png.h"

struct sc__image {
    sc__jpeg *jpeg;
    sc__png *png; /* made at the first PNG: a build without libspng still decodes JPEGs */
};

int sc__image_new(sc__image **out, sc_error *err)
{
    sc__image *im = calloc(1, sizeof *im);
    *out = NULL;
    if (!im)
        return sc__seterr(err, SC_ENOMEM, "no memory for an image decoder");
    int rc = sc__jpeg_new(&im->jpeg, err);
    if (rc != SC_OK) {
        sc__image_free(im);
        return rc;
    }
    *out = im;
    return SC_OK;
}

void sc__image_free(sc__image *im)
{
    if (!im)
        return;
    sc__jpeg_free(im->jpeg);
    sc__png_free(im->png);
    free(im);
}

const char *sc__image_format(const void *src, size_t n)
{
    const unsigned char *b = src;
    if (n >= 2 && b[0] == 0xFF && b[1] == 0xD8) /* its start of image: the JPEG decoder says
                                                  what is wrong past it, in its words */
        return "JPEG";
    if (n >= 8 && !memcmp(b, "\x89PNG\r\n\x1a\n", 8))
        return "PNG";
    return NULL;
}

/* *kind: src[n]'s format, 'J' (JPEG) or 'P' (PNG, its decoder made); else SC_EFORMAT. */
static int image_kind(sc__image *im, const void *src, size_t n, int *kind, sc_error *err)
{
    const char *f = src ? sc__image_format(src, n) : NULL;
    const unsigned char *b = src;
    *kind = f ? f[0] : 0;
    if (!im || !src)
        return sc__seterr(err, SC_EINVAL, "an image decode with no decoder or no image");
    if (*kind == 'P' && !im->png)
        return sc__png_new(&im->png, err);
    if (f)
        return SC_OK;
    if (n < 2)
        return sc__seterr(err, SC_EFORMAT, "not an image shardcache decodes: %zu byte%s (JPEG "
                          "and PNG are)", n, n == 1 ? "" : "s");
    return sc__seterr(err, SC_EFORMAT, "not an image shardcache decodes: starts with 0x%02x "
                      "0x%02x (JPEG and PNG are)", b[0], b[1]);
}

int sc__image_info(sc__image *im, const void *src, size_t n, uint32_t *w, uint32_t *h,
                   int *channels, sc_error *err)
{
    int kind, rc = image_kind(im, src, n, &kind, err);
    if (rc != SC_OK)
        return rc;
    return kind == 'J' ? sc__jpeg_info(im->jpeg, src, n, w, h, channels, err)
                       : sc__png_info(im->png, src, n, w, h, channels, err);
}

int sc__image_decode_crop(sc__image *im, const void *src, size_t n, const sc__crop *crop,
                          uint64_t seed, int channels, uint8_t *out, sc_error *err)
{
    int kind, rc = image_kind(im, src, n, &kind, err);
    if (rc != SC_OK)
        return rc;
    return kind == 'J' ? sc__jpeg_decode_crop(im->jpeg, src, n, crop, seed, channels, out, err)
                       : sc__png_decode_crop(im->png, src, n, crop, seed, channels, out, err);
}

int sc__image_check(sc__image *im, const void *src, size_t n, sc_error *err)
{
    /* The whole image into one pixel: the smallest scale, every scan decoded. */
    sc__crop whole = {1, 1, {1.0, 1.0}, {1e-6, 1e6 - 1}, 0, 3, 0};
    uint8_t px[3];
    return sc__image_decode_crop(im, src, n, &whole, 0, 3, px, err);
}
