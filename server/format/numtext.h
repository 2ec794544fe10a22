/*
 * numtext.h - tensor elements to and from decimal text, exactly.
 *
 * Parsing takes one JSON number token and stores it as one element of a
 * dtype, refusing what the dtype cannot hold exactly: 300 in int8, -1 in
 * uint32, 2.5 in int32, 1e39 in float32 (integral values such as 3.0 or 1e2
 * are fine for integers). Floats round to nearest once, from the decimal.
 * Integers go through 64 bits without loss, uint64 and int64 included.
 *
 * Printing gives the shortest decimal that reads back as the same value,
 * and the strings "NaN", "Infinity" and "-Infinity" (with their quotes)
 * for non-finite floats, as the protobuf JSON mapping does.
 *
 * Threading: every function may be called from any thread.
 */
#ifndef TALLY_NUMTEXT_H
#define TALLY_NUMTEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dtype.h"

/* Works out the text of every float16 and bfloat16 value into a table
 * (about 40 ms, 2 MiB), which the first print of either type would
 * otherwise do; tallyd calls it at start-up. Idempotent, thread-safe. */
void numtext_init(void);

/* Longest text numtext_print() writes, with room to spare. */
#define NUMFMT_MAX 40

/* Stores the number token s[0..len) (JSON grammar, already checked) as
 * element `index` of dst. On failure returns false and writes a reason
 * ("300 does not fit int8") into why. */
bool numtext_parse(tx_dtype t, const char *s, size_t len, void *dst,
                  size_t index, char *why, size_t whylen);

/* numtext_scan() and numtext_parse() in one pass, for a float dtype t: the
 * number token at s (before end) is parsed and stored, and its length
 * returned in *used. Returns false with a reason in why when the text is
 * not a JSON number (*used == 0) or does not fit t (*used > 0). */
bool numtext_parse_float_at(tx_dtype t, const char *s, const char *end,
                           void *dst, size_t index, size_t *used, char *why,
                           size_t whylen);

/* The same for an integer dtype t: the common token (an optional minus and
 * up to 19 digits) in one pass; the rest through numtext_scan() and
 * numtext_parse(), with their messages. */
bool numtext_parse_int_at(tx_dtype t, const char *s, const char *end, void *dst,
                         size_t index, size_t *used, char *why, size_t whylen);

/* ------------------------------------------------------------------------
 * The fast paths for long arrays: the common tokens only, no messages.
 * Each either stores the value and returns the end of its token, or
 * returns NULL and leaves everything else (and every message) to
 * numtext_parse_int_at() and numtext_parse_float_at(), which take the same
 * token again.
 */

/* The common integer token at p: an optional minus and 1 to 19 digits
 * ("0", or no leading zero), followed by neither a digit, a point nor an
 * exponent. Sets *neg and *mag. A token whose digits end within the next
 * eight bytes (up to seven digits) is read in one step on little-endian
 * machines: its digits found and converted with a few multiplications,
 * without a loop, and the bytes around them read from registers; longer
 * ones digit by digit. */
static inline __attribute__((always_inline)) const char *
numtext_int_token(const char *p, const char *end, bool *neg, uint64_t *mag)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (end - p >= 9) {
        /* the bytes at p and at p + 1, loaded at once: the token's digits
         * start at one or the other */
        uint64_t w0, w1;
        memcpy(&w0, p, 8);
        memcpy(&w1, p + 1, 8);
        bool minus = (w0 & 0xff) == '-';
        uint64_t pick = 0 - (uint64_t)minus; /* no branch: signs are random */
        uint64_t w = (w1 & pick) | (w0 & ~pick);
        uint64_t t = w ^ 0x3030303030303030ull; /* digits become 0..9 */
        /* the top bit of each byte that is not a digit (no carries: each
         * byte's low seven bits plus 0x76 stay below 0x100) */
        uint64_t bad = (((t & 0x7f7f7f7f7f7f7f7full) + 0x7676767676767676ull)
                        | t)
                       & 0x8080808080808080ull;
        if (bad != 0) { /* the token ends within these 8 bytes */
            int k = __builtin_ctzll(bad) >> 3;
            unsigned after = (unsigned)(w >> (8 * k)) & 0xff;
            if (k == 0 || ((w & 0xff) == '0' && k > 1) || after == '.'
                || after == 'e' || after == 'E')
                return NULL;
            /* the k digits to the top bytes, zeros below them, then
             * pairs, quads and the eight combined, most significant
             * first */
            t <<= 8 * (8 - k);
            t = t * 10 + (t >> 8);
            t = (((t & 0x000000ff000000ffull) * 0x000f424000000064ull)
                 + (((t >> 16) & 0x000000ff000000ffull)
                    * 0x0000271000000001ull))
                >> 32;
            *neg = minus;
            *mag = t;
            return p + minus + k;
        }
    }
#endif
    /* near the end of the text, or 8 digits and more */
    *neg = p < end && *p == '-';
    p += *neg;
    const char *d0 = p;
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9' && p - d0 < 20)
        v = v * 10 + (uint64_t)(*p++ - '0');
    size_t nd = (size_t)(p - d0);
    if (nd == 0 || nd > 19 || (*d0 == '0' && nd > 1))
        return NULL;
    if (p < end && (*p == '.' || *p == 'e' || *p == 'E'))
        return NULL;
    *mag = v;
    return p;
}

/* For a float dtype: the number token at p (JSON's grammar) stored as
 * element index of dst when it is finite in t and, for float16 and
 * bfloat16, its nearest double is not halfway between two of t's values
 * (where the decimal itself must decide). */
const char *numtext_float_fast(tx_dtype t, const char *p, const char *end,
                              void *dst, size_t index);

/* Stores a non-finite value named by a JSON string's contents ("NaN",
 * "Infinity", "-Infinity"); false (with a reason) for anything else or for
 * an integer dtype. */
bool numtext_parse_special(tx_dtype t, const char *s, size_t len, void *dst,
                          size_t index, char *why, size_t whylen);

/* Writes element `index` of src as JSON text into out (NUMFMT_MAX bytes,
 * not NUL-terminated) and returns its length. */
size_t numtext_print(tx_dtype t, const void *src, size_t index, char *out);

/* Writes elements [a, b) of src as a JSON array's body into out: the
 * elements separated by commas, with a comma before the first when a > 0
 * (so that ranges rendered apart join up). out must hold
 * (b - a) * (numtext_max_len(t) + 1) bytes; NARROW entries may write up to
 * 15 bytes past an element's text, within that room. Returns the length. */
size_t numtext_print_list(tx_dtype t, const void *src, size_t a, size_t b,
                         char *out);

/* The longest text one element of t can print as. */
size_t numtext_max_len(tx_dtype t);

/* Checks the JSON number grammar at s (up to end): returns the token's
 * length, or 0 if there is no valid number there. */
size_t numtext_scan(const char *s, const char *end);

#endif
