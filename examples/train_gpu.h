/*
 * train_gpu.h - the example trainer's GPU model (train_gpu.cu), built only
 * when CMake finds nvcc (TRAIN_HAVE_CUDA).  Each call returns 0, or -1 with
 * the CUDA or NCCL error in `err`.
 */
#ifndef TRAIN_GPU_H
#define TRAIN_GPU_H

#include <stddef.h>
#include <stdint.h>

#include <mpi.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tg_model tg_model;

/* A zeroed linear classifier of k classes over d uint8 inputs on `device`. */
int tg_open(int device, uint64_t d, uint64_t k, MPI_Comm comm, tg_model **out, char *err,
            size_t errlen);

/*
 * One SGD step on a batch in device memory (x: [n][d] uint8, y: [n] int64),
 * after `ready` (the batch's cudaEvent_t, or NULL); gradients are summed
 * across `comm`.  *loss is the batch's summed cross-entropy.  Returns once
 * the batch's buffers are no longer read.
 */
int tg_step(tg_model *m, const uint8_t *x, const int64_t *y, uint64_t n, void *ready,
            double lr, double *loss, int *bad_label, char *err, size_t errlen);

void tg_close(tg_model *m);

#ifdef __cplusplus
}
#endif

#endif
