/*
 * h5.c - the HDF5 lock, quiet error capture and type mapping.
 */
#include "h5.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "error.h"

/* Why global: HDF5 itself is one process-wide, non-thread-safe library. */
static pthread_mutex_t h5_mutex = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int h5_held; /* this thread holds h5_mutex: for sc__h5_held() */
static H5E_auto2_t saved_func;
static void *saved_data;

int sc__h5_held(void)
{
    return h5_held;
}

void sc__h5_lock(void)
{
    pthread_mutex_lock(&h5_mutex);
    h5_held = 1;
    H5Eget_auto2(H5E_DEFAULT, &saved_func, &saved_data);
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

void sc__h5_unlock(void)
{
    H5Eset_auto2(H5E_DEFAULT, saved_func, saved_data);
    h5_held = 0;
    pthread_mutex_unlock(&h5_mutex);
}

typedef struct last_msg {
    char text[160];
} last_msg;

/* The walk goes from the innermost error outwards; keep the innermost. */
static herr_t h5_keep_first(unsigned n, const H5E_error2_t *e, void *data)
{
    last_msg *m = data;
    if (n == 0 && e->desc)
        snprintf(m->text, sizeof m->text, "%s", e->desc);
    return 0;
}

int sc__h5_err(sc_error *err, int code, const char *fmt, ...)
{
    last_msg m = {""};
    char ctx[SC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx, sizeof ctx, fmt, ap);
    va_end(ap);
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, h5_keep_first, &m);
    H5Eclear2(H5E_DEFAULT);
    if (m.text[0])
        return sc__seterr(err, code, "%s (HDF5: %s)", ctx, m.text);
    return sc__seterr(err, code, "%s", ctx);
}

/* IEEE binary16, in either byte order: sign bit 15, exponent 10-14 (bias 15), mantissa 0-9. */
static int h5_is_half(hid_t t)
{
    size_t spos, epos, esize, mpos, msize;
    return H5Tget_class(t) == H5T_FLOAT && H5Tget_size(t) == 2 &&
           H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) >= 0 && spos == 15 &&
           epos == 10 && esize == 5 && mpos == 0 && msize == 10 && H5Tget_ebias(t) == 15;
}

/* bool as h5py writes it: an enum of two members valued 0 and 1 over a 1-byte integer. */
static int h5_is_bool(hid_t t)
{
    unsigned char v[2];
    if (H5Tget_class(t) != H5T_ENUM || H5Tget_nmembers(t) != 2 || H5Tget_size(t) != 1 ||
        H5Tget_member_value(t, 0, &v[0]) < 0 || H5Tget_member_value(t, 1, &v[1]) < 0)
        return 0;
    return v[0] + v[1] == 1;
}

size_t sc__h5_string_width(hid_t type)
{
    if (H5Tget_class(type) != H5T_STRING || H5Tis_variable_str(type) != 0)
        return 0;
    return H5Tget_size(type);
}

sc__dtype sc__h5_dtype(hid_t type)
{
    H5T_class_t cls = H5Tget_class(type);
    size_t size = H5Tget_size(type);
    if (cls == H5T_INTEGER) {
        int sgn = H5Tget_sign(type) == H5T_SGN_2;
        switch (size) {
        case 1: return sgn ? SC__DT_I8 : SC__DT_U8;
        case 2: return sgn ? SC__DT_I16 : SC__DT_U16;
        case 4: return sgn ? SC__DT_I32 : SC__DT_U32;
        case 8: return sgn ? SC__DT_I64 : SC__DT_U64;
        default: return SC__DT_INVALID;
        }
    }
    if (cls == H5T_FLOAT)
        return size == 4 ? SC__DT_F32 : size == 8 ? SC__DT_F64 : h5_is_half(type) ? SC__DT_F16
                                                                                 : SC__DT_INVALID;
    if (h5_is_bool(type))
        return SC__DT_BOOL;
    return sc__h5_string_width(type) ? SC__DT_U8 : SC__DT_INVALID;
}

static hid_t h5_native(sc__dtype dt)
{
    switch (dt) {
    case SC__DT_U8: return H5T_NATIVE_UINT8;
    case SC__DT_I8: return H5T_NATIVE_INT8;
    case SC__DT_U16: return H5T_NATIVE_UINT16;
    case SC__DT_I16: return H5T_NATIVE_INT16;
    case SC__DT_U32: return H5T_NATIVE_UINT32;
    case SC__DT_I32: return H5T_NATIVE_INT32;
    case SC__DT_U64: return H5T_NATIVE_UINT64;
    case SC__DT_I64: return H5T_NATIVE_INT64;
    case SC__DT_F32: return H5T_NATIVE_FLOAT;
    case SC__DT_F64: return H5T_NATIVE_DOUBLE;
    default: return H5I_INVALID_HID;
    }
}

