/*
 * checkpoint.h - the example trainer's checkpoints: every rank's loader
 * record (sc_loader_checkpoint) and the model's weights, written to a
 * directory after a step, and read back to resume, on any number of ranks.
 */
#ifndef TRAIN_CHECKPOINT_H
#define TRAIN_CHECKPOINT_H

#include <shardcache.h>

/*
 * Collective.  Writes DIR/ckpt-rR.bin on every rank and DIR/model.bin on
 * rank 0, each through a temporary file and a rename, so that a crash
 * leaves the previous checkpoint whole.  0, or -1 with a message on stderr.
 */
int ex_ckpt_save(MPI_Comm comm, const char *dir, sc_loader *ld, const float *w, size_t nw);

/*
 * Collective, right after sc_loader_open: rank 0 reads every ckpt-r*.bin
 * and the weights, which every rank then gets; the loader resumes
 * (sc_loader_resume) and *epoch is the epoch to begin next.
 */
int ex_ckpt_load(MPI_Comm comm, const char *dir, sc_loader *ld, float *w, size_t nw,
                 uint64_t *epoch);

#endif
