/*
 * ref.c - the naive reference scan, error bounds and random inputs.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"
#include "tx_half.h"

bool ref_is_float(tx_dtype t)
{
    return tx_dtype_kind(t) == TX_KIND_FLOAT;
}

long double ref_get_f(tx_dtype t, const void *buf, size_t i)
{
    switch (t) {
    case TX_FLOAT16: return tx_f16_to_f32(((const uint16_t *)buf)[i]);
    case TX_BFLOAT16: return tx_bf16_to_f32(((const uint16_t *)buf)[i]);
    case TX_FLOAT32: return ((const float *)buf)[i];
    case TX_FLOAT64: return ((const double *)buf)[i];
    default: return (long double)ref_get_u(t, buf, i);
    }
}

uint64_t ref_get_u(tx_dtype t, const void *buf, size_t i)
{
    switch (tx_dtype_size(t)) {
    case 1: return ((const uint8_t *)buf)[i];
    case 2: return ((const uint16_t *)buf)[i];
    case 4: return ((const uint32_t *)buf)[i];
    default: return ((const uint64_t *)buf)[i];
    }
}

void ref_set_u(tx_dtype t, void *buf, size_t i, uint64_t v)
{
    switch (tx_dtype_size(t)) {
    case 1: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    case 2: ((uint16_t *)buf)[i] = (uint16_t)v; break;
    case 4: ((uint32_t *)buf)[i] = (uint32_t)v; break;
    default: ((uint64_t *)buf)[i] = v; break;
    }
}

void ref_set_f(tx_dtype t, void *buf, size_t i, long double v)
{
    switch (t) {
    case TX_FLOAT16: ((uint16_t *)buf)[i] = tx_f32_to_f16((float)v); break;
    case TX_BFLOAT16: ((uint16_t *)buf)[i] = tx_f32_to_bf16((float)v); break;
    case TX_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case TX_FLOAT64: ((double *)buf)[i] = (double)v; break;
    default: ref_set_u(t, buf, i, (uint64_t)(int64_t)v); break;
    }
}

void ref_scan(const eng_scan_desc *desc, const void *in, ref_result *r)
{
    memset(r, 0, sizeof *r);
    eng_err e = eng_lines_from_desc(desc, &r->l, NULL, 0);
    if (e != ENG_E_OK) {
        fprintf(stderr, "ref_scan: invalid desc\n");
        abort();
    }
    const eng_lines *l = &r->l;
    size_t count = (size_t)l->elements;
    bool fl = ref_is_float(l->dtype);
    if (fl) {
        r->f = check_alloc(count * sizeof *r->f);
        r->abs = check_alloc(count * sizeof *r->abs);
    } else {
        r->u = check_alloc(count * sizeof *r->u);
    }
    /* Each line's running sums are carried in arrays across the lines'
     * inner positions, so that the walk reads and writes memory in order
     * (a column walk, one line at a time, missed the cache on every step
     * of a large tensor); every line is still summed in its own order. */
    size_t inner = (size_t)l->inner;
    long double *s = fl ? check_alloc(inner * sizeof *s) : NULL;
    long double *a = fl ? check_alloc(inner * sizeof *a) : NULL;
    uint64_t *u = fl ? NULL : check_alloc(inner * sizeof *u);
    for (uint64_t o = 0; o < l->outer; o++) {
        if (fl) {
            memset(s, 0, inner * sizeof *s);
            memset(a, 0, inner * sizeof *a);
        } else {
            memset(u, 0, inner * sizeof *u);
        }
        for (uint64_t j0 = 0; j0 < l->n; j0++) {
            uint64_t j = l->reverse ? l->n - 1 - j0 : j0;
            size_t base = (size_t)((o * l->n + j) * l->inner);
            for (size_t k = 0; k < inner; k++) {
                size_t i = base + k;
                if (fl) {
                    long double x = ref_get_f(l->dtype, in, i);
                    if (l->exclusive) {
                        r->f[i] = s[k];
                        r->abs[i] = a[k];
                    }
                    s[k] += x;
                    a[k] += fabsl(x);
                    if (!l->exclusive) {
                        r->f[i] = s[k];
                        r->abs[i] = a[k];
                    }
                } else {
                    uint64_t x = ref_get_u(l->dtype, in, i);
                    if (l->exclusive)
                        r->u[i] = u[k];
                    u[k] += x;
                    if (!l->exclusive)
                        r->u[i] = u[k];
                }
            }
        }
    }
    free(s);
    free(a);
    free(u);
}

