/*
 * ledger_words.c - the exactly-once verdict's words for an epoch some rank
 * stopped on a bad sample in (see ledger_words.h).
 */
#include "ledger_words.h"

#include <stdio.h>

void sc__ledger_say_stopped(sc_exactly_once *v, uint64_t stop_epoch, int skip, uint64_t failed)
{
    const char *policy = skip ? "SC_BAD_SAMPLE=skip, and no other sample of its "
                                        "shard could take its place"
                                      : "SC_BAD_SAMPLE=error; SC_BAD_SAMPLE=skip replaces "
                                        "such samples";
    int ahead = v->stopped == 1 && stop_epoch != v->epoch;
    int at = ahead ? snprintf(v->detail, sizeof v->detail, "epoch %llu cannot be verified: ",
                              (unsigned long long)v->epoch)
                   : 0;
    if (v->stopped == 1)
        snprintf(v->detail + at, sizeof v->detail - (size_t)at,
                 "rank %llu stopped in epoch %llu on sample %llu, whose image does not decode "
                 "(%s; its message says why); %llu rank(s) abandoned the epoch",
                 (unsigned long long)v->stopped_rank, (unsigned long long)stop_epoch,
                 (unsigned long long)v->stopped_sample, policy,
                 (unsigned long long)failed);
    else
        snprintf(v->detail, sizeof v->detail,
                 "%llu ranks stopped in or before epoch %llu on samples whose images do not "
                 "decode (%s; their messages name them); %llu rank(s) abandoned the epoch",
                 (unsigned long long)v->stopped, (unsigned long long)v->epoch, policy,
                 (unsigned long long)failed);
}
