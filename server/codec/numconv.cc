/*
 * numconv.cc - numconv.h over fast_float and double-conversion.
 */
#include <double-conversion/double-to-string.h>
#include <fast_float/fast_float.h>

#include <cstring>

#include "numconv.h"

using double_conversion::DoubleToStringConverter;
using double_conversion::StringBuilder;

namespace {

/* Numbers as JavaScript writes them: plain decimals from 1e-7 to 1e21,
 * exponents outside, with an explicit '+'; in precision mode the same
 * range, trailing zeros dropped. */
const DoubleToStringConverter &converter()
{
    static const DoubleToStringConverter conv(
        DoubleToStringConverter::EMIT_POSITIVE_EXPONENT_SIGN
            | DoubleToStringConverter::NO_TRAILING_ZERO,
        "Infinity", "NaN", 'e', -7, 21, 6, 21);
    return conv;
}

/* fast_float's general format also accepts what JSON does not ("1.",
 * ".5", "+1", "inf"); the caller has checked the grammar, and a token must
 * be consumed whole. */
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

extern "C" size_t numconv_shortest_f64(double v, char *out)
{
    char buf[NUMCONV_MAX + 8];
    StringBuilder b(buf, sizeof buf);
    converter().ToShortest(v, &b);
    size_t n = (size_t)b.position();
    memcpy(out, b.Finalize(), n);
    return n;
}

extern "C" size_t numconv_shortest_f32(float v, char *out)
{
    char buf[NUMCONV_MAX + 8];
    StringBuilder b(buf, sizeof buf);
    converter().ToShortestSingle(v, &b);
    size_t n = (size_t)b.position();
    memcpy(out, b.Finalize(), n);
    return n;
}

extern "C" size_t numconv_precision(double v, int digits, char *out)
{
    char buf[NUMCONV_MAX + 8];
    StringBuilder b(buf, sizeof buf);
    converter().ToPrecision(v, digits, &b);
    size_t n = (size_t)b.position();
    memcpy(out, b.Finalize(), n);
    return n;
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
