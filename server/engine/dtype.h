/*
 * dtype.h - the element types tally computes with, in one table.
 *
 * Every numeric type of DirectML's and OpenVINO's cumulative sum, plus
 * bfloat16. Each has a native name (NumPy's), the KServe v2 datatype name,
 * a size and a storage class. The storage class is what the kernels are
 * built for: signed and unsigned integers of one width share a class,
 * because two's-complement addition is the same operation on both.
 */
#ifndef TALLY_DTYPE_H
#define TALLY_DTYPE_H

#include <stddef.h>

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

typedef enum {
    TALLY_KIND_FLOAT,
    TALLY_KIND_SIGNED,
    TALLY_KIND_UNSIGNED,
} tally_kind;

/* X(ID, name, kserve, size, kind, storage) */
#define TALLY_DTYPES(X)                                                        \
    X(FLOAT16, "float16", "FP16", 2, FLOAT, F16)                               \
    X(BFLOAT16, "bfloat16", "BF16", 2, FLOAT, BF16)                            \
    X(FLOAT32, "float32", "FP32", 4, FLOAT, F32)                               \
    X(FLOAT64, "float64", "FP64", 8, FLOAT, F64)                               \
    X(INT8, "int8", "INT8", 1, SIGNED, B8)                                     \
    X(INT16, "int16", "INT16", 2, SIGNED, B16)                                 \
    X(INT32, "int32", "INT32", 4, SIGNED, B32)                                 \
    X(INT64, "int64", "INT64", 8, SIGNED, B64)                                 \
    X(UINT8, "uint8", "UINT8", 1, UNSIGNED, B8)                                \
    X(UINT16, "uint16", "UINT16", 2, UNSIGNED, B16)                            \
    X(UINT32, "uint32", "UINT32", 4, UNSIGNED, B32)                            \
    X(UINT64, "uint64", "UINT64", 8, UNSIGNED, B64)

typedef enum {
#define TALLY_DTYPE_ENUM(id, name, kserve, size, kind, storage) TALLY_##id,
    TALLY_DTYPES(TALLY_DTYPE_ENUM)
#undef TALLY_DTYPE_ENUM
        TALLY_NDTYPES
} tally_dtype;

/* Looks up a dtype by its native name ("float32") or its KServe name
 * ("FP32"); len is the length of s. Returns -1 when there is none. */
int tally_dtype_parse(const char *s, size_t len);

/* "float32"; static storage. */
const char *tally_dtype_name(tally_dtype t);

/* "FP32"; static storage. */
const char *tally_dtype_kserve(tally_dtype t);

size_t tally_dtype_size(tally_dtype t);
tally_kind tally_dtype_kind(tally_dtype t);
tally_storage tally_dtype_storage(tally_dtype t);

/* A comma-separated list of every native name, for error messages. */
const char *tally_dtype_list(void);

#endif
