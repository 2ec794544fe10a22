/*
 * tensor.c - validating a scan request and collapsing its shape.
 */
#include <inttypes.h>

#include "tensor.h"

eng_err eng_lines_from_desc(const eng_scan_desc *desc, eng_lines *out,
                            char *msg, size_t msglen)
{
    if ((unsigned)desc->dtype >= TX_NDTYPES)
        return eng_fail(msg, msglen, ENG_E_DTYPE,
                        "unknown dtype %d (expected one of %s)",
                        (int)desc->dtype, tx_dtype_list());
    if (desc->rank < 1)
        return eng_fail(msg, msglen, ENG_E_RANK,
                        "rank %d: a cumulative sum needs a tensor of rank 1 "
                        "or more",
                        desc->rank);
    if (desc->rank > ENG_MAX_RANK)
        return eng_fail(msg, msglen, ENG_E_RANK,
                        "rank %d is more than the %d supported", desc->rank,
                        ENG_MAX_RANK);

    int64_t rank = desc->rank, axis = desc->axis;
    if (axis < -rank || axis >= rank)
        return eng_fail(msg, msglen, ENG_E_AXIS,
                        "axis %" PRId64 " is out of range for a tensor of "
                        "rank %d (valid: %d to %d)",
                        axis, desc->rank, -desc->rank, desc->rank - 1);
    if (axis < 0)
        axis += rank;

    /* The total must fit even when some dimension is zero, so that a
     * declared shape cannot hide an overflow behind an empty one. */
    uint64_t outer = 1, inner = 1, total = 1;
    for (int64_t d = 0; d < rank; d++) {
        uint64_t s = desc->shape[d];
        if (s > 0 && !eng_mul_u64(total, s, &total))
            return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                            "shape overflows: the product of its dimensions "
                            "does not fit in 64 bits");
        if (d < axis)
            outer *= s;
        else if (d > axis)
            inner *= s;
    }
    uint64_t n = desc->shape[axis];
    uint64_t elements = outer * n * inner;
    size_t size = tx_dtype_size(desc->dtype);
    uint64_t bytes;
    if (!eng_mul_u64(total, size, &bytes) || bytes > SIZE_MAX / 2)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "tensor of %" PRIu64 " %s elements is too large", total,
                        tx_dtype_name(desc->dtype));

    out->dtype = desc->dtype;
    out->outer = outer;
    out->n = n;
    out->inner = inner;
    out->elements = elements;
    out->bytes = (size_t)(elements * size);
    out->exclusive = desc->exclusive;
    out->reverse = desc->reverse;
    return ENG_E_OK;
}
