/*
 * orient.c - EXIF orientation (see orient.h).
 */
#include "orient.h"

#include <string.h>

/* A TIFF integer of `bytes` (2 or 4) at p, in the block's byte order. */
static uint32_t orient_uint(const unsigned char *p, int bytes, int big)
{
    uint32_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint32_t)p[big ? bytes - 1 - i : i] << (8 * i);
    return v;
}

int sc__exif_orientation(const unsigned char *tiff, size_t n)
{
    if (!tiff || n < 8 || (memcmp(tiff, "II*\0", 4) && memcmp(tiff, "MM\0*", 4)))
        return 1;
    int big = tiff[0] == 'M';
    uint32_t ifd = orient_uint(tiff + 4, 4, big);
    if (ifd > n - 2)
        return 1;
    uint32_t count = orient_uint(tiff + ifd, 2, big);
    for (uint32_t k = 0; k < count && ifd + 2 + 12 * (size_t)(k + 1) <= n; k++) {
        const unsigned char *e = tiff + ifd + 2 + 12 * (size_t)k;
        uint32_t type = orient_uint(e + 2, 2, big);
        if (orient_uint(e, 2, big) != 0x0112 || (type != 3 && type != 4))
            continue;
        uint32_t o = orient_uint(e + 8, type == 3 ? 2 : 4, big);
        return o >= 1 && o <= 8 ? (int)o : 1;
    }
    return 1;
}

void sc__orient_size(int o, uint32_t w, uint32_t h, uint32_t *ow, uint32_t *oh)
{
    int swap = o >= 5 && o <= 8;
    *ow = swap ? h : w;
    *oh = swap ? w : h;
}

/* The source pixel (x, y) that upright pixel (u, v) comes from, under orientation o. */
static void orient_from(int o, uint32_t w, uint32_t h, uint32_t u, uint32_t v, uint32_t *x,
                        uint32_t *y)
{
    switch (o) {
    case 2: *x = w - 1 - u, *y = v; break;
    case 3: *x = w - 1 - u, *y = h - 1 - v; break;
    case 4: *x = u, *y = h - 1 - v; break;
    case 5: *x = v, *y = u; break;
    case 6: *x = v, *y = h - 1 - u; break;
    case 7: *x = w - 1 - v, *y = h - 1 - u; break;
    case 8: *x = w - 1 - v, *y = u; break;
    default: *x = u, *y = v; break;
    }
}

void sc__orient(const uint8_t *src, uint32_t w, uint32_t h, int ch, int o, uint8_t *dst)
{
    uint32_t ow, oh;
    sc__orient_size(o, w, h, &ow, &oh);
    for (uint32_t v = 0; v < oh; v++)
        for (uint32_t u = 0; u < ow; u++) {
            uint32_t x, y;
            orient_from(o, w, h, u, v, &x, &y);
            memcpy(dst + ((size_t)v * ow + u) * ch, src + ((size_t)y * w + x) * ch, (size_t)ch);
        }
}
