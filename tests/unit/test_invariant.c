/*
 * SC__ASSERT (base/invariant.h): a broken invariant stops a debug or
 * sanitizer build where it broke, naming the condition; a release build
 * never evaluates it.
 */
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "invariant.h"
#include "sc_test.h"

/* A kept invariant costs nothing but its evaluation, and only in debug builds. */
static void test_invariant_kept(void **state)
{
    (void)state;
    int evaluated = 0;
    SC__ASSERT(++evaluated == 1);
#ifdef NDEBUG
    assert_int_equal(evaluated, 0);
#else
    assert_int_equal(evaluated, 1);
#endif
}

/* A broken one aborts a debug build, with the file and the condition on stderr. */
static void test_invariant_broken_aborts(void **state)
{
    (void)state;
#ifdef NDEBUG
    skip();
#else
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none); /* no core file from the abort */
        dup2(fds[1], STDERR_FILENO);
        int two = 2;
        SC__ASSERT(two + two == 5);
        _exit(0); /* not reached unless the assertion let it through */
    }
    close(fds[1]);
    char text[512] = "";
    size_t got = 0;
    ssize_t n;
    while (got < sizeof text - 1 && (n = read(fds[0], text + got, sizeof text - 1 - got)) > 0)
        got += (size_t)n;
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(text, "invariant broken at"));
    assert_non_null(strstr(text, "test_invariant.c"));
    assert_non_null(strstr(text, "two + two == 5"));
#endif
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_invariant_kept),
        cmocka_unit_test(test_invariant_broken_aborts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
