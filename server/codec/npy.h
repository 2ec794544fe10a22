/*
 * npy.h - NumPy's .npy format, versions 1.0, 2.0 and 3.0.
 *
 * A file is the magic "\x93NUMPY", a version, a header length, a header
 * (a Python dict literal: 'descr', 'fortran_order', 'shape'), padding, and
 * the raw array. Any byte order and either memory order is accepted on
 * input; tally answers little-endian, C order. numpy has no bfloat16 descr:
 * a 2-byte array ('<u2', '<i2', '<f2' or '|V2') is read as bfloat16 when
 * the request says dtype=bfloat16.
 */
#ifndef TALLY_NPY_H
#define TALLY_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

/* The largest header tally reads; numpy writes a few dozen bytes. */
#define NPY_MAX_HEADER 65536

typedef struct {
    tally_dtype dtype;
    int rank;
    uint64_t shape[TALLY_MAX_RANK];
    bool fortran_order;
    bool big_endian;
    size_t data_offset; /* where the array starts in the file */
    size_t data_bytes;  /* what the header says it holds */
} npy_header;

/* Parses the header of the file at buf (len bytes). bf16 reads 2-byte
 * arrays as bfloat16. Checks that the file holds exactly the bytes the
 * header implies. Returns TALLY_E_INVALID, _DTYPE or _TOO_LARGE with a
 * message on failure. */
tally_err npy_parse(const uint8_t *buf, size_t len, bool bf16, npy_header *h,
                    char *msg, size_t msglen);

/* Swaps the bytes of `count` elements of `size` bytes in place. */
void npy_byteswap(void *data, size_t count, size_t size);

/* Copies a Fortran-order array into C order: dst and src must not
 * overlap. */
void npy_fortran_to_c(const void *src, void *dst, size_t size,
                      const uint64_t *shape, int rank);

/* Writes a version 1.0 header for a little-endian, C-order array of dtype
 * and shape into out (which must hold NPY_MAX_HEADER bytes), padded so that
 * the data that follows is 64-byte aligned. Returns its length. */
size_t npy_write_header(tally_dtype t, const uint64_t *shape, int rank,
                        uint8_t *out);

#endif
