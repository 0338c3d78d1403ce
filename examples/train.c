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
 *                      [--device auto|cpu|gpu|sim] [--transform MARGIN]
 *                      [--checkpoint DIR] [--resume DIR] [--kill-after STEPS]
 *                      [--source FILE] [--images /images] [--labels /labels]
 *                      [--eval FILE] [--decode jpeg|jpeg-once] [--crop N]
 *
 * --eval FILE (CPU model) scores the model on a held-out set after every
 * epoch (eval.c; `shardcache make-dataset --heldout` makes one): the mean
 * cross-entropy and accuracy on samples it never trained on, which is
 * where a loader's order shows (a class-sorted file read in order trains
 * to a model that forgets the early classes).
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
 * --decode jpeg (a set whose /images are JPEG bytes: make-dataset --encode
 * jpeg) has the producers decode every image at every delivery with a
 * random resized crop and flip to 3 x N x N (--crop N; 56, where a linear
 * model over 224 x 224 would diverge at the default rate); --decode
 * jpeg-once decodes the centre square once into the cache, flipped per
 * delivery (SC_DECODE and SC_DECODE_SIZE say the same).
 *
 * Everything else comes from the SC_* environment (sc_config_init).  Per
 * epoch rank 0 prints loss, samples/s, consumer wait as a share of the
 * epoch, cache hit rate and the exactly-once verdict; at the end four
 * summary lines.  Exits 1 if any epoch is not exactly-once or the loss did
 * not fall.  Only the public header is used: this is what a user writes.
 */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <shardcache.h>

#include "checkpoint.h"
#include "eval.h"
#include "model.h"
#include "options.h"
#include "transforms.h"

#ifdef TRAIN_HAVE_CUDA
#include "train_gpu.h"
#endif

/* The job's figures over its epochs, summed over ranks. */
typedef struct totals {
    double first_loss, last_loss, wait, wall;
    double eval_loss, eval_accuracy; /* after the last epoch, with --eval */
    uint64_t later_hits, later_reads, samples, duplicated, skipped;
    int all_ok;
} totals;

/* What a rank carries from epoch to epoch. */
typedef struct job {
    int rank, nranks, gpu, bad_label;
    sc_loader *ld;
    int ix, iy;      /* the images' and the labels' field in each batch */
    ex_model m;      /* the CPU model */
    ex_eval ev;      /* rank 0's held-out set (--eval) */
#ifdef TRAIN_HAVE_CUDA
    tg_model *g;     /* the GPU model, on the loader's device */
#endif
    uint64_t e0, steps;
    totals t;
} job;

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

/*
 * The loader stopped on this rank mid-epoch: say why and end the job.  The
 * other ranks may be inside the gradient all-reduce, waiting for a step
 * this rank will never take, so closing cleanly here would hang them.
 */
