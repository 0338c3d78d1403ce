/*
 * vlen.c - variable-length fields: their lengths at open, their shards' blobs.
 */
#include "vlen.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "h5.h"
#include "invariant.h"
#include "io.h"

/* Samples read through HDF5 at a time: their hvl_t array stays small. */
#define VLEN_BLOCK 4096

/* The memory type that reads d's sequences as dt's, in this machine's order. */
static hid_t vlen_mem_type(hid_t d, sc__dtype dt)
{
    hid_t ft = H5Dget_type(d), base = ft >= 0 ? H5Tget_super(ft) : H5I_INVALID_HID;
    hid_t bm = base >= 0 ? sc__h5_mem_type(base, dt) : H5I_INVALID_HID;
    hid_t mt = bm >= 0 ? H5Tvlen_create(bm) : H5I_INVALID_HID;
    if (bm >= 0)
        H5Tclose(bm);
    if (base >= 0)
        H5Tclose(base);
    if (ft >= 0)
        H5Tclose(ft);
    return mt;
}

/* Rows [first, first + count) as hvl_t (all of it without an axis); the lock is held. */
static herr_t vlen_read_rows(hid_t d, hid_t mt, const sc__field *f, uint64_t first, uint64_t count,
                             hvl_t *v)
{
    hsize_t start = first, cnt = count;
    hid_t fs = H5Dget_space(d);
    hid_t ms = f->no_axis ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &cnt, NULL);
    herr_t h = fs < 0 || ms < 0 ? -1
               : f->no_axis     ? H5Sselect_all(fs)
                                : H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &cnt, NULL);
    if (h >= 0)
        h = H5Dread(d, mt, ms, fs, H5P_DEFAULT, v);
    if (h < 0)
        memset(v, 0, sizeof *v * count); /* nothing to reclaim */
    hid_t why = h < 0 ? H5Eget_current_stack() : H5I_INVALID_HID; /* the closes clear it */
    if (ms >= 0)
        H5Sclose(ms);
    if (fs >= 0)
        H5Sclose(fs);
    if (why >= 0)
        H5Eset_current_stack(why); /* HDF5's reason, for the caller's message */
    return h;
}

/* Frees what vlen_read_rows gave v[count]; the lock is held. */
static void vlen_reclaim(hid_t mt, uint64_t count, hvl_t *v)
{
    hsize_t cnt = count;
    hid_t ms = H5Screate_simple(1, &cnt, NULL);
    if (ms >= 0) {
        H5Dvlen_reclaim(mt, ms, H5P_DEFAULT, v);
        H5Sclose(ms);
    }
}

/*
 * Contiguous storage holds one header per sample: a little-endian 4-byte
 * element count, then the global heap id of its values (an address of the
 * file's own width and a 4-byte index).  Reading those headers learns
 * every length for 16 bytes a sample instead of the samples themselves.
 * 1: done; 0: not stored so (the caller reads the values); -1: *why.
 */
