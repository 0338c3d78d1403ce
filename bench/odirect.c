/*
 * bench/odirect - the storage's own read limit for bench/storage.py: T
 * threads read the FILEs in aligned blocks with O_DIRECT (no page cache,
 * no copy), each thread taking the next piece (a file, or PIECE bytes of
 * a larger one, or a block where that is larger, so that one large file
 * keeps T reads in flight too) from a shared counter, one read in flight
 * per thread: the concurrency of a loader with T reads in flight.  A
 * loader's read of a large shard is one request of up to a GiB, which the
 * kernel splits and keeps in flight at once: --block up to 1024 MiB gives
 * the limit the same depth (4 MiB blocks read unet3d's files at 0.53-0.98
 * of 64 MiB blocks' rate, four alternated pairs here).  The blocks are
 * allocated and touched before the clock starts.
 *
 *   bench_odirect [--threads T] [--block MiB] [--seconds S] FILE...
 *
 * --seconds: no read is started after S seconds (the rate of what was
 * read), so that a measurement before and after each trial costs seconds,
 * not a pass over the dataset, and every thread stops within a block.
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
#include <sys/stat.h>
#include <unistd.h>

#include "bench_doc.h"

enum { ALIGN = 4096 };
#define PIECE (64ull << 20)

typedef struct {
    char **files;
    long long *first; /* the first piece of each file, and of none at [nfiles] */
    int nfiles;
    size_t block, piece; /* piece: PIECE, or the block where that is larger */
    unsigned char **bufs; /* [threads]: each reader's block */
    atomic_int slot;
    double stop; /* bench_now() after which no piece starts; 0: none */
    atomic_llong next;
    atomic_int buffered; /* a file was read without O_DIRECT */
    atomic_int failed;
    atomic_ullong bytes;
} job;

static int open_direct(job *j, const char *path)
{
    int fd = open(path, O_RDONLY | O_DIRECT);
    if (fd < 0 && errno == EINVAL) { /* tmpfs and others: no O_DIRECT */
        fd = open(path, O_RDONLY);
        atomic_store(&j->buffered, 1);
    }
    if (fd < 0)
        fprintf(stderr, "bench_odirect: '%s': %s\n", path, strerror(errno));
    return fd;
}

static int past_stop(const job *j)
{
    return j->stop > 0 && bench_now() > j->stop;
}

/*
 * Piece k of file f, up to its end or the stop: bytes read, or -1 (the
 * error printed).  Reads stay aligned: the block and the piece are
 * multiples of ALIGN, and a file's end reads short.
 */
static long long read_piece(job *j, int f, long long k, unsigned char *buf)
{
    int fd = open_direct(j, j->files[f]);
    if (fd < 0)
        return -1;
    off_t off = (off_t)(k * (long long)j->piece), end = off + (off_t)j->piece;
    long long total = 0;
    ssize_t n = 0;
    while (off < end && !past_stop(j)) {
        size_t want = (size_t)(end - off) < j->block ? (size_t)(end - off) : j->block;
        if ((n = pread(fd, buf, want, off)) <= 0)
            break;
        total += n;
        off += n;
        if ((size_t)n < want) /* the file's end */
            break;
    }
    if (n < 0)
        fprintf(stderr, "bench_odirect: '%s' at byte %lld: %s\n", j->files[f], (long long)off,
                strerror(errno));
    close(fd);
    return n < 0 ? -1 : total;
}

static void *reader(void *arg)
{
    job *j = arg;
    unsigned char *buf = j->bufs[atomic_fetch_add(&j->slot, 1)];
    int f = 0;
    for (long long p; (p = atomic_fetch_add(&j->next, 1)) < j->first[j->nfiles];) {
        if (past_stop(j))
            break;
        while (j->first[f + 1] <= p)
            f++;
        long long got = read_piece(j, f, p - j->first[f], buf);
        if (got < 0) {
            atomic_store(&j->failed, 1);
            break;
        }
        atomic_fetch_add(&j->bytes, (unsigned long long)got);
    }
    return NULL;
}

/* j->first: each file's pieces (at least one), numbered across the files; 0 on success. */
static int count_pieces(job *j)
{
    j->first = calloc((size_t)j->nfiles + 1, sizeof *j->first);
    if (!j->first)
        return -1;
    for (int i = 0; i < j->nfiles; i++) {
        struct stat st;
        if (stat(j->files[i], &st) != 0) {
            fprintf(stderr, "bench_odirect: '%s': %s\n", j->files[i], strerror(errno));
            return -1;
        }
        long long n = ((long long)st.st_size + (long long)j->piece - 1) / (long long)j->piece;
        j->first[i + 1] = j->first[i] + (n > 0 ? n : 1);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int threads = 1, first = 1;
    double block_mib = 4, seconds = 0;
    for (; first < argc && argv[first][0] == '-'; first += 2) {
        if (first + 1 >= argc)
            break;
        if (!strcmp(argv[first], "--threads"))
            threads = atoi(argv[first + 1]);
        else if (!strcmp(argv[first], "--block"))
            block_mib = atof(argv[first + 1]);
        else if (!strcmp(argv[first], "--seconds"))
            seconds = atof(argv[first + 1]);
        else
            break;
    }
    if (first >= argc || threads < 1 || threads > 1024 || block_mib <= 0 || block_mib > 1024 ||
        seconds < 0) {
        fprintf(stderr, "usage: bench_odirect [--threads T (1..1024)] [--block MiB (<= 1024)] "
                        "[--seconds S] FILE...\n");
        return 2;
    }
    job j = {.files = argv + first, .nfiles = argc - first};
    j.block = ((size_t)(block_mib * 1048576) + ALIGN - 1) / ALIGN * ALIGN;
    j.piece = j.block > PIECE ? j.block : PIECE;
    pthread_t *t = calloc((size_t)threads, sizeof *t);
    j.bufs = calloc((size_t)threads, sizeof *j.bufs);
    if (!t || !j.bufs || count_pieces(&j) != 0)
        return 1;
    for (int i = 0; i < threads; i++) {
        if (posix_memalign((void **)&j.bufs[i], ALIGN, j.block) != 0) {
            fprintf(stderr, "bench_odirect: no memory for %d blocks of %zu bytes\n", threads,
                    j.block);
            return 1;
        }
        memset(j.bufs[i], 0, j.block); /* touched before the clock, not during */
    }
    double t0 = bench_now();
    j.stop = seconds > 0 ? t0 + seconds : 0;
    int started = 0;
    for (; started < threads; started++)
        if (pthread_create(&t[started], NULL, reader, &j) != 0)
            break;
    for (int i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    double secs = bench_now() - t0;
    for (int i = 0; i < threads; i++)
        free(j.bufs[i]);
    free(j.bufs);
    free(t);
    free(j.first);
    if (started == 0 || atomic_load(&j.failed))
        return 1;
    unsigned long long bytes = atomic_load(&j.bytes);
    printf("odirect: %d threads, %d files, %llu bytes, %.3f s: %.1f MB/s (%s)\n", started,
           j.nfiles, bytes, secs, (double)bytes / secs / 1e6,
           atomic_load(&j.buffered) ? "buffered: O_DIRECT refused" : "O_DIRECT");
    return 0;
}
