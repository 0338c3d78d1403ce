/*
 * _core.c - shardcache._core, the CPython extension under the Python
 * package: a thin, typed skin over the public C API, and nothing else
 * (but for two inline helpers that need no symbol the ABI hides:
 * runtime/mpi/agree.h's sc__agree_min, one way to agree, and
 * runtime/base/config.h's sc__config_plan_params, the loader's rule for
 * an epoch's plan parameters).
 *
 * Why a C extension rather than ctypes or cffi: the loader's structs
 * (sc_config, sc_batch, sc_epoch_summary) would otherwise be restated in
 * Python and drift from the header; here the compiler checks every field,
 * the GIL is released around every call that can wait (a batch, a verdict,
 * a collective open or close), and an mpi4py communicator becomes an
 * MPI_Comm through mpi4py's own C API.  Arrays and tensors are made in
 * Python (shardcache/__init__.py) from the raw addresses this returns, so
 * numpy and torch are not build dependencies.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <mpi4py/mpi4py.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "shardcache.h"
#include "agree.h"  /* runtime/mpi: the one "agree on failure", inline */
#include "config.h" /* runtime/base: plan parameters from settings, inline */

static PyObject *core_error; /* shardcache.Error */

/* Raises shardcache.Error(status, message): status is the code's name. */
static PyObject *core_raise(int rc, const char *msg)
{
    const char *m = msg && *msg ? msg : sc_strerror(rc);
    /* A message cut to its buffer may end inside a character. */
    PyObject *text = PyUnicode_DecodeUTF8(m, (Py_ssize_t)strlen(m), "replace");
    PyObject *args = text ? Py_BuildValue("(sNi)", sc_status_name(rc), text, rc) : NULL;
    if (args) {
        PyErr_SetObject(core_error, args);
        Py_DECREF(args);
    }
    return NULL;
}

/* ---- the loader ------------------------------------------------------------ */

/*
 * Runs `stmt` (a call on self->ld) without the GIL.  Meanwhile another
 * thread's call on this loader is refused (core_open): the C loader is
 * used from one thread at a time.
 */
#define CORE_UNLOCKED(self, stmt)                                             \
    do {                                                                      \
        (self)->busy = 1;                                                     \
        Py_BEGIN_ALLOW_THREADS                                                \
        stmt;                                                                 \
        Py_END_ALLOW_THREADS                                                  \
        (self)->busy = 0;                                                     \
    } while (0)

typedef struct {
    PyObject_HEAD
    sc_loader *ld;
    PyObject *comm;   /* the mpi4py communicator: kept alive while open */
    uint64_t depth;   /* ring slots: at most this many batches held */
    sc_batch *held;   /* [depth]: batches handed out (nfields 0: an empty entry) */
    uint64_t resumed; /* the epoch sc_loader_resume said to begin, or UINT64_MAX */
    sc_batch pending; /* taken when Ctrl-C came (nfields 0: none): the next next()'s */
    sc_config cfg;    /* as opened: plans are computed from it (plan_batches) */
    int size;         /* the communicator's ranks */
    int busy;         /* a call is in flight with the GIL released */
} core_loader;

/* cfg from the defaults, the SC_* environment and `settings`: a status, err saying why. */
static int core_settings(sc_config *cfg, PyObject *settings, sc_error *err)
{
    int rc = sc_config_init(cfg, err);
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    while (rc == SC_OK && settings && PyDict_Next(settings, &pos, &key, &value)) {
        const char *k = PyUnicode_AsUTF8(key), *v = PyUnicode_AsUTF8(value);
        if (!k || !v) { /* settings are str -> str: __init__.py makes them so */
            PyErr_Clear();
            snprintf(err->msg, sizeof err->msg, "a setting that is not text");
            return SC_EINVAL;
        }
        rc = sc_config_set(cfg, k, v, err);
    }
    return rc;
}

static int core_config(sc_config *cfg, PyObject *settings)
{
    sc_error err = SC_ERROR_INIT;
    int rc = core_settings(cfg, settings, &err);
    return rc == SC_OK ? 0 : (core_raise(rc, err.msg), -1);
}

