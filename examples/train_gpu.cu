/*
 * train_gpu.cu - the example trainer's model on a GPU: the same linear
 * softmax classifier as the CPU path in train.c, as CUDA kernels that read
 * the batch where the loader put it (device memory, ready once its event
 * has fired), with the gradient averaged across ranks by NCCL when the
 * build has it, else by MPI_Allreduce through host memory.
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

struct tg_model {
    uint64_t d, k, row;
    int nranks;
    cudaStream_t stream;
    float *w, *grad, *dlogit, *loss; /* device: [k][row], [k][row], [n][k], [n] */
    float *host_grad, *host_loss;
    int *bad;                         /* device: a label outside 0..k-1 was seen */
    uint64_t cap;                     /* samples the per-sample buffers hold */
    MPI_Comm comm;
#ifdef TRAIN_HAVE_NCCL
    ncclComm_t nccl;
    int use_nccl;
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

/* Softmax, loss and dL/dlogit per sample, in place of the logits. */
__global__ void tg_softmax(float *logits, const int64_t *y, uint64_t n, uint64_t k,
                           float *loss, int *bad)
{
    uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float *z = logits + i * k;
    if (y[i] < 0 || (uint64_t)y[i] >= k) {
        *bad = 1;
        for (uint64_t c = 0; c < k; c++)
            z[c] = 0;
        loss[i] = 0;
        return;
    }
    float mx = z[0], sum = 0;
    for (uint64_t c = 1; c < k; c++)
        mx = fmaxf(mx, z[c]);
    for (uint64_t c = 0; c < k; c++)
        sum += z[c] = expf(z[c] - mx);
    float py = z[y[i]] / sum;
    loss[i] = -logf(fmaxf(py, 1e-30f));
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

extern "C" int tg_open(int device, uint64_t d, uint64_t k, MPI_Comm comm, tg_model **out,
                       char *err, size_t errlen)
{
    *out = NULL;
    tg_model *m = (tg_model *)calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "no memory for the GPU model");
        return -1;
    }
    *out = m;
    m->d = d, m->k = k, m->row = d + 1, m->comm = comm;
    MPI_Comm_size(comm, &m->nranks);
    size_t wbytes = sizeof(float) * k * m->row;
    TG_CHECK(cudaSetDevice(device));
    TG_CHECK(cudaStreamCreateWithFlags(&m->stream, cudaStreamNonBlocking));
    TG_CHECK(cudaMalloc((void **)&m->w, wbytes));
    TG_CHECK(cudaMalloc((void **)&m->grad, wbytes));
    TG_CHECK(cudaMalloc((void **)&m->bad, sizeof(int)));
    TG_CHECK(cudaMemset(m->w, 0, wbytes));
    TG_CHECK(cudaMemset(m->bad, 0, sizeof(int)));
    TG_CHECK(cudaMallocHost((void **)&m->host_grad, wbytes));
#ifdef TRAIN_HAVE_NCCL
    /* Rank 0's unique id reaches the others through MPI, as NCCL's docs do it. */
    ncclUniqueId id;
    int rank;
    MPI_Comm_rank(comm, &rank);
    ncclResult_t nr = ncclSuccess;
    if (rank == 0)
        nr = ncclGetUniqueId(&id);
    MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm);
    if (nr == ncclSuccess)
        nr = ncclCommInitRank(&m->nccl, m->nranks, id, rank);
    if (nr != ncclSuccess) {
        snprintf(err, errlen, "NCCL: %s", ncclGetErrorString(nr));
        return -1;
    }
    m->use_nccl = 1;
#endif
    return 0;
}

