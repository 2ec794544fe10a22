/*
 * tensor.h - shapes, sizes and the (outer, n, inner) view of a scan.
 *
 * A cumulative sum along one axis of a row-major tensor is a set of
 * independent lines: n elements `inner` apart, `inner` lines side by side in
 * each of `outer` slices. Any rank collapses to that view, which is all the
 * backends ever see. Every size computed here is checked for overflow.
 */
#ifndef TALLY_TENSOR_H
#define TALLY_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "error.h"

/* The largest rank accepted. Nothing in the engine depends on it beyond
 * the size of fixed arrays; DirectML's limit is 8, NumPy's 32 (64 in 2.x). */
#define ENG_MAX_RANK TX_MAX_RANK

/* A scan request: what to compute, independent of where the data is. */
typedef struct {
    tx_dtype dtype;
    int rank;
    uint64_t shape[ENG_MAX_RANK];
    int64_t axis;   /* negative counts from the back */
    bool exclusive; /* each element gets the sum of those before it */
    bool reverse;   /* sum from the end of the axis (DML's DECREASING) */
} eng_scan_desc;

/* The collapsed view of a validated request. */
typedef struct {
    tx_dtype dtype;
    uint64_t outer, n, inner;
    uint64_t elements; /* outer * n * inner */
    size_t bytes;      /* elements * dtype size */
    bool exclusive, reverse;
} eng_lines;

/* Validates desc (dtype, rank 1..ENG_MAX_RANK, axis in [-rank, rank),
 * sizes that fit in memory) and collapses it. On failure writes a message
 * naming the problem into msg. */
eng_err eng_lines_from_desc(const eng_scan_desc *desc, eng_lines *out,
                            char *msg, size_t msglen);

/* *r = a * b; returns false on overflow of uint64_t. */
static inline bool eng_mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    return !__builtin_mul_overflow(a, b, r);
}

#endif
