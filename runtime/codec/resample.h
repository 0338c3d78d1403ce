/*
 * resample.h - the crop every image decoder delivers, apart from any
 * codec: torchvision's RandomResizedCrop and RandomHorizontalFlip drawn
 * from a seed, the reduced scale a decoder may decode at first (and the
 * pixels of it the resample reads), and the resample from those pixels to
 * the output.  Arithmetic only: no codec library, no locks.
 *
 * A decoder (jpeg.c, or one that decodes only at full size) draws the
 * crop, asks sc__resample_plan which scale to decode at among its own and
 * which region of the scaled image to produce, decodes at least that
 * region, and hands it to sc__resample.
 */
#ifndef SC_RESAMPLE_H
#define SC_RESAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "error.h"

/* torchvision's RandomResizedCrop and RandomHorizontalFlip, by their parameters. */
typedef struct sc__crop {
    uint32_t width, height; /* of the output, in pixels */
    double scale[2];        /* the crop's share of the image's area: (0.08, 1) */
    double ratio[2];        /* its aspect ratio, width / height: (3/4, 4/3) */
    int flip;               /* 1: mirrored left-right with probability 1/2 */
    int channels;           /* planes delivered: 1 (PIL's convert("L")) or 3 (0 too: RGB) */
    int exif;               /* 1: the image turned upright by its EXIF orientation first */
} sc__crop;

/* The defaults above, for an output of w x h pixels. */
sc__crop sc__crop_default(uint32_t w, uint32_t h);

/* The planes a crop delivers: 1 or 3. */
static inline int sc__crop_planes(const sc__crop *c)
{
    return c->channels == 1 ? 1 : 3;
}

/* Bytes of one image decoded to the crop's size, as the loader delivers it. */
static inline uint64_t sc__crop_bytes(const sc__crop *c)
{
    return (uint64_t)sc__crop_planes(c) * c->width * c->height;
}

/* A crop rectangle of the full image, in its pixels, and whether it is mirrored. */
typedef struct sc__rect {
    double x, y, w, h;
    int flip;
} sc__rect;

/* torchvision's RandomResizedCrop.get_params (then the flip) over a W x H image, from seed. */
sc__rect sc__crop_draw(const sc__crop *c, uint32_t W, uint32_t H, uint64_t seed);

/*
 * What the resample needs decoded: the image at scale num/denom of its
 * full size (sw x sh pixels), and of that the pixels [x0, x1) x [y0, y1).
 */
typedef struct sc__region {
    int num, denom;
    uint32_t sw, sh;
    uint32_t x0, y0, x1, y1;
} sc__region;

/*
 * For crop r of a W x H image into an output of c->width x c->height: the
 * scale to decode at, the smallest of the decoder's `n` scales
 * (scales[i][0] / scales[i][1]; n 0: full size only) that leaves the
 * resample's filter 12 times the output's pixels (so that it stays within
 * a level of PIL's), and the region the resample reads: the crop's pixels
 * at that scale.  sw and sh are
 * the decoder's scaled size: scale(W) must be ceil(W * num / denom), as
 * libjpeg's is.
 */
void sc__resample_plan(const sc__rect *r, const sc__crop *c, uint32_t W, uint32_t H,
                       const int (*scales)[2], int n, sc__region *g);

/* Scratch for the resample: one thread's. */
typedef struct sc__resampler sc__resampler;

int sc__resampler_new(sc__resampler **out, sc_error *err);
void sc__resampler_free(sc__resampler *rs);

/*
 * Resamples crop r of a W x H image into out: ch (1 or 3) planes of
 * c->height x c->width uint8, mirrored when r->flip, as PIL's
 * crop(r).resize(BILINEAR) does, within a level (its filter widened when
 * shrinking).  img holds the image at g's scale from its pixel (ox, oy)
 * on, `stride` pixels a row of ch interleaved values, and covers at least
 * g's region; only the region is read.
 */
int sc__resample(sc__resampler *rs, const uint8_t *img, size_t stride, uint32_t ox, uint32_t oy,
                 int ch, const sc__region *g, const sc__rect *r, uint32_t W, uint32_t H,
                 const sc__crop *c, uint8_t *out, sc_error *err);

#ifdef SC_TESTING
/* Testing builds: the resample's code forced, 0 portable C, 1 SSE2, 2 AVX2 (x86-64 only; what
   the CPU lacks is not checked); -1 the best the CPU has again. */
void sc__resample_force(int level);
#endif

#endif /* SC_RESAMPLE_H */
