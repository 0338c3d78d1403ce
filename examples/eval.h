/*
 * eval.h - the example trainer's held-out set (train --eval FILE): its
 * images and labels read whole, once, and the model's loss and accuracy
 * on them after every epoch.  How a user tells a loader's order from
 * another by what the model learned, not by its training loss.
 */
#ifndef TRAIN_EVAL_H
#define TRAIN_EVAL_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

typedef struct ex_eval {
    uint8_t *x;  /* [n][d] */
    int64_t *y;  /* [n] */
    uint64_t n, d;
} ex_eval;

/*
 * Reads the uint8 field `images` (d bytes a sample) and the int64 field
 * `labels` (each in 0..k-1) of the HDF5 file `path`; 0, or -1 saying why
 * in err.
 */
int ex_eval_open(const char *path, const char *images, const char *labels, uint64_t d,
                 uint64_t k, ex_eval *ev, char *err, size_t errlen);
/* The mean cross-entropy and the accuracy (0..1) of m on the set. */
void ex_eval_run(const ex_eval *ev, ex_model *m, double *loss, double *accuracy);
void ex_eval_free(ex_eval *ev);

#endif
