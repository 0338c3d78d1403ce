/*
 * model.h - the example trainer's CPU model: a linear softmax classifier
 * over inputs in [0,1], trained by SGD, its gradient summed across ranks
 * every step.  (train_gpu.h is the same model on a GPU.)
 */
#ifndef TRAIN_MODEL_H
#define TRAIN_MODEL_H

#include <stdint.h>

#include <mpi.h>

typedef struct ex_model {
    uint64_t d, k;
    float *w, *grad;  /* [k][d + 1]: the last column is the bias */
    float *scaled;    /* uint8 inputs scaled to [0,1], [scaled_n] */
    uint64_t scaled_n;
} ex_model;

/* A zeroed model of k classes over d inputs; 0, or -1 when out of memory. */
int ex_model_init(ex_model *m, uint64_t d, uint64_t k);
void ex_model_free(ex_model *m);
/* Weights: [ex_model_size(m)] floats, for checkpoints. */
static inline uint64_t ex_model_size(const ex_model *m)
{
    return m->k * (m->d + 1);
}

/*
 * One SGD step on n samples: x is [n][d] uint8 pixels (scaled to [0,1]
 * here) or, with `floats`, [n][d] float32 already in [0,1]; y [n] int64
 * labels (one outside 0..k-1 sets *bad_label and is skipped).  The
 * gradient is summed over `comm` (nranks ranks).  Returns the batch's
 * summed cross-entropy, or NAN when out of memory.
 */
double ex_model_step(ex_model *m, const void *x, int floats, const int64_t *y, uint64_t n,
                     MPI_Comm comm, int nranks, double lr, int *bad_label);

/*
 * The summed cross-entropy of n uint8 samples x [n][d] with labels y
 * under the current weights, no update; *correct counts the samples whose
 * likeliest class is their label.  NAN when out of memory.
 */
double ex_model_eval(ex_model *m, const uint8_t *x, const int64_t *y, uint64_t n,
                     uint64_t *correct);

#endif
