/*
 * fields.h - a source's fields: found in an HDF5 file and described
 * (type, shape, samples, a variable-length field's lengths), checked for
 * a decoder, and made final at the open's last step (SC_DECODE, a shard
 * transform's outputs, SC_AUGMENT); then what each delivered field is.
 * The HDF5 lock is held where a comment says so.  HDF5 ids are int64_t
 * (what hid_t is, as in sc_dataset), so that the layers above include
 * this without <hdf5.h>.
 */
#ifndef SC_FIELDS_H
#define SC_FIELDS_H

#include <stdint.h>

#include "augment.h"
#include "dataset_impl.h"
#include "resample.h"
#include "skiplist.h"

/* The names of the fields to load, and the datasets "every field" left out. */
typedef struct sc__fields_names {
    char names[SC_MAX_FIELDS][256];
    int n, too_many;
    char skipped[512]; /* datasets and links left out, each named with why */
    int nskipped;
} sc__fields_names;

/* A source file opened read-only: through MPI-IO over comm when parallel.  The lock is held. */
int64_t sc__fields_open_file(const char *path, MPI_Comm comm, int parallel, sc_error *err);

/*
 * SC_FIELDS' list `wanted` as names with a leading '/', the blanks around
 * each dropped; an empty or overlong one refused.  Two names of one
 * dataset are found in the file, by sc__fields_find.
 */
int sc__fields_parse(const char *wanted, sc__fields_names *l, sc_error *err);

/* The fields to load from file: SC_FIELDS's list (wanted), or every dataset in "/". */
int sc__fields_find(int64_t file, const char *path, const char *wanted, sc__fields_names *l,
                    sc_error *err);

/* Says once (rank 0) which datasets and groups "every field" left out, and why. */
void sc__fields_note_skipped(const sc_dataset *ds, const sc_config *cfg,
                             const sc__fields_names *l);

/*
 * Describes field `name` of an open file into f; *n gets its samples, and
 * *dset (when asked) the open dataset.  The lock is held.
 */
int sc__fields_describe(int64_t file, const char *path, const char *name, int no_axis,
                        sc__field *f, uint64_t *n, int64_t *dset, sc_error *err);

/*
 * A compressed field whose chunks HDF5 decodes (inside H5Dread, under its
 * lock: one producer at a time): the note saying why (notes set), and a
 * refusal when a filter it must run is one this HDF5 cannot load.  The
 * lock is held.
 */
int sc__fields_check_decoder(const char *path, int64_t d, const sc__field *f,
                             const sc_config *cfg, int notes, sc_error *err);

/* Layout B: the decoder's check and notes (rank 0) for file f's fields.  The lock is held. */
int sc__fields_check_file(int64_t f, const char *path, const sc_dataset *ds, const sc_config *cfg,
                          sc_error *err);

/*
 * Variable-length field i's n samples from sample `at` on: their lengths
 * into ds->vlen_off[i], grown to hold them, and the largest into `into`.
 * The lock is held.
 */
int sc__fields_learn_lengths(sc_dataset *ds, int64_t d, const char *path, int i, uint64_t at,
                             uint64_t n, sc__field *into, sc_error *err);

/*
 * The open's last step for the fields, once the scan is every rank's:
 * SC_DECODE set up against the source's fields, the shard transform's
 * outputs (decode-once's or cfg's) in their place, then SC_AUGMENT against
 * those.
 */
int sc__fields_setup(sc_dataset *ds, const sc_config *cfg, sc_error *err);

/* The transform the stream runs (its augmentation): decode-once's, or cfg's own. */
const sc_transform *sc__fields_shard_tf(const sc_dataset *ds, const sc_config *cfg);

/* Whether a field of ds is decoded once (SC_DECODE=...jpeg-once). */
int sc__fields_decodes_once(const sc_dataset *ds);

/* SC_SKIP_LIST's samples, read at the open (NULL: none). */
const sc__skiplist *sc__fields_skip(const sc_dataset *ds);

/* The crop delivered field i is decoded with at every delivery; width 0: none. */
sc__crop sc__fields_crop(const sc_dataset *ds, int i);

/* Delivered field i as the consumer sees it (decoded every epoch: 3 x side x side uint8). */
void sc__fields_decoded(const sc_dataset *ds, int i, sc__field *out);

/* Field i's augmentation stages, or NULL when it is delivered as stored. */
const sc__aug *sc__fields_aug(const sc_dataset *ds, int i);

/* Delivered field i after its stages (in: as stored, or as SC_DECODE delivers it). */
void sc__fields_augmented(const sc_dataset *ds, int i, sc__field *inout);

#endif /* SC_FIELDS_H */
