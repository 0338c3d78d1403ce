/*
 * train_gpu.h - the example trainer's GPU model (train_gpu.cu), built only
 * when CMake finds nvcc (TRAIN_HAVE_CUDA).  Each call returns 0, or -1 with
 * the CUDA, NCCL or set-up error in `err`.
 *
 * The CPU never waits for the GPU per step: tg_step only queues work on
 * the model's stream (tg_stream), the loss is summed on the device, and
 * tg_epoch_loss reads it once per epoch, the one place the CPU waits.
 * The loop, with no host synchronization per batch:
 *
 *   sc_loader_open(comm, &cfg, &ld, NULL);      // makes the loader's device current
 *   tg_open(tg_current_device(), d, k, comm, &g, err, errlen);   // collective
 *   while (sc_batch_next(ld, &b) == SC_OK) {
 *       tg_step(g, b.data[0], b.data[1], b.size, b.ready, lr, err, errlen);
 *       sc_batch_release_on(ld, &b, tg_stream(g));   // reused after the step, on the GPU
 *   }
 *   tg_epoch_loss(g, &loss, &bad_label, err, errlen);
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

/* The calling thread's current CUDA device (the loader's, after sc_loader_open), or -1. */
int tg_current_device(void);

/*
 * A zeroed linear classifier of k classes over d uint8 inputs on `device`.
 * Collective over `comm`: call it on every rank, before the first batch
 * (right after sc_loader_open).  It fails on every rank, naming the rank,
 * when any rank's set-up fails, so no rank is left waiting in NCCL's
 * set-up for one that gave up.  *out is set even on failure: tg_close it.
 */
int tg_open(int device, uint64_t d, uint64_t k, MPI_Comm comm, tg_model **out, char *err,
            size_t errlen);

/*
 * Queues one SGD step on a batch in device memory (x: [n][d] uint8, y: [n]
 * int64) on the model's stream, after `ready` (the batch's cudaEvent_t, or
 * NULL), gradients summed across `comm`; returns without waiting for the
 * GPU (but see tg_open's build note: without NCCL and with more than one
 * rank, the gradient goes through host memory and the step waits).  The
 * batch's buffers are read until the stream reaches this point: release
 * the batch with sc_batch_release_on(ld, &b, tg_stream(m)).
 */
int tg_step(tg_model *m, const uint8_t *x, const int64_t *y, uint64_t n, void *ready,
            double lr, char *err, size_t errlen);

/*
 * Waits for every step queued so far, then *loss = the summed cross-entropy
 * of the samples since the last call (this rank's), and sets *bad_label to
 * 1 if a label outside 0..k-1 was seen (else leaves it).  Once per epoch.
 */
int tg_epoch_loss(tg_model *m, double *loss, int *bad_label, char *err, size_t errlen);

/* The model's cudaStream_t (non-blocking), for sc_batch_release_on. */
void *tg_stream(tg_model *m);

/* Waits for the queued steps and frees everything; NULL is fine. */
void tg_close(tg_model *m);

#ifdef __cplusplus
}
#endif

#endif
