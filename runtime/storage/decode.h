/*
 * decode.h - SC_DECODE: variable-length fields of encoded samples (JPEG
 * or PNG bytes, told apart by their signature) delivered as fixed-shape
 * images, decoded either at every
 * delivery (random resized crop and flip, in the producers: the stream
 * decodes) or once, as a shard is cached (the centre square, with a
 * random flip at every delivery: a built-in shard transform, here).
 *
 * The setting is a comma list of FIELD=DECODER or DECODER, a bare one
 * for every variable-length uint8 field not named; DECODER is "jpeg"
 * (every epoch) or "jpeg-once" (either decodes PNGs too).  SC_DECODE_SIZE
 * is the output's side, SC_DECODE_CHANNELS its planes (3 or 1),
 * SC_DECODE_EXIF whether images are turned upright first.
 */
#ifndef SC_DECODE_H
#define SC_DECODE_H

#include "error.h"
#include "field.h"
#include "skiplist.h"
#include "image.h"

enum { SC__DECODE_NONE, SC__DECODE_EPOCH, SC__DECODE_ONCE };

/*
 * SC_DECODE for one source: per field its decoder, the output's side and
 * decode-once's transform.  Made by the dataset's open between its scan
 * and its final fields (fields.c), from the source's fields alone, so that
 * decode knows no dataset; the dataset keeps it to the close.
 */
typedef struct sc__decode sc__decode;

/*
 * Reads cfg->decode against the source's fields[n] (path names the source
 * in errors; it must outlive *out), refusing a field that is not
 * variable-length uint8, a user transform beside it, or a build without
 * JPEG.  *out is NULL when SC_DECODE is unset.  The skip list's samples
 * (skip: NULL or empty for none; it must outlive *out) are not decoded
 * once: their images stay zero (the stream replaces them: they are never
 * delivered), and the list keys decode-once's version, so that a cache
 * filled with it never serves a job without it.
 */
int sc__decode_new(const char *path, const sc__field *fields, int n, const sc_config *cfg,
                   const sc__skiplist *skip, sc__decode **out, sc_error *err);
void sc__decode_free(sc__decode *d);

/* Decode-once's shard transform, or NULL when no field is decoded once (or d is NULL). */
const sc_transform *sc__decode_once(const sc__decode *d);

/* Source field i's crop when it is decoded every epoch; width 0: it is not. */
sc__crop sc__decode_epoch(const sc__decode *d, int i);

/* Field f as the images d decodes it into: channels x side x side uint8. */
void sc__decode_image(const sc__decode *d, const sc__field *f, sc__field *out);

#endif /* SC_DECODE_H */
