/* yield.c - the producers' scheduling policy (yield.h). */
#define _GNU_SOURCE /* SCHED_BATCH */
#include "yield.h"

#include <pthread.h>
#include <sched.h>

int sc__yield_to_caller(void)
{
    struct sched_param sp = {0}; /* SCHED_BATCH has one priority: 0 */
    return pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
}
