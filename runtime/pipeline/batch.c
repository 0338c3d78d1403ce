/*
 * batch.c - a batch assembled into a ring slot: each sample of the epoch's
 * delivered order copied from its shard in memory (or JPEG-decoded), a
 * variable-length field's values packed after their offsets, the user's
 * augmentation, SC_AUGMENT's stages (after it: the user's sees the stored
 * image), and the copy to the device.  Runs on a producer thread without the stream's mutex: the slot
 * and the shards it reads are the builder's until it retires the build
 * (stream.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "error.h"
#include "hash.h"
#include "image.h"
#include "log.h"
#include "mem.h"
#include "skiplist.h"
#include "source.h"
#include "stream_impl.h"
#include "vlen.h"

/*
 * What a build carries from sample to sample: the producer's JPEG decoder
 * (made at its first image), the batch's index, and, where a transform
 * augments and SC_AUGMENT has stages, room for one stored image of the
 * staged field: the transform's augmentation (decode-once's flip) is of the
 * stored uint8 image, before the stages change its dtype, shape or layout.
 */
typedef struct bwork {
    sc__image **jp;
    unsigned char *pre;
    uint64_t b;
} bwork;

/*
 * The user's augmentation, on one sample's fields in place; its seed
 * depends on (seed, epoch, sample) only, so the bytes delivered do not
 * depend on which thread built the batch.  `id` is the sample put: a
 * replacement's own, so its draws are its own.
 */
static int batch_augment(const sc__stream *s, const ep *e, uint64_t b, uint64_t id,
                         void *const *fields, sc_error *err)
{
    const sc_transform *tf = s->o.tf;
    if (!tf || !tf->augment)
        return SC_OK;
    uint64_t seed = sc__rng_key(s->o.seed, e->epoch, SC__PURPOSE_AUGMENT, id);
    char msg[256] = "";
    if (tf->augment(tf->arg, e->epoch, id, seed, fields, msg, sizeof msg) != 0)
        return sc__seterr(err, SC_ETRANSFORM,
                          "rank %d: epoch %llu: batch %llu: sample %llu: augmentation of "
                          "'%s' version %s failed: %s",
                          s->o.rank, (unsigned long long)e->epoch, (unsigned long long)b,
                          (unsigned long long)id, tf->name, tf->version,
                          msg[0] ? msg : "(no reason given)");
    return SC_OK;
}

/*
 * A variable-length field's sample, JPEG-decoded into out with a random
 * resized crop and flip drawn from (seed, epoch, sample, field) alone: the
 * same bytes for any producer count, and on resume.  `jp` is the calling
 * producer's decoder, made at its first image.  An image that does not
 * decode is SC_EFORMAT naming the sample (*bad set): SC_BAD_SAMPLE says
 * whether it stops the job or is replaced (batch_put_sample).
 */
static int batch_decode(const sc__stream *s, const ep *e, uint64_t id, uint32_t shard, int f,
                         const unsigned char *src, uint64_t len, unsigned char *out,
                         sc__image **jp, int *bad, sc_error *err)
{
    uint64_t seed = sc__rng_key(s->o.seed, e->epoch, SC__PURPOSE_DECODE + (unsigned)f, id);
    int rc = *jp ? SC_OK : sc__image_new(jp, err);
    if (rc == SC_OK && (rc = sc__image_decode_crop(*jp, src, len, &s->crop[f], seed,
                                                   sc__crop_planes(&s->crop[f]), out, err)) ==
                           SC_EFORMAT)
        *bad = 1;
    if (rc != SC_OK)
        sc__errctx(err, rc, "rank %d: epoch %llu: sample %llu (shard %u): field '%s' (%llu "
                   "bytes)", s->o.rank, (unsigned long long)e->epoch, (unsigned long long)id,
                   shard, s->ds->fields[f].name, (unsigned long long)len);
    if (rc == SC_EFORMAT && !s->o.skip_bad && err) { /* it stops the job: say what next */
        sc_error was = *err;
        sc__seterr(err, rc, "%s (SC_BAD_SAMPLE=skip replaces it; `shardcache scan --decode` "
                   "lists every bad sample for SC_SKIP_LIST)", was.msg);
    }
    return rc;
}

/*
 * A fixed-shape field's sample into a batch: copied, or through SC_AUGMENT's
 * stages with draws keyed as batch_decode's are, by (seed, epoch, field,
 * sample) alone.
 */
