/*
 * dml.h - the operator in DirectML's words:
 * DML_CUMULATIVE_SUMMATION_OPERATOR_DESC with DML_BUFFER_TENSOR_DESC input and
 * output tensors, as JSON.
 *
 *   {"InputTensor":  {"DataType": "FLOAT32", "Sizes": [1,1,3,4],
 *                     "Strides": [12,12,1,3]},
 *    "OutputTensor": {"DataType": "FLOAT32", "Sizes": [1,1,3,4]},
 *    "Axis": 3, "AxisDirection": "DML_AXIS_DIRECTION_DECREASING",
 *    "HasExclusiveSum": true,
 *    "data": [...]}
 *
 * A tensor object has DataType and Sizes, and optionally Strides,
 * TotalTensorSizeInBytes, DimensionCount (must equal the number of Sizes),
 * Flags (0 or 1, DML_TENSOR_FLAG_OWNED_BY_DML, which means nothing here)
 * and GuaranteedBaseOffsetAlignment (informational). Names come in full
 * ("DML_TENSOR_DATA_TYPE_FLOAT32") and short ("FLOAT32") forms, as
 * DirectML's enum numbers, and as tally's own dtype names. The rules, each
 * a 400 that names the member:
 *   - Sizes: 1 to ENG_MAX_RANK dimensions, each at least 1;
 *   - Strides: as many as Sizes; none means packed;
 *   - TotalTensorSizeInBytes: at least DMLCalcBufferTensorSize, the
 *     addressed bytes rounded up to a multiple of 4;
 *   - OutputTensor: the same DataType and Sizes as InputTensor, and
 *     Strides that cannot make two elements share an address;
 *   - Axis: 0 to DimensionCount - 1.
 * This module parses and checks; it knows nothing of HTTP. Threading: none
 * (pure functions on caller-owned memory).
 */
#ifndef TALLY_DML_H
#define TALLY_DML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "tensor.h"

/* One DML_BUFFER_TENSOR_DESC, with what tally derives from it. */
typedef struct {
    tx_dtype dtype;
    int rank;
    uint64_t sizes[ENG_MAX_RANK];
    uint64_t strides[ENG_MAX_RANK]; /* packed ones when none were given */
    bool has_strides;
    uint64_t total_bytes; /* as given, or min_bytes */
    bool has_total;       /* TotalTensorSizeInBytes was given */
    bool bad_dtype;       /* parsing failed on DataType */
    uint64_t min_bytes;   /* DMLCalcBufferTensorSize */
    uint64_t span;        /* elements from 0 to the last addressed, + 1 */
    uint64_t flags, alignment;
} dml_tensor;

/* A parsed operator. desc is the scan (dtype, shape, axis, direction,
 * exclusive); iv and ov point at in.strides and out.strides, with buffer
 * sizes set by the caller. data is the JSON form's input buffer
 * (in.span elements, eng_buffer_alloc()ed, the caller's to free with
 * eng_buffer_free()); NULL for the binary form. */
typedef struct {
    dml_tensor in, out;
    eng_scan_desc desc;
    eng_view iv, ov;
    void *data;
} dml_request;

/* Parses an operator description. With want_data, "data" is required and
 * parsed (the JSON form); without, it is refused (the binary form's
 * descriptor). Every buffer that a request could make tally allocate (the
 * input's span when data is parsed, the output's total size) must fit in
 * max_bytes, or the answer is ENG_E_TOO_LARGE. Errors: ENG_E_INVALID,
 * _DTYPE, _RANK, _AXIS, _SHAPE or _TOO_LARGE, with a message naming the
 * member; nothing needs freeing then. */
eng_err dml_parse(const char *text, size_t len, size_t max_bytes,
                  bool want_data, dml_request *out, char *msg, size_t msglen);

/* The binary form's length rule: a body of len bytes must be exactly
 * InputTensor's TotalTensorSizeInBytes when that is given; otherwise any
 * length from the addressed bytes (span times the element size) to
 * DMLCalcBufferTensorSize, so that the padding to 4 bytes may be sent or
 * left off. False with a message otherwise. */
bool dml_check_body(const dml_request *q, size_t len, char *msg, size_t msglen);

/* The OutputTensor object, echoed with its Strides and
 * TotalTensorSizeInBytes filled in, as JSON text appended to *buf. */
bool dml_append_output(char **buf, size_t *blen, const dml_request *q);

/* A writer for the JSON answer {"OutputTensor": {...}, "data": [...]}:
 * the out.span elements of the output buffer at out (borrowed). */
bool dml_json_writer(json_writer *w, const dml_request *q, const void *out);

#endif
