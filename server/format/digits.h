/*
 * digits.h - unsigned integers as decimal digits, two at a time, straight
 * into their place: the one digit writer that numtext.c (integers) and
 * numtext_conv.cc (the significands of floats) share. Valid C and C++.
 *
 * Threading: pure functions.
 */
#ifndef TALLY_DIGITS_H
#define TALLY_DIGITS_H

#include <stdint.h>
#include <string.h>

/* "00" to "99", back to back. */
static const char digits_pairs[201] = "00010203040506070809"
                                      "10111213141516171819"
                                      "20212223242526272829"
                                      "30313233343536373839"
                                      "40414243444546474849"
                                      "50515253545556575859"
                                      "60616263646566676869"
                                      "70717273747576777879"
                                      "80818283848586878889"
                                      "90919293949596979899";

/* How many decimal digits v has (1 for 0). */
static inline int digits_count(uint64_t v)
{
    static const uint64_t pow10[20] = {1ull,
                                       10ull,
                                       100ull,
                                       1000ull,
                                       10000ull,
                                       100000ull,
                                       1000000ull,
                                       10000000ull,
                                       100000000ull,
                                       1000000000ull,
                                       10000000000ull,
                                       100000000000ull,
                                       1000000000000ull,
                                       10000000000000ull,
                                       100000000000000ull,
                                       1000000000000000ull,
                                       10000000000000000ull,
                                       100000000000000000ull,
                                       1000000000000000000ull,
                                       10000000000000000000ull};
    /* v | 1 has as many digits as v, and is not 0. The bit length times
     * 1233 / 4096 (just above log10(2)) is the digit count or one less;
     * one comparison tells which. */
    uint64_t w = v | 1;
    int t = ((64 - __builtin_clzll(w)) * 1233) >> 12;
    return t + (w >= pow10[t]);
}

/* Writes the n = digits_count(v) digits of v to out[0..n), right to
 * left. */
static inline void digits_write(char *out, int n, uint64_t v)
{
    char *p = out + n;
    while (v >= 100) {
        unsigned k = (unsigned)(v % 100) * 2;
        v /= 100;
        p -= 2;
        memcpy(p, digits_pairs + k, 2);
    }
    if (v >= 10) {
        p -= 2;
        memcpy(p, digits_pairs + v * 2, 2);
    } else {
        *--p = (char)('0' + v);
    }
}

#endif
