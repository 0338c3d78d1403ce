/*
 * orient.h - EXIF orientation, for every image decoder: the tag read from
 * an image's EXIF block (a TIFF structure: JPEG's APP1 "Exif", PNG's eXIf)
 * and the image turned upright by it, as PIL's ImageOps.exif_transpose
 * does.  Arithmetic only: no codec library.
 */
#ifndef SC_ORIENT_H
#define SC_ORIENT_H

#include <stddef.h>
#include <stdint.h>

/* The orientation tag (0x0112) of the TIFF block tiff[n]: 1..8, 1 when absent or unreadable. */
int sc__exif_orientation(const unsigned char *tiff, size_t n);

/* The size of a w x h image once turned upright by orientation o (5-8 swap the sides). */
void sc__orient_size(int o, uint32_t w, uint32_t h, uint32_t *ow, uint32_t *oh);

/*
 * dst = src (w x h pixels of ch interleaved bytes) turned upright by
 * orientation o (PIL's transposes: 2 mirror, 3 rotate 180, 4 flip, 5
 * transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate 90
 * counter-clockwise); dst holds sc__orient_size's pixels, packed.
 */
void sc__orient(const uint8_t *src, uint32_t w, uint32_t h, int ch, int o, uint8_t *dst);

#endif /* SC_ORIENT_H */
