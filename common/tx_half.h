/*
 * tx_half.h - float16 and bfloat16 conversions, shared by the client and
 * the server; inline, for the loops that convert whole tensors.
 *
 * float16 has 5 exponent bits (bias 15) and 10 fraction bits; bfloat16 is
 * the top half of a float32 (8 exponent bits, 7 fraction bits). Widening
 * is exact. Narrowing rounds to nearest, ties to even, once: from float32
 * for data, and from float64 directly for decimal text, so that nothing is
 * rounded twice. NaN stays a quiet NaN (a NaN whose payload lives only in
 * the dropped bits does not turn into infinity).
 *
 * Threading: pure inline conversions; any thread.
 */
#ifndef TALLY_TX_HALF_H
#define TALLY_TX_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t tx_bits_of_f32(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static inline float tx_f32_of_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static inline float tx_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t frac = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN */
        return tx_f32_of_bits(sign | 0x7f800000u | (frac << 13));
    if (exp == 0) {
        if (frac == 0)
            return tx_f32_of_bits(sign);
        /* subnormal: frac * 2^-24, exact in float32 */
        float v = (float)frac * 0x1p-24f;
        return sign ? -v : v;
    }
    return tx_f32_of_bits(sign | ((exp + 112) << 23) | (frac << 13));
}

static inline uint16_t tx_f32_to_f16(float f)
{
    uint32_t u = tx_bits_of_f32(f);
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
        /* below the smallest normal float16 (2^-14): subnormal or zero; 2^-25
         * or less rounds to zero (2^-25 exactly ties with an even zero) */
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

static inline float tx_bf16_to_f32(uint16_t h)
{
    return tx_f32_of_bits((uint32_t)h << 16);
}

static inline uint16_t tx_f32_to_bf16(float f)
{
    uint32_t u = tx_bits_of_f32(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN */
        return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Rounds a double to a 16-bit format with `frac` fraction bits and normal
 * exponents emin..emax: keeps the double's 53-bit significand, drops the
 * bits below the narrow type's unit in the last place (fixed at emin for
 * subnormals) and rounds to nearest, ties to even. */
static inline uint16_t tx_narrow_f64(double v, int frac, int emin, int emax,
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

static inline uint16_t tx_f64_to_f16(double d)
{
    return tx_narrow_f64(d, 10, -14, 15, 0x7c00, 0x7e00);
}

static inline uint16_t tx_f64_to_bf16(double d)
{
    return tx_narrow_f64(d, 7, -126, 127, 0x7f80, 0x7fc0);
}

#endif
