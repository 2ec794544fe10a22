/*
 * dtype.c - element types, and elements as numbers.
 *
 * The client computes on elements only when it stitches a split tensor
 * together: it adds a carry to each element of a chunk's answer. Floats
 * are added in double and rounded once into the element type; integers in
 * uint64, truncated to their width (two's complement makes that addition
 * modulo 2^bits for signed types too). float16 and bfloat16 conversions
 * are in common/tx_half.h.
 */
#include <math.h>
#include <string.h>

#include "internal.h"
#include "tx_dtype.h"
#include "tx_half.h"

/* libtally's public tally_dt numbers the types as common/'s table does. */
#define TC_SAME(id, name, kserve, size, kind, npy)                             \
    _Static_assert((int)TALLY_DT_##id == (int)TX_##id, #id);
TX_DTYPES(TC_SAME)
#undef TC_SAME
_Static_assert((int)TALLY_NDT == (int)TX_NDTYPES, "dtype count");

static bool valid(tally_dt t)
{
    return (unsigned)t < TALLY_NDT;
}

TALLY_API const char *tally_dt_name(tally_dt t)
{
    return valid(t) ? tx_dtype_name((tx_dtype)t) : NULL;
}

TALLY_API const char *tally_dt_kserve(tally_dt t)
{
    return valid(t) ? tx_dtype_kserve((tx_dtype)t) : NULL;
}

TALLY_API size_t tally_dt_size(tally_dt t)
{
    return valid(t) ? tx_dtype_size((tx_dtype)t) : 0;
}

TALLY_API int tally_dt_parse(const char *name)
{
    return name == NULL ? -1 : tx_dtype_parse(name, strlen(name));
}

tc_kind tc_dt_kind(tally_dt t)
{
    switch (tx_dtype_kind((tx_dtype)t)) {
    case TX_KIND_FLOAT: return TC_FLOAT;
    case TX_KIND_SIGNED: return TC_SIGNED;
    case TX_KIND_UNSIGNED: return TC_UNSIGNED;
    }
    return TC_FLOAT;
}

/* ------------------------------------------------------------------------
 * Elements.
 */
double tc_get_f(tally_dt t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + i * tx_dtype_size((tx_dtype)t);
    uint16_t h;
    float f;
    double d;
    switch (t) {
    case TALLY_DT_FLOAT16: memcpy(&h, p, 2); return tx_f16_to_f32(h);
    case TALLY_DT_BFLOAT16: memcpy(&h, p, 2); return tx_bf16_to_f32(h);
    case TALLY_DT_FLOAT32: memcpy(&f, p, 4); return f;
    case TALLY_DT_FLOAT64: memcpy(&d, p, 8); return d;
    default: return (double)tc_get_u(t, buf, i);
    }
}

uint64_t tc_get_u(tally_dt t, const void *buf, size_t i)
{
    const char *p = (const char *)buf + i * tx_dtype_size((tx_dtype)t);
    switch (tx_dtype_size((tx_dtype)t)) {
    case 1: {
        uint8_t v;
        memcpy(&v, p, 1);
        return tx_dtype_kind((tx_dtype)t) == TX_KIND_SIGNED
                   ? (uint64_t)(int64_t)(int8_t)v
                   : v;
    }
    case 2: {
        uint16_t v;
        memcpy(&v, p, 2);
        return tx_dtype_kind((tx_dtype)t) == TX_KIND_SIGNED
                   ? (uint64_t)(int64_t)(int16_t)v
                   : v;
    }
    case 4: {
        uint32_t v;
        memcpy(&v, p, 4);
        return tx_dtype_kind((tx_dtype)t) == TX_KIND_SIGNED
                   ? (uint64_t)(int64_t)(int32_t)v
                   : v;
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
    char *p = (char *)buf + i * tx_dtype_size((tx_dtype)t);
    uint16_t h;
    float f;
    switch (t) {
    case TALLY_DT_FLOAT16:
        h = tx_f64_to_f16(v);
        memcpy(p, &h, 2);
        break;
    case TALLY_DT_BFLOAT16:
        h = tx_f64_to_bf16(v);
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
    char *p = (char *)buf + i * tx_dtype_size((tx_dtype)t);
    uint8_t b;
    uint16_t h;
    uint32_t w;
    switch (tx_dtype_size((tx_dtype)t)) {
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
