/*
 * json.c - recursive descent over RFC 8259, nodes and strings from one
 * arena of growing blocks, so that a trace of millions of events parses
 * without a malloc per value and frees at once.
 */
#include "json.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct json {
    json_type type;
    double num;
    const char *str; /* JSON_STR (and JSON_BOOL: "true"/"false") */
    const char *key; /* as a member of an object */
    json *first, *last, *next;
};

typedef struct block {
    struct block *prev;
    size_t used, cap;
    unsigned char mem[];
} block;

struct json_doc {
    block *arena;
    json *root;
};

typedef struct parser {
    const char *p, *end, *start;
    json_doc *doc;
    char *err;
    size_t errlen;
    int failed, depth;
} parser;

enum { MAX_DEPTH = 256 };

static void *json_alloc(parser *ps, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    block *b = ps->doc->arena;
    if (!b || b->used + n > b->cap) {
        /* From 4 KiB, doubling up to 1 MiB: one short event line takes 4 KiB. */
        size_t cap = !b ? 4096 : b->cap < (1u << 19) ? 2 * b->cap : (1u << 20);
        cap = n > cap ? n : cap;
        block *nb = malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->prev = b;
        nb->used = 0;
        nb->cap = cap;
        ps->doc->arena = b = nb;
    }
    void *m = b->mem + b->used;
    b->used += n;
    return m;
}

static void json_fail(parser *ps, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = 1;
    int line = 1, col = 1;
    for (const char *q = ps->start; q < ps->p && q < ps->end; q++, col++)
        if (*q == '\n')
            line++, col = 0;
    int n = snprintf(ps->err, ps->errlen, "line %d, column %d: ", line, col);
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < ps->errlen)
        vsnprintf(ps->err + n, ps->errlen - (size_t)n, fmt, ap);
    va_end(ap);
}

static void json_skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' ||
                               *ps->p == '\r'))
        ps->p++;
}

static json *json_node(parser *ps, json_type t)
{
    json *v = json_alloc(ps, sizeof *v);
    if (!v) {
        json_fail(ps, "out of memory");
        return NULL;
    }
    memset(v, 0, sizeof *v);
    v->type = t;
    return v;
}

static int json_hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

static void json_put_utf8(char **o, uint32_t cp)
{
    unsigned char *u = (unsigned char *)*o;
    if (cp < 0x80) {
        *u++ = (unsigned char)cp;
    } else if (cp < 0x800) {
        *u++ = (unsigned char)(0xc0 | cp >> 6);
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *u++ = (unsigned char)(0xe0 | cp >> 12);
        *u++ = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    } else {
        *u++ = (unsigned char)(0xf0 | cp >> 18);
        *u++ = (unsigned char)(0x80 | (cp >> 12 & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp >> 6 & 0x3f));
        *u++ = (unsigned char)(0x80 | (cp & 0x3f));
    }
    *o = (char *)u;
}

static int json_hex4(parser *ps, uint32_t *out)
{
    if (ps->end - ps->p < 4) {
        json_fail(ps, "truncated \\u escape");
        return -1;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        int h = json_hexval(ps->p[i]);
        if (h < 0) {
            json_fail(ps, "bad \\u escape");
            return -1;
        }
        v = v << 4 | (uint32_t)h;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

/* A string at ps->p (on the opening quote), decoded into the arena. */
static const char *json_string(parser *ps)
{
    const char *q = ++ps->p;
    while (q < ps->end && *q != '"')
        q += *q == '\\' ? 2 : 1;
    if (q >= ps->end) {
        json_fail(ps, "unterminated string");
        return NULL;
    }
    char *out = json_alloc(ps, (size_t)(q - ps->p) + 1), *o = out;
    if (!out) {
        json_fail(ps, "out of memory");
        return NULL;
    }
    while (*ps->p != '"') {
        unsigned char c = (unsigned char)*ps->p++;
        if (c < 0x20) {
            json_fail(ps, "control character in a string");
            return NULL;
        }
        if (c != '\\') {
            *o++ = (char)c;
            continue;
        }
        char e = *ps->p++;
        uint32_t cp;
        switch (e) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u':
            if (json_hex4(ps, &cp))
                return NULL;
            if (cp >= 0xd800 && cp < 0xdc00) { /* a surrogate pair */
                uint32_t lo;
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u') {
                    json_fail(ps, "lone surrogate in \\u escape");
                    return NULL;
                }
                ps->p += 2;
                if (json_hex4(ps, &lo))
                    return NULL;
                if (lo < 0xdc00 || lo >= 0xe000) {
                    json_fail(ps, "bad surrogate pair");
                    return NULL;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            }
            /* Six escaped bytes decode to at most four: it fits. */
            json_put_utf8(&o, cp);
            break;
        default:
            json_fail(ps, "bad escape \\%c", e);
            return NULL;
        }
    }
    ps->p++;
    *o = 0;
    return out;
}

static json *json_value(parser *ps);

static json *json_container(parser *ps, int obj)
{
    json *v = json_node(ps, obj ? JSON_OBJ : JSON_ARR);
    if (!v)
        return NULL;
    if (++ps->depth > MAX_DEPTH) {
        json_fail(ps, "nested deeper than %d", MAX_DEPTH);
        return NULL;
    }
    ps->p++;
    json_skip_ws(ps);
    if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
        ps->p++;
        ps->depth--;
        return v;
    }
    for (;;) {
        const char *key = NULL;
        json_skip_ws(ps);
        if (obj) {
            if (ps->p >= ps->end || *ps->p != '"') {
                json_fail(ps, "expected a member name");
                return NULL;
            }
            if (!(key = json_string(ps)))
                return NULL;
            json_skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                json_fail(ps, "expected ':'");
                return NULL;
            }
            ps->p++;
        }
        json *kid = json_value(ps);
        if (!kid)
            return NULL;
        kid->key = key;
        if (v->last)
            v->last->next = kid;
        else
            v->first = kid;
        v->last = kid;
        json_skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
            ps->p++;
            ps->depth--;
            return v;
        }
        json_fail(ps, "expected ',' or '%c'", obj ? '}' : ']');
        return NULL;
    }
}

