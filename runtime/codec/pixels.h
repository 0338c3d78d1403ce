/*
 * pixels.h - what every image decoder shares about the pixels it
 * delivers: their bound, and the colour conversions as PIL makes them
 * (Pillow's Convert.c), so that a decoded image is what PIL's
 * convert("RGB") or convert("L") delivers.
 */
#ifndef SC_PIXELS_H
#define SC_PIXELS_H

#include <stddef.h>
#include <stdint.h>

/* Images above this many pixels are refused: a forged header must not size our buffers. */
#define SC__IMAGE_MAX_PIXELS ((uint64_t)1 << 28)

/* Pillow's MULDIV255: a * b / 255, rounded as Pillow rounds it. */
static inline unsigned sc__muldiv255(unsigned a, unsigned b)
{
    unsigned t = a * b + 128;
    return ((t >> 8) + t) >> 8;
}

/* Pillow's L24: ITU-R 601-2 luma of one RGB pixel (convert("L")). */
static inline uint8_t sc__luma(const uint8_t *rgb)
{
    return (uint8_t)((rgb[0] * 19595u + rgb[1] * 38470u + rgb[2] * 7471u + 0x8000u) >> 16);
}

/* n RGB pixels to their luma, in place (out[i] is written after in[3i..3i+2] is read). */
static inline void sc__luma_row(uint8_t *px, size_t n)
{
    for (size_t i = 0; i < n; i++)
        px[i] = sc__luma(px + 3 * i);
}

/*
 * n CMYK pixels as libjpeg delivers them (CMYK and YCCK JPEGs alike) to
 * ch (3: RGB, 1: luma) bytes each, in place: PIL reads every CMYK JPEG
 * as Adobe's inverted CMYK ("CMYK;I") and converts as cmyk2rgb does,
 * R = K' - C'K'/255 with C' = 255 - C stored, K' = K stored.
 */
static inline void sc__cmyk_row(uint8_t *px, size_t n, int ch)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p = px + 4 * i;
        unsigned nk = p[3];
        uint8_t rgb[3];
        for (int k = 0; k < 3; k++)
            rgb[k] = (uint8_t)(nk - sc__muldiv255(255u - p[k], nk));
        if (ch == 1)
            px[i] = sc__luma(rgb);
        else
            px[3 * i] = rgb[0], px[3 * i + 1] = rgb[1], px[3 * i + 2] = rgb[2];
    }
}

#endif /* SC_PIXELS_H */
