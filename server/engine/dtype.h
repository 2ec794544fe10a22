/*
 * dtype.h - the engine's view of an element type. The dtype table itself
 * (names, KServe names, sizes, kinds) is common/tx_dtype.h, shared with
 * the client. The engine adds the storage class, which is what the kernels
 * are built for: signed and unsigned integers of one width share a class,
 * because two's-complement addition is the same operation on both.
 */
#ifndef TALLY_ENGINE_DTYPE_H
#define TALLY_ENGINE_DTYPE_H

#include "tx_dtype.h"

/* Storage classes; the numbers are TALLY_STORAGE in kernels/scan.cl. */
typedef enum {
    TALLY_STORAGE_F16 = 1,
    TALLY_STORAGE_BF16 = 2,
    TALLY_STORAGE_F32 = 3,
    TALLY_STORAGE_F64 = 4,
    TALLY_STORAGE_B8 = 5,
    TALLY_STORAGE_B16 = 6,
    TALLY_STORAGE_B32 = 7,
    TALLY_STORAGE_B64 = 8,
} tally_storage;

#define TALLY_NSTORAGE 8

/* The storage class of a valid dtype. */
tally_storage tally_dtype_storage(tx_dtype t);

#endif
