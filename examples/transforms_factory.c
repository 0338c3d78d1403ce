/*
 * transforms_factory.c - the example's crop as a transform by name
 * (sc_transform_factory), built into libsc_example_transforms.so, so that
 * a Python loop can ask for it:
 *
 *   shardcache.Loader(..., transform="/path/libsc_example_transforms.so:ex_crop_factory",
 *                     transform_arg="4")          # the margin; "4,flip" adds the flip
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transforms.h"

int ex_crop_factory(const char *arg, sc_transform *out, char *msg, size_t msglen);

/* The images' shape comes at the open (sc_transform.outputs): only the margin here. */
int ex_crop_factory(const char *arg, sc_transform *out, char *msg, size_t msglen)
{
    char *end = NULL;
    unsigned long long margin = strtoull(arg ? arg : "", &end, 10);
    int flip = end && !strcmp(end, ",flip");
    if (!end || end == arg || (*end && !flip)) {
        snprintf(msg, msglen, "ex_crop_factory: wants the margin ('4' or '4,flip', got '%s')",
                 arg ? arg : "");
        return SC_EINVAL;
    }
    ex_crop *crop = calloc(1, sizeof *crop); /* lives as long as the process, as the loader's */
    if (!crop)
        return SC_ENOMEM;
    crop->margin = margin;
    return ex_crop_transform(crop, flip, out); /* shape 0: learnt at the open */
}
