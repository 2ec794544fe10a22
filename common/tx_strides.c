/*
 * tx_strides.c - buffer-tensor sizes and the overlap test.
 */
#include "tx_strides.h"

#define MAX_DIMS 64

bool tx_strides_packed(int rank, const uint64_t *sizes, uint64_t *strides)
{
    uint64_t step = 1;
    for (int d = rank - 1; d >= 0; d--) {
        if (sizes[d] == 0)
            return false;
        strides[d] = step;
        if (__builtin_mul_overflow(step, sizes[d], &step))
            return false;
    }
    return true;
}

bool tx_strides_last_index(int rank, const uint64_t *sizes,
                           const uint64_t *strides, uint64_t *last)
{
    uint64_t sum = 0, count = 1;
    for (int d = 0; d < rank; d++) {
        if (sizes[d] == 0)
            return false;
        if (strides == NULL) {
            if (__builtin_mul_overflow(count, sizes[d], &count))
                return false;
            continue;
        }
        uint64_t term;
        if (__builtin_mul_overflow(sizes[d] - 1, strides[d], &term)
            || __builtin_add_overflow(sum, term, &sum))
            return false;
    }
    *last = strides == NULL ? count - 1 : sum;
    return true;
}

bool tx_strides_buffer_bytes(size_t elsize, int rank, const uint64_t *sizes,
                             const uint64_t *strides, uint64_t *bytes)
{
    uint64_t last, n;
    if (!tx_strides_last_index(rank, sizes, strides, &last)
        || __builtin_add_overflow(last, 1, &n)
        || __builtin_mul_overflow(n, (uint64_t)elsize, &n)
        || __builtin_add_overflow(n, 3, &n))
        return false;
    *bytes = n & ~(uint64_t)3;
    return true;
}

bool tx_strides_disjoint(int rank, const uint64_t *sizes,
                         const uint64_t *strides)
{
    if (rank > MAX_DIMS)
        return false;
    /* the dimensions that move, by increasing stride (insertion sort: a
     * rank is at most a few dozen) */
    int order[MAX_DIMS], n = 0;
    for (int d = 0; d < rank; d++) {
        if (sizes[d] == 0)
            return false;
        if (sizes[d] == 1)
            continue;
        int i = n++;
        while (i > 0 && strides[order[i - 1]] > strides[d]) {
            order[i] = order[i - 1];
            i--;
        }
        order[i] = d;
    }
    uint64_t reach = 0; /* the largest offset the smaller dimensions reach */
    for (int i = 0; i < n; i++) {
        int d = order[i];
        uint64_t span;
        if (strides[d] <= reach
            || __builtin_mul_overflow(sizes[d] - 1, strides[d], &span)
            || __builtin_add_overflow(reach, span, &reach))
            return false;
    }
    return true;
}
