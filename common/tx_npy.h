/*
 * tx_npy.h - NumPy .npy headers, versions 1.0, 2.0 and 3.0: the one reader
 * and writer the server (request bodies) and the client (files) share.
 *
 * A file is the magic "\x93NUMPY", a version, a header length, a header
 * (a Python dict literal: 'descr', 'fortran_order', 'shape'), padding, and
 * the raw array. numpy has no bfloat16 descr: a 2-byte array ('<u2',
 * '<i2', '<f2' or '|V2') is read as bfloat16 when the caller asks.
 *
 * The reader is strict: it takes the literal subset numpy writes. Before
 * the two copies were merged they disagreed; the stricter rule was kept in
 * each case, so that neither side accepts what the other refuses:
 *   - a header longer than TX_NPY_MAX_HEADER (64 KiB) is refused (the
 *     client took 1 MiB);
 *   - strings may hold neither a backslash nor a newline (the client took
 *     newlines);
 *   - a key may not repeat, and nothing but whitespace may follow the dict
 *     (the client took both);
 *   - a descr must start with its byte order (<, >, | or =) and be one of
 *     numpy's codes exactly, such as '<f4' (the server took '<f04' and a
 *     bare 'f4').
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_TX_NPY_H
#define TALLY_TX_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tx_dtype.h"

/* The largest header read; numpy writes a few dozen bytes. */
#define TX_NPY_MAX_HEADER 65536
/* What tx_npy_write_header() may write, at most (rank TX_MAX_RANK). */
#define TX_NPY_WRITE_MAX 2048

typedef enum {
    TX_NPY_OK,
    TX_NPY_FORMAT,    /* not .npy, or a malformed header */
    TX_NPY_DTYPE,     /* a descr tally does not compute */
    TX_NPY_RANK,      /* shape () */
    TX_NPY_TOO_LARGE, /* the array's size overflows 64 bits */
} tx_npy_status;

typedef struct {
    tx_dtype dtype;
    int rank;
    uint64_t shape[TX_MAX_RANK];
    bool fortran_order;
    bool big_endian;     /* the data needs a byte swap (never for 1 byte) */
    size_t data_offset;  /* where the array starts: preamble plus header */
    uint64_t data_bytes; /* what the shape says the array holds */
} tx_npy_header;

/* The length of the preamble (10 or 12 bytes) and of the header after it,
 * from the first `len` bytes of a file; when len is too short to tell,
 * TX_NPY_FORMAT with *need set to how many bytes it takes (else 0). */
tx_npy_status tx_npy_preamble(const uint8_t *buf, size_t len, size_t *pre,
                              size_t *hlen, size_t *need, char *msg,
                              size_t msglen);

/* Parses the preamble and header at buf (len bytes: at least those, maybe
 * the data too). bf16 reads 2-byte arrays as bfloat16. Fills h; the caller
 * checks that data_bytes bytes follow. Writes why into msg on failure. */
tx_npy_status tx_npy_parse(const uint8_t *buf, size_t len, bool bf16,
                           tx_npy_header *h, char *msg, size_t msglen);

/* Writes a version 1.0 header for a little-endian, C-order array of dtype
 * and shape (rank 1..TX_MAX_RANK) into out, which holds TX_NPY_WRITE_MAX
 * bytes, padded with spaces and a newline so that the data after it is
 * 64-byte aligned. Returns its length. */
size_t tx_npy_write_header(tx_dtype t, const uint64_t *shape, int rank,
                           uint8_t *out);

/* Swaps the bytes of `count` elements of `size` bytes in place. */
void tx_npy_byteswap(void *data, size_t count, size_t size);

/* Copies a Fortran-order array into C order; dst and src must not
 * overlap. */
void tx_npy_fortran_to_c(const void *src, void *dst, size_t size,
                         const uint64_t *shape, int rank);

#endif
