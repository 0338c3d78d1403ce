/*
 * json.h - a small strict JSON reader for the CLI's trace commands: the
 * whole of RFC 8259 (objects, arrays, strings with escapes, numbers, true,
 * false, null), into a tree that one call frees.  It exists so that the
 * tools can check and read the trace files shardcache writes without a
 * dependency; it is not used by the runtime.
 */
#ifndef SC_JSON_H
#define SC_JSON_H

#include <stddef.h>

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ } json_type;

typedef struct json json;
typedef struct json_doc json_doc;

/*
 * Parses text[0..len) as exactly one JSON value (whitespace around it
 * allowed).  NULL on error, with "line L, column C: what" in err.
 */
json_doc *json_parse(const char *text, size_t len, char *err, size_t errlen);
void json_free(json_doc *doc);
const json *json_root(const json_doc *doc);

json_type json_kind(const json *v);
/* Members of an object or elements of an array, in order; NULL at the end. */
const json *json_first(const json *v);
const json *json_next(const json *v);
/* A member's key (NULL for array elements). */
const char *json_key(const json *v);
/* The member `key` of an object, or NULL. */
const json *json_get(const json *obj, const char *key);
/* The value, or `dflt` when v is NULL or of another type. */
double json_num(const json *v, double dflt);
const char *json_str(const json *v, const char *dflt);

#endif /* SC_JSON_H */
