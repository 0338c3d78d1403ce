/*
 * image.h - encoded image samples, whatever their format: the format is
 * decided by the bytes' signature, never by a file's name or a field's
 * declared codec (ImageNet holds PNGs named .JPEG).  Each format's decoder
 * (jpeg.c, png.c) delivers the same crop (resample.h).  A handle is one thread's:
 * producers make one each, at their first image.
 */
#ifndef SC_IMAGE_H
#define SC_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "resample.h"

typedef struct sc__image sc__image;

int sc__image_new(sc__image **out, sc_error *err);
void sc__image_free(sc__image *im);

/* The format src[n] starts as ("JPEG", "PNG"), or NULL: none decoded here. */
const char *sc__image_format(const void *src, size_t n);

/* An image's size and colour channels (1: grayscale, 3: anything else). */
int sc__image_info(sc__image *im, const void *src, size_t n, uint32_t *w, uint32_t *h,
                   int *channels, sc_error *err);

/*
 * Decodes src[n] into out: `channels` (1 or 3) planes of crop->height x
 * crop->width uint8, the crop and flip drawn from seed (resample.h).  An
 * image that does not decode is SC_EFORMAT with the reason (no
 * half-decoded sample is ever delivered), and the handle decodes the next
 * image as if it were new.
 */
int sc__image_decode_crop(sc__image *im, const void *src, size_t n, const sc__crop *crop,
                          uint64_t seed, int channels, uint8_t *out, sc_error *err);

/*
 * Whether every crop of src[n] decodes: the whole image is decoded (at
 * the smallest scale: every byte of its data is still read).  For a scan
 * that finds every bad sample in one pass.
 */
int sc__image_check(sc__image *im, const void *src, size_t n, sc_error *err);

#endif /* SC_IMAGE_H */