/* HDF5 1.10 has no native half type: h5py's construction, in this machine's byte order. */
static hid_t h5_half(void)
{
    hid_t t = H5Tcopy(H5T_NATIVE_FLOAT);
    if (t >= 0 && (H5Tset_fields(t, 15, 10, 5, 0, 10) < 0 || H5Tset_size(t, 2) < 0 ||
                   H5Tset_ebias(t, 15) < 0)) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

/* bool as h5py writes it, so that h5py reads it back as numpy bool. */
static hid_t h5_bool(void)
{
    hid_t t = H5Tenum_create(H5T_NATIVE_INT8);
    signed char no = 0, yes = 1;
    if (t >= 0 && (H5Tenum_insert(t, "FALSE", &no) < 0 || H5Tenum_insert(t, "TRUE", &yes) < 0)) {
        H5Tclose(t);
        return H5I_INVALID_HID;
    }
    return t;
}

hid_t sc__h5_mem_type(hid_t file_type, sc__dtype dt)
{
    /*
     * Strings and bool are read as stored: byte order does not apply to
     * them, and HDF5 converts enums by member name, which h5py's FALSE and
     * TRUE need not match.  A half already in this byte order is its own
     * memory type (so that H5Tequal finds its raw chunks readable as is).
     */
    if (file_type >= 0 && (sc__h5_string_width(file_type) ||
                           (dt == SC__DT_BOOL && h5_is_bool(file_type)) ||
                           (dt == SC__DT_F16 && h5_is_half(file_type) &&
                            H5Tget_order(file_type) == H5Tget_order(H5T_NATIVE_FLOAT))))
        return H5Tcopy(file_type);
    if (dt == SC__DT_F16)
        return h5_half();
    if (dt == SC__DT_BOOL)
        return h5_bool();
    hid_t t = h5_native(dt);
    return t >= 0 ? H5Tcopy(t) : H5I_INVALID_HID;
}

/* An integer or float type's name (dtype.c), or "" when it is not one shardcache carries. */
static const char *h5_number_name(hid_t type)
{
    H5T_class_t cls = H5Tget_class(type);
    sc__dtype dt = cls == H5T_INTEGER || cls == H5T_FLOAT ? sc__h5_dtype(type) : SC__DT_INVALID;
    return dt != SC__DT_INVALID ? sc__dtype_name(dt) : "";
}

void sc__h5_type_words(hid_t type, char *buf, size_t n)
{
    size_t size = H5Tget_size(type);
    hid_t super = H5I_INVALID_HID;
    switch (H5Tget_class(type)) {
    case H5T_INTEGER:
    case H5T_FLOAT:
        snprintf(buf, n, "a %zu-byte %s%s%s%s", size,
                 H5Tget_class(type) == H5T_FLOAT ? "float" : "integer",
                 *h5_number_name(type) ? " (" : "", h5_number_name(type),
                 *h5_number_name(type) ? ")" : "");
        break;
    case H5T_STRING:
        if (H5Tis_variable_str(type) > 0)
            snprintf(buf, n, "a variable-length string");
        else
            snprintf(buf, n, "a fixed-length string of %zu bytes", size);
        break;
    case H5T_VLEN:
        super = H5Tget_super(type);
        snprintf(buf, n, "a variable-length sequence of %s",
                 super >= 0 && *h5_number_name(super) ? h5_number_name(super) : "another type");
        break;
    case H5T_ENUM:
        super = H5Tget_super(type);
        snprintf(buf, n, "an enum of %d values over %s",
                 H5Tget_nmembers(type), super >= 0 ? h5_number_name(super) : "?");
        break;
    case H5T_COMPOUND:
        snprintf(buf, n, "a compound of %d members (%zu bytes)", H5Tget_nmembers(type), size);
        break;
    case H5T_ARRAY: snprintf(buf, n, "an array type of %zu bytes", size); break;
    case H5T_OPAQUE: snprintf(buf, n, "an opaque type of %zu bytes", size); break;
    case H5T_REFERENCE: snprintf(buf, n, "a reference"); break;
    case H5T_BITFIELD: snprintf(buf, n, "a bitfield of %zu bytes", size); break;
    case H5T_TIME: snprintf(buf, n, "a time type"); break;
    default: snprintf(buf, n, "an unknown type of %zu bytes", size); break;
    }
    if (super >= 0)
        H5Tclose(super);
}

uint64_t sc__h5_raw_offset(hid_t d, uint64_t bytes)
{
    hid_t dcpl = H5Dget_create_plist(d);
    int ok = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS &&
             H5Pget_external_count(dcpl) == 0 && H5Dget_storage_size(d) == bytes;
    haddr_t at = ok ? H5Dget_offset(d) : HADDR_UNDEF;
    if (dcpl >= 0)
        H5Pclose(dcpl);
    H5Eclear2(H5E_DEFAULT);
    return at == HADDR_UNDEF ? UINT64_MAX : (uint64_t)at;
}
