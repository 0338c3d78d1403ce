/*
 * dev_sim.h - what a test adds to the simulated device (testing builds):
 * a consumer's "kernel" that reads device memory back after a delay, and a
 * host wait for a stream.  Its streams and events are the backend's own
 * (sc__devops_sim.stream_new, .record, .stream_wait).
 */
#ifndef SC_DEV_SIM_H
#define SC_DEV_SIM_H

#include <stddef.h>

#include "devops.h"

#ifdef SC_TESTING
/* Queues on `stream`: sleep delay_us, then copy n bytes from src to dst. */
int sc__sim_read(void *stream, void *dst, const void *src, size_t n, unsigned delay_us,
                 sc_error *err);
/* Waits until everything queued on `stream` so far has run. */
void sc__sim_stream_sync(void *stream);
/* Bytes the simulated device writes over memory it frees or gets back. */
#define SC__SIM_POISON 0xDB
#endif

#endif /* SC_DEV_SIM_H */
