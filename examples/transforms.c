/* transforms.c - see transforms.h. */
#include "transforms.h"

#include <stdio.h>
#include <string.h>

void ex_crop_run(const ex_crop *k, const uint8_t *in, uint64_t n, float *out)
{
    uint64_t oh = k->h - 2 * k->margin, ow = k->w - 2 * k->margin;
    for (uint64_t i = 0; i < n; i++)
        for (uint64_t c = 0; c < k->c; c++)
            for (uint64_t y = 0; y < oh; y++) {
                const uint8_t *row = in + ((i * k->c + c) * k->h + y + k->margin) * k->w + k->margin;
                float *o = out + ((i * k->c + c) * oh + y) * ow;
                for (uint64_t x = 0; x < ow; x++)
                    o[x] = (float)row[x] * (1.0f / 255.0f);
            }
}

static int crop_shard(void *arg, uint64_t shard, uint64_t first, uint64_t n,
                      const void *const *in, void *const *out, char *msg, size_t msglen)
{
    (void)shard;
    (void)first;
    (void)msg;
    (void)msglen;
    ex_crop_run(arg, in[0], n, out[0]);
    memcpy(out[1], in[1], n * sizeof(int64_t));
    return 0;
}

static int flip(void *arg, uint64_t epoch, uint64_t sample, uint64_t seed, void *const *fields,
                char *msg, size_t msglen)
{
    const ex_crop *k = arg;
    (void)epoch;
    (void)sample;
    (void)msg;
    (void)msglen;
    if (!(seed & 1))
        return 0;
    uint64_t oh = k->h - 2 * k->margin, ow = k->w - 2 * k->margin;
    float *img = fields[0];
    for (uint64_t r = 0; r < k->c * oh; r++)
        for (uint64_t x = 0; x < ow / 2; x++) {
            float t = img[r * ow + x];
            img[r * ow + x] = img[r * ow + ow - 1 - x];
            img[r * ow + ow - 1 - x] = t;
        }
    return 0;
}

/* The crop's two outputs, from its shape; the number of them. */
static int crop_fields(const ex_crop *k, sc_field_info *out)
{
    memset(out, 0, 2 * sizeof *out);
    snprintf(out[0].name, sizeof out[0].name, "/images");
    snprintf(out[0].dtype, sizeof out[0].dtype, "float32");
    out[0].ndims = 3;
    out[0].dims[0] = k->c;
    out[0].dims[1] = k->h - 2 * k->margin;
    out[0].dims[2] = k->w - 2 * k->margin;
    snprintf(out[1].name, sizeof out[1].name, "/labels");
    snprintf(out[1].dtype, sizeof out[1].dtype, "int64");
    return 2;
}

/* At the open: the shape from the source's first field, which must be uint8 [C][H][W]. */
static int crop_outputs(void *arg, const sc_field_info *in, int nin, sc_field_info *out,
                        int *nout, char *msg, size_t msglen)
{
    ex_crop *k = arg;
    if (nin < 2 || strcmp(in[0].dtype, "uint8") || in[0].ndims != 3 || in[0].vlen ||
        strcmp(in[1].dtype, "int64") || in[1].ndims != 0) {
        snprintf(msg, msglen, "the crop wants uint8 [C][H][W] images, then int64 labels");
        return 1;
    }
    k->c = in[0].dims[0], k->h = in[0].dims[1], k->w = in[0].dims[2];
    if (k->h <= 2 * k->margin || k->w <= 2 * k->margin) {
        snprintf(msg, msglen, "a margin of %llu leaves nothing of %llux%llu",
                 (unsigned long long)k->margin, (unsigned long long)k->h,
                 (unsigned long long)k->w);
        return 1;
    }
    *nout = crop_fields(k, out);
    return 0;
}

int ex_crop_transform(ex_crop *crop, int with_flip, sc_transform *tf)
{
    int known = crop->c || crop->h || crop->w;
    if (known && (crop->h <= 2 * crop->margin || crop->w <= 2 * crop->margin))
        return SC_EINVAL;
    memset(tf, 0, sizeof *tf);
    tf->name = "normalize-crop";
    tf->version = "1";
    if (known)
        tf->nout = crop_fields(crop, tf->out);
    else
        tf->outputs = crop_outputs;
    tf->shard = crop_shard;
    tf->augment = with_flip ? flip : NULL;
    tf->arg = crop;
    return SC_OK;
}
