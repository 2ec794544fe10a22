/*
 * dtype.c - the storage class of each dtype.
 */
#include "dtype.h"

eng_storage eng_dtype_storage(tx_dtype t)
{
    switch (t) {
    case TX_FLOAT16: return ENG_STORAGE_F16;
    case TX_BFLOAT16: return ENG_STORAGE_BF16;
    case TX_FLOAT32: return ENG_STORAGE_F32;
    case TX_FLOAT64: return ENG_STORAGE_F64;
    case TX_INT8:
    case TX_UINT8: return ENG_STORAGE_B8;
    case TX_INT16:
    case TX_UINT16: return ENG_STORAGE_B16;
    case TX_INT32:
    case TX_UINT32: return ENG_STORAGE_B32;
    case TX_INT64:
    case TX_UINT64: return ENG_STORAGE_B64;
    case TX_NDTYPES: break;
    }
    return ENG_STORAGE_F32; /* not reached for a valid dtype */
}
