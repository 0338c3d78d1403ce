#include "fault.h"

#ifdef SC_TESTING
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*
 * The list lives here, not in the environment: hooks run on producer,
 * writer and peer threads, and glibc's getenv races a setenv on another
 * thread (setenv may move the array getenv walks).  A test that changed
 * SC_FAULT with setenv while a loader ran crashed in getenv (CI, ASan).
 * The environment is read once, before main, for jobs started with
 * SC_FAULT set.
 */
static pthread_mutex_t fault_mu = PTHREAD_MUTEX_INITIALIZER;
static char fault_list[1024];

void sc__fault_set(const char *list)
{
    pthread_mutex_lock(&fault_mu);
    snprintf(fault_list, sizeof fault_list, "%s", list ? list : "");
    pthread_mutex_unlock(&fault_mu);
}

__attribute__((constructor)) static void fault_from_env(void)
{
    sc__fault_set(getenv("SC_FAULT"));
}

static int fault_listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    while (*list) {
        const char *end = strchr(list, ',');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (len == n && !strncmp(list, name, n))
            return 1;
        if (!end)
            break;
        list = end + 1;
    }
    return 0;
}

int sc__fault(const char *name)
{
    pthread_mutex_lock(&fault_mu);
    int hit = fault_listed(fault_list, name);
    pthread_mutex_unlock(&fault_mu);
    return hit;
}
#else
typedef int sc__fault_unused; /* ISO C forbids an empty translation unit */
#endif
