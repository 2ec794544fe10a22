/*
 * half.c - float16 and bfloat16 conversions in portable C.
 *
 * float16 has 5 exponent bits (bias 15) and 10 fraction bits; bfloat16 is
 * the top half of a float32. Narrowing rounds to nearest, ties to even, and
 * keeps NaN a quiet NaN (setting the top fraction bit so that a NaN whose
 * payload lives only in the dropped bits does not turn into infinity).
 */
#include <math.h>
#include <string.h>

#include "half.h"

static uint32_t bits_of(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

float tally_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t frac = h & 0x3ffu;

    if (exp == 0x1f) /* inf or NaN */
        return float_of(sign | 0x7f800000u | (frac << 13));
    if (exp == 0) {
        if (frac == 0)
            return float_of(sign);
        /* subnormal: value is frac * 2^-24, exact in float32 */
        float v = (float)frac * 0x1p-24f;
        return sign ? -v : v;
    }
    return float_of(sign | ((exp + 112) << 23) | (frac << 13));
}

uint16_t tally_f32_to_f16(float f)
{
    uint32_t u = bits_of(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;

    if (a >= 0x7f800000u) { /* inf or NaN */
        if (a == 0x7f800000u)
            return sign | 0x7c00u;
        return sign | 0x7e00u | (uint16_t)((a >> 13) & 0x3ffu);
    }
    if (a >= 0x477ff000u) /* rounds to at least 65520: overflow */
        return sign | 0x7c00u;
    if (a < 0x38800000u) {
        /* below the smallest normal float16 (2^-14): the result is
         * subnormal or zero; a value of 2^-25 or less rounds to zero
         * (2^-25 exactly is a tie with an even zero) */
        if (a <= 0x33000000u)
            return sign;
        uint32_t e = a >> 23;                     /* 102 .. 112 */
        uint32_t m = (a & 0x7fffffu) | 0x800000u; /* 24-bit significand */
        uint32_t shift = 126 - e;                 /* 14 .. 24 */
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1);
        uint32_t half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1u)))
            q++;
        return sign | (uint16_t)q;
    }
    /* normal: rebias the exponent and round off 13 fraction bits; a carry
     * out of the fraction correctly bumps the exponent */
    uint32_t r = a - 0x38000000u;
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
}

float tally_bf16_to_f32(uint16_t h)
{
    return float_of((uint32_t)h << 16);
}

uint16_t tally_f32_to_bf16(float f)
{
    uint32_t u = bits_of(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Rounds |d| (finite, not NaN) to a binary format with `mbits` fraction
 * bits, exponent bias `bias` and largest exponent field `emax` (all ones is
 * inf/NaN); returns the bits without sign. Scaling by powers of two is
 * exact in float64, so rint() (round to nearest even) rounds once. */
static uint32_t round_f64(double a, int mbits, int bias, int emax)
{
    int min_exp = 1 - bias; /* exponent of the smallest normal */
    if (a == 0)
        return 0;
    int ex;
    frexp(a, &ex);     /* a = m * 2^ex, m in [0.5, 1) */
    int e = ex - 1;    /* a = 1.f * 2^e */
    if (e < min_exp) { /* subnormal: units of 2^(min_exp - mbits) */
        double q = rint(ldexp(a, mbits - min_exp));
        return (uint32_t)q; /* may be 1 << mbits: the smallest normal */
    }
    double q = rint(ldexp(a, mbits - e)); /* in [2^mbits, 2^(mbits+1)] */
    if (q >= ldexp(1.0, mbits + 1)) {
        q /= 2;
        e++;
    }
    if (e + bias >= emax)
        return (uint32_t)emax << mbits; /* overflow: infinity */
    return ((uint32_t)(e + bias) << mbits) | ((uint32_t)q - (1u << mbits));
}

uint16_t tally_f64_to_f16(double d)
{
    uint16_t sign = signbit(d) ? 0x8000u : 0;
    if (isnan(d))
        return sign | 0x7e00u;
    if (isinf(d))
        return sign | 0x7c00u;
    return sign | (uint16_t)round_f64(fabs(d), 10, 15, 31);
}

uint16_t tally_f64_to_bf16(double d)
{
    uint16_t sign = signbit(d) ? 0x8000u : 0;
    if (isnan(d))
        return sign | 0x7fc0u;
    if (isinf(d))
        return sign | 0x7f80u;
    return sign | (uint16_t)round_f64(fabs(d), 7, 127, 255);
}
