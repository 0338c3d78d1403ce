/*
 * ckpt.h - the checkpoint record: what sc_loader_checkpoint writes for one
 * rank and sc_loader_resume reads back (api/resume decides what to do with
 * it).  Pure bytes in and out, with no MPI, no HDF5 and no dataset, so that
 * the decoder can be fuzzed on its own (tests/fuzz/fuzz_ckpt_decode.c).
 *
 * Two kinds, told apart by their version word:
 *  - plain (version 4, SC__CKPT_BYTES): a rank of an epoch run on its
 *    plan's ranks (or, with partitions, on any number of them): how many of
 *    its plan schedule's batches it took;
 *  - resliced (version 5, SC__CKPT_HEAD_BYTES + 16 bytes a piece, at most
 *    SC__CKPT_MAX_BYTES): a rank of an epoch dealt out again after a resume
 *    on another number of ranks: what it has left, named explicitly as
 *    pieces of the epoch's canonical space (below).
 *
 * The canonical space of an epoch is its plan's (for world0 ranks) real
 * samples: position (q, i) is rank q's schedule's i-th real sample
 * (sc__schedule), i < its nreal.  Every sample of the epoch that the plan
 * does not drop has exactly one position.
 */
#ifndef SC_CKPT_H
#define SC_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "shardcache/base.h"

#define SC__CKPT_BYTES 128       /* a plain record */
#define SC__CKPT_HEAD_BYTES 176  /* a resliced record without pieces (hash included) */
#define SC__CKPT_PIECE_BYTES 16
#define SC__CKPT_MAX_BYTES 4096  /* shardcache.h's SC_CHECKPOINT_MAX_BYTES */
/* The most pieces a resliced record holds: 245. */
#define SC__CKPT_MAX_PIECES ((SC__CKPT_MAX_BYTES - SC__CKPT_HEAD_BYTES) / SC__CKPT_PIECE_BYTES)
/* A piece's q and positions fit the 24 and 40 bits it is stored in. */
#define SC__CKPT_MAX_WORLD (UINT64_C(1) << 24)
#define SC__CKPT_MAX_POS (UINT64_C(1) << 40)

/* Canonical positions [start, end) of the plan's rank q's real samples. */
typedef struct sc__piece {
    uint64_t q, start, end;
} sc__piece;

typedef struct sc__ckpt {
    uint64_t epoch;
    uint64_t consumed;  /* batches this rank took in the epoch (plain: of its plan schedule;
                           resliced: of this run's share) */
    uint64_t rank, world; /* the checkpointing job's */
    uint64_t seed, mode, exchange_bits, remainder, batch, window;
    uint64_t partitions; /* SC_PARTITIONS (stored in mode's high 32 bits) */
    uint64_t fingerprint, nshards;
    uint64_t batches;   /* of `consumed`'s schedule; UINT64_MAX: unknown, never ended */
    /* Resliced records only (resliced = 0: plain, the rest 0): */
    int resliced;
    uint64_t world0, batches0; /* the epoch's plan: its ranks, its batches per rank */
    uint64_t run;              /* the run that wrote it: a hash of the records it resumed */
    uint64_t padded;           /* padding repeats delivered (rank 0: by the runs before too) */
    uint64_t dropped;          /* canonical samples dropped by a share's remainder (rank 0:
                                  by the runs before too); no piece names them */
    uint64_t npieces;          /* what it has left: its pieces, in its order */
    const unsigned char *raw;  /* decoded: the record's bytes (its pieces: sc__ckpt_piece) */
    size_t nraw;
} sc__ckpt;

/* The bytes of c's encoding (plain or resliced with c->npieces pieces). */
size_t sc__ckpt_size(const sc__ckpt *c);
/* Writes sc__ckpt_size(c) bytes; pieces[c->npieces] for a resliced record. */
void sc__ckpt_encode(const sc__ckpt *c, const sc__piece *pieces, unsigned char *out);
/*
 * SC_EFORMAT / SC_EVERSION naming what is wrong with blob `which`.  out
 * points into buf (raw): buf must outlive out's use of its pieces.
 */
int sc__ckpt_decode(const void *buf, size_t len, int which, sc__ckpt *out, sc_error *err);
/* Piece i (< c->npieces) of a decoded resliced record. */
sc__piece sc__ckpt_piece(const sc__ckpt *c, uint64_t i);

#endif /* SC_CKPT_H */