static int grow(tg_model *m, uint64_t n, char *err, size_t errlen)
{
    if (n <= m->cap)
        return 0;
    cudaFree(m->dlogit);
    cudaFree(m->loss);
    cudaFreeHost(m->host_loss);
    m->dlogit = m->loss = m->host_loss = NULL;
    TG_CHECK(cudaMalloc((void **)&m->dlogit, sizeof(float) * n * m->k));
    TG_CHECK(cudaMalloc((void **)&m->loss, sizeof(float) * n));
    TG_CHECK(cudaMallocHost((void **)&m->host_loss, sizeof(float) * n));
    m->cap = n;
    return 0;
}

extern "C" int tg_step(tg_model *m, const uint8_t *x, const int64_t *y, uint64_t n,
                       void *ready, double lr, double *loss, int *bad_label, char *err,
                       size_t errlen)
{
    if (grow(m, n, err, errlen))
        return -1;
    uint64_t wn = m->k * m->row;
    /* The batch is on the device once the loader's copy event has fired. */
    if (ready)
        TG_CHECK(cudaStreamWaitEvent(m->stream, (cudaEvent_t)ready, 0));
    tg_forward<<<(unsigned)(n * m->k), 256, 0, m->stream>>>(m->w, x, m->d, m->row, m->k,
                                                            m->dlogit);
    tg_softmax<<<(unsigned)((n + 127) / 128), 128, 0, m->stream>>>(m->dlogit, y, n, m->k,
                                                                    m->loss, m->bad);
    tg_backward<<<(unsigned)((wn + 255) / 256), 256, 0, m->stream>>>(m->dlogit, x, n, m->d,
                                                                      m->row, m->k, m->grad);
    TG_CHECK(cudaGetLastError());
    TG_CHECK(cudaMemcpyAsync(m->host_loss, m->loss, sizeof(float) * n,
                             cudaMemcpyDeviceToHost, m->stream));
#ifdef TRAIN_HAVE_NCCL
    ncclResult_t nr = ncclAllReduce(m->grad, m->grad, wn, ncclFloat, ncclSum, m->nccl,
                                    m->stream);
    if (nr != ncclSuccess) {
        snprintf(err, errlen, "ncclAllReduce: %s", ncclGetErrorString(nr));
        return -1;
    }
    TG_CHECK(cudaStreamSynchronize(m->stream));
#else
    TG_CHECK(cudaMemcpyAsync(m->host_grad, m->grad, sizeof(float) * wn,
                             cudaMemcpyDeviceToHost, m->stream));
    TG_CHECK(cudaStreamSynchronize(m->stream));
    MPI_Allreduce(MPI_IN_PLACE, m->host_grad, (int)wn, MPI_FLOAT, MPI_SUM, m->comm);
    TG_CHECK(cudaMemcpyAsync(m->grad, m->host_grad, sizeof(float) * wn,
                             cudaMemcpyHostToDevice, m->stream));
#endif
    tg_update<<<(unsigned)((wn + 255) / 256), 256, 0, m->stream>>>(
        m->w, m->grad, wn, (float)(lr / m->nranks));
    TG_CHECK(cudaGetLastError());
    int bad = 0;
    TG_CHECK(cudaMemcpyAsync(&bad, m->bad, sizeof bad, cudaMemcpyDeviceToHost, m->stream));
    /* The batch's buffers may go back to the loader once this returns. */
    TG_CHECK(cudaStreamSynchronize(m->stream));
    double sum = 0;
    for (uint64_t i = 0; i < n; i++)
        sum += m->host_loss[i];
    *loss = sum;
    *bad_label |= bad;
    return 0;
}

extern "C" void tg_close(tg_model *m)
{
    if (!m)
        return;
#ifdef TRAIN_HAVE_NCCL
    if (m->use_nccl)
        ncclCommDestroy(m->nccl);
#endif
    if (m->stream)
        cudaStreamDestroy(m->stream);
    cudaFree(m->w);
    cudaFree(m->grad);
    cudaFree(m->dlogit);
    cudaFree(m->loss);
    cudaFree(m->bad);
    cudaFreeHost(m->host_grad);
    cudaFreeHost(m->host_loss);
    free(m);
}
