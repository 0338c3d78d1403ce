/*
 * fault.h - test-only fault injection.  With SC_TESTING compiled in,
 * sc__fault("name") is true when the comma-separated fault list names
 * `name`.  The list starts as the SC_FAULT environment variable; a test
 * changes it with sc__fault_set, never setenv, since hooks run on other
 * threads and getenv races setenv.  Without SC_TESTING the hooks compile
 * to nothing, so a release build carries no way to break itself.  Hooks
 * never decide what the fault does: the call site does, next to the code
 * it breaks.
 */
#ifndef SC_FAULT_H
#define SC_FAULT_H

#ifdef SC_TESTING
int sc__fault(const char *name);
void sc__fault_set(const char *list); /* NULL: no faults */
#else
#define sc__fault(name) ((void)(name), 0)
#define sc__fault_set(list) ((void)(list))
#endif

#endif /* SC_FAULT_H */
