/*
 * train - a real training loop fed by shardcache: a linear softmax
 * classifier over the /images field (uint8 pixels scaled to [0,1]) with
 * /labels (int64) as targets, trained by SGD, gradients averaged across
 * ranks every step.  On the CPU the batch stays in host memory and
 * MPI_Allreduce sums the gradients; when the build has CUDA (nvcc) and a
 * GPU is visible, the loader puts batches on the device and CUDA kernels
 * (train_gpu.cu) train there, with ncclAllReduce when built with NCCL.
 *
 *   mpirun -np 4 train --epochs 3 [--lr 0.002] [--classes 10] [--step-ms X]
 *                      [--device auto|cpu|gpu] [--transform MARGIN]
 *                      [--checkpoint DIR] [--resume DIR] [--kill-after STEPS]
 *                      [--source FILE] [--images /images] [--labels /labels]
 *
 * --checkpoint DIR saves every rank's loader record and the weights after
 * every step (checkpoint.c); --resume DIR continues from them, on this
 * run's number of ranks, whatever it was before.  --kill-after N (for
 * tests) makes every rank SIGKILL itself right after checkpointing step N.
 *
 * --transform M (CPU model) registers an sc_transform (transforms.c): the
 * images are scaled to [0,1] and cropped by M pixels a side once, when a
 * shard is first read, and cached so; every delivery flips a sample
 * left-right with probability 1/2, reproducibly.
 *
 * Everything else comes from the SC_* environment (sc_config_init).  Per
 * epoch rank 0 prints loss, samples/s, consumer wait as a share of the
 * epoch, cache hit rate and the exactly-once verdict; at the end four
 * summary lines.  Exits 1 if any epoch is not exactly-once or the loss did
 * not fall.  Only the public header is used: this is what a user writes.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shardcache.h>

#include "checkpoint.h"
#include "transforms.h"

#include <signal.h>

#ifdef TRAIN_HAVE_CUDA
#include "train_gpu.h"
#endif

typedef struct opts {
    uint64_t epochs, classes;
    double lr, step_ms;
    const char *source, *images, *labels, *device;
    uint64_t crop; /* --transform M: normalize and crop M pixels a side, once; flip per delivery */
    const char *ckpt, *resume;
    uint64_t kill_after;
} opts;

static int usage(void)
{
    fprintf(stderr, "usage: train [--epochs N] [--lr X] [--classes K] [--step-ms X]\n"
                    "             [--device auto|cpu|gpu] [--transform MARGIN] [--source FILE]\n"
                    "             [--checkpoint DIR] [--resume DIR] [--kill-after STEPS]\n"
                    "             [--images NAME] [--labels NAME]\n");
    return 2;
}

