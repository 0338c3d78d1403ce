/*
 * yield.h - the loader's producer threads yield the CPU to the caller's.
 *
 * A producer waits for room in the ring, and the training thread's release
 * of a batch wakes it.  Under the default policy a woken thread preempts
 * the one that woke it when the scheduler thinks it has waited longer, so
 * the training thread, back from its step, lost its core to a producer's
 * copy in the middle of sc_batch_release: on 2 cores, one rank, cosmoflow's
 * 2.8 MB batches every 3.5 ms, a release took 215 us on average (6% of the
 * step) and 16 us with producers under SCHED_BATCH, the policy for threads
 * that work in the background: the same share of the CPU over time, no
 * wake-up preemption of a thread under the default policy.
 */
#ifndef SC_YIELD_H
#define SC_YIELD_H

/* Puts the calling thread under SCHED_BATCH: 0, or the errno of the refusal. */
int sc__yield_to_caller(void);

#endif /* SC_YIELD_H */