/*
 * A rank whose settings are refused (a bad SC_* variable in its environment
 * alone) must not leave the others waiting in the open's collectives: before
 * any, the ranks agree, and every rank raises the first refused rank's
 * error.  Collective.
 */
static int core_config_agreed(sc_config *cfg, PyObject *settings, MPI_Comm comm)
{
    sc_error err = SC_ERROR_INIT;
    int rank = 0, rc = core_settings(cfg, settings, &err), first = INT_MAX, e;
    MPI_Comm_rank(comm, &rank);
    Py_BEGIN_ALLOW_THREADS
    e = sc__agree_min(comm, rc == SC_OK ? INT_MAX : rank, &first);
    if (e == MPI_SUCCESS && first != INT_MAX)
        e = MPI_Bcast(&rc, 1, MPI_INT, first, comm);
    if (e == MPI_SUCCESS && first != INT_MAX)
        e = MPI_Bcast(err.msg, (int)sizeof err.msg, MPI_CHAR, first, comm);
    Py_END_ALLOW_THREADS
    if (e != MPI_SUCCESS)
        return core_raise(SC_EMPI, "the ranks' agreement on their settings failed"), -1;
    if (first == INT_MAX)
        return 0;
    char msg[SC_ERROR_MSG_MAX];
    err.msg[sizeof err.msg - 1] = '\0';
    snprintf(msg, sizeof msg, "rank %d: %.490s", first, err.msg); /* err: 512 at most */
    return core_raise(rc, msg), -1;
}

/*
 * transform= and resume= given on some ranks only: those with one would
 * wait in its collectives (the factory's agreement, the resume's) while the
 * others went on into the open's (a checkpoint found on one node's disk
 * only, `resume=load(p) if os.path.exists(p) else None`).  Agreed first, by
 * the least and greatest of each rank's two flags.  Collective.
 */
static int core_args_agreed(MPI_Comm comm, int transform, int resume)
{
    int mine[4] = {transform, resume, -transform, -resume}, all[4];
    int e;
    Py_BEGIN_ALLOW_THREADS
    e = MPI_Allreduce(mine, all, 4, MPI_INT, MPI_MIN, comm);
    Py_END_ALLOW_THREADS
    if (e != MPI_SUCCESS)
        return core_raise(SC_EMPI, "the ranks' agreement on transform= and resume= failed"),
               -1;
    const char *which = all[0] != -all[2] ? "transform=" : all[1] != -all[3] ? "resume=" : NULL;
    if (!which)
        return 0;
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    int mine_has = !strcmp(which, "transform=") ? transform : resume;
    char msg[SC_ERROR_MSG_MAX];
    snprintf(msg, sizeof msg, "rank %d: %s is given on some ranks and not on others (%s here): "
             "%s", rank, which, mine_has ? "given" : "not given",
             *which == 't' ? "every rank must name the same transform"
                           : "pass every rank's state_dict() on every rank, or None on every "
                             "rank");
    return core_raise(SC_EINVAL, msg), -1;
}

/*
 * Every rank's records, as sc_loader_resume takes them.  Collective: a rank
 * whose records are unusable fails every rank, before the resume itself.
 */
static int core_resume(core_loader *self, MPI_Comm comm, PyObject *records)
{
    Py_ssize_t n = PySequence_Size(records);
    if (n < 0)
        return -1;
    const void **blobs = PyMem_Calloc((size_t)n + 1, sizeof *blobs);
    size_t *lens = PyMem_Calloc((size_t)n + 1, sizeof *lens);
    PyObject *items = PySequence_Fast(records, "resume: a list of bytes");
    int ok = blobs && lens && items, all = 0;
    if (!blobs || !lens)
        PyErr_NoMemory();
    for (Py_ssize_t i = 0; ok && i < n; i++) {
        PyObject *b = PySequence_Fast_GET_ITEM(items, i);
        ok = PyBytes_Check(b);
        if (ok) {
            blobs[i] = PyBytes_AS_STRING(b);
            lens[i] = (size_t)PyBytes_GET_SIZE(b);
        } else {
            PyErr_SetString(PyExc_TypeError, "resume: every record must be bytes");
        }
    }
    int rc = SC_OK;
    Py_BEGIN_ALLOW_THREADS
    sc__agree_min(comm, ok, &all);
    if (all)
        rc = sc_loader_resume(self->ld, blobs, lens, (int)n, &self->resumed);
    Py_END_ALLOW_THREADS
    if (ok && !all)
        PyErr_SetString(PyExc_ValueError, "resume: another rank's records were unusable");
    ok = all;
    Py_XDECREF(items);
    PyMem_Free(blobs);
    PyMem_Free(lens);
    if (ok && rc != SC_OK)
        core_raise(rc, sc_loader_last_error(self->ld));
    return ok && rc == SC_OK ? 0 : -1;
}

