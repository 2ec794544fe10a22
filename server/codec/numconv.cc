/*
 * numconv.cc - numconv.h over fast_float (parsing) and {fmt} (printing:
 * its Dragonbox shortest round trip, and printf's %g for a precision),
 * both Debian packages, both used header-only.
 */
#define FMT_HEADER_ONLY
#include <fast_float/fast_float.h>
#include <fmt/compile.h>
#include <fmt/format.h>

#include <cstring>

#include "numconv.h"

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

} // namespace

/* "{}" is the shortest text that reads back as the same value, fixed
 * between 1e-5 and 1e16 and with an exponent outside ("1e+21",
 * "1e-07"): always a JSON number for a finite value. */
extern "C" size_t numconv_shortest_f64(double v, char *out)
{
    return (size_t)(fmt::format_to(out, FMT_COMPILE("{}"), v) - out);
}

extern "C" size_t numconv_shortest_f32(float v, char *out)
{
    return (size_t)(fmt::format_to(out, FMT_COMPILE("{}"), v) - out);
}

/* printf's %.*g: correctly rounded, trailing zeros dropped. */
extern "C" size_t numconv_precision(double v, int digits, char *out)
{
    return (size_t)(fmt::format_to(out, FMT_COMPILE("{:.{}g}"), v, digits)
                    - out);
}

extern "C" bool numconv_parse_f64(const char *s, size_t len, double *out)
{
    return parse(s, len, out);
}

extern "C" bool numconv_parse_f32(const char *s, size_t len, float *out)
{
    return parse(s, len, out);
}

extern "C" size_t numconv_prefix_f64(const char *s, const char *end,
                                     double *out)
{
    return prefix(s, end, out);
}

extern "C" size_t numconv_prefix_f32(const char *s, const char *end,
                                     float *out)
{
    return prefix(s, end, out);
}
