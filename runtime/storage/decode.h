/*
 * decode.h - SC_DECODE: variable-length fields of encoded samples (JPEG
 * bytes) delivered as fixed-shape images, decoded either at every
 * delivery (random resized crop and flip, in the producers: the stream
 * decodes) or once, as a shard is cached (the centre square, with a
 * random flip at every delivery: a built-in shard transform, here).
 *
 * The setting is a comma list of FIELD=DECODER or DECODER, a bare one
 * for every variable-length uint8 field not named; DECODER is "jpeg"
 * (every epoch) or "jpeg-once".  SC_DECODE_SIZE is the output's side.
 */
#ifndef SC_DECODE_H
#define SC_DECODE_H

#include "jpeg.h"
#include "source.h"

enum { SC__DECODE_NONE, SC__DECODE_EPOCH, SC__DECODE_ONCE };

/*
 * After the scan, before the fields are final (sc__dataset_finish): reads
 * cfg->decode against the source's fields into ds->decode[], refusing a
 * field that is not variable-length uint8 or a build without JPEG, and
 * for decode-once fields makes ds->decode_tf, the transform that decodes
 * them (*tf then points at it; else at cfg->transform).
 */
int sc__decode_setup(sc_dataset *ds, const sc_config *cfg, const sc_transform **tf,
                     sc_error *err);

/* The transform the dataset's shards go through: decode-once's, or cfg's own. */
const sc_transform *sc__decode_transform(const sc_dataset *ds, const sc_config *cfg);

/* The crop delivered field i is decoded with at every delivery; width 0: none. */
sc__crop sc__decode_crop(const sc_dataset *ds, int i);

/* Delivered field i as the consumer sees it (decoded every epoch: 3 x side x side uint8). */
void sc__decode_field(const sc_dataset *ds, int i, sc__field *out);

#endif /* SC_DECODE_H */
