/*
 * device.c - batch memory, the device a rank uses, and the order of its
 * copies.  A slot's bytes go to the device in one copy on the loader's own
 * (non-blocking) copy stream; that copy waits on the GPU, not the CPU, for
 * the event its previous batch's consumer recorded at release, so a copy
 * never overwrites device memory a kernel may still read, and the training
 * thread never blocks to give a batch back.
 */
#include "device.h"

#include <stdlib.h>

#include "error.h"
#include "mem.h"

struct sc__dev {
    const sc__devops *ops; /* NULL: host only */
    int device;            /* -1: host only */
    int visible;           /* devices the backend showed at open */
    void *stream;          /* the copy stream */
};

/* The backend for a mode, or an error naming why there is none. */
static int dev_backend(sc_device_mode mode, const sc__devops **ops, sc_error *err)
{
    *ops = NULL;
#ifdef SC_TESTING
    if (mode == SC_DEVICE_SIM) {
        *ops = &sc__devops_sim;
        return SC_OK;
    }
#endif
#ifdef SC_HAVE_CUDA
    if (mode == SC_DEVICE_CUDA || mode == SC_DEVICE_AUTO) {
        *ops = &sc__devops_cuda;
        return SC_OK;
    }
#endif
    if (mode == SC_DEVICE_CUDA)
        return sc__seterr(err, SC_ENOTSUP,
                          "SC_DEVICE=cuda but this build of shardcache has no CUDA "
                          "(configure with -DSC_WITH_CUDA=ON)");
    if (mode == SC_DEVICE_SIM)
        return sc__seterr(err, SC_ENOTSUP,
                          "SC_DEVICE=sim exists only in testing builds (-DSC_TESTING=ON)");
    return SC_OK; /* auto without CUDA, or host: no backend */
}

int sc__dev_probe(sc_device_mode mode, int *n, sc_error *err)
{
    const sc__devops *ops;
    *n = 0;
    int rc = dev_backend(mode, &ops, err);
    if (rc != SC_OK || !ops)
        return rc;
    return ops->count(n, err);
}

/* The caller's own device when it chose one, else the node-local rank's. */
static int dev_choose(sc__dev *d, sc_device_mode mode, int local_rank, sc_error *err)
{
    int n = 0, cur = -1;
    int rc = d->ops->count(&n, err);
    if (rc == SC_OK && n == 0)
        rc = sc__seterr(err, SC_ECUDA, "SC_DEVICE=%s but %s shows no device to node-local "
                        "rank %d (no GPU is visible, or no driver is installed)",
                        mode == SC_DEVICE_SIM ? "sim" : "cuda", d->ops->name, local_rank);
    if (rc == SC_OK)
        rc = d->ops->current(&cur, err);
    if (rc != SC_OK)
        return rc;
    d->device = cur >= 0 ? cur : local_rank % n;
    d->visible = n;
    return SC_OK;
}

int sc__dev_open(sc_device_mode mode, int local_rank, sc__dev **out, int *device_out,
                 sc_error *err)
{
    *out = NULL;
    *device_out = -1;
    sc__dev *d = calloc(1, sizeof *d);
    if (!d)
        return sc__seterr(err, SC_ENOMEM, "no memory for the device state");
    d->device = -1;
    *out = d;
    if (mode == SC_DEVICE_HOST)
        return SC_OK;
    int rc = dev_backend(mode, &d->ops, err);
    if (rc == SC_OK && !d->ops)
        rc = sc__seterr(err, SC_EINVAL, "the device mode must be resolved before it is opened");
    if (rc == SC_OK)
        rc = dev_choose(d, mode, local_rank, err);
    if (rc != SC_OK)
        return rc;
    rc = d->ops->bind(d->device, err);
    if (rc == SC_OK)
        rc = d->ops->stream_new(&d->stream, err);
    if (rc != SC_OK)
        return sc__errctx(err, rc, "%s device %d", d->ops->name, d->device);
    *device_out = d->device;
    return SC_OK;
}

void sc__dev_close(sc__dev *d)
{
    if (!d)
        return;
    if (d->ops && d->stream)
        d->ops->stream_free(d->stream);
    free(d);
}

int sc__dev_visible(const sc__dev *d)
{
    return d->visible;
}

int sc__dev_identity(sc__dev *d, char id[SC__DEV_ID_BYTES], sc_error *err)
{
    id[0] = '\0';
    return d->ops ? d->ops->identity(d->device, id, err) : SC_OK;
}

int sc__dev_has_device(const sc__dev *d)
{
    return d && d->ops;
}

int sc__dev_host_alloc(sc__dev *d, size_t bytes, void **out, sc_error *err)
{
    bytes = bytes ? bytes : 1;
    if (d->ops)
        return d->ops->host_alloc(bytes, out, err);
    *out = sc__big_alloc(bytes);
    return *out ? SC_OK : sc__seterr(err, SC_ENOMEM, "no memory for %zu staging bytes", bytes);
}

void sc__dev_host_free(sc__dev *d, void *p)
{
    if (p)
        d->ops ? d->ops->host_free(p) : free(p);
}

int sc__dev_alloc(sc__dev *d, size_t bytes, void **out, sc_error *err)
{
    *out = NULL;
    if (!d->ops)
        return sc__seterr(err, SC_EINVAL, "device memory asked for without a device");
    return d->ops->alloc(bytes ? bytes : 1, out, err);
}

void sc__dev_free(sc__dev *d, void *p, size_t bytes)
{
    if (d->ops && p)
        d->ops->free(p, bytes);
}

int sc__dev_event(sc__dev *d, void **event, sc_error *err)
{
    *event = NULL;
    return d->ops ? d->ops->event_new(event, err) : SC_OK;
}

void sc__dev_event_free(sc__dev *d, void *event)
{
    if (d->ops && event)
        d->ops->event_free(event);
}

int sc__dev_bind(sc__dev *d, sc_error *err)
{
    return d->ops ? d->ops->bind(d->device, err) : SC_OK;
}

int sc__dev_copy(sc__dev *d, void *dst, const void *src, size_t bytes, void *consumed,
                 void *ready, sc_error *err)
{
    if (!d->ops)
        return SC_OK;
    int rc = d->ops->stream_wait(d->stream, consumed, err);
    if (rc == SC_OK)
        rc = d->ops->copy(dst, src, bytes, d->stream, err);
    if (rc == SC_OK)
        rc = d->ops->record(ready, d->stream, err);
    return rc;
}

int sc__dev_release(sc__dev *d, void *dst, size_t bytes, void *consumed, void *stream,
                    sc_error *err)
{
    if (!d->ops)
        return SC_OK;
    /*
     * A backend that checks order overwrites the slot on the consumer's
     * stream, after its reads and before the point the next copy waits for:
     * a read the consumer did not order before its release finds poison.
     */
    int rc = d->ops->poison ? d->ops->poison(dst, bytes, stream, err) : SC_OK;
    if (rc == SC_OK)
        rc = d->ops->record(consumed, stream, err);
    return rc;
}

int sc__dev_stream_wait(sc__dev *d, void *stream, void *event, sc_error *err)
{
    return d->ops && event ? d->ops->stream_wait(stream, event, err) : SC_OK;
}

int sc__dev_event_wait(sc__dev *d, void *event, sc_error *err)
{
    return d->ops && event ? d->ops->sync(event, err) : SC_OK;
}
