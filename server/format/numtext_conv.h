/*
 * numtext_conv.h - binary floating point to and from decimal text, through two
 * well-kept libraries behind a C interface: fast_float (Eisel-Lemire
 * parsing, correctly rounded) and {fmt} (Dragonbox shortest round-trip
 * printing). numtext_conv.cc is the only C++ in tally.
 *
 * Threading: every function is pure and thread-safe.
 */
#ifndef TALLY_NUMTEXT_CONV_H
#define TALLY_NUMTEXT_CONV_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The most numtext_conv_*() writes: a sign, 17 digits, a point, an exponent. */
#define NUMCONV_MAX 32

/* The shortest decimal that reads back as v (finite), as a JSON number:
 * "0.1", "1e+21", "-2.5e-07". Not NUL-terminated; returns the length. */
size_t numtext_conv_shortest_f64(double v, char *out);
size_t numtext_conv_shortest_f32(float v, char *out);

/* v correctly rounded to `digits` significant digits (1 to 17), trailing
 * zeros dropped, as a JSON number. */
size_t numtext_conv_precision(double v, int digits, char *out);

/* The JSON number token s[0..len), correctly rounded to the nearest
 * double or float (ties to even); an overflow gives an infinity. False
 * when s is not a whole number token. */
bool numtext_conv_parse_f64(const char *s, size_t len, double *out);
bool numtext_conv_parse_f32(const char *s, size_t len, float *out);

/* The longest number at s (before end) in fast_float's general grammar,
 * which is wider than JSON's ("1.", "01", ".5", "inf"): the caller checks
 * JSON's rules on the span. Returns its length, 0 when there is none. */
size_t numtext_conv_prefix_f64(const char *s, const char *end, double *out);
size_t numtext_conv_prefix_f32(const char *s, const char *end, float *out);

#ifdef __cplusplus
}
#endif

#endif