static void batch_copy_sample(const sc__stream *s, const ep *e, uint64_t id, int f,
                               const unsigned char *from, unsigned char *to)
{
    const sc__aug *a = sc__fields_aug(s->ds, f);
    if (a)
        sc__aug_run(a, from, to, sc__rng_key(s->o.seed, e->epoch,
                                             SC__PURPOSE_STAGES + (unsigned)f, id));
    else
        s->copy(to, from, s->fsb[f]);
}

/*
 * A fixed-shape field's sample `from` into `to`, or, when it has stages and
 * the transform augments (w->pre), into w->pre to be augmented first
 * (batch_put_one runs the stages after): where the augmentation sees it.
 */
static void *batch_put_fixed(const sc__stream *s, const ep *e, uint64_t id, int f,
                             const unsigned char *from, unsigned char *to, const bwork *w)
{
    if (w->pre && sc__fields_aug(s->ds, f)) {
        memcpy(w->pre, from, s->ds->fields[f].sample_bytes);
        return w->pre;
    }
    batch_copy_sample(s, e, id, f, from, to);
    return to;
}

/*
 * Sample `off` of the epoch's shard i (global id `id`) into sample k of a
 * batch, field by field: copied, or decoded; a variable-length field's
 * values after the batch's earlier samples' (end[f]: its bytes so far),
 * its offset recorded; then the user's augmentation, and SC_AUGMENT's
 * stages of a field it augmented in w->pre.  *bad: it failed because an
 * image does not decode.
 */
static int batch_put_one(const sc__stream *s, const ep *e, uint64_t i, uint64_t off,
                         uint64_t id, uint64_t k, rslot *slot, uint64_t *end, const bwork *w,
                         int *bad, sc_error *err)
{
    const unsigned char **fp = e->fp + i * (uint64_t)s->nfields;
    uint64_t n = s->ds->shard_sizes[e->shards[i]];
    void *fields[SC_MAX_FIELDS];
    for (int f = 0; f < s->nfields; f++) {
        unsigned char *to = slot->host + s->fval[f];
        fields[f] = to + k * s->fsb[f];
        if (!s->ds->fields[f].vlen) {
            fields[f] = batch_put_fixed(s, e, id, f, fp[f] + off * s->ds->fields[f].sample_bytes,
                                        fields[f], w);
            continue;
        }
        uint64_t at = sc__vlen_off(fp[f], off), len = sc__vlen_off(fp[f], off + 1) - at;
        const unsigned char *from = sc__vlen_values(fp[f], n) + at;
        if (s->crop[f].width) {
            int rc = batch_decode(s, e, id, e->shards[i], f, from, len, fields[f], w->jp, bad,
                                  err);
            if (rc != SC_OK)
                return rc;
            continue;
        }
        if (len > s->fsb[f]) /* the dataset's largest: no shard in memory can exceed it */
            return sc__seterr(err, SC_EFORMAT, "rank %d: epoch %llu: sample %llu: field '%s' "
                              "holds %llu bytes, more than its largest at open (%llu)",
                              s->o.rank, (unsigned long long)e->epoch,
                              (unsigned long long)id, s->ds->fields[f].name,
                              (unsigned long long)len, (unsigned long long)s->fsb[f]);
        fields[f] = to + end[f];
        s->copy(fields[f], from, len);
        ((uint64_t *)(slot->host + s->foff[f]))[k] = end[f]; /* slot fields are aligned */
        end[f] += len;
    }
    int rc = batch_augment(s, e, w->b, id, fields, err);
    for (int f = 0; rc == SC_OK && w->pre && f < s->nfields; f++)
        if (fields[f] == w->pre)
            batch_copy_sample(s, e, id, f, w->pre, slot->host + s->fval[f] + k * s->fsb[f]);
    return rc;
}

/*
 * Sample k of the batch stands in for position q's sample, skipped for
 * `why` (SC_REPLACED_*): the first sample of the same shard, in an order
 * drawn from (seed, epoch, the skipped id) alone, that is not listed and
 * puts cleanly; one that does not decode is passed over under
 * SC_BAD_SAMPLE=skip (its own slot will skip it), and stops the job under
 * error.  The same replacement on every run, whatever the producers.
 */
