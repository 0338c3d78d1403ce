/* checkpoint.c - see checkpoint.h. */
#include "checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Writes n bytes to path via path.tmp and a rename.  The temporary is made
 * anew by sc_output_open (0600, never through a link someone planted at
 * its name on a shared node); the rename replaces whatever is at path, a
 * link included, without writing through it.  0 or -1.
 */
static int write_whole(const char *path, const void *buf, size_t n)
{
    char tmp[4200];
    sc_error err = SC_ERROR_INIT;
    int fd = -1;
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (sc_output_open(tmp, &fd, &err) != SC_OK) {
        fprintf(stderr, "train: checkpoint '%s': %s\n", path, err.msg);
        return -1;
    }
    FILE *f = fdopen(fd, "wb");
    int ok = f && fwrite(buf, 1, n, f) == n;
    if (!f)
        close(fd);
    if (f && fclose(f) != 0)
        ok = 0;
    if (ok && rename(tmp, path) != 0)
        ok = 0;
    if (!ok)
        fprintf(stderr, "train: checkpoint '%s': %s\n", path, strerror(errno));
    return ok ? 0 : -1;
}

int ex_ckpt_save(MPI_Comm comm, const char *dir, sc_loader *ld, const float *w, size_t nw)
{
    int rank, bad = 0;
    MPI_Comm_rank(comm, &rank);
    unsigned char rec[SC_CHECKPOINT_MAX_BYTES];
    size_t len = 0;
    char path[4096];
    if (sc_loader_checkpoint(ld, rec, sizeof rec, &len) != SC_OK) {
        fprintf(stderr, "train[rank %d]: %s\n", rank, sc_loader_last_error(ld));
        bad = 1;
    }
    snprintf(path, sizeof path, "%s/ckpt-r%d.bin", dir, rank);
    bad = bad || write_whole(path, rec, len);
    snprintf(path, sizeof path, "%s/model.bin", dir);
    bad = bad || (rank == 0 && write_whole(path, w, sizeof *w * nw));
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, comm);
    return bad ? -1 : 0;
}

int ex_ckpt_load(MPI_Comm comm, const char *dir, sc_loader *ld, float *w, size_t nw,
                 uint64_t *epoch)
{
    int rank, n = 0, bad = 0;
    MPI_Comm_rank(comm, &rank);
    enum { MAXR = 4096 };
    static unsigned char *recs[MAXR]; /* each at most SC_CHECKPOINT_MAX_BYTES */
    const void *ptrs[MAXR];
    size_t lens[MAXR];
    char path[4096];
    if (rank == 0) {
        for (; n < MAXR; n++) {
            snprintf(path, sizeof path, "%s/ckpt-r%d.bin", dir, n);
            FILE *f = fopen(path, "rb");
            if (!f || !(recs[n] = malloc(SC_CHECKPOINT_MAX_BYTES))) {
                if (f)
                    fclose(f);
                break;
            }
            lens[n] = fread(recs[n], 1, SC_CHECKPOINT_MAX_BYTES, f);
            ptrs[n] = recs[n];
            fclose(f);
        }
        snprintf(path, sizeof path, "%s/model.bin", dir);
        FILE *f = fopen(path, "rb");
        bad = !f || fread(w, sizeof *w, nw, f) != nw;
        if (f)
            fclose(f);
        if (bad || !n)
            fprintf(stderr, "train: no checkpoint to resume in '%s' (%d rank records, %s "
                            "weights)\n", dir, n, bad ? "no" : "its");
        bad = bad || !n;
    }
    MPI_Bcast(&bad, 1, MPI_INT, 0, comm);
    if (!bad)
        MPI_Bcast(w, (int)nw, MPI_FLOAT, 0, comm);
    int rc = bad ? SC_EINVAL : sc_loader_resume(ld, ptrs, lens, n, epoch);
    for (int i = 0; i < n; i++)
        free(recs[i]);
    if (bad)
        return -1;
    if (rc != SC_OK) {
        fprintf(stderr, "train[rank %d]: %s\n", rank, sc_loader_last_error(ld));
        return -1;
    }
    return 0;
}
