/*
 * npy.c - a .npy request body, checked against what arrived.
 */
#include <inttypes.h>

#include "npy.h"

eng_err npy_parse(const uint8_t *buf, size_t len, bool bf16, tx_npy_header *h,
                  char *msg, size_t msglen)
{
    switch (tx_npy_parse(buf, len, bf16, h, msg, msglen)) {
    case TX_NPY_OK: break;
    case TX_NPY_FORMAT: return ENG_E_INVALID;
    case TX_NPY_DTYPE: return ENG_E_DTYPE;
    case TX_NPY_RANK: return ENG_E_RANK;
    case TX_NPY_TOO_LARGE: return ENG_E_TOO_LARGE;
    }
    if (len - h->data_offset != h->data_bytes)
        return eng_fail(msg, msglen, ENG_E_INVALID,
                        "the .npy header describes %" PRIu64 " bytes of "
                        "data but the body has %zu",
                        h->data_bytes, len - h->data_offset);
    return ENG_E_OK;
}
