/*
 * jpeg.h - JPEG samples through libjpeg-turbo's TurboJPEG API: decoding
 * with a random resized crop and flip into a fixed output (the per-sample
 * decode of image sets stored as encoded bytes), and encoding (make-dataset
 * --encode jpeg).
 *
 * Optional at build time, as CUDA is (SC_WITH_JPEG, SC_HAVE_JPEG): without
 * libjpeg-turbo every call but sc__jpeg_free returns SC_ENOTSUP naming
 * what is missing.  A handle holds its TurboJPEG instances and scratch
 * buffers and is one thread's: producers make one each.  The crop and the
 * flip are drawn from `seed` alone, so that a sample decoded twice with
 * the same seed gets the same bytes on any thread.
 */
#ifndef SC_JPEG_H
#define SC_JPEG_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "resample.h"

typedef struct sc__jpeg sc__jpeg;

int sc__jpeg_new(sc__jpeg **out, sc_error *err);
void sc__jpeg_free(sc__jpeg *j);

/* An image's size and colour channels (1: grayscale, 3: anything else). */
int sc__jpeg_info(sc__jpeg *j, const void *src, size_t n, uint32_t *w, uint32_t *h,
                  int *channels, sc_error *err);

/*
 * Decodes the JPEG src[n] into out: `channels` (1 or 3) planes of
 * crop->height x crop->width uint8 (channels first, as the trainer's
 * images are), the crop rectangle and flip drawn from seed, resampled
 * by resample.c from the region of a reduced-scale decode it chooses.
 * Colours as PIL's convert("RGB") or convert("L") (CMYK and YCCK as
 * Adobe's inverted CMYK, as PIL reads them); bytes after the end-of-image
 * marker are ignored; with crop->exif the image is turned upright by its
 * EXIF orientation first.  A corrupt, truncated or oversized image is an
 * error with the reason (libjpeg's warnings are errors: no half-decoded
 * sample is ever delivered), and the handle decodes the next image as if
 * it were new.
 */
int sc__jpeg_decode_crop(sc__jpeg *j, const void *src, size_t n, const sc__crop *crop,
                         uint64_t seed, int channels, uint8_t *out, sc_error *err);

/*
 * Encodes a `channels` x h x w planar uint8 image (1 or 3 channels) at
 * quality 1-100 (4:2:0 chroma for colour); *dst is malloc'd, *n its bytes.
 */
int sc__jpeg_encode(sc__jpeg *j, const uint8_t *planar, int channels, uint32_t w, uint32_t h,
                    int quality, unsigned char **dst, size_t *n, sc_error *err);

#endif /* SC_JPEG_H */
