/*
 * train_gpu.cu - the example trainer's model on a GPU: the same linear
 * softmax classifier as the CPU path (model.c), as CUDA kernels that read
 * the batch where the loader put it (device memory, ready once its event
 * has fired), with the gradient summed across ranks by NCCL when the build
 * has it, else by MPI_Allreduce through host memory (the slow fallback).
 *
 * Everything runs on one non-blocking stream per model, and a step only
 * queues work: the CPU goes on to the next batch while the GPU computes,
 * and waits for the GPU once per epoch (tg_epoch_loss), on an event made
 * with cudaEventBlockingSync, so it sleeps rather than spins on a core the
 * loader's producers need.  The example never calls cudaSetDeviceFlags: the
 * process's device flags are the application's to choose.
 *
 * Built only when CMake finds nvcc (examples/CMakeLists.txt); train.c
 * calls it through train_gpu.h and uses it only when a device is visible.
 */
#include "train_gpu.h"

#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TRAIN_HAVE_NCCL
#include <nccl.h>
#endif

/* What the CPU reads back once per epoch. */
typedef struct tg_sums {
    double loss; /* summed cross-entropy since the last read */
    int bad;     /* a label outside 0..k-1 was seen */
} tg_sums;

struct tg_model {
    uint64_t d, k, row;
    int rank, nranks;
    cudaStream_t stream; /* non-blocking: never ordered behind the legacy default stream */
    cudaEvent_t done;    /* blocking sync: where the CPU waits, it sleeps */
    float *w, *grad, *dlogit; /* device: [k][row], [k][row], [cap][k] */
    tg_sums *sums, *host_sums; /* device, and its pinned copy */
    float *host_grad;          /* pinned: the host all-reduce (no NCCL, several ranks) */
    uint64_t cap;              /* samples dlogit holds */
    MPI_Comm comm;
#ifdef TRAIN_HAVE_NCCL
    ncclComm_t nccl; /* only with several ranks: one rank needs no collective */
#endif
};

#define TG_CHECK(call)                                                        \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            snprintf(err, errlen, "%s: %s", #call, cudaGetErrorString(e_));   \
            return -1;                                                        \
        }                                                                     \
    } while (0)

/* logits[i][c] = w[c][d] + sum_j w[c][j] * x[i][j] / 255: one block per (i, c). */
__global__ void tg_forward(const float *w, const uint8_t *x, uint64_t d, uint64_t row,
                           uint64_t k, float *logits)
{
    uint64_t i = blockIdx.x / k, c = blockIdx.x % k;
    const uint8_t *xi = x + i * d;
    const float *wc = w + c * row;
    float sum = 0;
    for (uint64_t j = threadIdx.x; j < d; j += blockDim.x)
        sum += wc[j] * (float)xi[j] * (1.0f / 255.0f);
    __shared__ float part[256];
    part[threadIdx.x] = sum;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s)
            part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        logits[i * k + c] = part[0] + wc[d];
}

/*
 * Softmax and dL/dlogit per sample, in place of the logits; each sample's
 * loss is added to the epoch's sum on the device, so no step copies
 * anything back.  (Atomic adds: the sum's rounding depends on their order.)
 */
__global__ void tg_softmax(float *logits, const int64_t *y, uint64_t n, uint64_t k,
                           tg_sums *sums)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float *z = logits + i * k;
    if (y[i] < 0 || (uint64_t)y[i] >= k) {
        sums->bad = 1; /* every writer writes 1 */
        for (uint64_t c = 0; c < k; c++)
            z[c] = 0;
        return;
    }
    float mx = z[0], sum = 0;
    for (uint64_t c = 1; c < k; c++)
        mx = fmaxf(mx, z[c]);
    for (uint64_t c = 0; c < k; c++)
        sum += z[c] = expf(z[c] - mx);
    float py = z[y[i]] / sum;
    atomicAdd(&sums->loss, (double)-logf(fmaxf(py, 1e-30f)));
    for (uint64_t c = 0; c < k; c++)
        z[c] = (z[c] / sum - (c == (uint64_t)y[i])) / (float)n;
}

/* grad[c][j] = sum_i dlogit[i][c] * x[i][j] / 255; grad[c][d] = sum_i dlogit[i][c]. */
__global__ void tg_backward(const float *dlogit, const uint8_t *x, uint64_t n, uint64_t d,
                            uint64_t row, uint64_t k, float *grad)
{
    uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (t >= k * row)
        return;
    uint64_t c = t / row, j = t % row;
    float g = 0;
    for (uint64_t i = 0; i < n; i++)
        g += dlogit[i * k + c] * (j == d ? 1.0f : (float)x[i * d + j] * (1.0f / 255.0f));
    grad[t] = g;
}

__global__ void tg_update(float *w, const float *grad, uint64_t m, float scale)
{
    uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (t < m)
        w[t] -= scale * grad[t];
}

