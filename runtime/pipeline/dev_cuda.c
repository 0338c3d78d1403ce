/*
 * dev_cuda.c - the CUDA backend of the device operations (devops.h).
 *
 * Every CUDA failure is an SC_ECUDA carrying CUDA's own text; only "no
 * device" and "no driver at all" mean zero devices.  Events are made with
 * cudaEventBlockingSync, so a producer waiting for a slot's copy sleeps
 * instead of spinning on a core the training thread needs.
 */
#include "devops.h"

#ifdef SC_HAVE_CUDA
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#define CU_CHECK(err, call)                                                         \
    do {                                                                            \
        cudaError_t cu_rc_ = (call);                                                \
        if (cu_rc_ != cudaSuccess)                                                  \
            return sc__seterr((err), SC_ECUDA, "%s failed: %s", #call,              \
                              cudaGetErrorString(cu_rc_));                          \
    } while (0)

/*
 * cudaErrorInsufficientDriver means either "no driver installed" (a build
 * machine: no GPU) or "a driver older than this runtime" (a GPU that cannot
 * be used: an error the user must see).  Only the driver library tells.
 */
static int cuda_driver_present(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (h)
        dlclose(h);
    return h != NULL;
}

static int cuda_count(int *n, sc_error *err)
{
    *n = 0;
    cudaError_t rc = cudaGetDeviceCount(n);
    if (rc == cudaSuccess)
        return SC_OK;
    (void)cudaGetLastError();
    *n = 0;
    if (rc == cudaErrorNoDevice || (rc == cudaErrorInsufficientDriver && !cuda_driver_present()))
        return SC_OK;
    return sc__seterr(err, SC_ECUDA,
                      "cudaGetDeviceCount failed: %s (CUDA_VISIBLE_DEVICES='%s')",
                      cudaGetErrorString(rc),
                      getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES")
                                                     : "(unset)");
}

/*
 * cudaGetDevice answers 0 whether or not the caller chose device 0; a
 * current context says the caller (or its framework) really chose one.
 * The driver's cuCtxGetCurrent is reached through the runtime, so the
 * library needs no link to libcuda.
 */
static int cuda_current(int *device, sc_error *err)
{
    typedef int (*ctx_get_current)(void **ctx);
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    *device = -1;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &fn, 12000, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn) {
        (void)cudaGetLastError();
        return SC_OK; /* cannot tell: the node-local rank decides */
    }
    void *ctx = NULL;
    if (((ctx_get_current)fn)(&ctx) != 0 || !ctx)
        return SC_OK;
    CU_CHECK(err, cudaGetDevice(device));
    return SC_OK;
}

static int cuda_bind(int device, sc_error *err)
{
    CU_CHECK(err, cudaSetDevice(device));
    return SC_OK;
}

/* The UUID, not the PCI bus id: MIG slices of one GPU share the bus id. */
static int cuda_identity(int device, char id[SC__DEV_ID_BYTES], sc_error *err)
{
    struct cudaDeviceProp p;
    CU_CHECK(err, cudaGetDeviceProperties(&p, device));
    int at = snprintf(id, SC__DEV_ID_BYTES, "GPU-");
    for (int i = 0; i < 16 && at < SC__DEV_ID_BYTES - 2; i++)
        at += snprintf(id + at, (size_t)(SC__DEV_ID_BYTES - at), "%02x",
                       (unsigned char)p.uuid.bytes[i]);
    return SC_OK;
}

static int cuda_host_alloc(size_t bytes, void **p, sc_error *err)
{
    CU_CHECK(err, cudaHostAlloc(p, bytes, cudaHostAllocDefault));
    return SC_OK;
}

static void cuda_host_free(void *p)
{
    cudaFreeHost(p);
}

static int cuda_alloc(size_t bytes, void **p, sc_error *err)
{
    CU_CHECK(err, cudaMalloc(p, bytes));
    return SC_OK;
}

static void cuda_free(void *p, size_t bytes)
{
    (void)bytes;
    cudaFree(p);
}

static int cuda_stream_new(void **stream, sc_error *err)
{
    cudaStream_t s;
    /* Non-blocking: the copies never wait for work on the legacy stream. */
    CU_CHECK(err, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    *stream = s;
    return SC_OK;
}

static void cuda_stream_free(void *stream)
{
    cudaStreamSynchronize((cudaStream_t)stream);
    cudaStreamDestroy((cudaStream_t)stream);
}

static int cuda_event_new(void **event, sc_error *err)
{
    cudaEvent_t e;
    CU_CHECK(err, cudaEventCreateWithFlags(&e, cudaEventBlockingSync | cudaEventDisableTiming));
    *event = e;
    return SC_OK;
}

static void cuda_event_free(void *event)
{
    cudaEventDestroy((cudaEvent_t)event);
}

static int cuda_record(void *event, void *stream, sc_error *err)
{
    CU_CHECK(err, cudaEventRecord((cudaEvent_t)event, (cudaStream_t)stream));
    return SC_OK;
}

static int cuda_stream_wait(void *stream, void *event, sc_error *err)
{
    CU_CHECK(err, cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)event, 0));
    return SC_OK;
}

static int cuda_sync(void *event, sc_error *err)
{
    CU_CHECK(err, cudaEventSynchronize((cudaEvent_t)event));
    return SC_OK;
}

static int cuda_copy(void *dst, const void *src, size_t bytes, void *stream, sc_error *err)
{
    CU_CHECK(err, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice,
                                  (cudaStream_t)stream));
    return SC_OK;
}

const sc__devops sc__devops_cuda = {
    .name = "CUDA",
    .count = cuda_count,
    .current = cuda_current,
    .bind = cuda_bind,
    .identity = cuda_identity,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .stream_new = cuda_stream_new,
    .stream_free = cuda_stream_free,
    .event_new = cuda_event_new,
    .event_free = cuda_event_free,
    .record = cuda_record,
    .stream_wait = cuda_stream_wait,
    .sync = cuda_sync,
    .copy = cuda_copy,
    .poison = NULL,
};

#else
typedef int sc__dev_cuda_absent; /* a translation unit may not be empty */
#endif /* SC_HAVE_CUDA */
