/*
 * dtype.c - element types, and elements as numbers.
 *
 * The client computes on elements only when it stitches a split tensor
 * together: it adds a carry to each element of a chunk's answer. Floats
 * are added in double and rounded once into the element type; integers in
 * uint64, truncated to their width (two's complement makes that addition
 * modulo 2^bits for signed types too). float16 and bfloat16 conversions
 * are in half.h.
 */
#include <math.h>
#include <string.h>

#include "half.h"
#include "internal.h"

static const struct {
    const char *name, *kserve;
    size_t size;
    tc_kind kind;
} dtypes[TALLY_NDT] = {
    [TALLY_DT_FLOAT16] = {"float16", "FP16", 2, TC_FLOAT},
    [TALLY_DT_BFLOAT16] = {"bfloat16", "BF16", 2, TC_FLOAT},
    [TALLY_DT_FLOAT32] = {"float32", "FP32", 4, TC_FLOAT},
    [TALLY_DT_FLOAT64] = {"float64", "FP64", 8, TC_FLOAT},
    [TALLY_DT_INT8] = {"int8", "INT8", 1, TC_SIGNED},
    [TALLY_DT_INT16] = {"int16", "INT16", 2, TC_SIGNED},
    [TALLY_DT_INT32] = {"int32", "INT32", 4, TC_SIGNED},
    [TALLY_DT_INT64] = {"int64", "INT64", 8, TC_SIGNED},
    [TALLY_DT_UINT8] = {"uint8", "UINT8", 1, TC_UNSIGNED},
    [TALLY_DT_UINT16] = {"uint16", "UINT16", 2, TC_UNSIGNED},
    [TALLY_DT_UINT32] = {"uint32", "UINT32", 4, TC_UNSIGNED},
    [TALLY_DT_UINT64] = {"uint64", "UINT64", 8, TC_UNSIGNED},
};

static bool valid(tally_dt t)
{
    return (unsigned)t < TALLY_NDT;
}

TALLY_API const char *tally_dt_name(tally_dt t)
{
    return valid(t) ? dtypes[t].name : NULL;
}

TALLY_API size_t tally_dt_size(tally_dt t)
{
    return valid(t) ? dtypes[t].size : 0;
}

TALLY_API int tally_dt_parse(const char *name)
{
    if (name == NULL)
        return -1;
    for (int t = 0; t < TALLY_NDT; t++)
        if (strcmp(name, dtypes[t].name) == 0
            || strcmp(name, dtypes[t].kserve) == 0)
            return t;
    return -1;
}

tc_kind tc_dt_kind(tally_dt t)
{
    return dtypes[t].kind;
}

/* ------------------------------------------------------------------------
 * Elements.
 */
double tc_get_f(tally_dt t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + i * dtypes[t].size;
    uint16_t h;
    float f;
    double d;
    switch (t) {
    case TALLY_DT_FLOAT16: memcpy(&h, p, 2); return tc_f16_to_float(h);
    case TALLY_DT_BFLOAT16: memcpy(&h, p, 2); return tc_bf16_to_float(h);
    case TALLY_DT_FLOAT32: memcpy(&f, p, 4); return f;
    case TALLY_DT_FLOAT64: memcpy(&d, p, 8); return d;
    default: return (double)tc_get_u(t, buf, i);
    }
}

uint64_t tc_get_u(tally_dt t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + i * dtypes[t].size;
    switch (dtypes[t].size) {
    case 1: {
        uint8_t v;
        memcpy(&v, p, 1);
        return dtypes[t].kind == TC_SIGNED ? (uint64_t)(int64_t)(int8_t)v : v;
    }
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return dtypes[t].kind == TC_SIGNED ? (uint64_t)(int64_t)(int16_t)v : v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return dtypes[t].kind == TC_SIGNED ? (uint64_t)(int64_t)(int32_t)v : v;
    }
    default: {
        uint64_t v;
        memcpy(&v, p, 8);
        return v;
    }
    }
}

void tc_set_f(tally_dt t, void *buf, size_t i, double v)
{
    char *p = (char *)buf + i * dtypes[t].size;
    uint16_t h;
    float f;
    switch (t) {
    case TALLY_DT_FLOAT16:
        h = tc_f16_from_double(v);
        memcpy(p, &h, 2);
        break;
    case TALLY_DT_BFLOAT16:
        h = tc_bf16_from_double(v);
        memcpy(p, &h, 2);
        break;
    case TALLY_DT_FLOAT32:
        f = (float)v;
        memcpy(p, &f, 4);
        break;
    case TALLY_DT_FLOAT64: memcpy(p, &v, 8); break;
    default: break; /* integers go through tc_set_u */
    }
}

void tc_set_u(tally_dt t, void *buf, size_t i, uint64_t v)
{
    char *p = (char *)buf + i * dtypes[t].size;
    uint8_t b;
    uint16_t h;
    uint32_t w;
    switch (dtypes[t].size) {
    case 1:
        b = (uint8_t)v;
        memcpy(p, &b, 1);
        break;
    case 2:
        h = (uint16_t)v;
        memcpy(p, &h, 2);
        break;
    case 4:
        w = (uint32_t)v;
        memcpy(p, &w, 4);
        break;
    default: memcpy(p, &v, 8); break;
    }
}
