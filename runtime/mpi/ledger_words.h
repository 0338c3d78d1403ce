/*
 * ledger_words.h - the verdict's detail in words, apart from the ledger's
 * bookkeeping (ledger.c): which rank stopped where, under which policy.
 */
#ifndef SC_LEDGER_WORDS_H
#define SC_LEDGER_WORDS_H

#include <stdint.h>

#include "shardcache.h"

/*
 * The detail of an epoch some rank stopped on a bad sample in, or before
 * (then the epoch cannot be verified: that rank never ran it), with the
 * policy it stopped under (skip: SC_BAD_SAMPLE=skip) and what to do next.
 */
void sc__ledger_say_stopped(sc_exactly_once *v, uint64_t stop_epoch, int skip, uint64_t failed);

#endif /* SC_LEDGER_WORDS_H */
