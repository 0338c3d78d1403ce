/*
 * options.h - the example trainer's command line (see train.c's header).
 */
#ifndef TRAIN_OPTIONS_H
#define TRAIN_OPTIONS_H

#include <stdint.h>

typedef struct ex_opts {
    uint64_t epochs, classes;
    double lr, step_ms;
    const char *source, *images, *labels, *device;
    uint64_t crop; /* --transform M: normalize and crop M pixels a side, once; flip per delivery */
    const char *ckpt, *resume;
    const char *eval; /* --eval FILE: a held-out set, scored after every epoch */
    uint64_t kill_after;
    const char *decode, *decode_size; /* --decode jpeg|jpeg-once, --crop N: SC_DECODE(_SIZE) */
} ex_opts;

/* 0, or 2 after printing the usage or the bad value to stderr. */
int ex_opts_parse(int argc, char **argv, ex_opts *o);

#endif
