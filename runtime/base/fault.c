#include "fault.h"

#ifdef SC_TESTING
#include <stdlib.h>
#include <string.h>

int sc__fault(const char *name)
{
    const char *list = getenv("SC_FAULT");
    size_t n = strlen(name);
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t len = end ? (size_t)(end - list) : strlen(list);
        if (len == n && !strncmp(list, name, n))
            return 1;
        list = end ? end + 1 : NULL;
    }
    return 0;
}
#else
typedef int sc__fault_unused; /* ISO C forbids an empty translation unit */
#endif