static int parse(int argc, char **argv, opts *o)
{
    *o = (opts){3, 10, 0.002, 0.0, NULL, "/images", "/labels", "auto", 0, NULL, NULL, 0};
    for (int i = 1; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v)
            return usage();
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
        else if (!strcmp(a, "--kill-after"))
            o->kill_after = strtoull(v, &end, 10);
        else if (!strcmp(a, "--device") &&
                 (!strcmp(v, "auto") || !strcmp(v, "cpu") || !strcmp(v, "gpu")))
            o->device = v, end = (char *)"";
        else
            return usage();
        if (!end || *end || (o->epochs < 1) || o->classes < 2 || !(o->lr > 0) ||
            o->step_ms < 0) {
            fprintf(stderr, "train: bad value '%s' for %s\n", v, a);
            return 2;
        }
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The compute a real model would spend per step, for benchmarks. */
static void busy_for(double ms)
{
    double until = now() + ms / 1e3;
    while (now() < until)
        ;
}

typedef struct model {
    uint64_t d, k;
    float *w, *grad; /* [k][d + 1]: the last column is the bias */
} model;

/* One SGD step on a batch of inputs in [0,1]; returns its summed cross-entropy. */
static double step(model *m, const float *x, const int64_t *y, uint64_t n,
                   MPI_Comm comm, int nranks, double lr, int *bad_label)
{
    uint64_t d = m->d, k = m->k, row = d + 1;
    double loss = 0;
    float logits[256], p[256];
    memset(m->grad, 0, sizeof *m->grad * k * row);
    for (uint64_t i = 0; i < n; i++) {
        const float *xi = x + i * d;
        if (y[i] < 0 || (uint64_t)y[i] >= k) {
            *bad_label = 1;
            continue;
        }
        float mx = -INFINITY;
        for (uint64_t c = 0; c < k; c++) {
            const float *wc = m->w + c * row;
            float z = wc[d];
            for (uint64_t j = 0; j < d; j++)
                z += wc[j] * xi[j];
            logits[c] = z;
            mx = z > mx ? z : mx;
        }
        float sum = 0;
        for (uint64_t c = 0; c < k; c++)
            sum += p[c] = expf(logits[c] - mx);
        for (uint64_t c = 0; c < k; c++) {
            p[c] /= sum;
            float g = (p[c] - (c == (uint64_t)y[i])) / (float)n;
            float *gc = m->grad + c * row;
            for (uint64_t j = 0; j < d; j++)
                gc[j] += g * xi[j];
            gc[d] += g;
        }
        loss -= log(p[y[i]] > 1e-30f ? p[y[i]] : 1e-30f);
    }
    MPI_Allreduce(MPI_IN_PLACE, m->grad, (int)(k * row), MPI_FLOAT, MPI_SUM, comm);
    float scale = (float)(lr / nranks);
    for (uint64_t i = 0; i < k * row; i++)
        m->w[i] -= scale * m->grad[i];
    return loss;
}

static int field_index(const sc_dataset *ds, const char *name, const char *dtype,
                       sc_field_info *out)
{
    sc_dataset_info di;
    sc_dataset_get_info(ds, &di);
    for (int i = 0; i < di.nfields; i++) {
        sc_dataset_field(ds, i, out);
        const char *n = out->name[0] == '/' ? out->name + 1 : out->name;
        const char *want = name[0] == '/' ? name + 1 : name;
        if (!strcmp(n, want))
            return strcmp(out->dtype, dtype) ? -2 : i;
    }
    return -1;
}

int main(int argc, char **argv)
{
    int provided, rank, nranks, rc;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    opts o;
    if ((rc = parse(argc, argv, &o)) != 0) {
        MPI_Finalize();
        return rc;
    }

    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    if (sc_config_init(&cfg, &err) != SC_OK ||
        (o.source && sc_config_set(&cfg, "SC_SOURCE", o.source, &err) != SC_OK)) {
        fprintf(stderr, "train: %s\n", err.msg);
        MPI_Finalize();
        return 2;
    }
    /*
     * The GPU when this build can train there and a device is visible
     * (--device auto), else the CPU, with batches in host memory.
     */
    sc_features f;
    sc_features_get(&f);
    int gpu = 0;
#ifdef TRAIN_HAVE_CUDA
    gpu = strcmp(o.device, "cpu") != 0 && f.cuda_devices > 0;
#endif
    if (!strcmp(o.device, "gpu") && !gpu) {
        if (rank == 0)
            fprintf(stderr, "train: --device gpu, but %s\n",
                    f.cuda_devices ? "this build has no nvcc-built GPU model"
                                   : "no CUDA device is visible");
        MPI_Finalize();
        return 2;
    }
    cfg.device = gpu ? SC_DEVICE_CUDA : SC_DEVICE_HOST;
    /* The transform needs the images' shape: a look at the dataset first. */
    ex_crop crop = {0, 0, 0, o.crop};
    sc_transform tf;
    if (o.crop) {
        sc_dataset *ds = NULL;
        sc_field_info fi;
        int ok = !gpu && sc_dataset_open(MPI_COMM_WORLD, &cfg, &ds, &err) == SC_OK &&
                 field_index(ds, o.images, "uint8", &fi) >= 0 && fi.ndims == 3;
        if (ok) {
            crop.c = fi.dims[0], crop.h = fi.dims[1], crop.w = fi.dims[2];
            ok = ex_crop_transform(&crop, 1, &tf) == SC_OK;
        }
        sc_dataset_close(ds);
        if (!ok) {
            if (rank == 0)
                fprintf(stderr, "train: --transform %llu needs the CPU model and a uint8 "
                                "[C][H][W] field '%s' larger than the crop%s%s\n",
                        (unsigned long long)o.crop, o.images, err.msg[0] ? ": " : "",
                        err.msg);
            MPI_Finalize();
            return 2;
        }
        cfg.transform = &tf;
    }
    sc_loader *ld = NULL;
    if (sc_loader_open(MPI_COMM_WORLD, &cfg, &ld) != SC_OK) {
        MPI_Finalize();
        return 1;
    }
    sc_field_info fx, fy;
    int ix = field_index(sc_loader_dataset(ld), o.images, o.crop ? "float32" : "uint8", &fx);
    int iy = field_index(sc_loader_dataset(ld), o.labels, "int64", &fy);
    if (ix < 0 || iy < 0 || o.classes > 256) {
        if (rank == 0)
            fprintf(stderr, "train: needs a uint8 field '%s' and an int64 field '%s' "
                            "(and at most 256 classes)\n", o.images, o.labels);
        sc_loader_close(ld);
        MPI_Finalize();
        return 2;
    }
    /* Inputs in [0,1]: the transform's floats, or the bytes scaled here. */
    model m = {o.crop ? fx.sample_bytes / sizeof(float) : fx.sample_bytes, o.classes, NULL, NULL};
    float *scaled = NULL;
    uint64_t scaled_n = 0;
    m.w = calloc(m.k * (m.d + 1), sizeof *m.w);
    m.grad = calloc(m.k * (m.d + 1), sizeof *m.grad);
#ifdef TRAIN_HAVE_CUDA
    tg_model *g = NULL;
#endif

    double first_loss = NAN, last_loss = NAN, wait_all = 0, wall_all = 0;
    uint64_t later_hits = 0, later_reads = 0, samples_all = 0, dup_all = 0, skip_all = 0;
    int all_ok = 1, bad_label = 0;
    uint64_t e0 = 0, steps = 0;
    if ((o.ckpt || o.resume) && gpu) {
        if (rank == 0)
            fprintf(stderr, "train: --checkpoint and --resume run the CPU model\n");
        rc = 2;
    } else if (o.resume && ex_ckpt_load(MPI_COMM_WORLD, o.resume, ld, m.w, m.k * (m.d + 1),
                                        &e0) != 0) {
        rc = 1;
    }
    for (uint64_t e = e0; e < o.epochs && rc == 0; e++) {
        sc_epoch_info info;
        if (sc_epoch_begin(ld, e, &info) != SC_OK) {
            fprintf(stderr, "train[rank %d]: %s\n", rank, sc_last_error(ld));
            rc = 1;
            break;
        }
        double loss = 0, t0 = now();
        uint64_t n = 0;
        sc_batch b;
        while ((rc = sc_next_batch(ld, &b)) == SC_OK) {
#ifdef TRAIN_HAVE_CUDA
            if (gpu) {
                /* The model lives where the loader puts the batches. */
                char msg[256];
                double bl = 0;
                if ((!g && tg_open(b.device, m.d, m.k, MPI_COMM_WORLD, &g, msg, sizeof msg)) ||
                    tg_step(g, b.data[ix], b.data[iy], b.size, b.ready, o.lr, &bl,
                            &bad_label, msg, sizeof msg)) {
                    /* The other ranks are in the gradient all-reduce: stop them too. */
                    fprintf(stderr, "train[rank %d]: GPU %d: %s\n", rank, b.device, msg);
                    MPI_Abort(MPI_COMM_WORLD, 1);
                }
                loss += bl;
            } else
#endif
            {
            const float *x = b.data[ix];
            if (!o.crop) {
                if (scaled_n < b.size * m.d) {
                    free(scaled);
                    scaled = malloc(sizeof *scaled * (scaled_n = b.size * m.d));
                    if (!scaled) {
                        fprintf(stderr, "train[rank %d]: out of memory\n", rank);
                        MPI_Abort(MPI_COMM_WORLD, 1);
                    }
                }
                const uint8_t *px = b.data[ix];
                for (uint64_t j = 0; j < b.size * m.d; j++)
                    scaled[j] = (float)px[j] * (1.0f / 255.0f);
                x = scaled;
            }
            loss += step(&m, x, b.data[iy], b.size, MPI_COMM_WORLD, nranks, o.lr, &bad_label);
            }
            n += b.size;
            if (o.step_ms > 0)
                busy_for(o.step_ms);
            sc_batch_release(ld, &b);
            steps++;
            if (o.ckpt && ex_ckpt_save(MPI_COMM_WORLD, o.ckpt, ld, m.w, m.k * (m.d + 1)) != 0)
                MPI_Abort(MPI_COMM_WORLD, 1);
            if (o.kill_after && steps == o.kill_after)
                raise(SIGKILL); /* a test's crash, right after a checkpoint */
        }
        if (rc != SC_END_OF_EPOCH) {
            fprintf(stderr, "train[rank %d]: %s\n", rank, sc_last_error(ld));
            rc = 1;
            break;
        }
        rc = 0;
        double secs = now() - t0;
        sc_epoch_summary rep;
        if (sc_epoch_wait(ld, e, &rep) != SC_OK) {
            fprintf(stderr, "train[rank %d]: %s\n", rank, sc_last_error(ld));
            rc = 1;
            break;
        }
        /* The job's figures: sums over ranks. */
        double mine[6] = {loss, (double)n, rep.wait_s, rep.wall_s,
                          (double)rep.cache_hits, (double)(rep.cache_hits + rep.cache_misses)};
        double all[6];
        MPI_Allreduce(mine, all, 6, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(MPI_IN_PLACE, &secs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double mean = all[0] / all[1];
        if (e == e0)
            first_loss = mean;
        last_loss = mean;
        wait_all += all[2];
        wall_all += all[3];
        if (e > e0)
            later_hits += (uint64_t)all[4], later_reads += (uint64_t)all[5];
        const sc_exactly_once *v = &rep.exactly_once;
        all_ok &= v->ok;
        samples_all += v->delivered;
        dup_all += v->duplicated;
        skip_all += v->skipped;
        if (rank == 0)
            printf("epoch %llu: loss %.4f, %.0f samples/s, consumer wait %.1f%% of step "
                   "time, cache hit rate %.1f%%, exactly-once %s%s%s\n",
                   (unsigned long long)e, mean, all[1] / secs,
                   all[3] > 0 ? 100.0 * all[2] / all[3] : 0.0,
                   all[5] > 0 ? 100.0 * all[4] / all[5] : 0.0, v->ok ? "ok" : "FAILED",
                   v->ok ? "" : ": ", v->ok ? "" : v->detail);
        fflush(stdout);
    }
    int failed = rc != 0 || bad_label;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (sc_loader_close(ld) != SC_OK)
        failed = 1;
    int fell = last_loss < first_loss;
    if (rank == 0 && !failed) {
        printf("exactly-once: %s (%llu epochs, %llu samples, %llu duplicated, %llu skipped)\n",
               all_ok ? "ok" : "FAILED", (unsigned long long)(o.epochs - e0),
               (unsigned long long)samples_all, (unsigned long long)dup_all,
               (unsigned long long)skip_all);
        printf("loss: %.4f -> %.4f%s\n", first_loss, last_loss, fell ? "" : " (did not fall)");
        printf("consumer wait: %.1f%% of step time\n",
               wall_all > 0 ? 100.0 * wait_all / wall_all : 0.0);
        if (o.epochs > e0 + 1)
            printf("cache hit rate after epoch 1: %.1f%%\n",
                   later_reads ? 100.0 * (double)later_hits / (double)later_reads : 0.0);
    }
    if (rank == 0 && bad_label)
        fprintf(stderr, "train: a label is outside 0..%llu (--classes)\n",
                (unsigned long long)(o.classes - 1));
    free(m.w);
    free(m.grad);
    free(scaled);
#ifdef TRAIN_HAVE_CUDA
    tg_close(g);
#endif
    MPI_Finalize();
    return failed || !all_ok || !fell ? 1 : 0;
}
