/*
 * dtype.c - the element types shardcache carries, by name and size.
 */
#include "dtype.h"

#include <string.h>

static const struct {
    const char *name;
    size_t size;
} dtypes[] = {
    [SC__DT_INVALID] = {"invalid", 0}, [SC__DT_U8] = {"uint8", 1},
    [SC__DT_I8] = {"int8", 1},         [SC__DT_U16] = {"uint16", 2},
    [SC__DT_I16] = {"int16", 2},       [SC__DT_U32] = {"uint32", 4},
    [SC__DT_I32] = {"int32", 4},       [SC__DT_U64] = {"uint64", 8},
    [SC__DT_I64] = {"int64", 8},       [SC__DT_F32] = {"float32", 4},
    [SC__DT_F64] = {"float64", 8},     [SC__DT_F16] = {"float16", 2},
    [SC__DT_BOOL] = {"bool", 1},
};

size_t sc__dtype_size(sc__dtype dt)
{
    return (unsigned)dt <= SC__DT_LAST ? dtypes[dt].size : 0;
}

const char *sc__dtype_name(sc__dtype dt)
{
    return (unsigned)dt <= SC__DT_LAST ? dtypes[dt].name : "invalid";
}

sc__dtype sc__dtype_parse(const char *name)
{
    for (int i = SC__DT_U8; i <= SC__DT_LAST; i++)
        if (!strcmp(name, dtypes[i].name))
            return (sc__dtype)i;
    return SC__DT_INVALID;
}
