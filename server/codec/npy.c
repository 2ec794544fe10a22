/*
 * npy.c - a .npy request body, checked against what arrived.
 */
#include <inttypes.h>

#include "npy.h"

tally_err npy_parse(const uint8_t *buf, size_t len, bool bf16, tx_npy_header *h,
                    char *msg, size_t msglen)
{
    switch (tx_npy_parse(buf, len, bf16, h, msg, msglen)) {
    case TX_NPY_OK: break;
    case TX_NPY_FORMAT: return TALLY_E_INVALID;
    case TX_NPY_DTYPE: return TALLY_E_DTYPE;
    case TX_NPY_RANK: return TALLY_E_RANK;
    case TX_NPY_TOO_LARGE: return TALLY_E_TOO_LARGE;
    }
    if (len - h->data_offset != h->data_bytes)
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "the .npy header describes %" PRIu64 " bytes of "
                          "data but the body has %zu",
                          h->data_bytes, len - h->data_offset);
    return TALLY_E_OK;
}
