/*
 * numtext.c - exact parsing and shortest printing of tensor elements.
 *
 * Integers are parsed digit by digit: the token's digits and exponent give
 * an exact integer (or prove it is not one) without going through a
 * double, so every uint64 and int64 is exact.
 *
 * float32 and float64 are parsed (correctly rounded, by Eisel-Lemire with
 * an exact fallback) and printed (shortest round trip) by fast_float and
 * {fmt} (Dragonbox), through numtext_conv.h. float16 and bfloat16 are parsed to
 * the nearest double first; that double decides the rounding to the
 * narrower type unless it lies exactly halfway between two of its values,
 * where the decimal itself may lie on either side (or on the midpoint):
 * then the token is compared with the midpoint's exact decimal expansion,
 * so they too are rounded once, from the decimal. They print as the
 * fewest significant digits that read back as the same value.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "digits.h"
#include "errors.h"
#include "numtext.h"
#include "numtext_conv.h"
#include "tx_half.h"

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

size_t numtext_scan(const char *s, const char *end)
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

/* The exponent at p ("e-12", "E+3"; 0 when there is none), its
 * magnitude held below 10^6 (more says the same: no integer). */
static long exponent(const char *p, const char *end)
{
    if (p >= end || (*p != 'e' && *p != 'E'))
        return 0;
    p++;
    bool neg = p < end && *p == '-';
    if (p < end && (*p == '+' || *p == '-'))
        p++;
    long e = 0;
    for (; p < end && is_digit(*p); p++)
        if (e < 100000)
            e = e * 10 + (*p - '0');
    return neg ? -e : e;
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
    bool lost = false; /* a nonzero digit beyond the 64 kept */
    for (; p < end && is_digit(*p); p++) {
        if (leading && *p == '0')
            continue;
        leading = false;
        if (nd < sizeof digits)
            digits[nd++] = *p;
        else {
            dropped++;
            lost = lost || *p != '0';
        }
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
    exp10 += exponent(p, end);
    /* more than 64 significant digits: no integer below 2^64 has them
     * (a fraction, when the exponent reaches below the last one) */
    if (lost) {
        *fraction = *fraction || exp10 < (long)dropped;
        return false;
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

/* The significant digits of a positive decimal token (JSON grammar, no
 * sign) into dig (as many bytes as the token), without leading or
 * trailing zeros, and the exponent e of its value 0.d1d2... * 10^e. */
static size_t decimal_digits(const char *p, size_t len, char *dig, long *e)
{
    const char *end = p + len;
    size_t nd = 0;
    long before = 0; /* digits before the point, less leading zeros after it */
    bool seen = false, frac = false;
    for (; p < end && (is_digit(*p) || *p == '.'); p++) {
        if (*p == '.') {
            frac = true;
        } else if (!seen && *p == '0') {
            before -= frac;
        } else {
            seen = true;
            dig[nd++] = *p;
            before += !frac;
        }
    }
    long ex = 0;
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        bool neg = *p == '-';
        if (*p == '+' || *p == '-')
            p++;
        for (; p < end && is_digit(*p); p++)
            if (ex < 100000000)
                ex = ex * 10 + (*p - '0');
        ex = neg ? -ex : ex;
    }
    while (nd > 0 && dig[nd - 1] == '0')
        nd--;
    *e = before + ex;
    return nd;
}

/* Compares two positive decimal tokens by value: -1, 0 or 1. */
static int compare_decimal(const char *a, size_t alen, const char *b,
                           size_t blen)
{
    char *da = malloc(alen + 1), *db = malloc(blen + 1);
    int r = 0; /* without memory, equal: the double's rounding stands */
    if (da != NULL && db != NULL) {
        long ea, eb;
        size_t na = decimal_digits(a, alen, da, &ea);
        size_t nb = decimal_digits(b, blen, db, &eb);
        if (na == 0 || nb == 0)
            r = (na != 0) - (nb != 0);
        else if (ea != eb)
            r = ea > eb ? 1 : -1;
        else
            for (size_t i = 0; r == 0 && i < (na > nb ? na : nb); i++) {
                int x = i < na ? da[i] : '0', y = i < nb ? db[i] : '0';
                r = (x > y) - (x < y);
            }
    }
    free(da);
    free(db);
    return r;
}

/* A float16 (half) or bfloat16 magnitude as a double; infinity for the
 * pattern one past the largest finite value. */
static double narrow_value(bool half, uint16_t bits)
{
    return half ? tx_f16_to_f32(bits) : tx_bf16_to_f32(bits);
}

/* The token s[0..len) rounded once to float16 (half) or bfloat16 (!half),
 * given its nearest double d: the bits of the result. */
static uint16_t round_narrow(bool half, const char *s, size_t len, double d)
{
    uint16_t r = half ? tx_f64_to_f16(d) : tx_f64_to_bf16(d);
    if (!isfinite(d) || d == 0)
        return r;
    double a = fabs(d);
    uint16_t sign = signbit(d) ? 0x8000 : 0, inf = half ? 0x7c00 : 0x7f80;
    uint16_t rm = r & 0x7fff;
    /* the neighbours of a in the narrow type: lo <= a < lo + 1 */
    uint16_t lo = narrow_value(half, rm) <= a ? rm : (uint16_t)(rm - 1);
    if (lo >= inf)
        return r;
    double lv = narrow_value(half, lo);
    /* past the largest finite value, the next step of the same size */
    double hv = lo + 1 < inf ? narrow_value(half, (uint16_t)(lo + 1))
                             : (half ? 65536.0 : ldexp(1.0, 128));
    double mid = (lv + hv) / 2; /* exact: a few bits more than the type */
    if (a != mid)
        return r; /* the decimal lies on the same side of mid as d */
    /* mid's exact decimal (glibc prints exactly): an odd multiple of
     * 2^-25 at least for float16, 2^-134 for bfloat16, so 40 and 110
     * significant digits hold every one */
    char m[160];
    int n = snprintf(m, sizeof m, "%.*e", half ? 40 : 110, mid);
    bool neg = s[0] == '-';
    int c = compare_decimal(s + neg, len - neg, m, n > 0 ? (size_t)n : 0);
    if (c == 0)
        return r; /* a true tie: the double's rounding is to even */
    return (uint16_t)(sign | (c > 0 ? lo + 1 : lo));
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

/* Stores the parsed token s[0..len) (d, or f for float32) as element
 * index of dst, rounding once more for the 16-bit types; false with a
 * reason when it is out of range. */
static bool store_float(tx_dtype t, const char *s, size_t len, double d,
                        float f, void *dst, size_t index, char *why,
                        size_t whylen)
{
    int shown = len > 24 ? 24 : (int)len;
    const char *more = len > 24 ? "..." : "";
    uint16_t h = 0;
    bool overflow;
    switch (t) {
    case TX_FLOAT16:
    case TX_BFLOAT16:
        h = round_narrow(t == TX_FLOAT16, s, len, d);
        overflow = (h & 0x7fff) == (t == TX_FLOAT16 ? 0x7c00 : 0x7f80);
        break;
    case TX_FLOAT32: overflow = isinf(f); break;
    default: overflow = isinf(d); break;
    }
    if (overflow)
        return msg_fail(
            why, whylen,
            "%.*s%s is out of range for %s (write \"Infinity\" for an "
            "infinity)",
            shown, s, more, tx_dtype_name(t));
    switch (t) {
    case TX_FLOAT16:
    case TX_BFLOAT16: ((uint16_t *)dst)[index] = h; break;
    case TX_FLOAT32: ((float *)dst)[index] = f; break;
    default: ((double *)dst)[index] = d; break;
    }
    return true;
}

bool numtext_parse(tx_dtype t, const char *s, size_t len, void *dst,
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
        return msg_fail(why, whylen, "%.*s%s %s %s", shown, s, more,
                        fraction ? "is not an integer, so it does not fit"
                                 : "does not fit",
                        tx_dtype_name(t));
    }
    double d = 0;
    float f = 0;
    bool ok = t == TX_FLOAT32 ? numtext_conv_parse_f32(s, len, &f)
                              : numtext_conv_parse_f64(s, len, &d);
    if (!ok)
        return msg_fail(why, whylen, "%.*s%s is not a number", shown, s, more);
    return store_float(t, s, len, d, f, dst, index, why, whylen);
}

/* JSON's number grammar on a non-empty span [s, q) that fast_float took:
 * a digit after the optional minus, no leading zero, a digit after a
 * point, and nothing fast_float stopped short of (a point or an exponent
 * right after). */
static bool json_span(const char *s, const char *q, const char *end)
{
    const char *p = s + (*s == '-');
    if (p >= q || !is_digit(*p) || (*p == '0' && p + 1 < q && is_digit(p[1])))
        return false;
    if (q < end && (*q == '.' || *q == 'e' || *q == 'E'))
        return false;
    for (const char *r = p; r < q; r++)
        if (*r == '.')
            return r + 1 < q && is_digit(r[1]);
    return true;
}

bool numtext_parse_float_at(tx_dtype t, const char *s, const char *end,
                            void *dst, size_t index, size_t *used, char *why,
                            size_t whylen)
{
    double d = 0;
    float f = 0;
    size_t n = t == TX_FLOAT32 ? numtext_conv_prefix_f32(s, end, &f)
                               : numtext_conv_prefix_f64(s, end, &d);
    bool json = n > 0 && json_span(s, s + n, end);
    *used = json ? n : 0;
    if (!json)
        return msg_fail(why, whylen, "not a number");
    return store_float(t, s, n, d, f, dst, index, why, whylen);
}

const char *numtext_float_fast(tx_dtype t, const char *p, const char *end,
                               void *dst, size_t index)
{
    if (t == TX_FLOAT32) {
        float f;
        size_t n = numtext_conv_prefix_f32(p, end, &f);
        if (n == 0 || isinf(f) || !json_span(p, p + n, end))
            return NULL;
        ((float *)dst)[index] = f;
        return p + n;
    }
    double d;
    size_t n = numtext_conv_prefix_f64(p, end, &d);
    if (n == 0 || isinf(d) || !json_span(p, p + n, end))
        return NULL;
    if (t == TX_FLOAT64) {
        ((double *)dst)[index] = d;
        return p + n;
    }
    /* float16 and bfloat16: d rounded once more, unless it lies exactly
     * halfway between two of their values (the bits dropped are 100...0),
     * or rounds to infinity: round_narrow() and its messages decide those */
    bool half = t == TX_FLOAT16;
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    int exp = (int)((bits >> 52) & 0x7ff) - 1023;
    int frac = half ? 10 : 7, emin = half ? -14 : -126;
    int drop = 52 - frac + (exp < emin ? emin - exp : 0);
    if (exp > -1023 && drop <= 53) {
        uint64_t full = (bits & ((1ull << 52) - 1)) | (1ull << 52);
        if ((full & ((1ull << drop) - 1)) == 1ull << (drop - 1))
            return NULL;
    }
    uint16_t h = half ? tx_f64_to_f16(d) : tx_f64_to_bf16(d);
    if ((h & 0x7fff) == (half ? 0x7c00 : 0x7f80))
        return NULL;
    ((uint16_t *)dst)[index] = h;
    return p + n;
}

bool numtext_parse_int_at(tx_dtype t, const char *s, const char *end, void *dst,
                          size_t index, size_t *used, char *why, size_t whylen)
{
    /* the common case in one pass: an optional minus and at most 19
     * digits, which fit a uint64_t without a check */
    const char *p = s;
    bool neg = p < end && *p == '-';
    p += neg;
    const char *d0 = p;
    uint64_t v = 0;
    while (p < end && is_digit(*p) && p - d0 < 19)
        v = v * 10 + (uint64_t)(*p++ - '0');
    size_t nd = (size_t)(p - d0);
    bool plain =
        nd > 0
        && !(p < end && (is_digit(*p) || *p == '.' || *p == 'e' || *p == 'E'));
    if (plain && *d0 == '0' && nd > 1) {
        *used = 0; /* "01" is not JSON */
        return msg_fail(why, whylen, "not a number");
    }
    if (plain) {
        unsigned bits = 8 * (unsigned)tx_dtype_size(t);
        bool fits;
        if (tx_dtype_kind(t) == TX_KIND_UNSIGNED)
            fits = (!neg || v == 0) && (bits == 64 || v < (1ull << bits));
        else
            fits = neg ? v <= 1ull << (bits - 1) : v < 1ull << (bits - 1);
        if (fits) {
            *used = nd + neg;
            store_u(t, dst, index, neg ? 0 - v : v);
            return true;
        }
    }
    /* anything else (fractions, exponents, 20 digits and more, values
     * that do not fit) through the general path and its messages */
    size_t n = s < end ? numtext_scan(s, end) : 0;
    *used = n;
    if (n == 0)
        return msg_fail(why, whylen, "not a number");
    return numtext_parse(t, s, n, dst, index, why, whylen);
}

bool numtext_parse_special(tx_dtype t, const char *s, size_t len, void *dst,
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
        return msg_fail(why, whylen,
                        "the string \"%.*s\" is not a number (only \"NaN\", "
                        "\"Infinity\" and \"-Infinity\" may be strings)",
                        len > 24 ? 24 : (int)len, s);
    }
    if (tx_dtype_kind(t) != TX_KIND_FLOAT)
        return msg_fail(why, whylen, "%.*s is not a value of %s", (int)len, s,
                        tx_dtype_name(t));
    store_f(t, dst, index, d, (float)d);
    return true;
}

/* Unsigned decimal, written in place (digits.h). */
static size_t print_u64(uint64_t v, char *out)
{
    int n = digits_count(v);
    digits_write(out, n, v);
    return (size_t)n;
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

/* The fewest significant digits (up to 5) that read back as the same
 * float16 (half) or bfloat16 value, through the one rounding numtext_parse()
 * does. */
static size_t shortest_narrow(bool half, uint16_t bits, char *out)
{
    double d = narrow_value(half, bits);
    size_t n = 0;
    for (int p = 1; p <= 5; p++) {
        n = numtext_conv_precision(d, p, out);
        double back;
        if (numtext_conv_parse_f64(out, n, &back)
            && round_narrow(half, out, n, back) == bits)
            break;
    }
    return n;
}

/* Both 16-bit float types have only 65536 values: their text is worked out
 * once, on first use, into a table (2 x 1 MiB; every entry at most
 * NARROW_TEXT - 1 bytes, its length in the last byte). */
#define NARROW_TEXT 16
static char (*narrow_text[2])[NARROW_TEXT];
static pthread_once_t narrow_once = PTHREAD_ONCE_INIT;

static void narrow_init(void)
{
    for (int k = 0; k < 2; k++) {
        /* zeroed: print_one() copies whole entries */
        char(*t)[NARROW_TEXT] = calloc(65536, NARROW_TEXT);
        if (t == NULL)
            continue; /* print_one() works them out one by one */
        for (uint32_t b = 0; b < 65536; b++) {
            char tmp[NUMCONV_MAX];
            double d = narrow_value(k == 0, (uint16_t)b);
            size_t n =
                isfinite(d) ? shortest_narrow(k == 0, (uint16_t)b, tmp) : 0;
            if (n >= NARROW_TEXT)
                n = 0; /* does not happen: 5 digits and an exponent */
            memcpy(t[b], tmp, n);
            t[b][NARROW_TEXT - 1] = (char)n;
        }
        narrow_text[k] = t;
    }
}

void numtext_init(void)
{
    pthread_once(&narrow_once, narrow_init);
}

/* One element of a dtype known at compile time, for print_list_t(). */
static inline __attribute__((always_inline)) size_t
print_one(tx_dtype t, const void *src, size_t i, char *out)
{
    switch (t) {
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
        size_t neg = v < 0;
        out[0] = '-';
        return neg + print_u64(neg ? 0 - (uint64_t)v : (uint64_t)v, out + neg);
    }
    case TX_UINT8: return print_u64(((const uint8_t *)src)[i], out);
    case TX_UINT16: return print_u64(((const uint16_t *)src)[i], out);
    case TX_UINT32: return print_u64(((const uint32_t *)src)[i], out);
    case TX_UINT64: return print_u64(((const uint64_t *)src)[i], out);
    case TX_FLOAT32: {
        float f = ((const float *)src)[i];
        return isfinite(f) ? numtext_conv_shortest_f32(f, out)
                           : print_special(f, out);
    }
    case TX_FLOAT64: {
        double d = ((const double *)src)[i];
        return isfinite(d) ? numtext_conv_shortest_f64(d, out)
                           : print_special(d, out);
    }
    case TX_FLOAT16:
    case TX_BFLOAT16: {
        bool half = t == TX_FLOAT16;
        uint16_t b = ((const uint16_t *)src)[i];
        const char(*tab)[NARROW_TEXT] = narrow_text[half ? 0 : 1];
        size_t n = tab != NULL ? (size_t)tab[b][NARROW_TEXT - 1] : 0;
        if (n == 0) { /* not finite, or no table */
            double d = narrow_value(half, b);
            return isfinite(d) ? shortest_narrow(half, b, out)
                               : print_special(d, out);
        }
        memcpy(out, tab[b], NARROW_TEXT - 1); /* the whole entry: faster */
        return n;
    }
    case TX_NDTYPES: break;
    }
    return 0;
}

static inline __attribute__((always_inline)) size_t
print_list_t(tx_dtype t, const void *src, size_t a, size_t b, char *out)
{
    char *p = out;
    for (size_t i = a; i < b; i++) {
        *p = ',';
        p += i > 0;
        p += print_one(t, src, i, p);
    }
    return (size_t)(p - out);
}

size_t numtext_print_list(tx_dtype t, const void *src, size_t a, size_t b,
                          char *out)
{
    numtext_init();
    switch (t) {
    case TX_FLOAT16: return print_list_t(TX_FLOAT16, src, a, b, out);
    case TX_BFLOAT16: return print_list_t(TX_BFLOAT16, src, a, b, out);
    case TX_FLOAT32: return print_list_t(TX_FLOAT32, src, a, b, out);
    case TX_FLOAT64: return print_list_t(TX_FLOAT64, src, a, b, out);
    case TX_INT8: return print_list_t(TX_INT8, src, a, b, out);
    case TX_INT16: return print_list_t(TX_INT16, src, a, b, out);
    case TX_INT32: return print_list_t(TX_INT32, src, a, b, out);
    case TX_INT64: return print_list_t(TX_INT64, src, a, b, out);
    case TX_UINT8: return print_list_t(TX_UINT8, src, a, b, out);
    case TX_UINT16: return print_list_t(TX_UINT16, src, a, b, out);
    case TX_UINT32: return print_list_t(TX_UINT32, src, a, b, out);
    case TX_UINT64: return print_list_t(TX_UINT64, src, a, b, out);
    case TX_NDTYPES: break;
    }
    return 0;
}

size_t numtext_max_len(tx_dtype t)
{
    switch (t) {
    case TX_INT8: return 4;   /* -128 */
    case TX_INT16: return 6;  /* -32768 */
    case TX_INT32: return 11; /* -2147483648 */
    case TX_INT64: return 20; /* -9223372036854775808 */
    case TX_UINT8: return 3;
    case TX_UINT16: return 5;
    case TX_UINT32: return 10;
    case TX_UINT64: return 20;
    /* "-Infinity" with its quotes is 11; finite values: float16
     * "-6.1035e-05" 11, bfloat16 "-1.1755e-38" 11, float32
     * "-1.1754944e-38" 14 or "-3402823500000000" (fixed up to 10^16) 17,
     * float64 "-2.2250738585072014e-308" 24 */
    case TX_FLOAT16:
    case TX_BFLOAT16: return NARROW_TEXT - 1;
    case TX_FLOAT32: return 17;
    case TX_FLOAT64: return 24;
    case TX_NDTYPES: break;
    }
    return NUMFMT_MAX;
}

size_t numtext_print(tx_dtype t, const void *src, size_t i, char *out)
{
    /* element i alone: no comma before it */
    const char *at = (const char *)src + i * tx_dtype_size(t);
    return numtext_print_list(t, at, 0, 1, out);
}