/* The factory `symbol` in the shared library `path`, or NULL with msg set. */
static sc_transform_factory core_factory(const char *spec, char *msg, size_t msglen)
{
    char path[4096];
    const char *colon = strrchr(spec, ':');
    if (!colon || colon == spec || !colon[1] || (size_t)(colon - spec) >= sizeof path) {
        snprintf(msg, msglen, "transform='%s': name it LIBRARY.so:FUNCTION", spec);
        return NULL;
    }
    memcpy(path, spec, (size_t)(colon - spec));
    path[colon - spec] = '\0';
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL); /* never closed: the loader runs it */
    void *fn = lib ? dlsym(lib, colon + 1) : NULL;
    if (!fn)
        snprintf(msg, msglen, "transform='%s': %s", spec, dlerror());
    return (sc_transform_factory)(uintptr_t)fn;
}

/*
 * cfg->transform from a factory by name (its outputs, if they depend on the
 * dataset's fields, are declared when the loader opens it).  Collective:
 * every rank looks the factory up and runs it, then all agree (a library
 * missing on one node, or a factory refusing on one, fails every rank).
 */
static int core_transform(core_loader *self, MPI_Comm comm, sc_config *cfg, const char *spec,
                          const char *arg)
{
    sc_error err = SC_ERROR_INIT;
    (void)self;
    sc_transform_factory make = core_factory(spec, err.msg, sizeof err.msg);
    /* The loader's threads use it until the process ends: never freed. */
    sc_transform *tf = calloc(1, sizeof *tf);
    int mine = make && tf, all = 0, rc = SC_OK, worst = SC_OK;
    Py_BEGIN_ALLOW_THREADS
    sc__agree_min(comm, mine, &all);
    if (all)
        rc = make(arg ? arg : "", tf, err.msg, sizeof err.msg);
    if (all) /* a factory that refuses on one rank fails them all */
        sc__agree_min(comm, rc, &worst);
    Py_END_ALLOW_THREADS
    if (!all || worst != SC_OK)
        free(tf);
    if (!all)
        return core_raise(SC_EINVAL, mine ? "the transform's library is missing on another "
                                            "rank" : make ? "no memory" : err.msg), -1;
    if (worst != SC_OK)
        return core_raise(worst, rc != SC_OK ? err.msg : "the transform's factory refused "
                                                         "on another rank"), -1;
    cfg->transform = tf;
    return 0;
}

/*
 * Loader(comm, settings, resume=None, transform=None, transform_arg=None, held=0):
 * collective, like sc_loader_open.  held: batches the caller may hold
 * beside the one its loop's variable names (batch_transform's queue, and
 * the one get() just handed the loop), which SC_PREFETCH_BATCHES=auto
 * leaves room for (sc_config.prefetch_least).
 */
