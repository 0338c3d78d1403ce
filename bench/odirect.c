/*
 * bench/odirect - the storage's own read limit for bench/storage.py: T
 * threads read every FILE once, whole, in aligned blocks with O_DIRECT
 * (no page cache, no copy), each thread taking the next file from a
 * shared counter, one read in flight per thread: the concurrency of a
 * loader with T reads in flight.
 *
 *   bench_odirect [--threads T] [--block MiB] FILE...
 *
 * Prints "odirect: T threads, N files, B bytes, S s: R MB/s (O_DIRECT)"; a
 * filesystem that refuses O_DIRECT (tmpfs) is read through the page cache
 * and the line says "(buffered: O_DIRECT refused)".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_doc.h"

enum { ALIGN = 4096 };

typedef struct {
    char **files;
    int nfiles;
    size_t block;
    atomic_int next;
    atomic_int buffered; /* a file was read without O_DIRECT */
    atomic_int failed;
    atomic_ullong bytes;
} job;

/* One file, whole: bytes read, or -1 (the error printed, naming the file). */
static long long read_file(job *j, const char *path, unsigned char *buf)
{
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0 && errno == EINVAL) { /* tmpfs and others: no O_DIRECT */
        fd = open(path, O_RDONLY);
        atomic_store(&j->buffered, 1);
    }
    if (fd < 0) {
        fprintf(stderr, "bench_odirect: '%s': %s\n", path, strerror(errno));
        return -1;
    }
    long long total = 0;
    ssize_t n;
    while ((n = read(fd, buf, j->block)) > 0)
        total += n;
    if (n < 0)
        fprintf(stderr, "bench_odirect: '%s' at byte %lld: %s\n", path, total, strerror(errno));
    close(fd);
    return n < 0 ? -1 : total;
}

static void *reader(void *arg)
{
    job *j = arg;
    unsigned char *buf = NULL;
    if (posix_memalign((void **)&buf, ALIGN, j->block) != 0) {
        fprintf(stderr, "bench_odirect: no memory for a %zu-byte block\n", j->block);
        atomic_store(&j->failed, 1);
        return NULL;
    }
    memset(buf, 0, j->block); /* touched before the clock's work, not during */
    for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->nfiles;) {
        long long got = read_file(j, j->files[i], buf);
        if (got < 0) {
            atomic_store(&j->failed, 1);
            break;
        }
        atomic_fetch_add(&j->bytes, (unsigned long long)got);
    }
    free(buf);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = 1, first = 1;
    double block_mib = 4;
    for (; first < argc && argv[first][0] == '-'; first += 2) {
        if (first + 1 >= argc)
            break;
        if (!strcmp(argv[first], "--threads"))
            threads = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--block"))
            block_mib = atof(argv[first + 1]);
        else
            break;
    }
    if (first >= argc || threads < 1 || threads > 1024 || block_mib <= 0) {
        fprintf(stderr, "usage: bench_odirect [--threads T (1..1024)] [--block MiB] FILE...\n");
        return 2;
    }
    job j = {.files = argv + first, .nfiles = argc - first};
    j.block = ((size_t)(block_mib * 1048576) + ALIGN - 1) / ALIGN * ALIGN;
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    if (!t)
        return 1;
    double t0 = bench_now();
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&t[started], NULL, reader, &j) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    double secs = bench_now() - t0;
    free(t);
    if (started == 0 || atomic_load(&j.failed))
        return 1;
    unsigned long long bytes = atomic_load(&j.bytes);
    printf("odirect: %d threads, %d files, %llu bytes, %.3f s: %.1f MB/s (%s)\n", started,
           j.nfiles, bytes, secs, (double)bytes / secs / 1e6,
           atomic_load(&j.buffered) ? "buffered: O_DIRECT refused" : "O_DIRECT");
    return 0;
}