static int batch_replace(const sc__stream *s, const ep *e, uint64_t q, uint64_t k, int why,
                         rslot *slot, uint64_t *end, const bwork *w, sc_error *err)
{
    uint64_t id = e->sched.ids[q], i = e->src_shard[q];
    uint32_t shard = e->shards[i];
    uint64_t n = s->ds->shard_sizes[shard], first = s->ds->shard_first[shard];
    uint64_t start = sc__rng_key(s->o.seed, e->epoch, SC__PURPOSE_REPLACE, id) % n;
    uint64_t keep[SC_MAX_FIELDS];
    memcpy(keep, end, sizeof keep);
    for (uint64_t t = 0; t < n; t++) {
        uint64_t c = (start + t) % n;
        if (c == e->src_off[q] || sc__skiplist_find(s->o.skip, first + c) >= 0)
            continue;
        int bad = 0, rc = batch_put_one(s, e, i, c, first + c, k, slot, end, w, &bad, err);
        if (rc == SC_OK) {
            slot->ids[k] = first + c;
            slot->replaced[k] = (unsigned char)why;
            slot->stands_for[k] = id;
            slot->nreplaced++;
            return SC_OK;
        }
        if (!bad || !s->o.skip_bad)
            return rc;
        memcpy(end, keep, sizeof keep); /* a half-put candidate's values are dropped */
    }
    return sc__seterr(err, SC_EFORMAT, "rank %d: epoch %llu: sample %llu (shard %u) is %s, "
                      "and no other sample of its shard (%llu samples) can take its place",
                      s->o.rank, (unsigned long long)e->epoch, (unsigned long long)id, shard,
                      why == SC_REPLACED_LISTED ? "in the skip list" : "bad",
                      (unsigned long long)n);
}

/*
 * Position q of the epoch into sample k of a batch; a sample the skip list
 * names, or (SC_BAD_SAMPLE=skip) one that does not decode, is replaced
 * (batch_replace) and named in the log.  *bad_id: the sample a failure
 * stopped on, when an image did not decode.
 */
static int batch_put_sample(const sc__stream *s, const ep *e, uint64_t q, uint64_t k,
                             rslot *slot, uint64_t *end, const bwork *w, uint64_t *bad_id,
                             sc_error *err)
{
    uint64_t id = e->sched.ids[q], keep[SC_MAX_FIELDS];
    int64_t listed = sc__skiplist_find(s->o.skip, id);
    int bad = 0, rc = SC_OK;
    slot->replaced[k] = 0;
    slot->ids[k] = id;
    memcpy(keep, end, sizeof keep);
    if (listed < 0)
        rc = batch_put_one(s, e, e->src_shard[q], e->src_off[q], id, k, slot, end, w, &bad,
                           err);
    if (listed < 0 && !(bad && s->o.skip_bad)) {
        *bad_id = bad ? id : *bad_id;
        return rc;
    }
    memcpy(end, keep, sizeof keep);
    if (bad)
        sc__log(s->o.log_level, SC__LOG_WARN, s->o.rank, "SC_BAD_SAMPLE=skip: %s: skipped, "
                "replaced by another sample of its shard", err->msg);
    rc = batch_replace(s, e, q, k, listed < 0 ? SC_REPLACED_BAD : SC_REPLACED_LISTED, slot,
                       end, w, err);
    if (rc == SC_EFORMAT && *bad_id == UINT64_MAX)
        *bad_id = id;
    return rc;
}

/*
 * A built slot to the device.  The fields lie one after another in the
 * slot: one DMA for them all; but a variable-length field's room is B of
 * its largest sample, so with one each field's used bytes go on their own.
 */
static int batch_copy(const sc__stream *s, rslot *slot, const uint64_t *vend, sc_error *err)
{
    int some = 0, rc = SC_OK;
    for (int f = 0; f < s->nfields; f++)
        some |= s->vlen[f];
    if (!some)
        return sc__dev_copy(s->o.dev, slot->dev, slot->host, s->slot_bytes, slot->consumed,
                            slot->event, err);
    for (int f = 0; rc == SC_OK && f < s->nfields; f++) {
        uint64_t used = s->vlen[f] ? vend[f] : s->o.batch_size * s->fsb[f];
        rc = sc__dev_copy(s->o.dev, slot->dev + s->foff[f], slot->host + s->foff[f],
                          s->fval[f] - s->foff[f] + used, slot->consumed, slot->event, err);
    }
    return rc;
}