static int core_loader_init(core_loader *self, PyObject *args, PyObject *kw)
{
    static char *names[] = {"comm", "settings", "resume", "transform", "transform_arg", "held",
                            NULL};
    PyObject *comm, *settings, *resume = Py_None;
    const char *tspec = NULL, *targ = NULL;
    unsigned long long held = 0;
    if (self->ld) {
        PyErr_SetString(PyExc_RuntimeError, "the loader is already open");
        return -1;
    }
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO!|OzzK", names, &comm, &PyDict_Type,
                                     &settings, &resume, &tspec, &targ, &held))
        return -1;
    MPI_Comm *c = PyMPIComm_Get(comm);
    if (!c)
        return -1;
    sc_config cfg;
    if (core_config_agreed(&cfg, settings, *c) ||
        core_args_agreed(*c, tspec != NULL, resume != Py_None) ||
        (tspec && core_transform(self, *c, &cfg, tspec, targ)))
        return -1;
    cfg.prefetch_least = held ? held + SC_PREFETCH_AUTO_MIN : 0;
    sc_error err = SC_ERROR_INIT;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = sc_loader_open(*c, &cfg, &self->ld, &err);
    Py_END_ALLOW_THREADS
    if (rc != SC_OK)
        return core_raise(rc, err.msg), -1;
    Py_INCREF(comm);
    self->comm = comm;
    sc_config run; /* SC_PREFETCH_BATCHES=auto resolved by the slot's bytes */
    sc_loader_config(self->ld, &run);
    self->depth = run.prefetch_batches;
    self->cfg = cfg;
    self->cfg.transform = NULL; /* not needed to plan, and freed by nobody here */
    MPI_Comm_size(*c, &self->size);
    self->resumed = UINT64_MAX;
    self->held = PyMem_Calloc(self->depth, sizeof *self->held);
    if (!self->held)
        return PyErr_NoMemory(), -1;
    if (resume != Py_None && core_resume(self, *c, resume)) {
        /* Refused on every rank alike (sc_loader_resume is collective): close. */
        sc_loader *ld = self->ld;
        self->ld = NULL;
        Py_BEGIN_ALLOW_THREADS
        sc_loader_close(ld);
        Py_END_ALLOW_THREADS
        return -1;
    }
    return 0;
}

/* The loader is open, and no other thread is inside a call on it. */
static int core_open(core_loader *self)
{
    if (self->ld && !self->busy)
        return 1;
    PyErr_SetString(PyExc_RuntimeError,
                    self->ld ? "the loader is in a call from another thread: one thread "
                               "at a time"
                             : "the loader is closed");
    return 0;
}

/* close(): collective; the first error the loader had, raised. */
static PyObject *core_close(core_loader *self, PyObject *unused)
{
    (void)unused;
    if (!self->ld)
        Py_RETURN_NONE;
    if (!core_open(self))
        return NULL;
    sc_loader *ld = self->ld;
    self->ld = NULL;
    int rc;
    CORE_UNLOCKED(self, rc = sc_loader_close(ld));
    Py_CLEAR(self->comm);
    PyMem_Free(self->held);
    self->held = NULL;
    if (rc != SC_OK)
        return core_raise(rc, "the loader failed (the first error was reported when it "
                              "happened)");
    Py_RETURN_NONE;
}

