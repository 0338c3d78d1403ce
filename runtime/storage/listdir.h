/*
 * listdir.h - layout B's files from a directory: the names it takes, and
 * a warning for the HDF5 data beside them that it does not take.
 */
#ifndef SC_LISTDIR_H
#define SC_LISTDIR_H

#include "dataset_impl.h"

/*
 * Appends ds->path's files named *.h5 or *.hdf5 (not hidden) to ds->files,
 * sorted.  On rank 0 (where warnings are logged), warns of what a user may
 * have meant to include: HDF5 files under other names (`x.H5`, `x.hdf`,
 * `x.nc`: names that say HDF5 are opened to look) and subdirectories
 * holding *.h5 or *.hdf5, which a directory source does not search (the
 * first 64 peeked into).  The caller holds the HDF5 lock.
 */
int sc__listdir_hdf5(sc_dataset *ds, sc_error *err);

#endif /* SC_LISTDIR_H */
