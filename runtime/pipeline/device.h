/*
 * device.h - where batch memory lives, and the one place that talks to the
 * CUDA runtime for it.
 *
 * Host staging buffers are pinned (cudaHostAlloc) when the build has CUDA,
 * page-aligned otherwise; device buffers and the copy stream exist only
 * when a GPU is in use.  Without SC_HAVE_CUDA every call still compiles and
 * does the host half, so the pipeline has one code path.  This module must
 * never pick a device on its own: the caller says which, and a CUDA failure
 * is an SC_ECUDA naming the call, never a quiet switch to host memory.
 */
#ifndef SC_DEVICE_H
#define SC_DEVICE_H

#include <stddef.h>

#include "shardcache.h"

typedef struct sc__dev sc__dev;

/*
 * mode AUTO uses device `local_rank % devices` when there is one, HOST never
 * does, CUDA must.  *device_out is the device used, or -1.
 */
int sc__dev_open(sc_device_mode mode, int local_rank, sc__dev **out, int *device_out,
                 sc_error *err);
void sc__dev_close(sc__dev *d);

/* Staging memory: pinned with CUDA, page-aligned without.  NULL on failure. */
void *sc__dev_host_alloc(sc__dev *d, size_t bytes);
void sc__dev_host_free(sc__dev *d, void *p);

/* Device memory (only with a device in use). */
int sc__dev_alloc(sc__dev *d, size_t bytes, void **out, sc_error *err);
void sc__dev_free(sc__dev *d, void *p);

/* Per ring slot: an event recorded after the slot's copy. */
int sc__dev_event(sc__dev *d, void **event, sc_error *err);
void sc__dev_event_free(sc__dev *d, void *event);

/*
 * Binds the calling thread to the device (CUDA's current device is per
 * thread); a no-op on the host.
 */
int sc__dev_bind(sc__dev *d, sc_error *err);

/*
 * Queues host->device copies on the copy stream and records `event` after
 * them; returns without waiting.  `event_wait` first waits for the event's
 * previous use, so a slot's host buffer is never overwritten mid-copy.
 */
int sc__dev_copy(sc__dev *d, void *const *dst, void *const *src, const size_t *bytes,
                 int n, void *event, sc_error *err);
int sc__dev_event_wait(sc__dev *d, void *event, sc_error *err);

#endif /* SC_DEVICE_H */