extern "C" int tg_current_device(void)
{
    int device;
    if (cudaGetDevice(&device) != cudaSuccess) {
        (void)cudaGetLastError();
        return -1;
    }
    return device;
}

/* This rank's half of tg_open: device, stream, event, weights, sums. */
static int open_local(tg_model *m, int device, char *err, size_t errlen)
{
    if (device < 0) {
        snprintf(err, errlen, "no CUDA device is current (open the GPU model after "
                              "sc_loader_open, which makes the loader's device current)");
        return -1;
    }
    size_t wbytes = sizeof(float) * m->k * m->row;
    TG_CHECK(cudaSetDevice(device));
    TG_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    TG_CHECK(cudaEventCreateWithFlags(&m->done,
                                      cudaEventBlockingSync | cudaEventDisableTiming));
    TG_CHECK(cudaMalloc((void **)&m->w, wbytes));
    TG_CHECK(cudaMalloc((void **)&m->grad, wbytes));
    TG_CHECK(cudaMalloc((void **)&m->sums, sizeof *m->sums));
    TG_CHECK(cudaMallocHost((void **)&m->host_sums, sizeof *m->host_sums));
    /* On the model's stream: a plain cudaMemset goes to the legacy default
       stream, which a non-blocking stream's kernels do not wait for. */
    TG_CHECK(cudaMemsetAsync(m->w, 0, wbytes, m->stream));
    TG_CHECK(cudaMemsetAsync(m->sums, 0, sizeof *m->sums, m->stream));
#ifndef TRAIN_HAVE_NCCL
    if (m->nranks > 1)
        TG_CHECK(cudaMallocHost((void **)&m->host_grad, wbytes));
#endif
    return 0;
}

/*
 * Every rank learns whether every rank got this far (`ok`) before any goes
 * on to a collective that would wait for a rank that gave up; -1 with a
 * message naming the failed rank when one did (a failed rank keeps its own).
 */
static int agree(MPI_Comm comm, int ok, const char *what, char *err, size_t errlen)
{
    int rank, worst;
    MPI_Comm_rank(comm, &rank);
    int failed = ok ? -1 : rank;
    MPI_Allreduce(&failed, &worst, 1, MPI_INT, MPI_MAX, comm);
    if (worst < 0)
        return 0;
    if (ok)
        snprintf(err, errlen, "rank %d failed %s (see its message)", worst, what);
    return -1;
}

#ifdef TRAIN_HAVE_NCCL
/* NCCL's communicator: rank 0's id and the status of getting it, in one broadcast. */
static int open_nccl(tg_model *m, char *err, size_t errlen)
{
    struct {
        int status; /* rank 0's ncclGetUniqueId() result */
        ncclUniqueId id;
    } u;
    memset(&u, 0, sizeof u);
    if (m->rank == 0)
        u.status = (int)ncclGetUniqueId(&u.id);
    MPI_Bcast(&u, sizeof u, MPI_BYTE, 0, m->comm);
    if (u.status != (int)ncclSuccess) { /* the same on every rank: all stop here */
        snprintf(err, errlen, "rank 0's ncclGetUniqueId: %s",
                 ncclGetErrorString((ncclResult_t)u.status));
        return -1;
    }
    ncclResult_t nr = ncclCommInitRank(&m->nccl, m->nranks, u.id, m->rank);
    if (nr != ncclSuccess) {
        m->nccl = NULL;
        snprintf(err, errlen, "ncclCommInitRank: %s", ncclGetErrorString(nr));
    }
    /* No rank's first all-reduce may wait for a rank without a communicator. */
    return agree(m->comm, nr == ncclSuccess, "in ncclCommInitRank", err, errlen);
}
#endif

extern "C" int tg_open(int device, uint64_t d, uint64_t k, MPI_Comm comm, tg_model **out,
                       char *err, size_t errlen)
{
    tg_model *m = (tg_model *)calloc(1, sizeof *m);
    *out = m;
    int ok = m != NULL;
    if (!ok)
        snprintf(err, errlen, "no memory for the GPU model");
    else {
        m->d = d, m->k = k, m->row = d + 1, m->comm = comm;
        MPI_Comm_rank(comm, &m->rank);
        MPI_Comm_size(comm, &m->nranks);
        ok = open_local(m, device, err, errlen) == 0;
    }
    if (agree(comm, ok, "to set up its GPU model", err, errlen))
        return -1;
#ifdef TRAIN_HAVE_NCCL
    if (m->nranks > 1 && open_nccl(m, err, errlen))
        return -1;
#endif
    return 0;
}

/*
 * dlogit holds n x k floats.  The first batch sizes it and batches never
 * grow after it (every batch has the batch size), so cudaFree's implicit
 * wait for the device is not paid per step.
 */
static int grow(tg_model *m, uint64_t n, char *err, size_t errlen)
{
    if (n <= m->cap)
        return 0;
    if (m->dlogit)
        TG_CHECK(cudaFree(m->dlogit));
    m->dlogit = NULL;
    m->cap = 0;
    TG_CHECK(cudaMalloc((void **)&m->dlogit, sizeof(float) * n * m->k));
    m->cap = n;
    return 0;
}

