/*
 * transforms.h - the example trainer's transform and augmentation, also
 * used by bench/transform: images uint8 [C][H][W] become float32
 * [C][H-2m][W-2m], scaled to [0,1] and center-cropped by a margin m, once
 * per shard (cached); each delivery then flips a sample left-right with
 * probability 1/2, decided by its (seed, epoch, sample) seed.
 */
#ifndef TRAIN_TRANSFORMS_H
#define TRAIN_TRANSFORMS_H

#include <shardcache.h>

typedef struct ex_crop {
    uint64_t c, h, w, margin; /* the source images' shape and the crop's margin */
} ex_crop;

/*
 * Fills *tf: "normalize-crop" version 1, outputs /images (float32
 * [c][h-2m][w-2m]) and /labels (int64), with `flip` as augmentation when
 * asked.  The source's fields must be /images (uint8) then /labels.  A
 * crop of shape 0 x 0 x 0 learns it from the source's images when the
 * dataset opens (sc_transform.outputs): no need to open it first.
 */
int ex_crop_transform(ex_crop *crop, int flip, sc_transform *tf);

/* The transform of n samples, for callers that run it themselves. */
void ex_crop_run(const ex_crop *crop, const uint8_t *in, uint64_t n, float *out);

#endif
