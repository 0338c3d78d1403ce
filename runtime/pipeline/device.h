/*
 * device.h - where batch memory lives, and the decisions about the device:
 * which one a rank uses, which copy waits for which consumer, one copy per
 * batch.  The operations themselves are a backend's (devops.h): CUDA, or
 * the simulated device of testing builds.
 *
 * On the host (SC_DEVICE=host, or auto without a GPU on every rank) no
 * backend call is made at all: staging memory is page-aligned, not pinned,
 * so a CPU job never creates a CUDA context.  This module never picks host
 * memory on its own: the caller resolves "auto" (on every rank alike), and
 * a failure is an SC_ECUDA carrying CUDA's text, never a quiet fallback.
 */
#ifndef SC_DEVICE_H
#define SC_DEVICE_H

#include <stddef.h>

#include "devops.h"
#include "shardcache.h"

typedef struct sc__dev sc__dev;

/*
 * Devices this process sees for `mode` (cuda, sim, or auto: the build's
 * GPU backend); 0 when there is none.  An error when the answer is neither
 * (a driver too old, a bad CUDA_VISIBLE_DEVICES).
 */
int sc__dev_probe(sc_device_mode mode, int *n, sc_error *err);

/*
 * Opens `mode` (host, cuda or sim; never auto).  With a device: the one
 * the calling thread already uses, else device local_rank % visible (the
 * caller checks that no two ranks of a node share one: sc__dev_identity),
 * made current on the calling thread.  *device_out is it, or -1.
 */
int sc__dev_open(sc_device_mode mode, int local_rank, sc__dev **out, int *device_out,
                 sc_error *err);
void sc__dev_close(sc__dev *d);

/* Devices visible to this process when it was opened (0 on the host). */
int sc__dev_visible(const sc__dev *d);

/* The device's identity (a UUID): equal for two ranks on one GPU or MIG slice. */
int sc__dev_identity(sc__dev *d, char id[SC__DEV_ID_BYTES], sc_error *err);

/* Staging memory: pinned with a device, page-aligned without. */
int sc__dev_host_alloc(sc__dev *d, size_t bytes, void **out, sc_error *err);
/* 1 when d has a device backend (host memory then comes from it, not malloc). */
int sc__dev_has_device(const sc__dev *d);
void sc__dev_host_free(sc__dev *d, void *p);

/* Device memory (only with a device in use). */
int sc__dev_alloc(sc__dev *d, size_t bytes, void **out, sc_error *err);
void sc__dev_free(sc__dev *d, void *p, size_t bytes);

/* An event (NULL on the host, where nothing needs one). */
int sc__dev_event(sc__dev *d, void **event, sc_error *err);
void sc__dev_event_free(sc__dev *d, void *event);

/*
 * Binds the calling thread to the device (CUDA's current device is per
 * thread); a no-op on the host.
 */
int sc__dev_bind(sc__dev *d, sc_error *err);

/*
 * One host-to-device copy of a slot, queued on the copy stream after the
 * slot's last consumer is done with it (`consumed`), and `ready` recorded
 * after it; returns without waiting.
 */
int sc__dev_copy(sc__dev *d, void *dst, const void *src, size_t bytes, void *consumed,
                 void *ready, sc_error *err);

/*
 * A consumer gives a slot back: `consumed` is recorded on its `stream`
 * (NULL: the legacy default stream).  Returns without waiting.
 */
int sc__dev_release(sc__dev *d, void *dst, size_t bytes, void *consumed, void *stream,
                    sc_error *err);

/* What `stream` (a consumer's) runs next waits for `event`. */
int sc__dev_stream_wait(sc__dev *d, void *stream, void *event, sc_error *err);

/* The calling thread waits for `event` (nothing to wait for: NULL). */
int sc__dev_event_wait(sc__dev *d, void *event, sc_error *err);

#endif /* SC_DEVICE_H */
