/*
 * native.h - tally's own API: POST /v1/cumsum in JSON, .npy or raw bytes.
 *
 * Scan parameters, and the sequence parameters sequence_id,
 * sequence_start and sequence_end, come from JSON members
 * (application/json) or the query string (the binary formats), read and
 * checked by scan_params.h. This
 * module parses the JSON body and writes the JSON answer; it knows
 * nothing of HTTP.
 *
 * Threading: any thread; a parsed request belongs to its caller.
 */
#ifndef TALLY_NATIVE_H
#define TALLY_NATIVE_H

#include <stdbool.h>
#include <stddef.h>

#include "json.h"
#include "scan_params.h"
#include "tensor.h"

/* A parsed JSON request. data holds the tensor (eng_scan_desc's dtype
 * and shape); the caller frees it with eng_buffer_free(). */
typedef struct {
    eng_scan_desc desc;
    void *data;
    size_t bytes;
    bool dml; /* the body is DirectML's form (dml.h) */
    seq_params seq; /* sequence_id, _start, _end members; has_id: a chunk */
} native_request;

/* Parses a JSON request body. The tensor may take at most max_bytes
 * (ENG_E_TOO_LARGE otherwise). Errors are ENG_E_INVALID, _DTYPE,
 * _RANK, _AXIS or _TOO_LARGE with a message naming the member, element
 * index or problem; nothing needs freeing then. A body with a member of
 * DirectML's (InputTensor, OutputTensor, Axis, AxisDirection or
 * HasExclusiveSum) fails with out->dml set: it is DirectML's operator
 * description (dml.h). */
eng_err native_parse_json(const char *body, size_t len, size_t max_bytes,
                          native_request *out, char *msg, size_t msglen);

/* A writer for the JSON response {"dtype", "shape", "data"} of a result
 * with desc's dtype and shape at data (borrowed). False when out of memory. */
bool native_json_writer(json_writer *w, const eng_scan_desc *desc,
                        const void *data);

#endif
