/*
 * numfmt.h - tensor elements to and from decimal text, exactly.
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
#ifndef TALLY_NUMFMT_H
#define TALLY_NUMFMT_H

#include <stdbool.h>
#include <stddef.h>

#include "dtype.h"

/* Works out the text of every float16 and bfloat16 value into a table
 * (about 40 ms, 2 MiB), which the first print of either type would
 * otherwise do; tallyd calls it at start-up. Idempotent, thread-safe. */
void numfmt_init(void);

/* Longest text numfmt_print() writes, with room to spare. */
#define NUMFMT_MAX 40

/* Stores the number token s[0..len) (JSON grammar, already checked) as
 * element `index` of dst. On failure returns false and writes a reason
 * ("300 does not fit int8") into why. */
bool numfmt_parse(tx_dtype t, const char *s, size_t len, void *dst,
                  size_t index, char *why, size_t whylen);

/* numfmt_scan() and numfmt_parse() in one pass, for a float dtype t: the
 * number token at s (before end) is parsed and stored, and its length
 * returned in *used. Returns false with a reason in why when the text is
 * not a JSON number (*used == 0) or does not fit t (*used > 0). */
bool numfmt_parse_float_at(tx_dtype t, const char *s, const char *end,
                           void *dst, size_t index, size_t *used, char *why,
                           size_t whylen);

/* The same for an integer dtype t: the common token (an optional minus and
 * up to 19 digits) in one pass; the rest through numfmt_scan() and
 * numfmt_parse(), with their messages. */
bool numfmt_parse_int_at(tx_dtype t, const char *s, const char *end, void *dst,
                         size_t index, size_t *used, char *why, size_t whylen);

/* Stores a non-finite value named by a JSON string's contents ("NaN",
 * "Infinity", "-Infinity"); false (with a reason) for anything else or for
 * an integer dtype. */
bool numfmt_parse_special(tx_dtype t, const char *s, size_t len, void *dst,
                          size_t index, char *why, size_t whylen);

/* Writes element `index` of src as JSON text into out (NUMFMT_MAX bytes,
 * not NUL-terminated) and returns its length. */
size_t numfmt_print(tx_dtype t, const void *src, size_t index, char *out);

/* Checks the JSON number grammar at s (up to end): returns the token's
 * length, or 0 if there is no valid number there. */
size_t numfmt_scan(const char *s, const char *end);

#endif