static int loader_failed(const job *j)
{
    fprintf(stderr, "train[rank %d]: %s\n", j->rank, sc_loader_last_error(j->ld));
    fflush(stderr);
    if (j->nranks > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}

/* One SGD step on a batch, on the GPU or the CPU; returns the summed loss. */
static double train_step(const ex_opts *o, job *j, const sc_batch *b)
{
#ifdef TRAIN_HAVE_CUDA
    if (j->gpu) {
        /* Queued on the model's stream; the loss stays on the GPU until the epoch ends. */
        char msg[256];
        if (tg_step(j->g, b->data[j->ix], b->data[j->iy], b->size, b->ready, o->lr, msg,
                    sizeof msg)) {
            /* The other ranks are in the gradient all-reduce: stop them too. */
            fprintf(stderr, "train[rank %d]: GPU %d: %s\n", j->rank, b->device, msg);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        return 0;
    }
#endif
    /* --device sim: the batch is in (simulated) device memory, read once it lands. */
    if (b->device >= 0 && sc_batch_wait(j->ld, b) != SC_OK)
        loader_failed(j);
    double loss = ex_model_step(&j->m, b->data[j->ix], o->crop != 0, b->data[j->iy], b->size,
                                MPI_COMM_WORLD, j->nranks, o->lr, &j->bad_label);
    if (isnan(loss)) {
        fprintf(stderr, "train[rank %d]: out of memory\n", j->rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return loss;
}

/*
 * The stream that reads a batch: the GPU model's, so that the loader reuses
 * the batch's buffers after the step, with no wait on the CPU; NULL on the CPU.
 */
static void *step_stream(const job *j)
{
#ifdef TRAIN_HAVE_CUDA
    if (j->gpu)
        return tg_stream(j->g);
#endif
    (void)j;
    return NULL;
}

/* The epoch's summed loss from the GPU: the one wait for it per epoch. */
static void gpu_epoch_loss(job *j, double *loss)
{
#ifdef TRAIN_HAVE_CUDA
    char msg[256];
    if (j->gpu && tg_epoch_loss(j->g, loss, &j->bad_label, msg, sizeof msg)) {
        fprintf(stderr, "train[rank %d]: GPU: %s\n", j->rank, msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
#else
    (void)j;
    (void)loss;
#endif
}

/* After a step: the benchmark's compute, the checkpoint, a test's crash. */
static void after_step(const ex_opts *o, job *j)
{
    if (o->step_ms > 0)
        busy_for(o->step_ms);
    j->steps++;
    if (o->ckpt && ex_ckpt_save(MPI_COMM_WORLD, o->ckpt, j->ld, j->m.w, ex_model_size(&j->m)))
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (o->kill_after && j->steps == o->kill_after)
        raise(SIGKILL); /* a test's crash, right after a checkpoint */
}

/* Rank 0's line for an epoch, from the job's sums; adds them to the totals. */
static void report_epoch(job *j, uint64_t e, double loss, uint64_t n, double secs,
                         const sc_epoch_summary *rep)
{
    double mine[9] = {loss, (double)n, rep->wait_s, rep->wall_s, (double)rep->cache_hits,
                      (double)(rep->cache_hits + rep->cache_misses),
                      (double)rep->bytes_from_source, (double)rep->bytes_from_peers,
                      (double)rep->bytes_from_cache};
    double all[9];
    MPI_Allreduce(mine, all, 9, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &secs, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    totals *t = &j->t;
    double mean = all[0] / all[1];
    if (e == j->e0)
        t->first_loss = mean;
    t->last_loss = mean;
    t->wait += all[2];
    t->wall += all[3];
    if (e > j->e0)
        t->later_hits += (uint64_t)all[4], t->later_reads += (uint64_t)all[5];
    const sc_exactly_once *v = &rep->exactly_once;
    t->all_ok &= v->ok;
    t->samples += v->delivered;
    t->duplicated += v->duplicated;
    t->skipped += v->skipped;
    if (j->rank == 0)
        printf("epoch %llu: loss %.4f, %.0f samples/s, consumer wait %.1f%% of step "
               "time, cache hit rate %.1f%%, from cache %.1f MiB, from source %.1f MiB, "
               "from other nodes %.1f MiB, "
               "exactly-once %s%s%s\n",
               (unsigned long long)e, mean, all[1] / secs,
               all[3] > 0 ? 100.0 * all[2] / all[3] : 0.0,
               all[5] > 0 ? 100.0 * all[4] / all[5] : 0.0, all[8] / 1048576.0, all[6] / 1048576.0,
               all[7] / 1048576.0, v->ok ? "ok" : "FAILED",
               v->ok ? "" : ": ", v->ok ? "" : v->detail);
    fflush(stdout);
}

/* One epoch: a step per batch this rank is given, then the job's verdict. */
static int train_epoch(const ex_opts *o, job *j, uint64_t e)
{
    sc_epoch_info info;
    if (sc_epoch_begin(j->ld, e, &info) != SC_OK)
        return loader_failed(j);
    double loss = 0, t0 = now();
    uint64_t n = 0;
    sc_batch b;
    int rc;
    while ((rc = sc_batch_next(j->ld, &b)) == SC_OK) {
        loss += train_step(o, j, &b);
        n += b.size;
        sc_batch_release_on(j->ld, &b, step_stream(j));
        after_step(o, j);
    }
    if (rc != SC_END_OF_EPOCH)
        return loader_failed(j);
    gpu_epoch_loss(j, &loss);
    double secs = now() - t0;
    sc_epoch_summary rep;
    if (sc_epoch_wait(j->ld, e, &rep) != SC_OK)
        return loader_failed(j);
    report_epoch(j, e, loss, n, secs, &rep);
    if (j->ev.n) { /* rank 0 only: every rank holds the same weights */
        ex_eval_run(&j->ev, &j->m, &j->t.eval_loss, &j->t.eval_accuracy);
        printf("epoch %llu: held-out loss %.4f, accuracy %.1f%%\n", (unsigned long long)e,
               j->t.eval_loss, 100.0 * j->t.eval_accuracy);
        fflush(stdout);
    }
    return 0;
}

/* The field named `name` of the loader's batches. */
static int field_index(const sc_loader *ld, const char *name, const char *dtype,
                       sc_field_info *out)
{
    sc_dataset_info di;
    sc_dataset_get_info(sc_loader_dataset(ld), &di);
    for (int i = 0; i < di.nfields; i++) {
        sc_loader_field(ld, i, out);
        const char *n = out->name[0] == '/' ? out->name + 1 : out->name;
        const char *want = name[0] == '/' ? name + 1 : name;
        if (!strcmp(n, want))
            return strcmp(out->dtype, dtype) ? -2 : i;
    }
    return -1;
}

/*
 * Where batches land: --device says (cpu, gpu, sim, auto), else SC_DEVICE,
 * else auto.  The loader settles auto alike on every rank (the GPU only
 * when every rank has one), so the ranks cannot split between a GPU path
 * and a CPU one; --device sim (testing builds of the library) trains on
 * the CPU from batches that went through the simulated device.
 */
static void choose_device(const ex_opts *o, sc_config *cfg)
{
    const char *d = o->device ? o->device : getenv("SC_DEVICE") ? NULL : "auto";
    if (d)
        cfg->device = !strcmp(d, "cpu")   ? SC_DEVICE_HOST
                      : !strcmp(d, "gpu") ? SC_DEVICE_CUDA
                      : !strcmp(d, "sim") ? SC_DEVICE_SIM
                                          : SC_DEVICE_AUTO;
}

/* The GPU model where the loader put the batches on a GPU; 0 or the exit status. */
static int use_device(const ex_opts *o, job *j, const sc_config *cfg)
{
    int dev = sc_loader_device(j->ld);
    if (dev < 0 || cfg->device == SC_DEVICE_SIM)
        return 0;
#ifdef TRAIN_HAVE_CUDA
    j->gpu = 1;
    if (!o->crop)
        return 0;
    if (j->rank == 0)
        fprintf(stderr, "train: --transform runs the CPU model: add --device cpu\n");
    return 2;
#else
    (void)o;
    if (j->rank == 0) /* every rank finds the same: the loader agreed on the device */
        fprintf(stderr, "train: batches are on GPU %d, but this trainer was built without "
                        "its GPU model (no nvcc): run it with --device cpu\n", dev);
    return 2;
#endif
}

/*
 * --transform: the crop learns the images' shape when the loader opens the
 * dataset (sc_transform.outputs), which refuses a source it cannot crop.
 */
static void choose_transform(const ex_opts *o, sc_config *cfg, ex_crop *crop, sc_transform *tf)
{
    *crop = (ex_crop){0, 0, 0, o->crop};
    ex_crop_transform(crop, 1, tf);
    cfg->transform = tf;
}

/* The batches' image and label fields, and a model sized to them. */
static int open_model(const ex_opts *o, job *j)
{
    sc_field_info fx, fy;
    j->ix = field_index(j->ld, o->images, o->crop ? "float32" : "uint8", &fx);
    j->iy = field_index(j->ld, o->labels, "int64", &fy);
    if (j->ix >= 0 && fx.vlen) {
        if (j->rank == 0)
            fprintf(stderr, "train: '%s' holds variable-length samples (JPEG bytes?): "
                            "--decode jpeg decodes them to images\n", o->images);
        return 2;
    }
    if (j->ix < 0 || j->iy < 0 || o->classes > 256) {
        if (j->rank == 0)
            fprintf(stderr, "train: needs a uint8 field '%s' and an int64 field '%s' "
                            "(and at most 256 classes)\n", o->images, o->labels);
        return 2;
    }
    /* Inputs in [0,1]: the transform's floats, or the bytes scaled by the model. */
    uint64_t d = o->crop ? fx.sample_bytes / sizeof(float) : fx.sample_bytes;
    if (ex_model_init(&j->m, d, o->classes) != 0) {
        fprintf(stderr, "train[rank %d]: out of memory\n", j->rank);
        return 1;
    }
    if ((o->ckpt || o->resume) && j->gpu) {
        if (j->rank == 0)
            fprintf(stderr, "train: --checkpoint and --resume run the CPU model\n");
        return 2;
    }
    return 0;
}

/*
 * Rank 0 reads the held-out set of --eval; collective when --eval is given
 * (every rank learns whether it could), whatever rc each rank brings.
 */
static int open_eval(const ex_opts *o, job *j, int rc)
{
    if (!o->eval)
        return rc;
    char msg[512] = "";
    if (rc == 0 && (o->crop || j->gpu)) {
        snprintf(msg, sizeof msg, "scores the CPU model on untransformed images: not with %s",
                 o->crop ? "--transform" : "the GPU model (--device cpu)");
        rc = 2;
    } else if (rc == 0 && j->rank == 0 &&
               ex_eval_open(o->eval, o->images, o->labels, j->m.d, j->m.k, &j->ev, msg,
                            sizeof msg)) {
        rc = 1;
    }
    if (msg[0] && j->rank == 0)
        fprintf(stderr, "train: --eval: %s\n", msg);
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return rc;
}

/*
 * The GPU model, on the device the loader made current; collective, before
 * the first batch, so that a rank that cannot start stops every rank here.
 * Every rank calls it or none does (rc agreed first).
 */
static int open_gpu(job *j, int rc)
{
#ifdef TRAIN_HAVE_CUDA
    MPI_Allreduce(MPI_IN_PLACE, &rc, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    char msg[256];
    if (rc == 0 && tg_open(tg_current_device(), j->m.d, j->m.k, MPI_COMM_WORLD, &j->g, msg,
                           sizeof msg)) {
        fprintf(stderr, "train[rank %d]: GPU: %s\n", j->rank, msg);
        rc = 1;
    }
#else
    (void)j;
#endif
    return rc;
}

/* Settings, device, transform, loader and model; 0 or the exit status. */
static int open_job(const ex_opts *o, job *j, ex_crop *crop, sc_transform *tf)
{
    sc_config cfg;
    sc_error err = SC_ERROR_INIT;
    int rc = 0, any = 0;
    if (sc_config_init(&cfg, &err) != SC_OK ||
        (o->source && sc_config_set(&cfg, "SC_SOURCE", o->source, &err) != SC_OK) ||
        (o->decode && sc_config_set(&cfg, "SC_DECODE", o->decode, &err) != SC_OK) ||
        (o->decode_size && sc_config_set(&cfg, "SC_DECODE_SIZE", o->decode_size, &err) != SC_OK)) {
        fprintf(stderr, "train[rank %d]: %s\n", j->rank, err.msg);
        rc = 2;
    }
    if (rc == 0) {
        cfg.epochs = o->epochs; /* SC_EPOCHS: the last epoch reads nothing ahead */
        choose_device(o, &cfg);
        if (o->crop)
            choose_transform(o, &cfg, crop, tf);
    }
    /* Every rank opens the loader or none: one stopping here would leave the rest in it. */
    MPI_Allreduce(&rc, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (any)
        return rc ? rc : any;
    if (sc_loader_open(MPI_COMM_WORLD, &cfg, &j->ld, NULL) != SC_OK)
        rc = 1;
    if (rc == 0)
        rc = use_device(o, j, &cfg);
    if (rc == 0)
        rc = open_model(o, j);
    if (rc == 0 && o->resume &&
        ex_ckpt_load(MPI_COMM_WORLD, o->resume, j->ld, j->m.w, ex_model_size(&j->m), &j->e0))
        rc = 1;
    if (j->gpu)
        rc = open_gpu(j, rc);
    return open_eval(o, j, rc);
}

/* Rank 0's closing lines. */
static void print_summary(const ex_opts *o, const job *j)
{
    const totals *t = &j->t;
    int fell = t->last_loss < t->first_loss;
    printf("exactly-once: %s (%llu epochs, %llu samples, %llu duplicated, %llu skipped)\n",
           t->all_ok ? "ok" : "FAILED", (unsigned long long)(o->epochs - j->e0),
           (unsigned long long)t->samples, (unsigned long long)t->duplicated,
           (unsigned long long)t->skipped);
    printf("loss: %.4f -> %.4f%s\n", t->first_loss, t->last_loss, fell ? "" : " (did not fall)");
    printf("consumer wait: %.1f%% of step time\n", t->wall > 0 ? 100.0 * t->wait / t->wall : 0.0);
    if (j->ev.n)
        printf("held-out: loss %.4f, accuracy %.1f%% (%s)\n", t->eval_loss,
               100.0 * t->eval_accuracy, o->eval);
    if (o->epochs > j->e0 + 1)
        printf("cache hit rate after epoch 1: %.1f%%\n",
               t->later_reads ? 100.0 * (double)t->later_hits / (double)t->later_reads : 0.0);
}

/*
 * Closes everything.  The exit status: rc if the job stopped early (2: a
 * usage error), else 1 unless every epoch was exactly-once and the loss fell.
 */
static int close_job(const ex_opts *o, job *j, int rc)
{
    int failed = rc != 0 || j->bad_label;
    MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (sc_loader_close(j->ld) != SC_OK)
        failed = 1;
    if (j->rank == 0 && !failed)
        print_summary(o, j);
    if (j->rank == 0 && j->bad_label)
        fprintf(stderr, "train: a label is outside 0..%llu (--classes)\n",
                (unsigned long long)(o->classes - 1));
    ex_model_free(&j->m);
    ex_eval_free(&j->ev);
#ifdef TRAIN_HAVE_CUDA
    tg_close(j->g);
#endif
    if (rc != 0)
        return rc;
    return failed || !j->t.all_ok || !(j->t.last_loss < j->t.first_loss) ? 1 : 0;
}

int main(int argc, char **argv)
{
    int provided;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    job j = {.t = {.first_loss = NAN, .last_loss = NAN, .all_ok = 1}};
    MPI_Comm_rank(MPI_COMM_WORLD, &j.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &j.nranks);
    ex_opts o;
    ex_crop crop;
    sc_transform tf;
    int rc = ex_opts_parse(argc, argv, &o);
    if (rc == 0)
        rc = open_job(&o, &j, &crop, &tf);
    for (uint64_t e = j.e0; rc == 0 && e < o.epochs; e++)
        rc = train_epoch(&o, &j, e);
    if (j.ld)
        rc = close_job(&o, &j, rc);
    MPI_Finalize();
    return rc;
}
