/*
 * ckpt.h - the checkpoint record: what sc_loader_checkpoint writes for one
 * rank and sc_loader_resume reads back (api/resume decides what to do with
 * it).  Pure bytes in and out, with no MPI, no HDF5 and no dataset, so that
 * the decoder can be fuzzed on its own (tests/fuzz/fuzz_ckpt_decode.c).
 */
#ifndef SC_CKPT_H
#define SC_CKPT_H

#include <stddef.h>
#include <stdint.h>

#include "shardcache/base.h"

#define SC__CKPT_BYTES 128

typedef struct sc__ckpt {
    uint64_t epoch, consumed, rank, world;
    uint64_t seed, mode, exchange_bits, remainder, batch, window;
    uint64_t fingerprint, nshards, batches;
} sc__ckpt;

void sc__ckpt_encode(const sc__ckpt *c, unsigned char out[SC__CKPT_BYTES]);
/* SC_EFORMAT / SC_EVERSION naming what is wrong with blob `which`. */
int sc__ckpt_decode(const void *buf, size_t len, int which, sc__ckpt *out, sc_error *err);

#endif /* SC_CKPT_H */
