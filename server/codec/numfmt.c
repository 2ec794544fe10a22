/*
 * numfmt.c - exact parsing and shortest printing of tensor elements.
 *
 * Integers are parsed digit by digit: the token's digits and exponent give
 * an exact integer (or prove it is not one) without going through a
 * double, so every uint64 and int64 is exact. Floats use strtof/strtod,
 * which glibc rounds correctly; float16 and bfloat16 round the double once
 * more, directly. Printing tries increasing precisions of %.*g and keeps the
 * first that reads back as the same value: the shortest round-trip text.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "numfmt.h"
#include "tx_half.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

size_t numfmt_scan(const char *s, const char *end)
{
    const char *p = s;
    if (p < end && *p == '-')
        p++;
    if (p >= end || !is_digit(*p))
        return 0;
    if (*p == '0')
        p++;
    else
        while (p < end && is_digit(*p))
            p++;
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !is_digit(*p))
            return 0;
        while (p < end && is_digit(*p))
            p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-'))
            p++;
        if (p >= end || !is_digit(*p))
            return 0;
        while (p < end && is_digit(*p))
            p++;
    }
    return (size_t)(p - s);
}

/* The exact integer value of a number token as sign and magnitude; false
 * when it is not an integer or its magnitude exceeds 2^64 - 1. */
static bool exact_integer(const char *s, size_t len, bool *neg, uint64_t *mag,
                          bool *fraction)
{
    const char *p = s, *end = s + len;
    *neg = *p == '-';
    if (*neg)
        p++;
    /* collect significant digits of the integer and fraction parts */
    char digits[64];
    size_t nd = 0, dropped = 0; /* digits beyond 64 that must all be 0 */
    long exp10 = 0;
    bool leading = true;
    for (; p < end && is_digit(*p); p++) {
        if (leading && *p == '0')
            continue;
        leading = false;
        if (nd < sizeof digits)
            digits[nd++] = *p;
        else
            dropped++;
    }
    exp10 += (long)dropped;
    if (p < end && *p == '.') {
        for (p++; p < end && is_digit(*p); p++) {
            if (leading && *p == '0') {
                exp10--;
                continue;
            }
            leading = false;
            if (nd < sizeof digits) {
                digits[nd++] = *p;
                exp10--;
            } else if (*p != '0') {
                *fraction = true; /* a nonzero digit far below the point */
            }
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        bool eneg = *p == '-';
        if (*p == '+' || *p == '-')
            p++;
        long e = 0;
        for (; p < end && is_digit(*p); p++)
            if (e < 100000)
                e = e * 10 + (*p - '0');
        exp10 += eneg ? -e : e;
    }
    /* drop trailing zeros into the exponent */
    while (nd > 0 && digits[nd - 1] == '0') {
        nd--;
        exp10++;
    }
    *mag = 0;
    if (nd == 0)
        return !*fraction; /* zero */
    if (exp10 < 0) {
        *fraction = true;
        return false;
    }
    if ((long)nd + exp10 > 20)
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < nd; i++)
        if (__builtin_mul_overflow(v, 10, &v)
            || __builtin_add_overflow(v, (uint64_t)(digits[i] - '0'), &v))
            return false;
    for (long i = 0; i < exp10; i++)
        if (__builtin_mul_overflow(v, 10, &v))
            return false;
    *mag = v;
    return !*fraction;
}

static void store_u(tx_dtype t, void *dst, size_t i, uint64_t v)
{
    switch (tx_dtype_size(t)) {
    case 1: ((uint8_t *)dst)[i] = (uint8_t)v; break;
    case 2: ((uint16_t *)dst)[i] = (uint16_t)v; break;
    case 4: ((uint32_t *)dst)[i] = (uint32_t)v; break;
    default: ((uint64_t *)dst)[i] = v; break;
    }
}

static void store_f(tx_dtype t, void *dst, size_t i, double d, float f)
{
    switch (t) {
    case TX_FLOAT16: ((uint16_t *)dst)[i] = tx_f64_to_f16(d); break;
    case TX_BFLOAT16: ((uint16_t *)dst)[i] = tx_f64_to_bf16(d); break;
    case TX_FLOAT32: ((float *)dst)[i] = f; break;
    default: ((double *)dst)[i] = d; break;
    }
}

bool numfmt_parse(tx_dtype t, const char *s, size_t len, void *dst,
                  size_t index, char *why, size_t whylen)
{
    int shown = len > 24 ? 24 : (int)len;
    const char *more = len > 24 ? "..." : "";
    if (tx_dtype_kind(t) != TX_KIND_FLOAT) {
        bool neg, fraction = false;
        uint64_t mag;
        bool ok = exact_integer(s, len, &neg, &mag, &fraction);
        unsigned bits = 8 * (unsigned)tx_dtype_size(t);
        if (ok) {
            if (tx_dtype_kind(t) == TX_KIND_UNSIGNED) {
                uint64_t max = bits == 64 ? UINT64_MAX : (1ull << bits) - 1;
                ok = (!neg || mag == 0) && mag <= max;
                if (ok) {
                    store_u(t, dst, index, mag);
                    return true;
                }
            } else {
                uint64_t lim = 1ull << (bits - 1); /* |min| */
                ok = neg ? mag <= lim : mag < lim;
                if (ok) {
                    store_u(t, dst, index, neg ? 0 - mag : mag);
                    return true;
                }
            }
        }
        snprintf(why, whylen, "%.*s%s %s %s", shown, s, more,
                 fraction ? "is not an integer, so it does not fit"
                          : "does not fit",
                 tx_dtype_name(t));
        return false;
    }
    char buf[512];
    if (len >= sizeof buf) {
        snprintf(why, whylen, "number %.*s%s is longer than %zu characters",
                 shown, s, more, sizeof buf - 1);
        return false;
    }
    memcpy(buf, s, len);
    buf[len] = '\0';
    errno = 0;
    double d = strtod(buf, NULL);
    float f = 0;
    bool overflow = isinf(d);
    if (t == TX_FLOAT32) {
        f = strtof(buf, NULL);
        overflow = isinf(f);
    } else if (t == TX_FLOAT16) {
        overflow = overflow || (tx_f64_to_f16(d) & 0x7fff) == 0x7c00;
    } else if (t == TX_BFLOAT16) {
        overflow = overflow || (tx_f64_to_bf16(d) & 0x7fff) == 0x7f80;
    }
    if (overflow) {
        snprintf(why, whylen,
                 "%.*s%s is out of range for %s (write \"Infinity\" for an "
                 "infinity)",
                 shown, s, more, tx_dtype_name(t));
        return false;
    }
    store_f(t, dst, index, d, f);
    return true;
}

