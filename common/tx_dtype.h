/*
 * tx_dtype.h - the element types tally computes, shared by the client and
 * the server: names, KServe names, sizes, kinds and .npy codes.
 *
 * common/ is built into both sides, as curl shares its curlx code: its
 * names start with tx_. It includes nothing of either side.
 *
 * The order of the table is the order of libtally's public tally_dt enum
 * (client/include/tally.h), which dtype.c checks at compile time.
 *
 * Threading: pure functions over constant tables; any thread.
 */
#ifndef TALLY_TX_DTYPE_H
#define TALLY_TX_DTYPE_H

#include <stddef.h>

/* The largest rank either side accepts. */
#define TX_MAX_RANK 64

typedef enum {
    TX_KIND_FLOAT,
    TX_KIND_SIGNED,
    TX_KIND_UNSIGNED,
} tx_kind;

/* X(ID, name, kserve, size, kind, npy) - npy is the little-endian .npy
 * descr written for the type (bfloat16, which numpy lacks, as '<u2'). */
#define TX_DTYPES(X)                                                           \
    X(FLOAT16, "float16", "FP16", 2, FLOAT, "<f2")                             \
    X(BFLOAT16, "bfloat16", "BF16", 2, FLOAT, "<u2")                           \
    X(FLOAT32, "float32", "FP32", 4, FLOAT, "<f4")                             \
    X(FLOAT64, "float64", "FP64", 8, FLOAT, "<f8")                             \
    X(INT8, "int8", "INT8", 1, SIGNED, "|i1")                                  \
    X(INT16, "int16", "INT16", 2, SIGNED, "<i2")                               \
    X(INT32, "int32", "INT32", 4, SIGNED, "<i4")                               \
    X(INT64, "int64", "INT64", 8, SIGNED, "<i8")                               \
    X(UINT8, "uint8", "UINT8", 1, UNSIGNED, "|u1")                             \
    X(UINT16, "uint16", "UINT16", 2, UNSIGNED, "<u2")                          \
    X(UINT32, "uint32", "UINT32", 4, UNSIGNED, "<u4")                          \
    X(UINT64, "uint64", "UINT64", 8, UNSIGNED, "<u8")

typedef enum {
#define TX_DTYPE_ENUM(id, name, kserve, size, kind, npy) TX_##id,
    TX_DTYPES(TX_DTYPE_ENUM)
#undef TX_DTYPE_ENUM
        TX_NDTYPES
} tx_dtype;

/* Looks up a dtype by its native name ("float32") or its KServe name
 * ("FP32"), exactly, in s[0..len); -1 when neither. */
int tx_dtype_parse(const char *s, size_t len);

/* These take a valid dtype (below TX_NDTYPES); strings are static. */
const char *tx_dtype_name(tx_dtype t);   /* "float32" */
const char *tx_dtype_kserve(tx_dtype t); /* "FP32" */
const char *tx_dtype_npy(tx_dtype t);    /* "<f4" */
size_t tx_dtype_size(tx_dtype t);
tx_kind tx_dtype_kind(tx_dtype t);

/* "float16, bfloat16, ...": every native name, for error messages;
 * static. */
const char *tx_dtype_list(void);

#endif
