/*
 * features.c - what this build can do, and the CUDA/NCCL boundary that
 * every build links: with SC_HAVE_CUDA the CUDA runtime is asked how many
 * devices there are; "no device" and "no driver" are answers, not errors,
 * so that every test runs on machines without a GPU.
 */
#include "shardcache/base.h"

#ifdef SC_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif
#ifdef SC_HAVE_NCCL
#include <nccl.h>
#endif

int sc_features_get(sc_features *out)
{
    if (!out)
        return SC_EINVAL;
    *out = (sc_features){0};
#ifdef SC_TESTING
    out->testing = 1;
#endif
#ifdef SC_FEATURE_JPEG /* the codec layer's libjpeg-turbo, told to this one by CMake */
    out->jpeg = 1;
#endif
#ifdef SC_HAVE_CUDA
    int n = 0;
    out->cuda = 1;
    if (cudaGetDeviceCount(&n) == cudaSuccess)
        out->cuda_devices = n;
    else
        (void)cudaGetLastError(); /* clear the sticky "no device" error */
#endif
#ifdef SC_HAVE_NCCL
    int v = 0;
    out->nccl = 1;
    if (ncclGetVersion(&v) == ncclSuccess)
        out->nccl_version = v;
#endif
    return SC_OK;
}
