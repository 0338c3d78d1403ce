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

int ex_crop_transform(ex_crop *crop, int with_flip, sc_transform *tf)
{
    if (crop->h <= 2 * crop->margin || crop->w <= 2 * crop->margin)
        return SC_EINVAL;
    memset(tf, 0, sizeof *tf);
    tf->name = "normalize-crop";
    tf->version = "1";
    tf->nout = 2;
    snprintf(tf->out[0].name, sizeof tf->out[0].name, "/images");
    snprintf(tf->out[0].dtype, sizeof tf->out[0].dtype, "float32");
    tf->out[0].ndims = 3;
    tf->out[0].dims[0] = crop->c;
    tf->out[0].dims[1] = crop->h - 2 * crop->margin;
    tf->out[0].dims[2] = crop->w - 2 * crop->margin;
    snprintf(tf->out[1].name, sizeof tf->out[1].name, "/labels");
    snprintf(tf->out[1].dtype, sizeof tf->out[1].dtype, "int64");
    tf->out[1].ndims = 0;
    tf->shard = crop_shard;
    tf->augment = with_flip ? flip : NULL;
    tf->arg = crop;
    return SC_OK;
}