/* sc__batch_build's, with w's room (if any) made. */
static int batch_build(sc__stream *s, ep *e, uint64_t b, rslot *slot, sc__tring *tr,
                       const bwork *w, uint64_t *bad_id, sc_error *err)
{
    *bad_id = UINT64_MAX;
    slot->nreplaced = 0;
    uint64_t B = s->o.batch_size, q0 = b * B, vend[SC_MAX_FIELDS] = {0};
    uint64_t t0 = sc__tring_now(tr);
    int rc = sc__dev_event_wait(s->o.dev, slot->event, err);
    if (rc != SC_OK)
        return rc;
    sc__tring_slow(tr, SC__ST_ASSEMBLY);
    slot->retired = 0;
    for (uint64_t k = 0, put = 0; k < B; k++) {
        if ((rc = batch_put_sample(s, e, q0 + k, k, slot, vend, w, bad_id, err)) != SC_OK)
            return rc;
        if ((put += s->ds->sample_bytes) >= SC__RETIRE_BYTES && k + 1 < B) {
            pthread_mutex_lock(&s->mu);
            sc__stream_retire(s, e, q0 + slot->retired, q0 + k + 1);
            sc__stream_bury(s);
            pthread_mutex_unlock(&s->mu);
            slot->retired = k + 1, put = 0;
        }
    }
    for (int f = 0; f < s->nfields; f++)
        if (s->vlen[f])
            ((uint64_t *)(slot->host + s->foff[f]))[B] = vend[f];
    sc__copy_fence(); /* s->copy's stores, before the slot goes to the device or the consumer */
    slot->epoch = e->epoch;
    slot->index = b;
    uint64_t end = q0 + B;
    slot->padded = end > e->m ? end - (q0 > e->m ? q0 : e->m) : 0;
    uint64_t t1 = sc__tring_now(tr);
    sc__tring_span(tr, SC__ST_ASSEMBLY, t0, t1, e->epoch, -1, (int64_t)b,
                   B * s->ds->sample_bytes);
    t0 = t1;
    if (s->o.device >= 0) {
        rc = batch_copy(s, slot, vend, err);
        /* With CUDA this is the copy's issue; the copy itself overlaps. */
        sc__tring_span(tr, SC__ST_H2D, t0, sc__tring_now(tr), e->epoch, -1, (int64_t)b,
                       B * s->ds->sample_bytes);
        if (rc != SC_OK)
            return sc__errctx(err, rc, "rank %d: epoch %llu: batch %llu", s->o.rank,
                              (unsigned long long)e->epoch, (unsigned long long)b);
    }
    return SC_OK;
}

/*
 * One stored image of the field SC_AUGMENT stages when the transform
 * augments too (decode-once's flip): bytes per batch build, 0 when none.
 */
static uint64_t batch_pre_bytes(const sc__stream *s)
{
    uint64_t most = 0;
    for (int f = 0; s->o.tf && s->o.tf->augment && f < s->nfields; f++)
        if (sc__fields_aug(s->ds, f) && s->ds->fields[f].sample_bytes > most)
            most = s->ds->fields[f].sample_bytes;
    return most;
}

int sc__batch_build(sc__stream *s, ep *e, uint64_t b, rslot *slot, sc__tring *tr,
                    sc__image **jp, uint64_t *bad_id, sc_error *err)
{
    bwork w = {.jp = jp, .b = b};
    uint64_t pre = batch_pre_bytes(s);
    if (pre && !(w.pre = malloc(pre))) {
        *bad_id = UINT64_MAX;
        return sc__seterr(err, SC_ENOMEM, "rank %d: epoch %llu: batch %llu: no memory for "
                          "an image of %llu bytes to augment", s->o.rank,
                          (unsigned long long)e->epoch, (unsigned long long)b,
                          (unsigned long long)pre);
    }
    int rc = batch_build(s, e, b, slot, tr, &w, bad_id, err);
    if (rc != SC_OK)
        sc__copy_fence(); /* a failed build's slot goes back to the ring, to any producer */
    free(w.pre);
    return rc;
}

/*
 * A ring slot: each field's batch, aligned; a variable-length one's B + 1
 * offsets, then room for B of its largest sample.
 */
