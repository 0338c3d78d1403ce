/*
 * augment.h - SC_AUGMENT: torchvision's everyday image augmentations, built
 * in, run by the producers as they copy a fixed-shape uint8 image field's
 * samples into a batch: RandomCrop (with padding), RandomHorizontalFlip,
 * RandomVerticalFlip, ToTensor + Normalize (to float32 or float16) and the
 * change between channels-last (NHWC batches) and channels-first (NCHW).
 *
 * The setting is "[FIELD=]STAGE;STAGE;..." (docs/api.md has the grammar);
 * without FIELD= it names the dataset's one 3-D uint8 field.
 * SC_AUGMENT_LAYOUT says whether the stored images are C x H x W (chw, the
 * default: as SC_DECODE delivers them) or H x W x C (hwc).
 *
 * A sample's random draws come from one key, which the stream makes from
 * (seed, epoch, field, sample) as it does for SC_DECODE's crop: in stage
 * order, a crop draws its top row then its left column (uniform, without
 * bias: sc__rng_below), a flip one uniform double in [0, 1) compared with
 * p.  Every stage is an index map or a per-value map, so a sample is done
 * in one pass from the cached image to the batch, with no scratch memory.
 * Pure: no MPI, HDF5 or threads; a compiled pipeline is read-only and
 * shared by every producer.
 */
#ifndef SC_AUGMENT_H
#define SC_AUGMENT_H

#include <stdint.h>

#include "dtype.h"
#include "error.h"
#include "field.h"

#define SC__AUG_STAGES 8    /* stages in one pipeline */
#define SC__AUG_CHANNELS 16 /* an image's channels, at most */
#define SC__AUG_SIDE 8192   /* an image's height and width, at most (input and output) */

typedef struct sc__aug sc__aug;

/* What a sample drew, stage by stage (0 where a stage draws nothing). */
typedef struct sc__aug_draws {
    uint32_t top[SC__AUG_STAGES], left[SC__AUG_STAGES];
    unsigned char flip[SC__AUG_STAGES];
} sc__aug_draws;

/*
 * Compiles the stages of spec (no FIELD= prefix) for the uint8 images
 * `in` describes (3-D, hwc: channels last), *out malloc'd; what is wrong
 * with a stage is an SC_EINVAL naming it.
 */
int sc__aug_compile(const char *spec, const sc__field *in, int hwc, sc__aug **out,
                    sc_error *err);
void sc__aug_free(sc__aug *a);

/* The delivered sample: its dtype (uint8, float32, float16) and 3-D shape. */
void sc__aug_output(const sc__aug *a, sc__field *out);

/* The draws one key makes (the tests recompute them by hand). */
void sc__aug_draw(const sc__aug *a, uint64_t key, sc__aug_draws *d);

/* One sample: in (the stored image) through every stage into out. */
void sc__aug_run(const sc__aug *a, const uint8_t *in, void *out, uint64_t key);

/*
 * SC_AUGMENT against a source's delivered fields[n] (path names it in
 * errors; epoch[i] nonzero: field i is decoded every epoch, and crops and
 * flips itself): the field it names into *field, its compiled stages into
 * *out (NULL when unset).  Refuses by name a field that is not a
 * fixed-shape 3-D uint8 one, a user transform with its own augmentation,
 * and every bad stage.
 */
int sc__aug_setup(const char *path, const sc__field *fields, int n, const unsigned char *epoch,
                  const sc_config *cfg, sc__aug **out, int *field, sc_error *err);

#endif /* SC_AUGMENT_H */