/* Sums the gradient across ranks, in stream order. */
static int sum_gradients(tg_model *m, uint64_t wn, char *err, size_t errlen)
{
    if (m->nranks == 1)
        return 0;
#ifdef TRAIN_HAVE_NCCL
    ncclResult_t nr = ncclAllReduce(m->grad, m->grad, wn, ncclFloat, ncclSum, m->nccl,
                                    m->stream);
    if (nr != ncclSuccess) {
        snprintf(err, errlen, "ncclAllReduce: %s", ncclGetErrorString(nr));
        return -1;
    }
#else
    /*
     * The slow fallback (a build without NCCL, several ranks): the gradient
     * goes through host memory, so the CPU must wait for this step's kernels
     * (asleep, on the blocking-sync event) before MPI can add it up, and the
     * GPU idles meanwhile.  Build with NCCL to train on several GPUs.
     */
    TG_CHECK(cudaMemcpyAsync(m->host_grad, m->grad, sizeof(float) * wn,
                             cudaMemcpyDeviceToHost, m->stream));
    TG_CHECK(cudaEventRecord(m->done, m->stream));
    TG_CHECK(cudaEventSynchronize(m->done));
    MPI_Allreduce(MPI_IN_PLACE, m->host_grad, (int)wn, MPI_FLOAT, MPI_SUM, m->comm);
    /* The next step's copy out is queued after this copy in, so host_grad is
       never overwritten while the GPU still reads it. */
    TG_CHECK(cudaMemcpyAsync(m->grad, m->host_grad, sizeof(float) * wn,
                             cudaMemcpyHostToDevice, m->stream));
#endif
    return 0;
}

extern "C" int tg_step(tg_model *m, const uint8_t *x, const int64_t *y, uint64_t n,
                       void *ready, double lr, char *err, size_t errlen)
{
    if (n == 0)
        return 0;
    if (grow(m, n, err, errlen))
        return -1;
    uint64_t wn = m->k * m->row;
    /* The batch is on the device once the loader's copy event has fired. */
    if (ready)
        TG_CHECK(cudaStreamWaitEvent(m->stream, (cudaEvent_t)ready, 0));
    tg_forward<<<(unsigned)(n * m->k), 256, 0, m->stream>>>(m->w, x, m->d, m->row, m->k,
                                                            m->dlogit);
    tg_softmax<<<(unsigned)((n + 127) / 128), 128, 0, m->stream>>>(m->dlogit, y, n, m->k,
                                                                    m->sums);
    tg_backward<<<(unsigned)((wn + 255) / 256), 256, 0, m->stream>>>(m->dlogit, x, n, m->d,
                                                                      m->row, m->k, m->grad);
    TG_CHECK(cudaGetLastError());
    if (sum_gradients(m, wn, err, errlen))
        return -1;
    tg_update<<<(unsigned)((wn + 255) / 256), 256, 0, m->stream>>>(
        m->w, m->grad, wn, (float)(lr / m->nranks));
    TG_CHECK(cudaGetLastError());
    return 0; /* queued, not done: the caller releases the batch on tg_stream(m) */
}

extern "C" int tg_epoch_loss(tg_model *m, double *loss, int *bad_label, char *err,
                             size_t errlen)
{
    TG_CHECK(cudaMemcpyAsync(m->host_sums, m->sums, sizeof *m->sums, cudaMemcpyDeviceToHost,
                             m->stream));
    TG_CHECK(cudaMemsetAsync(&m->sums->loss, 0, sizeof m->sums->loss, m->stream));
    TG_CHECK(cudaEventRecord(m->done, m->stream));
    /* The one wait per epoch; a kernel's failure since the last one shows here. */
    TG_CHECK(cudaEventSynchronize(m->done));
    *loss = m->host_sums->loss;
    if (m->host_sums->bad)
        *bad_label = 1;
    return 0;
}

extern "C" void *tg_stream(tg_model *m)
{
    return m ? (void *)m->stream : NULL;
}

extern "C" void tg_close(tg_model *m)
{
    if (!m)
        return;
    /* Nothing is freed under a kernel still queued (a job stopped mid-epoch). */
    if (m->stream && m->done && cudaEventRecord(m->done, m->stream) == cudaSuccess)
        cudaEventSynchronize(m->done);
#ifdef TRAIN_HAVE_NCCL
    if (m->nccl)
        ncclCommDestroy(m->nccl);
#endif
    if (m->done)
        cudaEventDestroy(m->done);
    if (m->stream)
        cudaStreamDestroy(m->stream);
    cudaFree(m->w);
    cudaFree(m->grad);
    cudaFree(m->dlogit);
    cudaFree(m->sums);
    cudaFreeHost(m->host_sums);
    cudaFreeHost(m->host_grad);
    free(m);
}