int sc__batch_layout(sc__stream *s, uint64_t B, sc_error *err)
{
    uint64_t at = 0;
    for (int f = 0; f < s->nfields; f++) {
        s->crop[f] = s->o.crop[f];
        s->vlen[f] = s->ds->fields[f].vlen && !s->crop[f].width;
        sc__field as = s->ds->fields[f];
        sc__fields_augmented(s->ds, f, &as); /* SC_AUGMENT's delivered size */
        s->fsb[f] = s->crop[f].width ? sc__crop_bytes(&s->crop[f]) : as.sample_bytes;
        s->foff[f] = at;
        s->fval[f] = at + (s->vlen[f] ? 8 * (B + 1) : 0);
        uint64_t bytes;
        if (__builtin_mul_overflow(B, s->fsb[f], &bytes) ||
            __builtin_add_overflow(s->fval[f], bytes + FIELD_ALIGN, &at))
            return sc__seterr(err, SC_EOVERFLOW, "rank %d: batches of %llu samples of field "
                              "'%s' (%llu bytes at most a sample) do not fit in memory",
                              s->o.rank, (unsigned long long)B, s->ds->fields[f].name,
                              (unsigned long long)s->fsb[f]);
        at = (at - 1) / FIELD_ALIGN * FIELD_ALIGN;
    }
    s->slot_bytes = at;
    return SC_OK;
}

/* ---- a held batch detached from the ring (sc_batch_detach) ---------------------- */

/* What a detached batch owns, freed as one (sc_batch_free): its offsets table here. */
typedef struct detached {
    unsigned char *host;
    uint64_t *ids, *stands_for;
    unsigned char *replaced;
    const uint64_t *offs[SC_MAX_FIELDS];
} detached;

int sc__stream_detach(sc__stream *s, sc_batch *b, void **out, sc_error *err)
{
    if (s->o.device >= 0 || sc__dev_has_device(s->o.dev))
        return sc__seterr(err, SC_ENOTSUP, "rank %d: a batch of a loader with a device "
                          "cannot be detached (its memory is the device's)", s->o.rank);
    detached *d = calloc(1, sizeof *d);
    unsigned char *host = NULL;
    uint64_t *ids = malloc(sizeof *ids * s->o.batch_size);
    uint64_t *stands_for = calloc(s->o.batch_size, sizeof *stands_for);
    unsigned char *replaced = calloc(s->o.batch_size, 1);
    int rc = d && ids && stands_for && replaced
                 ? sc__dev_host_alloc(s->o.dev, s->slot_bytes, (void **)&host, err)
                 : sc__seterr(err, SC_ENOMEM, "no memory to detach a batch");
    pthread_mutex_lock(&s->mu);
    rslot *slot = rc == SC_OK ? sc__stream_slot_with(s, SL_HELD, b->seq) : NULL;
    if (rc == SC_OK && !slot)
        rc = sc__seterr(err, SC_EINVAL, "rank %d: batch %llu of epoch %llu is not held",
                        s->o.rank, (unsigned long long)b->index, (unsigned long long)b->epoch);
    if (rc == SC_OK) {
        /* The batch keeps the slot's memory; the slot takes the new. */
        d->host = slot->host, d->ids = slot->ids;
        d->replaced = slot->replaced, d->stands_for = slot->stands_for;
        slot->host = host, slot->ids = ids;
        slot->replaced = replaced, slot->stands_for = stands_for;
        replaced = NULL, stands_for = NULL;
        for (int f = 0; f < s->nfields; f++) {
            d->offs[f] = slot->offs[f];
            slot->offs[f] = s->vlen[f] ? (const uint64_t *)(host + s->foff[f]) : NULL;
        }
        slot->state = SL_FREE;
        s->held--;
        pthread_cond_broadcast(&s->work);
        host = NULL, ids = NULL;
        b->offsets = d->offs;
        *out = d;
    }
    pthread_mutex_unlock(&s->mu);
    sc__dev_host_free(s->o.dev, host);
    free(ids);
    free(replaced);
    free(stands_for);
    if (rc != SC_OK)
        free(d);
    return rc;
}

void sc__stream_detached_free(void *p)
{
    detached *d = p;
    if (!d)
        return;
    free(d->host); /* a ring without a device allocates with sc__big_alloc: free() */
    free(d->ids);
    free(d->replaced);
    free(d->stands_for);
    free(d);
}
