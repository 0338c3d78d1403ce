/*
 * libFuzzer target: json_parse() (the trace reader of `shardcache trace`)
 * on arbitrary bytes must never crash, leak or read past the text; a
 * refusal says where and why.  A tree it accepts must be well formed
 * (members keyed, elements not, json_get finding each key's first member),
 * and written back as JSON it must parse again to the same tree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

typedef struct out {
    char *p;
    size_t n, cap;
} out;

static void put(out *o, const char *s, size_t n)
{
    if (o->n + n + 1 > o->cap) {
        o->cap = 2 * (o->n + n + 1);
        if (!(o->p = realloc(o->p, o->cap)))
            abort();
    }
    memcpy(o->p + o->n, s, n);
    o->n += n;
}

static void put_str(out *o, const char *s)
{
    put(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[8];
        if (c == '"' || c == '\\' || c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            put(o, esc, 6);
        } else {
            put(o, s, 1);
        }
    }
    put(o, "\"", 1);
}

/* Checks v's shape and writes it as JSON; the number of values in it. */
static size_t walk(const json *v, out *o, int depth)
{
    char num[40];
    size_t count = 1;
    if (depth > 300)
        abort(); /* the reader refuses nesting deeper than 256 */
    switch (json_kind(v)) {
    case JSON_NULL: put(o, "null", 4); break;
    case JSON_BOOL:
        /* Neither a number nor a string to the readers, whose API has no
         * way to tell true from false (no caller needs it): written as true. */
        if (json_num(v, -1) != -1 || strcmp(json_str(v, "x"), "x") || json_first(v))
            abort();
        put(o, "true", 4);
        break;
    case JSON_NUM: {
        double d = json_num(v, NAN);
        if (isnan(d))
            abort();
        if (isinf(d))
            snprintf(num, sizeof num, "%s1e999", d < 0 ? "-" : "");
        else
            snprintf(num, sizeof num, "%.17g", d);
        put(o, num, strlen(num));
        break;
    }
    case JSON_STR:
        if (!json_str(v, NULL))
            abort();
        put_str(o, json_str(v, NULL));
        break;
    case JSON_ARR:
    case JSON_OBJ: {
        int obj = json_kind(v) == JSON_OBJ;
        put(o, obj ? "{" : "[", 1);
        for (const json *m = json_first(v); m; m = json_next(m)) {
            if (m != json_first(v))
                put(o, ",", 1);
            if (obj) {
                if (!json_key(m))
                    abort();
                const json *g = json_get(v, json_key(m));
                if (!g || strcmp(json_key(g), json_key(m)))
                    abort();
                for (const json *x = json_first(v); x != g; x = json_next(x))
                    if (!strcmp(json_key(x), json_key(m)))
                        abort(); /* json_get finds the first member of that name */
                put_str(o, json_key(m));
                put(o, ":", 1);
            } else if (json_key(m) || json_get(v, "")) {
                abort();
            }
            count += walk(m, o, depth + 1);
        }
        put(o, obj ? "}" : "]", 1);
        break;
    }
    default: abort();
    }
    return count;
}

static int same(const json *a, const json *b)
{
    if (json_kind(a) != json_kind(b))
        return 0;
    double x = json_num(a, 0), y = json_num(b, 0);
    if (memcmp(&x, &y, sizeof x) != 0)
        return 0;
    if (strcmp(json_str(a, ""), json_str(b, "")))
        return 0;
    const json *p = json_first(a), *q = json_first(b);
    for (; p && q; p = json_next(p), q = json_next(q))
        if (strcmp(json_key(p) ? json_key(p) : "-", json_key(q) ? json_key(q) : "-") ||
            !same(p, q))
            return 0;
    return !p && !q;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char err[256] = "";
    json_doc *doc = json_parse((const char *)data, size, err, sizeof err);
    if (!doc) {
        if (strncmp(err, "line ", 5) != 0)
            abort(); /* a refusal says where */
        char tiny[6];
        if (json_parse((const char *)data, size, tiny, sizeof tiny) ||
            json_parse((const char *)data, size, NULL, 0) || strlen(tiny) != 5)
            abort(); /* and a short buffer is only cut short */
        return 0;
    }
    if (err[0] || !json_root(doc))
        abort();
    out o = {NULL, 0, 0};
    size_t n = walk(json_root(doc), &o, 0);
    if (n > size)
        abort(); /* every value takes at least a byte of the text */
    json_doc *again = json_parse(o.p, o.n, err, sizeof err);
    if (!again || !same(json_root(doc), json_root(again)))
        abort();
    json_free(again);
    json_free(doc);
    free(o.p);
    return 0;
}