static json *json_number(parser *ps)
{
    const char *q = ps->p;
    if (q < ps->end && *q == '-')
        q++;
    if (q >= ps->end || *q < '0' || *q > '9') {
        json_fail(ps, "bad number");
        return NULL;
    }
    if (*q == '0')
        q++;
    else
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    if (q < ps->end && *q == '.') {
        if (++q >= ps->end || *q < '0' || *q > '9') {
            json_fail(ps, "bad number");
            return NULL;
        }
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || *q < '0' || *q > '9') {
            json_fail(ps, "bad number");
            return NULL;
        }
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    char buf[64];
    size_t n = (size_t)(q - ps->p);
    if (n >= sizeof buf) {
        json_fail(ps, "number too long");
        return NULL;
    }
    memcpy(buf, ps->p, n);
    buf[n] = 0;
    json *v = json_node(ps, JSON_NUM);
    if (v)
        v->num = strtod(buf, NULL);
    ps->p = q;
    return v;
}

static json *json_literal(parser *ps, const char *word, json_type t)
{
    size_t n = strlen(word);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n) != 0) {
        json_fail(ps, "unexpected '%c'", *ps->p);
        return NULL;
    }
    ps->p += n;
    json *v = json_node(ps, t);
    if (v && t == JSON_BOOL)
        v->str = word, v->num = word[0] == 't';
    return v;
}

static json *json_value(parser *ps)
{
    json_skip_ws(ps);
    if (ps->p >= ps->end) {
        json_fail(ps, "unexpected end of input");
        return NULL;
    }
    switch (*ps->p) {
    case '{': return json_container(ps, 1);
    case '[': return json_container(ps, 0);
    case '"': {
        json *v = json_node(ps, JSON_STR);
        if (v && !(v->str = json_string(ps)))
            return NULL;
        return v;
    }
    case 't': return json_literal(ps, "true", JSON_BOOL);
    case 'f': return json_literal(ps, "false", JSON_BOOL);
    case 'n': return json_literal(ps, "null", JSON_NULL);
    default: return json_number(ps);
    }
}

void json_free(json_doc *doc)
{
    if (!doc)
        return;
    for (block *b = doc->arena, *p; b; b = p) {
        p = b->prev;
        free(b);
    }
    free(doc);
}

json_doc *json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    json_doc *doc = calloc(1, sizeof *doc);
    if (!doc) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    parser ps = {text, text + len, text, doc, err, errlen, 0, 0};
    doc->root = json_value(&ps);
    json_skip_ws(&ps);
    if (!ps.failed && ps.p != ps.end)
        json_fail(&ps, "text after the value");
    if (ps.failed || !doc->root) {
        json_free(doc);
        return NULL;
    }
    return doc;
}

const json *json_root(const json_doc *doc)
{
    return doc ? doc->root : NULL;
}

json_type json_kind(const json *v)
{
    return v ? v->type : JSON_NULL;
}

const json *json_first(const json *v)
{
    return v && (v->type == JSON_ARR || v->type == JSON_OBJ) ? v->first : NULL;
}

const json *json_next(const json *v)
{
    return v ? v->next : NULL;
}

const char *json_key(const json *v)
{
    return v ? v->key : NULL;
}

const json *json_get(const json *obj, const char *key)
{
    for (const json *m = json_first(obj); obj && obj->type == JSON_OBJ && m; m = m->next)
        if (!strcmp(m->key, key))
            return m;
    return NULL;
}

double json_num(const json *v, double dflt)
{
    return v && v->type == JSON_NUM ? v->num : dflt;
}

const char *json_str(const json *v, const char *dflt)
{
    return v && v->type == JSON_STR ? v->str : dflt;
}
