/*
 * error.c - sc_strerror, status names and the sc_error helpers.
 */
#include "error.h"

#include <stdio.h>
#include <string.h>

const char *sc_strerror(int code)
{
    switch (code) {
#define SC__STATUS_TEXT(name, value, text)                                   \
    case (value):                                                            \
        return text;
        SC_STATUS_LIST(SC__STATUS_TEXT)
#undef SC__STATUS_TEXT
    }
    return "unknown status code";
}

const char *sc_status_name(int code)
{
    switch (code) {
#define SC__STATUS_NAME(name, value, text)                                   \
    case (value):                                                            \
        return "SC_" #name;
        SC_STATUS_LIST(SC__STATUS_NAME)
#undef SC__STATUS_NAME
    }
    return "SC_UNKNOWN";
}

int sc__vseterr(sc_error *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    }
    return code;
}

int sc__seterr(sc_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sc__vseterr(err, code, fmt, ap);
    va_end(ap);
    return code;
}

int sc__errctx(sc_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    err->code = code;
    char out[SC_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, sizeof out, fmt, ap);
    va_end(ap);
    /* Append ": old message", cutting whatever does not fit. */
    size_t used = n < 0 ? 0 : (size_t)n < sizeof out ? (size_t)n : sizeof out - 1;
    const char *tail[2] = {": ", err->msg};
    for (int i = 0; i < 2; i++) {
        size_t len = strlen(tail[i]), room = sizeof out - 1 - used;
        len = len < room ? len : room;
        memcpy(out + used, tail[i], len);
        used += len;
    }
    out[used] = '\0';
    memcpy(err->msg, out, used + 1);
    return code;
}

int sc__errok(sc_error *err)
{
    if (err) {
        err->code = SC_OK;
        err->msg[0] = '\0';
    }
    return SC_OK;
}
