/*
 * dtype.h - the engine's view of an element type. The dtype table itself
 * (names, KServe names, sizes, kinds) is common/tx_dtype.h, shared with
 * the client. The engine adds the storage class, which is what the kernels
 * are built for: signed and unsigned integers of one width share a class,
 * because two's-complement addition is the same operation on both.
 *
 * Threading: constant tables and pure functions; any thread.
 */
#ifndef TALLY_ENGINE_DTYPE_H
#define TALLY_ENGINE_DTYPE_H

#include "tx_dtype.h"

/* Storage classes; the numbers are TALLY_STORAGE in kernels/scan.cl. */
typedef enum {
    ENG_STORAGE_F16 = 1,
    ENG_STORAGE_BF16 = 2,
    ENG_STORAGE_F32 = 3,
    ENG_STORAGE_F64 = 4,
    ENG_STORAGE_B8 = 5,
    ENG_STORAGE_B16 = 6,
    ENG_STORAGE_B32 = 7,
    ENG_STORAGE_B64 = 8,
} eng_storage;

#define ENG_NSTORAGE 8

/* The storage class of a valid dtype. */
eng_storage eng_dtype_storage(tx_dtype t);

#endif
