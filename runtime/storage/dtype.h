/*
 * dtype.h - the element types a field can have, without HDF5: the layers
 * above storage describe fields with these and never see <hdf5.h>
 * (h5.h maps them to and from HDF5's types).
 */
#ifndef SC_DTYPE_H
#define SC_DTYPE_H

#include <stddef.h>

/*
 * Element types shardcache can carry: HDF5 integers, IEEE floats of 2, 4
 * and 8 bytes, and bool (h5py's enum FALSE=0, TRUE=1 over int8).  A
 * fixed-length string field is carried as uint8 with its width as the
 * sample's last dimension.  New types go at the end: the values are
 * written into layout B's saved manifest.
 */
typedef enum sc__dtype {
    SC__DT_INVALID = 0,
    SC__DT_U8, SC__DT_I8, SC__DT_U16, SC__DT_I16, SC__DT_U32, SC__DT_I32,
    SC__DT_U64, SC__DT_I64, SC__DT_F32, SC__DT_F64, SC__DT_F16, SC__DT_BOOL,
    SC__DT_LAST = SC__DT_BOOL
} sc__dtype;

size_t sc__dtype_size(sc__dtype dt);
const char *sc__dtype_name(sc__dtype dt);
sc__dtype sc__dtype_parse(const char *name);

#endif /* SC_DTYPE_H */
