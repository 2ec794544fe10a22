/*
 * carry.h - the running sum that joins the chunks of a sequence.
 *
 * A sequence is one tensor cut along its scan axis into chunks that are
 * scanned one by one (seq/sequence.h). Each chunk is scanned alone, as
 * any tensor is; what joins them is a carry per line (the sum of every
 * element of that line in the chunks before), added to each element of
 * the chunk's answer, and then advanced by the chunk's own line totals.
 * The same holds for exclusive scans (the carry is what precedes the
 * chunk) and for reverse ones, whose chunks come from the last to the
 * first.
 *
 * Carries are wider than the data, as the kernels' accumulators are:
 * double for every float type (a float16 or bfloat16 element becomes
 * float, then double), and uint64 for integers, which wrap modulo 2^64
 * and so, cut to the data's width, wrap exactly as a whole-tensor scan
 * does. A line is (o, k) of the scan's (outer, n, inner) view (tensor.h):
 * carry index o * inner + k.
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_CARRY_H
#define TALLY_CARRY_H

#include <stdbool.h>
#include <stdint.h>

#include "tensor.h"

typedef union {
    uint64_t u; /* integer types */
    double f;   /* float types */
} eng_carry;

/* How many carries a chunk of l's shape keeps: one per line. */
static inline uint64_t eng_carry_count(const eng_lines *l)
{
    return l->outer * l->inner;
}

/* Adds each line's sum of the packed tensor `in` (l's dtype and view)
 * into t[0..eng_carry_count(l)), which the caller zeroes first: a
 * chunk's totals, read before it is scanned (the scan may run in place). */
void eng_carry_totals(const eng_lines *l, const void *in, eng_carry *t);

/* Adds c[line] to every element of the scanned chunk `out` (packed, l's
 * view), in the carry's width, rounding (floats) or wrapping (integers)
 * back to the data's type once. */
void eng_carry_apply(const eng_lines *l, void *out, const eng_carry *c);

/* For float16 and bfloat16, whose own rounding of a chunk's scan would
 * be rounded again when the carry is added: the chunk's answer computed
 * from its input (a copy kept from before the scan) in double, from the
 * carries, with one rounding per element. out is l's view; the mode
 * (exclusive, reverse) is l's. Other dtypes do nothing. */
void eng_carry_scan(const eng_lines *l, const void *in, void *out,
                    const eng_carry *c);

/* Whether a dtype's chunks need eng_carry_scan(). */
static inline bool eng_carry_rescans(tx_dtype t)
{
    return t == TX_FLOAT16 || t == TX_BFLOAT16;
}

/* Advances c[0..n) by t[0..n) (a chunk's totals): doubles for a float
 * dtype's carries, integers (wrapping) for the others. */
void eng_carry_add(eng_carry *c, const eng_carry *t, uint64_t n,
                   bool is_float);

/* Whether every carry of c[0..n) is zero (a sequence's first chunk):
 * then eng_carry_apply() would change nothing. */
bool eng_carry_zero(const eng_carry *c, uint64_t n);

#endif