static int vlen_header_lengths(hid_t d, const char *path, const sc__field *f, uint64_t n,
                               uint64_t *len, const char **why)
{
    hid_t fid = H5Iget_file_id(d);
    hid_t fcpl = fid >= 0 ? H5Fget_create_plist(fid) : H5I_INVALID_HID;
    size_t addr = 0, size = 0; /* the file's address width: a header's middle */
    int ok = fcpl >= 0 && H5Pget_sizes(fcpl, &addr, &size) >= 0;
    if (fcpl >= 0)
        H5Pclose(fcpl);
    if (fid >= 0)
        H5Fclose(fid);
    uint64_t each = 8 + addr, at = ok ? sc__h5_raw_offset(d, n * each) : UINT64_MAX;
    H5Eclear2(H5E_DEFAULT);
    if (at == UINT64_MAX)
        return 0;
    unsigned char *raw = malloc(n * each);
    int fd = raw ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    *why = !raw ? "no memory" : fd < 0 ? strerror(errno) : sc__io_pread(fd, raw, n * each, at);
    size_t esize = sc__dtype_size(f->dtype);
    for (uint64_t k = 0; !*why && k < n; k++) {
        const unsigned char *p = raw + k * each;
        len[k] =
            ((uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24) *
            esize;
    }
    if (fd >= 0)
        close(fd);
    free(raw);
    return *why ? -1 : 1;
}

static int vlen_cannot(const char *path, const sc__field *f, sc_error *err)
{
    return sc__h5_err(err, SC_EHDF5, "source '%s': field '%s': cannot read its variable-length "
                      "samples", path, f->name);
}

int sc__vlen_lengths(hid_t d, const char *path, const sc__field *f, uint64_t n, uint64_t *len,
                     sc_error *err)
{
    SC__ASSERT(sc__h5_held());
    const char *why = NULL;
    int done = vlen_header_lengths(d, path, f, n, len, &why);
    if (done < 0)
        return sc__seterr(err, SC_EIO, "source '%s': field '%s': reading its lengths: %s", path,
                          f->name, why);
    if (done)
        return SC_OK;
    hid_t mt = vlen_mem_type(d, f->dtype);
    hvl_t *v = malloc(sizeof *v * (n < VLEN_BLOCK ? n : VLEN_BLOCK));
    int rc = mt >= 0 && v ? SC_OK : vlen_cannot(path, f, err);
    size_t esize = sc__dtype_size(f->dtype);
    for (uint64_t first = 0; rc == SC_OK && first < n; first += VLEN_BLOCK) {
        uint64_t count = n - first < VLEN_BLOCK ? n - first : VLEN_BLOCK;
        if (vlen_read_rows(d, mt, f, first, count, v) < 0)
            rc = vlen_cannot(path, f, err); /* before the reclaim clears HDF5's reason */
        for (uint64_t k = 0; rc == SC_OK && k < count; k++)
            len[first + k] = (uint64_t)v[k].len * esize;
        vlen_reclaim(mt, count, v);
    }
    free(v);
    if (mt >= 0)
        H5Tclose(mt);
    return rc;
}

/* The blob's offset k, from the dataset's offsets as seen at open. */
static void vlen_put_off(unsigned char *blob, uint64_t k, uint64_t v)
{
    memcpy(blob + 8 * k, &v, sizeof v);
}

int sc__vlen_read(hid_t d, const sc__field *f, uint64_t first, uint64_t count, const uint64_t *off,
                  uint64_t n, uint64_t row, void *blob, const char *path, uint64_t shard,
                  uint64_t id0, sc_error *err)
{
    unsigned char *b = blob, *values = b + 8 * (n + 1);
    size_t esize = sc__dtype_size(f->dtype);
    hvl_t *v = malloc(sizeof *v * (count ? count : 1));
    if (!v)
        return sc__seterr(err, SC_ENOMEM, "source '%s': shard %llu: no memory", path,
                          (unsigned long long)shard);
    sc__h5_lock();
    hid_t mt = vlen_mem_type(d, f->dtype);
    herr_t h = mt >= 0 ? vlen_read_rows(d, mt, f, first, count, v) : -1;
    int rc = h < 0 ? sc__h5_err(err, SC_EHDF5,
                                "source '%s': reading shard %llu of field '%s' "
                                "failed",
                                path, (unsigned long long)shard, f->name)
                   : SC_OK;
    for (uint64_t k = 0; rc == SC_OK && k < count; k++) {
        uint64_t at = off[row + k] - off[0], bytes = (uint64_t)v[k].len * esize;
        if (bytes != off[row + k + 1] - off[row + k])
            rc = sc__seterr(err, SC_EIO,
                            "source '%s' changed since the dataset was opened: "
                            "field '%s', sample %llu (shard %llu) holds %llu bytes, not %llu",
                            path, f->name, (unsigned long long)(id0 + row + k),
                            (unsigned long long)shard,
                            (unsigned long long)bytes,
                            (unsigned long long)(off[row + k + 1] - off[row + k]));
        else if (bytes)
            memcpy(values + at, v[k].p, bytes);
        vlen_put_off(b, row + k, at);
    }
    if (h >= 0)
        vlen_reclaim(mt, count, v);
    if (mt >= 0)
        H5Tclose(mt);
    sc__h5_unlock();
    free(v);
    if (rc == SC_OK)
        vlen_put_off(b, row + count, off[row + count] - off[0]);
    return rc;
}
