/*
 * half.h - float16 and bfloat16 conversions, inline for the loops that
 * gather and stitch split tensors.
 *
 * Widening is exact (float holds every float16 and bfloat16 value).
 * Narrowing goes from double directly, so nothing is rounded twice: it
 * keeps the double's 53-bit significand, drops the bits below the narrow
 * type's unit in the last place (fixed at the smallest normal exponent for
 * subnormals) and rounds to nearest, ties to even. A float16 has 10
 * fraction bits and exponents -14..15; a bfloat16 has 7 and -126..127.
 */
#ifndef TALLY_CLIENT_HALF_H
#define TALLY_CLIENT_HALF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline uint16_t tc_narrow(double v, int frac, int emin, int emax,
                                 uint16_t inf, uint16_t qnan)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    uint16_t sign = (uint16_t)((bits >> 48) & 0x8000);
    int exp = (int)((bits >> 52) & 0x7ff);
    uint64_t mant = bits & ((1ull << 52) - 1);
    if (exp == 0x7ff)
        return sign | (mant ? qnan : inf);
    if (exp == 0) /* zero or a double subnormal: far below either type */
        return sign;
    int e = exp - 1023;
    if (e > emax)
        return sign | inf;
    uint64_t full = mant | (1ull << 52);
    int drop = 52 - frac + (e < emin ? emin - e : 0);
    if (drop >= 64)
        return sign;
    uint64_t q = full >> drop;
    uint64_t rem = full & ((1ull << drop) - 1), half = 1ull << (drop - 1);
    if (rem > half || (rem == half && (q & 1)))
        q++;
    /* q carries the implicit bit for normals, so adding it to the biased
     * exponent minus one lands right, including a carry into the next
     * binade or into infinity */
    uint64_t h = (e >= emin ? (uint64_t)(e - emin) << frac : 0) + q;
    return sign | (uint16_t)h;
}

static inline uint16_t tc_f16_from_double(double v)
{
    return tc_narrow(v, 10, -14, 15, 0x7c00, 0x7e00);
}

static inline uint16_t tc_bf16_from_double(double v)
{
    return tc_narrow(v, 7, -126, 127, 0x7f80, 0x7fc0);
}

static inline float tc_f16_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else { /* zero or subnormal: mant * 2^-24, exact */
        float f = ldexpf((float)mant, -24);
        return sign ? -f : f;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float tc_bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

#endif