void ref_free(ref_result *r)
{
    free(r->f);
    free(r->abs);
    free(r->u);
    memset(r, 0, sizeof *r);
}

long double ref_tolerance(tx_dtype t, long double exact, long double abs,
                          uint64_t n)
{
    long double m = fabsl(exact);
    switch (t) {
    case TX_FLOAT16: return 0x1p-19L * abs + 0x1.01p-11L * m + 0x1p-24L;
    case TX_BFLOAT16: return 0x1p-19L * abs + 0x1.01p-8L * m + 0x1p-133L;
    case TX_FLOAT32: return 0x1p-19L * abs + 0x1p-24L * m + 0x1p-149L;
    case TX_FLOAT64:
        return (long double)(n + 16) * 0x1p-53L * abs + 0x1p-53L * m
               + 0x1p-1074L;
    default: return 0;
    }
}

static long double max_finite(tx_dtype t)
{
    switch (t) {
    case TX_FLOAT16: return 65504.0L;
    case TX_BFLOAT16: return 0x1.fep127L;
    case TX_FLOAT32: return FLT_MAX;
    default: return DBL_MAX;
    }
}

void ref_poison(const ref_result *r, void *out)
{
    const eng_lines *l = &r->l;
    for (size_t i = 0; i < (size_t)l->elements; i++) {
        if (ref_is_float(l->dtype))
            ref_set_f(l->dtype, out, i, NAN);
        else
            ref_set_u(l->dtype, out, i, ~r->u[i]);
    }
}

static size_t compare(const ref_result *r, const void *got, const char *what,
                      long double abs_scale)
{
    const eng_lines *l = &r->l;
    size_t bad = 0;
    bool fl = ref_is_float(l->dtype);
    /* the text of a mismatch is made only for the few printed: formatting
     * every element's long doubles took most of a large case's time */
    for (size_t i = 0; i < (size_t)l->elements; i++) {
        if (fl) {
            long double y = ref_get_f(l->dtype, got, i), x = r->f[i];
            long double tol =
                ref_tolerance(l->dtype, x, abs_scale * r->abs[i], l->n);
            long double big = max_finite(l->dtype);
            bool ok;
            if (isnan(x))
                ok = isnan(y);
            else if (isinf(x))
                ok = y == x;
            else if (fabsl(x) - tol > big) /* must overflow */
                ok = isinf(y) && signbit(y) == signbit(x);
            else if (fabsl(x) + tol < big)
                ok = !isnan(y) && fabsl(y - x) <= tol;
            else /* straddles the largest finite value */
                ok = (isinf(y) && signbit(y) == signbit(x))
                     || fabsl(y - x) <= tol;
            if (!ok && bad++ < 4)
                fprintf(stderr,
                        "      %s: element %zu: got %.12Lg, want %.12Lg (tol "
                        "%.3Lg)\n",
                        what, i, y, x, tol);
        } else {
            uint64_t mask = tx_dtype_size(l->dtype) == 8
                                ? ~0ull
                                : (1ull << (8 * tx_dtype_size(l->dtype))) - 1;
            uint64_t y = ref_get_u(l->dtype, got, i), x = r->u[i] & mask;
            if (y != x && bad++ < 4)
                fprintf(stderr, "      %s: element %zu: got %llu, want %llu\n",
                        what, i, (unsigned long long)y, (unsigned long long)x);
        }
    }
    return bad;
}

size_t ref_compare(const ref_result *r, const void *got, const char *what)
{
    return compare(r, got, what, 1);
}

size_t ref_compare_split(const ref_result *r, const void *got, const char *what)
{
    return compare(r, got, what, 2);
}

void ref_random(tx_dtype t, void *buf, size_t count, bool small)
{
    if (!ref_is_float(t)) {
        for (size_t i = 0; i < count; i++)
            ref_set_u(t, buf, i,
                      small ? (uint64_t)((int64_t)check_below(16) - 8)
                            : check_rand());
        return;
    }
    /* float16 sums must stay below 65504: keep its values small */
    int span = t == TX_FLOAT16 ? 0 : 4;
    long double scale =
        ldexpl(1.0L, (int)check_below((uint64_t)(2 * span + 1)) - span);
    if (t == TX_FLOAT16)
        scale = 0.25L;
    for (size_t i = 0; i < count; i++) {
        long double u = (long double)check_unit();
        ref_set_f(t, buf, i, small ? u : (2 * u - 1) * scale);
    }
}