static void core_loader_dealloc(core_loader *self)
{
    /*
     * Closing is collective: a loader dropped without close() is left open
     * (its memory stays), never closed behind the other ranks' backs.
     */
    Py_XDECREF(self->comm);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* fields(): [(name, dtype, shape, vlen)] in batch order, as delivered. */
static PyObject *core_fields(core_loader *self, PyObject *unused)
{
    (void)unused;
    if (!core_open(self))
        return NULL;
    sc_dataset_info di;
    sc_dataset_get_info(sc_loader_dataset(self->ld), &di);
    PyObject *list = PyList_New(di.nfields);
    for (int i = 0; list && i < di.nfields; i++) {
        sc_field_info f;
        sc_loader_field(self->ld, i, &f);
        PyObject *shape = PyTuple_New(f.ndims);
        for (int d = 0; shape && d < f.ndims; d++)
            PyTuple_SET_ITEM(shape, d, PyLong_FromUnsignedLongLong(f.dims[d]));
        PyObject *item =
            shape ? Py_BuildValue("(ssNi)", f.name, f.dtype, shape, (int)f.vlen) : NULL;
        if (!item) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

/* begin(epoch) -> dict of sc_epoch_info. */
static PyObject *core_begin(core_loader *self, PyObject *arg)
{
    unsigned long long epoch = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred() || !core_open(self))
        return NULL;
    sc_epoch_info in;
    int rc;
    CORE_UNLOCKED(self, rc = sc_epoch_begin(self->ld, epoch, &in));
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    return Py_BuildValue("{sKsKsKsKsKsKsd}", "epoch", (unsigned long long)in.epoch, "batches",
                         (unsigned long long)in.batches, "batch_size",
                         (unsigned long long)in.batch_size, "shards",
                         (unsigned long long)in.shards, "samples",
                         (unsigned long long)in.samples, "plan_hash",
                         (unsigned long long)in.plan_hash, "plan_wait_s", in.plan_wait_s);
}

/*
 * next() -> (seq, epoch, index, size, padded, device, ids_address,
 * [(address, bytes, offsets_address or 0)], [replaced slot], [the id each
 * stands for]) or None after the epoch's last batch.
 */
/* Appends v to list l: 0, or -1 with an exception. */
static int core_append_u64(PyObject *l, uint64_t v)
{
    PyObject *o = PyLong_FromUnsignedLongLong((unsigned long long)v);
    int rc = o ? PyList_Append(l, o) : -1;
    Py_XDECREF(o);
    return rc;
}

static PyObject *core_next(core_loader *self, PyObject *unused)
{
    (void)unused;
    if (!core_open(self))
        return NULL;
    sc_batch b = self->pending;
    int rc = SC_OK;
    self->pending.nfields = 0;
    if (!b.nfields)
        CORE_UNLOCKED(self, rc = sc_batch_next(self->ld, &b));
    if (rc == SC_OK && PyErr_CheckSignals()) {
        /*
         * Ctrl-C while waiting: KeyboardInterrupt.  The ledger counts the
         * batch as delivered, so it is kept for the next call rather than
         * given back: a loop that catches the interrupt and goes on gets it.
         */
        self->pending = b;
        return NULL;
    }
    if (rc == SC_END_OF_EPOCH)
        Py_RETURN_NONE;
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    /* At most depth batches are out at once, so an entry is free; they go
     * back in any order (the package releases a batch when its last tensor
     * is gone). */
    uint64_t k = 0;
    while (k + 1 < self->depth && self->held[k].nfields)
        k++;
    self->held[k] = b;
    PyObject *bufs = PyList_New(b.nfields);
    for (int f = 0; bufs && f < b.nfields; f++)
        PyList_SET_ITEM(bufs, f, Py_BuildValue("(KKK)", (unsigned long long)(uintptr_t)b.data[f],
                                               (unsigned long long)b.bytes[f],
                                               (unsigned long long)(uintptr_t)b.offsets[f]));
    PyObject *slots = bufs ? PyList_New(0) : NULL, *stand = slots ? PyList_New(0) : NULL;
    for (uint64_t i = 0; stand && b.nreplaced && i < b.size; i++)
        if (b.replaced[i] && (core_append_u64(slots, i) || core_append_u64(stand,
                                                                          b.stands_for[i])))
            Py_CLEAR(stand);
    if (!stand) {
        Py_XDECREF(bufs);
        Py_XDECREF(slots);
        return NULL;
    }
    return Py_BuildValue("(KKKKKiKNNN)", (unsigned long long)b.seq, (unsigned long long)b.epoch,
                         (unsigned long long)b.index, (unsigned long long)b.size,
                         (unsigned long long)b.padded, b.device,
                         (unsigned long long)(uintptr_t)b.ids, bufs, slots, stand);
}

/* The batch handed out as `seq`, or NULL with an exception. */
static sc_batch *core_held(core_loader *self, PyObject *args, void **stream)
{
    unsigned long long seq, s = 0;
    if (!PyArg_ParseTuple(args, "K|K", &seq, &s) || !core_open(self))
        return NULL;
    sc_batch *b = NULL;
    for (uint64_t k = 0; !b && k < self->depth; k++)
        if (self->held[k].nfields && self->held[k].seq == seq)
            b = &self->held[k];
    if (!b) {
        PyErr_Format(PyExc_ValueError, "batch %llu is not held (released already?)", seq);
        return NULL;
    }
    if (stream)
        *stream = (void *)(uintptr_t)s;
    return b;
}

/* release(seq, stream=0): stream is a cudaStream_t as an int (0: legacy). */
static PyObject *core_release(core_loader *self, PyObject *args)
{
    void *stream;
    sc_batch *b = core_held(self, args, &stream);
    if (!b)
        return NULL;
    int rc = sc_batch_release_on(self->ld, b, stream);
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    b->nfields = 0;
    Py_RETURN_NONE;
}

/* wait_on(seq, stream=0): the stream (0: the legacy one) waits for a device batch. */
static PyObject *core_wait_on(core_loader *self, PyObject *args)
{
    void *stream;
    sc_batch *b = core_held(self, args, &stream);
    if (!b)
        return NULL;
    int rc = sc_batch_wait_on(self->ld, b, stream);
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    Py_RETURN_NONE;
}

/*
 * detach(seq) -> handle: the batch's memory becomes its own (sc_batch_detach),
 * so that its tensors outlive the loader; free_detached(handle) frees it.
 */
static PyObject *core_detach(core_loader *self, PyObject *args)
{
    sc_batch *b = core_held(self, args, NULL);
    if (!b)
        return NULL;
    sc_batch *own = malloc(sizeof *own);
    if (!own)
        return PyErr_NoMemory();
    int rc = sc_batch_detach(self->ld, b);
    if (rc != SC_OK) {
        free(own);
        return core_raise(rc, sc_loader_last_error(self->ld));
    }
    *own = *b;
    b->nfields = 0;
    return PyLong_FromVoidPtr(own);
}

static PyObject *core_free_detached(PyObject *mod, PyObject *arg)
{
    (void)mod;
    sc_batch *own = PyLong_AsVoidPtr(arg);
    if (!own)
        return PyErr_Occurred() ? NULL : (PyErr_SetString(PyExc_ValueError, "no batch"), NULL);
    sc_batch_free(own);
    free(own);
    Py_RETURN_NONE;
}

/* wait(seq): this thread waits for a device batch's bytes. */
static PyObject *core_wait(core_loader *self, PyObject *args)
{
    sc_batch *b = core_held(self, args, NULL);
    if (!b)
        return NULL;
    int rc;
    CORE_UNLOCKED(self, rc = sc_batch_wait(self->ld, b));
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    Py_RETURN_NONE;
}

static PyObject *core_summary(const sc_epoch_summary *r)
{
    const sc_exactly_once *v = &r->exactly_once;
    return Py_BuildValue(
        "{sKsKsKsKsKsKsKsKsKsdsdsdsisisKsKsKsKsKsssKsKsKsKsKsKsK}", "epoch",
        (unsigned long long)r->epoch,
        "batches", (unsigned long long)r->batches, "samples", (unsigned long long)r->samples,
        "cache_hits", (unsigned long long)r->cache_hits, "cache_misses",
        (unsigned long long)r->cache_misses, "bytes_from_source",
        (unsigned long long)r->bytes_from_source, "bytes_from_cache",
        (unsigned long long)r->bytes_from_cache, "bytes_from_peers",
        (unsigned long long)r->bytes_from_peers, "cache_writes_skipped",
        (unsigned long long)r->cache_writes_skipped, "wait_s", r->wait_s, "wall_s", r->wall_s,
        "shards_per_batch", r->shards_per_batch,
        "verified", v->verified, "ok", v->ok, "delivered", (unsigned long long)v->delivered,
        "dropped", (unsigned long long)v->dropped, "padded", (unsigned long long)v->padded,
        "duplicated", (unsigned long long)v->duplicated, "skipped",
        (unsigned long long)v->skipped, "detail", v->detail, "caller_skipped",
        (unsigned long long)v->caller_skipped, "skipped_bad", (unsigned long long)v->skipped_bad,
        "skipped_listed", (unsigned long long)v->skipped_listed, "replacements",
        (unsigned long long)v->replacements, "stopped", (unsigned long long)v->stopped,
        "stopped_rank", (unsigned long long)v->stopped_rank, "stopped_sample",
        (unsigned long long)v->stopped_sample);
}

/* report(epoch, wait) -> dict: this rank's figures and the job's verdict. */
static PyObject *core_report(core_loader *self, PyObject *args)
{
    unsigned long long epoch;
    int wait;
    if (!PyArg_ParseTuple(args, "Kp", &epoch, &wait) || !core_open(self))
        return NULL;
    sc_epoch_summary r;
    int rc;
    CORE_UNLOCKED(self, rc = wait ? sc_epoch_wait(self->ld, epoch, &r)
                                  : sc_epoch_report(self->ld, epoch, &r));
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    return core_summary(&r);
}

/*
 * plan_batches(epoch) -> batches per rank of `epoch`'s plan, without
 * beginning it.  The count is floor or ceil of samples over ranks x batch
 * (the remainder is cut at sample granularity), the same in every epoch and
 * mode: a global plan of the epoch gives it with no sticky chain before.
 */
static PyObject *core_plan_batches(core_loader *self, PyObject *arg)
{
    unsigned long long epoch = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred() || !core_open(self))
        return NULL;
    const sc_dataset *ds = sc_loader_dataset(self->ld);
    const uint64_t *sizes = NULL;
    sc_dataset_info di;
    sc_plan *plan = NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_dataset_get_info(ds, &di);
    if (rc == SC_OK)
        rc = sc_dataset_shard_sizes(ds, &sizes);
    sc_plan_params p = sc__config_plan_params(&self->cfg, sizes, di.nshards, di.fingerprint,
                                              (uint32_t)self->size, epoch);
    p.mode = SC_SHUFFLE_GLOBAL;
    if (rc == SC_OK)
        CORE_UNLOCKED(self, rc = sc_plan_create(&p, NULL, &plan, &err));
    if (rc != SC_OK)
        return core_raise(rc, err.msg);
    sc_plan_info in;
    sc_plan_get_info(plan, &in);
    sc_plan_free(plan);
    return PyLong_FromUnsignedLongLong(in.batches_per_rank);
}

/* unused(samples): taken, not used (sc_epoch_unused). */
static PyObject *core_unused(core_loader *self, PyObject *arg)
{
    unsigned long long n = PyLong_AsUnsignedLongLong(arg);
    if (PyErr_Occurred() || !core_open(self))
        return NULL;
    int rc = sc_epoch_unused(self->ld, n);
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    Py_RETURN_NONE;
}

/* skip_rest() -> samples: ends the epoch early (sc_epoch_skip_rest). */
static PyObject *core_skip_rest(core_loader *self, PyObject *unused)
{
    (void)unused;
    if (!core_open(self))
        return NULL;
    uint64_t n = 0;
    int rc = SC_OK;
    if (self->pending.nfields) /* interrupted before it reached the loop: counted delivered */
        rc = sc_batch_release(self->ld, &self->pending);
    self->pending.nfields = 0;
    if (rc == SC_OK)
        CORE_UNLOCKED(self, rc = sc_epoch_skip_rest(self->ld, &n));
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    return PyLong_FromUnsignedLongLong(n);
}

/* checkpoint() -> bytes: this rank's position (sc_loader_checkpoint). */
static PyObject *core_checkpoint(core_loader *self, PyObject *unused)
{
    (void)unused;
    if (!core_open(self))
        return NULL;
    unsigned char rec[SC_CHECKPOINT_MAX_BYTES];
    size_t len = 0;
    int rc = sc_loader_checkpoint(self->ld, rec, sizeof rec, &len);
    if (rc != SC_OK)
        return core_raise(rc, sc_loader_last_error(self->ld));
    return PyBytes_FromStringAndSize((const char *)rec, (Py_ssize_t)len);
}

static PyObject *core_resumed(core_loader *self, void *closure)
{
    (void)closure;
    if (self->resumed == UINT64_MAX)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(self->resumed);
}

static PyMethodDef core_loader_methods[] = {
    {"close", (PyCFunction)core_close, METH_NOARGS, "collective: close the loader"},
    {"fields", (PyCFunction)core_fields, METH_NOARGS, "[(name, dtype, shape)]"},
    {"begin", (PyCFunction)core_begin, METH_O, "begin(epoch) -> info dict"},
    {"next", (PyCFunction)core_next, METH_NOARGS, "the next batch's addresses, or None"},
    {"release", (PyCFunction)core_release, METH_VARARGS, "release(seq, stream=0)"},
    {"wait_on", (PyCFunction)core_wait_on, METH_VARARGS, "wait_on(seq, stream=0)"},
    {"wait", (PyCFunction)core_wait, METH_VARARGS, "wait(seq): the host waits"},
    {"report", (PyCFunction)core_report, METH_VARARGS, "report(epoch, wait) -> dict"},
    {"checkpoint", (PyCFunction)core_checkpoint, METH_NOARGS, "this rank's record"},
    {"skip_rest", (PyCFunction)core_skip_rest, METH_NOARGS, "end the epoch early"},
    {"unused", (PyCFunction)core_unused, METH_O, "unused(samples): taken, not used"},
    {"detach", (PyCFunction)core_detach, METH_VARARGS, "detach(seq) -> handle"},
    {"plan_batches", (PyCFunction)core_plan_batches, METH_O, "an epoch's batches, planned here"},
    {NULL, NULL, 0, NULL},
};

static PyObject *core_depth(core_loader *self, void *closure)
{
    (void)closure;
    return PyLong_FromUnsignedLongLong(self->depth);
}

static PyObject *core_device(core_loader *self, void *closure)
{
    (void)closure;
    return PyLong_FromLong(self->ld ? sc_loader_device(self->ld) : -1);
}

static PyGetSetDef core_loader_getset[] = {
    {"resumed_epoch", (getter)core_resumed, NULL, "the epoch to begin after resume", NULL},
    {"depth", (getter)core_depth, NULL, "ring slots (SC_PREFETCH_BATCHES)", NULL},
    {"device", (getter)core_device, NULL, "the loader's device, -1 for host", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject core_loader_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shardcache._core.Loader",
    .tp_basicsize = sizeof(core_loader),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "the C loader (sc_loader); use shardcache.Loader",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)core_loader_init,
    .tp_dealloc = (destructor)core_loader_dealloc,
    .tp_methods = core_loader_methods,
    .tp_getset = core_loader_getset,
};

/* features() -> dict of sc_features. */
static PyObject *core_features(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    sc_features f;
    sc_features_get(&f);
    return Py_BuildValue("{sisisisisi}", "cuda", f.cuda, "nccl", f.nccl, "cuda_devices",
                         f.cuda_devices, "testing", f.testing, "jpeg", f.jpeg);
}

/*
 * launcher_check(settings): sc_launcher_check with the SC_* environment and
 * the settings dict (str -> str) over it; None, or shardcache.Error.
 */
static PyObject *core_launcher_check(PyObject *mod, PyObject *settings)
{
    (void)mod;
    if (settings != Py_None && !PyDict_Check(settings))
        return PyErr_Format(PyExc_TypeError, "launcher_check: a dict of settings or None");
    sc_config cfg;
    if (core_config(&cfg, settings == Py_None ? NULL : settings) < 0)
        return NULL;
    sc_error err = SC_ERROR_INIT;
    int rc = sc_launcher_check(&cfg, &err);
    if (rc != SC_OK)
        return core_raise(rc, err.msg);
    Py_RETURN_NONE;
}

static PyMethodDef core_methods[] = {
    {"features", core_features, METH_NOARGS, "what this build of the library has"},
    {"free_detached", core_free_detached, METH_O, "frees a detached batch"},
    {"launcher_check", core_launcher_check, METH_O,
     "refuses a launcher that started more processes than MPI_COMM_WORLD holds"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "shardcache._core", "the C loader under shardcache", -1,
    core_methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void)
{
    if (import_mpi4py() < 0)
        return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m || PyType_Ready(&core_loader_type) < 0)
        return NULL;
    core_error = PyErr_NewExceptionWithDoc(
        "shardcache._core.Error", "a shardcache call failed: (status, message, code)",
        PyExc_RuntimeError, NULL);
    Py_INCREF(&core_loader_type);
    if (!core_error || PyModule_AddObject(m, "Loader", (PyObject *)&core_loader_type) < 0 ||
        PyModule_AddObject(m, "Error", core_error) < 0 ||
        PyModule_AddIntConstant(m, "CHECKPOINT_BYTES", SC_CHECKPOINT_BYTES) < 0 ||
        PyModule_AddIntConstant(m, "EINVAL", SC_EINVAL) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(core_error);
    return m;
}
