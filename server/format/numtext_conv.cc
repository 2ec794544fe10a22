/*
 * numtext_conv.cc - numtext_conv.h over fast_float (parsing) and {fmt} (printing:
 * its Dragonbox shortest digits, and printf's %g for a precision), both
 * Debian packages, both used header-only.
 */
#define FMT_HEADER_ONLY
#include <fast_float/fast_float.h>
#include <fmt/compile.h>
#include <fmt/format.h>

#include <cmath>
#include <cstring>

#include "digits.h"
#include "numtext_conv.h"

namespace {

/* fast_float's general format also accepts what JSON does not ("1.",
 * ".5", "inf"); the caller has checked the grammar, and a token must be
 * consumed whole. */
template <typename T> bool parse(const char *s, size_t len, T *out)
{
    T v;
    auto r = fast_float::from_chars(s, s + len, v);
    if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)
        return false;
    if (r.ptr != s + len)
        return false;
    *out = v;
    return true;
}

template <typename T> size_t prefix(const char *s, const char *end, T *out)
{
    T v;
    auto r = fast_float::from_chars(s, end, v);
    if (r.ec != std::errc() && r.ec != std::errc::result_out_of_range)
        return 0;
    *out = v;
    return (size_t)(r.ptr - s);
}

/* The shortest text that reads back as v, laid out as {fmt}'s "{}" lays
 * it out (so the text is what it was when {fmt} wrote all of it): fixed
 * notation when the decimal exponent is in [-4, 16), "1e+21" and
 * "-2.5e-07" outside. The digits come from Dragonbox (fmt's
 * dragonbox::to_decimal, its trailing zeros removed); writing them here
 * instead of through format_to halves a float32's time (BENCHMARKS.md
 * has the figures). */
template <typename T> size_t shortest(T v, char *out)
{
    char *p = out;
    if (std::signbit(v)) {
        *p++ = '-';
        v = -v;
    }
    if (v == 0) {
        *p++ = '0';
        return (size_t)(p - out);
    }
    auto dec = fmt::detail::dragonbox::to_decimal(v);
    uint64_t sig = dec.significand;
    int e = dec.exponent, n = digits_count(sig);
    int x = e + n - 1; /* the exponent of the first digit */
    if (x < -4 || x >= 16) {
        char d[24];
        digits_write(d, n, sig);
        *p++ = d[0];
        if (n > 1) {
            *p++ = '.';
            memcpy(p, d + 1, (size_t)n - 1);
            p += n - 1;
        }
        *p++ = 'e';
        *p++ = x < 0 ? '-' : '+';
        unsigned a = (unsigned)(x < 0 ? -x : x);
        if (a >= 100) {
            *p++ = (char)('0' + a / 100);
            a %= 100;
        }
        memcpy(p, digits_pairs + 2 * a, 2);
        p += 2;
    } else if (e >= 0) { /* an integer: the digits, then e zeros */
        digits_write(p, n, sig);
        p += n;
        memset(p, '0', (size_t)e);
        p += e;
    } else if (x >= 0) { /* the point among the digits */
        char d[24];
        digits_write(d, n, sig);
        memcpy(p, d, (size_t)x + 1);
        p += x + 1;
        *p++ = '.';
        memcpy(p, d + x + 1, (size_t)(n - x - 1));
        p += n - x - 1;
    } else { /* 0.000ddd */
        *p++ = '0';
        *p++ = '.';
        memset(p, '0', (size_t)(-x - 1));
        p += -x - 1;
        digits_write(p, n, sig);
        p += n;
    }
    return (size_t)(p - out);
}

} // namespace

extern "C" size_t numtext_conv_shortest_f64(double v, char *out)
{
    return shortest(v, out);
}

extern "C" size_t numtext_conv_shortest_f32(float v, char *out)
{
    return shortest(v, out);
}

/* printf's %.*g: correctly rounded, trailing zeros dropped. */
extern "C" size_t numtext_conv_precision(double v, int digits, char *out)
{
    return (size_t)(fmt::format_to(out, FMT_COMPILE("{:.{}g}"), v, digits)
                    - out);
}

extern "C" bool numtext_conv_parse_f64(const char *s, size_t len, double *out)
{
    return parse(s, len, out);
}

extern "C" bool numtext_conv_parse_f32(const char *s, size_t len, float *out)
{
    return parse(s, len, out);
}

extern "C" size_t numtext_conv_prefix_f64(const char *s, const char *end,
                                     double *out)
{
    return prefix(s, end, out);
}

extern "C" size_t numtext_conv_prefix_f32(const char *s, const char *end,
                                     float *out)
{
    return prefix(s, end, out);
}
