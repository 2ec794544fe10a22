/*
 * fuzz_npy.c - .npy bodies as tallyd reads them (server/format/npy.c, over
 * common/tx_npy.c, the one header parser both sides use).
 *
 * The first byte's low bit asks for bfloat16 (dtype=bfloat16); the rest is
 * the body. Properties: a refusal comes with a message the server can
 * send; an accepted body's data fills it exactly; its header written
 * again (as tallyd writes its answers) parses to the same dtype and shape,
 * with the data right after it; Fortran order and big-endian data convert
 * to C order, little-endian, and (byte swaps being their own inverse) back.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzzd.h"
#include "npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    bool bf16 = data[0] & 1;
    data++;
    size--;
    tx_npy_header h;
    char msg[512];
    eng_err e = npy_parse(data, size, bf16, &h, msg, sizeof msg);
    if (e != ENG_E_OK) {
        fuzz_refusal("npy_parse's message", msg, sizeof msg);
        return 0;
    }
    FUZZ_CHECK(h.data_offset <= size && size - h.data_offset == h.data_bytes,
               "an accepted body of %zu bytes: data at %zu, %llu bytes", size,
               h.data_offset, (unsigned long long)h.data_bytes);
    FUZZ_CHECK(h.rank >= 1 && h.rank <= TX_MAX_RANK, "rank %d", h.rank);
    size_t esize = tx_dtype_size(h.dtype);
    uint64_t count = 1;
    for (int d = 0; d < h.rank; d++)
        count *= h.shape[d];
    FUZZ_CHECK(count * esize == h.data_bytes,
               "the shape says %llu elements, "
               "the data %llu bytes",
               (unsigned long long)count, (unsigned long long)h.data_bytes);
    if (bf16)
        FUZZ_CHECK(h.dtype == TX_BFLOAT16, "dtype=bfloat16 read as %s",
                   tx_dtype_name(h.dtype));

    uint8_t *head = malloc(TX_NPY_WRITE_MAX + h.data_bytes);
    FUZZ_CHECK(head != NULL, "out of memory");
    size_t hlen = tx_npy_write_header(h.dtype, h.shape, h.rank, head);
    FUZZ_CHECK(hlen > 0 && hlen <= TX_NPY_WRITE_MAX && hlen % 64 == 0,
               "a written header of %zu bytes", hlen);
    memcpy(head + hlen, data + h.data_offset, h.data_bytes);
    tx_npy_header g;
    e = npy_parse(head, hlen + h.data_bytes, h.dtype == TX_BFLOAT16, &g, msg,
                  sizeof msg);
    FUZZ_CHECK(e == ENG_E_OK, "the header tally writes does not parse: %s",
               msg);
    FUZZ_CHECK(
        g.dtype == h.dtype && g.rank == h.rank && !g.fortran_order
            && !g.big_endian && g.data_offset == hlen
            && memcmp(g.shape, h.shape, sizeof h.shape[0] * (size_t)h.rank)
                   == 0,
        "the written header reads back differently");

    /* the conversions tallyd applies: swapped twice is the same */
    uint8_t *copy = malloc(h.data_bytes ? h.data_bytes : 1);
    uint8_t *c = malloc(h.data_bytes ? h.data_bytes : 1);
    FUZZ_CHECK(copy != NULL && c != NULL, "out of memory");
    memcpy(copy, data + h.data_offset, h.data_bytes);
    tx_npy_byteswap(copy, count, esize);
    tx_npy_byteswap(copy, count, esize);
    FUZZ_CHECK(memcmp(copy, data + h.data_offset, h.data_bytes) == 0,
               "two byte swaps are not the identity");
    if (h.fortran_order && count > 0) {
        tx_npy_fortran_to_c(copy, c, esize, h.shape, h.rank);
        /* the last element is where it was, in either order */
        FUZZ_CHECK(
            memcmp(c + (count - 1) * esize, copy + (count - 1) * esize, esize)
                == 0,
            "Fortran to C order moved the last element");
    }
    free(c);
    free(copy);
    free(head);
    return 0;
}