bool numfmt_parse_special(tx_dtype t, const char *s, size_t len, void *dst,
                          size_t index, char *why, size_t whylen)
{
    double d;
    if (len == 3 && memcmp(s, "NaN", 3) == 0)
        d = NAN;
    else if (len == 8 && memcmp(s, "Infinity", 8) == 0)
        d = INFINITY;
    else if (len == 9 && memcmp(s, "-Infinity", 9) == 0)
        d = -INFINITY;
    else {
        snprintf(why, whylen,
                 "the string \"%.*s\" is not a number (only \"NaN\", "
                 "\"Infinity\" and \"-Infinity\" may be strings)",
                 len > 24 ? 24 : (int)len, s);
        return false;
    }
    if (tx_dtype_kind(t) != TX_KIND_FLOAT) {
        snprintf(why, whylen, "%.*s is not a value of %s", (int)len, s,
                 tx_dtype_name(t));
        return false;
    }
    store_f(t, dst, index, d, (float)d);
    return true;
}

/* Unsigned decimal, right to left. */
static size_t print_u64(uint64_t v, char *out)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    for (size_t i = 0; i < n; i++)
        out[i] = tmp[n - 1 - i];
    return n;
}

static size_t print_special(double d, char *out)
{
    const char *s = isnan(d) ? "\"NaN\""
                    : d > 0  ? "\"Infinity\""
                             : "\"-Infinity\"";
    size_t n = strlen(s);
    memcpy(out, s, n);
    return n;
}

/* Shortest %.*g (from precision lo to hi) that reads back as the same
 * value of type t. */
static size_t print_float(tx_dtype t, double d, int lo, int hi, char *out)
{
    char buf[NUMFMT_MAX];
    int n = 0;
    for (int p = lo; p <= hi; p++) {
        n = snprintf(buf, sizeof buf, "%.*g", p, d);
        bool same;
        switch (t) {
        case TX_FLOAT16:
            same = tx_f64_to_f16(strtod(buf, NULL)) == tx_f64_to_f16(d);
            break;
        case TX_BFLOAT16:
            same = tx_f64_to_bf16(strtod(buf, NULL)) == tx_f64_to_bf16(d);
            break;
        case TX_FLOAT32: same = strtof(buf, NULL) == (float)d; break;
        default: same = strtod(buf, NULL) == d; break;
        }
        if (same)
            break;
    }
    memcpy(out, buf, (size_t)n);
    return (size_t)n;
}

size_t numfmt_print(tx_dtype t, const void *src, size_t i, char *out)
{
    double d;
    switch (t) {
    case TX_FLOAT16:
        d = tx_f16_to_f32(((const uint16_t *)src)[i]);
        return isfinite(d) ? print_float(t, d, 3, 6, out)
                           : print_special(d, out);
    case TX_BFLOAT16:
        d = tx_bf16_to_f32(((const uint16_t *)src)[i]);
        return isfinite(d) ? print_float(t, d, 2, 5, out)
                           : print_special(d, out);
    case TX_FLOAT32:
        d = ((const float *)src)[i];
        return isfinite(d) ? print_float(t, d, 6, 9, out)
                           : print_special(d, out);
    case TX_FLOAT64:
        d = ((const double *)src)[i];
        return isfinite(d) ? print_float(t, d, 15, 17, out)
                           : print_special(d, out);
    case TX_INT8:
    case TX_INT16:
    case TX_INT32:
    case TX_INT64: {
        int64_t v;
        switch (t) {
        case TX_INT8: v = ((const int8_t *)src)[i]; break;
        case TX_INT16: v = ((const int16_t *)src)[i]; break;
        case TX_INT32: v = ((const int32_t *)src)[i]; break;
        default: v = ((const int64_t *)src)[i]; break;
        }
        if (v < 0) {
            out[0] = '-';
            return 1 + print_u64(0 - (uint64_t)v, out + 1);
        }
        return print_u64((uint64_t)v, out);
    }
    case TX_UINT8: return print_u64(((const uint8_t *)src)[i], out);
    case TX_UINT16: return print_u64(((const uint16_t *)src)[i], out);
    case TX_UINT32: return print_u64(((const uint32_t *)src)[i], out);
    case TX_UINT64: return print_u64(((const uint64_t *)src)[i], out);
    case TX_NDTYPES: break;
    }
    return 0;
}
