/*
 * devops.h - the operations a device backend provides, and the backends.
 *
 * device.c decides what to do (which device, which stream waits for which
 * event, one copy per batch); a backend only does it.  CUDA is the real one.
 * The simulated one (testing builds) runs the same operations on the CPU
 * with the same ordering rules, so that the device path runs in every CI
 * job, under ASan and TSan, with no GPU: "device" buffers are separate
 * allocations poisoned on free and once their release point has passed, a
 * copy-engine thread runs each stream's operations in order after an
 * injectable delay, events are sequence points in a stream, and every call
 * but a free fails on a thread that has not bound the device.
 */
#ifndef SC_DEVOPS_H
#define SC_DEVOPS_H

#include <stddef.h>

#include "error.h"

/* Bytes of a device's identity (a PCI bus id), NUL included. */
#define SC__DEV_ID_BYTES 64

typedef struct sc__devops {
    const char *name; /* for messages: "CUDA", "the simulated device" */
    /* Devices visible to this process; 0 when there is no GPU or no driver. */
    int (*count)(int *n, sc_error *err);
    /* The device the calling thread already uses, or -1 when it chose none. */
    int (*current)(int *device, sc_error *err);
    int (*bind)(int device, sc_error *err);
    int (*identity)(int device, char id[SC__DEV_ID_BYTES], sc_error *err);
    int (*host_alloc)(size_t bytes, void **p, sc_error *err); /* pinned */
    void (*host_free)(void *p);
    int (*alloc)(size_t bytes, void **p, sc_error *err);
    void (*free)(void *p, size_t bytes);
    int (*stream_new)(void **stream, sc_error *err);
    void (*stream_free)(void *stream);
    int (*event_new)(void **event, sc_error *err);
    void (*event_free)(void *event);
    /* The point after everything queued on `stream` so far. */
    int (*record)(void *event, void *stream, sc_error *err);
    /* What `stream` runs next waits for `event`'s last recorded point. */
    int (*stream_wait)(void *stream, void *event, sc_error *err);
    /* The calling thread waits (blocking, not spinning) for the event. */
    int (*sync)(void *event, sc_error *err);
    /* Host to device, queued on `stream`. */
    int (*copy)(void *dst, const void *src, size_t bytes, void *stream, sc_error *err);
    /* Queues an overwrite of memory a consumer gave back; NULL: not done. */
    int (*poison)(void *dst, size_t bytes, void *stream, sc_error *err);
} sc__devops;

#ifdef SC_HAVE_CUDA
extern const sc__devops sc__devops_cuda;
#endif
#ifdef SC_TESTING
extern const sc__devops sc__devops_sim;
#endif

#endif /* SC_DEVOPS_H */
