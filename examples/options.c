/* options.c - see options.h. */
#include "options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int opts_usage(void)
{
    fprintf(stderr, "usage: train [--epochs N] [--lr X] [--classes K] [--step-ms X]\n"
                    "             [--device auto|cpu|gpu|sim] [--transform MARGIN] [--source FILE]\n"
                    "             [--checkpoint DIR] [--resume DIR] [--kill-after STEPS]\n"
                    "             [--images NAME] [--labels NAME] [--eval FILE]\n"
                    "             [--decode jpeg|jpeg-once] [--crop N]\n"
                    "--decode: the images are JPEG bytes, decoded every epoch (jpeg: a random\n"
                    "resized crop and flip) or once (jpeg-once) to 3 x N x N (--crop N, 56)\n"
                    "--device: where batches land; without it SC_DEVICE says, else auto\n"
                    "(the GPU when every rank sees one; sim: testing builds)\n");
    return 2;
}

int ex_opts_parse(int argc, char **argv, ex_opts *o)
{
    *o = (ex_opts){3, 10, 0.002, 0.0, NULL, "/images", "/labels", NULL, 0, NULL, NULL, NULL, 0,
                   NULL, NULL};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v)
            return opts_usage();
        if (!strcmp(a, "--epochs"))
            o->epochs = strtoull(v, &end, 10);
        else if (!strcmp(a, "--classes"))
            o->classes = strtoull(v, &end, 10);
        else if (!strcmp(a, "--lr"))
            o->lr = strtod(v, &end);
        else if (!strcmp(a, "--step-ms"))
            o->step_ms = strtod(v, &end);
        else if (!strcmp(a, "--source"))
            o->source = v, end = (char *)"";
        else if (!strcmp(a, "--images"))
            o->images = v, end = (char *)"";
        else if (!strcmp(a, "--labels"))
            o->labels = v, end = (char *)"";
        else if (!strcmp(a, "--transform"))
            o->crop = strtoull(v, &end, 10);
        else if (!strcmp(a, "--checkpoint"))
            o->ckpt = v, end = (char *)"";
        else if (!strcmp(a, "--resume"))
            o->resume = v, end = (char *)"";
        else if (!strcmp(a, "--eval"))
            o->eval = v, end = (char *)"";
        else if (!strcmp(a, "--decode") && (!strcmp(v, "jpeg") || !strcmp(v, "jpeg-once")))
            o->decode = v, end = (char *)"";
        else if (!strcmp(a, "--crop"))
            o->decode_size = v, strtoull(v, &end, 10);
        else if (!strcmp(a, "--kill-after"))
            o->kill_after = strtoull(v, &end, 10);
        else if (!strcmp(a, "--device") &&
                 (!strcmp(v, "auto") || !strcmp(v, "cpu") || !strcmp(v, "gpu") ||
                  !strcmp(v, "sim")))
            o->device = v, end = (char *)"";
        else
            return opts_usage();
        if (!end || *end || (o->epochs < 1) || o->classes < 2 || !(o->lr > 0) ||
            o->step_ms < 0) {
            fprintf(stderr, "train: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    if (o->decode_size && !o->decode) {
        fprintf(stderr, "train: --crop is the size --decode decodes to: add --decode jpeg\n");
        return 2;
    }
    /* A linear model over 3 x 224 x 224 inputs diverges at the default rate: 56 trains. */
    if (o->decode && !o->decode_size && !getenv("SC_DECODE_SIZE"))
        o->decode_size = "56";
    return 0;
}
