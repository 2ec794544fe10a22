/*
 * tensor.h - shapes, sizes and the (outer, n, inner) view of a scan.
 *
 * A cumulative sum along one axis of a row-major tensor is a set of
 * independent lines: n elements `inner` apart, `inner` lines side by side in
 * each of `outer` slices. Any rank collapses to that view, which is all the
 * backends ever see. Every size computed here is checked for overflow.
 *
 * Threading: plain values; a descriptor belongs to whoever holds it.
 */
#ifndef TALLY_TENSOR_H
#define TALLY_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"
#include "errors.h"

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

/* Where a tensor lies in its buffer: DirectML's DML_BUFFER_TENSOR_DESC
 * less what eng_scan_desc already says. */
typedef struct {
    /* rank entries, in elements: index (i0, ..., ik) lies at element
     * sum(i_d * strides[d]) of the buffer. 0 broadcasts (inputs only).
     * NULL: packed row-major. */
    const uint64_t *strides;
    /* The buffer's size; the last element addressed must lie inside. */
    size_t bytes;
} eng_view;

/* The collapsed view of a strided request. Dimensions of size 1 are
 * dropped, the others sorted by input stride and merged where both
 * layouts allow, so that any rank becomes lines along the axis ("rows",
 * n of them, ri/ro apart in the input/output) side by side in `cols`
 * columns (ci/co apart), repeated over up to ENG_MAX_RANK - 2 outer
 * dimensions (outermost first). Offsets are in elements. */
typedef struct {
    eng_lines l;     /* outer = product of osize, n, inner = cols */
    uint64_t ri, ro; /* along the axis */
    uint64_t ci, co; /* between columns */
    int nouter;
    uint64_t osize[ENG_MAX_RANK], oi[ENG_MAX_RANK], oo[ENG_MAX_RANK];
    uint64_t in_span, out_span; /* last element addressed + 1 */
} eng_strided;

/* Validates desc and the two layouts (each buffer large enough for the
 * elements it addresses; output strides must not let two indices share an
 * element, by tx_strides_disjoint's test) and collapses them. When both
 * layouts turn out to be one packed (outer, n, inner) tensor, as packed
 * data, an NHWC tensor described as NCHW on both sides or size-1
 * dimensions with odd strides are, sets *packed and fills only v->l, for
 * the packed scanners. Messages name the problem. */
eng_err eng_strided_from_desc(const eng_scan_desc *desc, const eng_view *in,
                              const eng_view *out, eng_strided *v, bool *packed,
                              char *msg, size_t msglen);

/* The input and output offsets of outer slice o (0 <= o < v->l.outer). */
void eng_strided_outer(const eng_strided *v, uint64_t o, uint64_t *bi,
                       uint64_t *bo);

/* *r = a * b; returns false on overflow of uint64_t. */
static inline bool eng_mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    return !__builtin_mul_overflow(a, b, r);
}

#endif
