/*
 * tx_strides.h - DirectML's buffer-tensor arithmetic (DML_BUFFER_TENSOR_DESC),
 * for the client and the server alike.
 *
 * Strides count elements: the element at index (i0, ..., in-1) lies at
 * offset sum(i_k * strides[k]) from the start of the buffer. A stride of 0
 * broadcasts one element along its dimension. No strides means packed
 * row-major. A size of 0 is invalid, as in DirectML. Every function here
 * checks its arithmetic for overflow and reports it instead of wrapping.
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_TX_STRIDES_H
#define TALLY_TX_STRIDES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The strides of packed row-major data of these sizes. False when a size
 * is 0 or the element count overflows 64 bits. */
bool tx_strides_packed(int rank, const uint64_t *sizes, uint64_t *strides);

/* The offset, in elements, of the last element the descriptor addresses:
 * dot(sizes - 1, strides), or the element count - 1 when strides is NULL.
 * False when a size is 0 or the sum overflows. */
bool tx_strides_last_index(int rank, const uint64_t *sizes,
                           const uint64_t *strides, uint64_t *last);

/* DMLCalcBufferTensorSize: the smallest buffer that holds the tensor,
 * (last index + 1) * elsize rounded up to a multiple of 4 bytes. False
 * when a size is 0 or the size overflows 64 bits. */
bool tx_strides_buffer_bytes(size_t elsize, int rank, const uint64_t *sizes,
                             const uint64_t *strides, uint64_t *bytes);

/* Whether no two indices can share an offset, by a sufficient test: with
 * the dimensions of size > 1 sorted by stride, each stride exceeds the
 * largest offset the smaller ones reach. True for packed data and any
 * permutation of it, with or without padding; false for a broadcast
 * (stride 0) dimension of size > 1, and for some layouts that do not in
 * fact overlap but that the test cannot tell apart. Output tensors must
 * pass it; inputs, which are only read, need not. */
bool tx_strides_disjoint(int rank, const uint64_t *sizes,
                         const uint64_t *strides);

#endif
