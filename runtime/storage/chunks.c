/*
 * chunks.c - a field's rows read chunk by chunk (see chunks.h).
 */
#include "chunks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dtype.h"
#include "h5.h"
#include "mem.h"

/*
 * Why a filtered field's stored chunks are not its bytes, or NULL: only in
 * the native type are they (H5Dread converts a big-endian field; a raw
 * chunk would not be), only when each chunk holds whole samples, and only
 * if every chunk went through the filters (HDF5 may leave partial edge
 * chunks unfiltered with a filter mask that does not say so).
 */
static const char *chunks_not_as_stored(hid_t t, int rank, hid_t dcpl, const sc__field *f,
                                        const hsize_t *cdims)
{
    for (int i = 1; i < rank; i++)
        if (cdims[i] != f->dims[i - 1])
            return "its chunks split samples";
    hid_t mt = sc__h5_mem_type(t, f->dtype);
    htri_t same = mt >= 0 ? H5Tequal(t, mt) : -1;
    if (mt >= 0)
        H5Tclose(mt);
    if (same <= 0)
        return "it is stored in another byte order than it is read";
    unsigned opts = 0;
    if (H5Pget_chunk_opts(dcpl, &opts) < 0 || (opts & H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS))
        return "its partial edge chunks are stored unfiltered";
    return NULL;
}

void sc__chunks_missing(hid_t d, sc__chunking *c)
{
    hid_t dcpl = H5Dget_create_plist(d);
    int n = dcpl >= 0 ? H5Pget_nfilters(dcpl) : 0;
    c->missing = 0;
    for (int i = 0; i < n && !c->missing; i++) {
        unsigned flags, conf;
        size_t nv = 0;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nv, NULL, 0, NULL, &conf);
        if (id >= 0 && H5Zfilter_avail(id) <= 0) /* it looks for a plugin: errors stay quiet */
            c->missing = (unsigned)id;
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
}

int sc__chunks_direct(hid_t d, const sc__field *f, sc__chunking *c)
{
    memset(c, 0, sizeof *c);
    hid_t dcpl = H5Dget_create_plist(d), t = H5Dget_type(d);
    hsize_t cdims[H5S_MAX_RANK];
    size_t width = t >= 0 ? sc__h5_string_width(t) : 0; /* the shuffle's element, no axis */
    int rank = f->ndims + 1 - (width > 0);
    /*
     * A file of one sample (no sample axis) has no rows to map chunks to, and
     * a variable-length field's chunks hold where its values lie (in the
     * heap, never compressed): HDF5 reads both.
     */
    int n = dcpl >= 0 && t >= 0 && !f->no_axis && !f->vlen &&
                    H5Pget_layout(dcpl) == H5D_CHUNKED &&
                    H5Pget_chunk(dcpl, H5S_MAX_RANK, cdims) == rank
                ? H5Pget_nfilters(dcpl)
                : 0;
    if (n > SC__MAX_PIPELINE)
        c->why = "it has more filters than shardcache decodes";
    else if (n > 0)
        c->why = chunks_not_as_stored(t, rank, dcpl, f, cdims);
    for (int i = 0; n > 0 && !c->why && i < n; i++) {
        unsigned flags, conf;
        size_t nv = 0;
        H5Z_filter_t id = H5Pget_filter2(dcpl, (unsigned)i, &flags, &nv, NULL, 0, NULL, &conf);
        c->pipe.id[c->pipe.n++] = (unsigned)id;
        if (!sc__pipeline_decodable(&c->pipe)) {
            c->filter = (unsigned)id;
            c->why = "a filter shardcache does not decode";
        }
    }
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (t >= 0)
        H5Tclose(t);
    int ok = n > 0 && !c->why;
    c->rows = ok ? cdims[0] : 0;
    c->pipe.elem = (unsigned)(width ? width : sc__dtype_size(f->dtype));
    return ok;
}

/*
 * Each thread's buffers, kept between shards (mem.h): a fresh chunk-sized
 * malloc is an mmap whose every page faults on first touch, which costs
 * more than the decompression (bench/compressed.sh).
 */
static unsigned char *chunks_buffer(int slot, size_t n)
{
    return sc__thread_buffer(slot, n);
}

/* The chunk at `row`: its stored bytes into *raw (this thread's); the lock is taken here. */
static int chunks_fetch(hid_t d, uint64_t row, unsigned char **raw, size_t *n, uint32_t *mask,
                        const char *what, sc_error *err)
{
    hsize_t off[H5S_MAX_RANK] = {row};
    hsize_t bytes = 0;
    int rc = SC_OK;
    sc__h5_lock();
    /*
     * A chunk never written has no storage: HDF5 1.10 fails here ("chunk
     * storage is not allocated") where later ones say 0 bytes.  Either way
     * H5Dread reads it, fill values and all, and reports a real error.
     */
    herr_t got = -1;
    H5E_BEGIN_TRY { got = H5Dget_chunk_storage_size(d, off, &bytes); } H5E_END_TRY;
    if (got < 0 || bytes == 0)
        rc = SC__CHUNK_UNSTORED;
    if (rc == SC_OK && !(*raw = chunks_buffer(SC__TB_CHUNK_RAW, bytes)))
        rc = sc__seterr(err, SC_ENOMEM, "%s: no memory for %llu bytes", what,
                        (unsigned long long)bytes);
    if (rc == SC_OK && H5Dread_chunk(d, H5P_DEFAULT, off, mask, *raw) < 0)
        rc = sc__h5_err(err, SC_EHDF5, "%s: reading the stored chunk failed", what);
    sc__h5_unlock();
    *n = (size_t)bytes;
    return rc;
}

int sc__chunks_read(hid_t d, const sc__field *f, const sc__chunking *c, uint64_t first,
                    uint64_t count, void *buf, const char *path, uint64_t shard,
                    sc_error *err)
{
    size_t want = c->rows * f->sample_bytes, n = 0;
    unsigned char *raw = NULL, *chunk = chunks_buffer(SC__TB_CHUNK, want), *tmp = chunks_buffer(SC__TB_CHUNK_TMP, want);
    int rc = chunk && tmp ? SC_OK
                          : sc__seterr(err, SC_ENOMEM, "source '%s': shard %llu: no memory for "
                                       "a chunk of field '%s'", path,
                                       (unsigned long long)shard, f->name);
    for (uint64_t row = first / c->rows * c->rows; rc == SC_OK && row < first + count;
         row += c->rows) {
        char what[SC_PATH_MAX + 320];
        uint32_t mask = 0;
        snprintf(what, sizeof what, "source '%s': field '%s', chunk at row %llu (shard %llu)",
                 path, f->name, (unsigned long long)row, (unsigned long long)shard);
        rc = chunks_fetch(d, row, &raw, &n, &mask, what, err);
        if (rc == SC__CHUNK_UNSTORED)
            break;
        /* A chunk inside the shard decodes in place; one it shares, beside it. */
        int inside = row >= first && row + c->rows <= first + count;
        unsigned char *to = inside ? (unsigned char *)buf + (row - first) * f->sample_bytes : chunk;
        if (rc == SC_OK)
            rc = sc__chunk_decode(&c->pipe, mask, raw, n, to, want, tmp, what, err);
        if (rc != SC_OK || inside)
            continue;
        uint64_t lo = row > first ? row : first;
        uint64_t hi = row + c->rows < first + count ? row + c->rows : first + count;
        memcpy((unsigned char *)buf + (lo - first) * f->sample_bytes,
               chunk + (lo - row) * f->sample_bytes, (hi - lo) * f->sample_bytes);
    }
    return rc;
}
