/* model.c - see model.h. */
#include "model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int ex_model_init(ex_model *m, uint64_t d, uint64_t k)
{
    *m = (ex_model){d, k, calloc(k * (d + 1), sizeof(float)), calloc(k * (d + 1), sizeof(float)),
                    NULL, 0};
    return m->w && m->grad ? 0 : -1;
}

void ex_model_free(ex_model *m)
{
    free(m->w);
    free(m->grad);
    free(m->scaled);
    memset(m, 0, sizeof *m);
}

/* The batch's pixels as floats in [0,1], in a buffer kept between steps. */
static const float *model_inputs(ex_model *m, const void *x, int floats, uint64_t n)
{
    if (floats)
        return x;
    if (m->scaled_n < n * m->d) {
        free(m->scaled);
        m->scaled = malloc(sizeof *m->scaled * (m->scaled_n = n * m->d));
        if (!m->scaled)
            return NULL;
    }
    const uint8_t *px = x;
    for (uint64_t j = 0; j < n * m->d; j++)
        m->scaled[j] = (float)px[j] * (1.0f / 255.0f);
    return m->scaled;
}

/* The class probabilities of one sample, p[k]; returns the likeliest class. */
static uint64_t model_forward(const ex_model *m, const float *xi, float *p)
{
    uint64_t d = m->d, k = m->k, row = d + 1, best = 0;
    float mx = -INFINITY;
    for (uint64_t c = 0; c < k; c++) {
        const float *wc = m->w + c * row;
        float z = wc[d];
        for (uint64_t j = 0; j < d; j++)
            z += wc[j] * xi[j];
        p[c] = z;
        if (z > mx)
            mx = z, best = c;
    }
    float sum = 0;
    for (uint64_t c = 0; c < k; c++)
        sum += p[c] = expf(p[c] - mx);
    for (uint64_t c = 0; c < k; c++)
        p[c] /= sum;
    return best;
}

/* Adds one sample's gradient; returns its cross-entropy. */
static double model_sample(ex_model *m, const float *xi, int64_t y, uint64_t n)
{
    uint64_t d = m->d, k = m->k, row = d + 1;
    float p[256];
    model_forward(m, xi, p);
    for (uint64_t c = 0; c < k; c++) {
        float g = (p[c] - (c == (uint64_t)y)) / (float)n;
        float *gc = m->grad + c * row;
        for (uint64_t j = 0; j < d; j++)
            gc[j] += g * xi[j];
        gc[d] += g;
    }
    return -log(p[y] > 1e-30f ? p[y] : 1e-30f);
}

double ex_model_eval(ex_model *m, const uint8_t *x, const int64_t *y, uint64_t n,
                     uint64_t *correct)
{
    double loss = 0;
    float p[256];
    *correct = 0;
    for (uint64_t i = 0; i < n; i++) {
        const float *in = model_inputs(m, x + i * m->d, 0, 1);
        if (!in)
            return NAN;
        if (y[i] < 0 || (uint64_t)y[i] >= m->k)
            continue;
        *correct += model_forward(m, in, p) == (uint64_t)y[i];
        loss -= log(p[y[i]] > 1e-30f ? p[y[i]] : 1e-30f);
    }
    return loss;
}

double ex_model_step(ex_model *m, const void *x, int floats, const int64_t *y, uint64_t n,
                     MPI_Comm comm, int nranks, double lr, int *bad_label)
{
    const float *in = model_inputs(m, x, floats, n);
    if (!in)
        return NAN;
    double loss = 0;
    memset(m->grad, 0, sizeof *m->grad * ex_model_size(m));
    for (uint64_t i = 0; i < n; i++) {
        if (y[i] < 0 || (uint64_t)y[i] >= m->k) {
            *bad_label = 1;
            continue;
        }
        loss += model_sample(m, in + i * m->d, y[i], n);
    }
    MPI_Allreduce(MPI_IN_PLACE, m->grad, (int)ex_model_size(m), MPI_FLOAT, MPI_SUM, comm);
    float scale = (float)(lr / nranks);
    for (uint64_t i = 0; i < ex_model_size(m); i++)
        m->w[i] -= scale * m->grad[i];
    return loss;
}
