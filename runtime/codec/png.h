/*
 * png.h - PNG samples through libspng: every PNG PIL reads (grayscale,
 * grayscale + alpha, RGB, RGBA, palette, 1 to 16 bits, interlaced)
 * decoded at full size into the crop every decoder delivers (resample.h),
 * as PIL's convert("RGB") or convert("L") would deliver it: alpha dropped
 * (not composited), 16-bit samples by their high byte, but 16-bit
 * grayscale (PIL's mode "I") clipped to 255, gamma and colour profiles
 * ignored.
 *
 * Optional at build time, as libjpeg-turbo is (SC_WITH_PNG, SC_HAVE_PNG):
 * without libspng every call but sc__png_free returns SC_ENOTSUP naming
 * what is missing.  A handle holds its scratch buffers and is one
 * thread's.
 */
#ifndef SC_PNG_H
#define SC_PNG_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "resample.h"

typedef struct sc__png sc__png;

int sc__png_new(sc__png **out, sc_error *err);
void sc__png_free(sc__png *p);

/* An image's size and colour channels (1: grayscale, 3: anything else). */
int sc__png_info(sc__png *p, const void *src, size_t n, uint32_t *w, uint32_t *h, int *channels,
                 sc_error *err);

/*
 * Decodes the PNG src[n] into out: `channels` (1 or 3) planes of
 * crop->height x crop->width uint8, the crop and flip drawn from seed;
 * with crop->exif turned upright by its eXIf orientation first.  A
 * damaged, truncated or oversized image is SC_EFORMAT with the reason.
 */
int sc__png_decode_crop(sc__png *p, const void *src, size_t n, const sc__crop *crop,
                        uint64_t seed, int channels, uint8_t *out, sc_error *err);

#endif /* SC_PNG_H */
