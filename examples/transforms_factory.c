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

int ex_crop_factory(const sc_dataset *ds, const char *arg, sc_transform *out, char *msg,
                    size_t msglen);

int ex_crop_factory(const sc_dataset *ds, const char *arg, sc_transform *out, char *msg,
                    size_t msglen)
{
    char *end = NULL;
    unsigned long long margin = strtoull(arg ? arg : "", &end, 10);
    int flip = end && !strcmp(end, ",flip");
    sc_field_info fi;
    if (!end || end == arg || (*end && !flip) || sc_dataset_field(ds, 0, &fi) != SC_OK ||
        strcmp(fi.dtype, "uint8") || fi.ndims != 3) {
        snprintf(msg, msglen, "ex_crop_factory: wants the margin ('4' or '4,flip', got '%s') "
                 "and a first field of uint8 [C][H][W]", arg ? arg : "");
        return SC_EINVAL;
    }
    ex_crop *crop = malloc(sizeof *crop); /* lives as long as the process, as the loader's */
    if (!crop)
        return SC_ENOMEM;
    *crop = (ex_crop){fi.dims[0], fi.dims[1], fi.dims[2], margin};
    int rc = ex_crop_transform(crop, flip, out);
    if (rc != SC_OK) {
        snprintf(msg, msglen, "ex_crop_factory: a margin of %llu leaves nothing of %llux%llu",
                 margin, (unsigned long long)fi.dims[1], (unsigned long long)fi.dims[2]);
        free(crop);
    }
    return rc;
}
