/*
 * device.c - batch memory and host-to-device copies.  Everything CUDA is
 * behind SC_HAVE_CUDA; with a device in use, one non-blocking copy stream
 * per loader carries every batch, so copies overlap the training step that
 * runs on the consumer's own stream.
 */
#include "device.h"

#include <stdlib.h>
#include <unistd.h>

#include "error.h"

#ifdef SC_HAVE_CUDA
#include <cuda_runtime_api.h>

#define SC_CUDA_CHECK(err, call)                                              \
    do {                                                                      \
        cudaError_t sc__cu = (call);                                          \
        if (sc__cu != cudaSuccess)                                            \
            return sc__seterr((err), SC_ECUDA, "%s failed: %s (%s:%d)", #call, \
                              cudaGetErrorString(sc__cu), __FILE__, __LINE__); \
    } while (0)
#endif

struct sc__dev {
    int device; /* -1: host only */
#ifdef SC_HAVE_CUDA
    int pinned;
    cudaStream_t stream;
#endif
};

int sc__dev_open(sc_device_mode mode, int local_rank, sc__dev **out, int *device_out,
                 sc_error *err)
{
    sc__dev *d = calloc(1, sizeof *d);
    if (!d)
        return sc__seterr(err, SC_ENOMEM, "no memory for the device state");
    d->device = -1;
    *out = d;
    *device_out = -1;
#ifdef SC_HAVE_CUDA
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        n = 0;
    }
    /* Pinned staging helps only when there is a device to copy to. */
    d->pinned = n > 0;
    if (mode == SC_DEVICE_HOST || n == 0) {
        if (mode == SC_DEVICE_CUDA)
            return sc__seterr(err, SC_ECUDA,
                              "SC_DEVICE=cuda but no CUDA device is visible to local "
                              "rank %d",
                              local_rank);
        return SC_OK;
    }
    d->device = local_rank % n;
    SC_CUDA_CHECK(err, cudaSetDevice(d->device));
    SC_CUDA_CHECK(err, cudaStreamCreateWithFlags(&d->stream, cudaStreamNonBlocking));
    *device_out = d->device;
    return SC_OK;
#else
    (void)local_rank;
    if (mode == SC_DEVICE_CUDA)
        return sc__seterr(err, SC_ENOTSUP,
                          "SC_DEVICE=cuda but this build of shardcache has no CUDA "
                          "(configure with -DSC_WITH_CUDA=ON)");
    return SC_OK;
#endif
}

void sc__dev_close(sc__dev *d)
{
    if (!d)
        return;
#ifdef SC_HAVE_CUDA
    if (d->device >= 0 && d->stream) {
        cudaStreamSynchronize(d->stream);
        cudaStreamDestroy(d->stream);
    }
#endif
    free(d);
}

void *sc__dev_host_alloc(sc__dev *d, size_t bytes)
{
    if (!bytes)
        bytes = 1;
#ifdef SC_HAVE_CUDA
    if (d->pinned) {
        void *p = NULL;
        if (cudaHostAlloc(&p, bytes, cudaHostAllocPortable) == cudaSuccess)
            return p;
        (void)cudaGetLastError();
        return NULL;
    }
#else
    (void)d;
#endif
    long page = sysconf(_SC_PAGESIZE);
    size_t align = page > 0 ? (size_t)page : 4096;
    return aligned_alloc(align, (bytes + align - 1) / align * align);
}

void sc__dev_host_free(sc__dev *d, void *p)
{
    if (!p)
        return;
#ifdef SC_HAVE_CUDA
    if (d->pinned) {
        cudaFreeHost(p);
        return;
    }
#else
    (void)d;
#endif
    free(p);
}

int sc__dev_alloc(sc__dev *d, size_t bytes, void **out, sc_error *err)
{
    *out = NULL;
#ifdef SC_HAVE_CUDA
    if (d->device >= 0) {
        SC_CUDA_CHECK(err, cudaMalloc(out, bytes ? bytes : 1));
        return SC_OK;
    }
#else
    (void)d;
    (void)bytes;
#endif
    return sc__seterr(err, SC_EINVAL, "device memory asked for without a device");
}

void sc__dev_free(sc__dev *d, void *p)
{
    (void)d;
#ifdef SC_HAVE_CUDA
    if (p)
        cudaFree(p);
#else
    (void)p;
#endif
}

int sc__dev_event(sc__dev *d, void **event, sc_error *err)
{
    *event = NULL;
#ifdef SC_HAVE_CUDA
    if (d->device >= 0) {
        cudaEvent_t e;
        SC_CUDA_CHECK(err, cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        *event = e;
    }
#else
    (void)d;
    (void)err;
#endif
    return SC_OK;
}

void sc__dev_event_free(sc__dev *d, void *event)
{
    (void)d;
#ifdef SC_HAVE_CUDA
    if (event)
        cudaEventDestroy((cudaEvent_t)event);
#else
    (void)event;
#endif
}

int sc__dev_bind(sc__dev *d, sc_error *err)
{
#ifdef SC_HAVE_CUDA
    if (d->device >= 0)
        SC_CUDA_CHECK(err, cudaSetDevice(d->device));
#else
    (void)d;
    (void)err;
#endif
    return SC_OK;
}

int sc__dev_copy(sc__dev *d, void *const *dst, void *const *src, const size_t *bytes,
                 int n, void *event, sc_error *err)
{
#ifdef SC_HAVE_CUDA
    if (d->device < 0)
        return SC_OK;
    for (int i = 0; i < n; i++)
        SC_CUDA_CHECK(err, cudaMemcpyAsync(dst[i], src[i], bytes[i],
                                           cudaMemcpyHostToDevice, d->stream));
    SC_CUDA_CHECK(err, cudaEventRecord((cudaEvent_t)event, d->stream));
#else
    (void)d;
    (void)dst;
    (void)src;
    (void)bytes;
    (void)n;
    (void)event;
    (void)err;
#endif
    return SC_OK;
}

int sc__dev_event_wait(sc__dev *d, void *event, sc_error *err)
{
    (void)d;
#ifdef SC_HAVE_CUDA
    if (event)
        SC_CUDA_CHECK(err, cudaEventSynchronize((cudaEvent_t)event));
#else
    (void)event;
    (void)err;
#endif
    return SC_OK;
}
