/*
 * kserve.h - the KServe v2 / Open Inference Protocol inference request.
 *
 * Model "cumsum", version "1": input "x" (any numeric datatype and shape),
 * optional input "axis" (INT32 or INT64, one element, as in ONNX CumSum;
 * taken, not advertised in the metadata),
 * output "y". Request parameters "axis", "exclusive", "reverse" (and
 * "direction"), "timeout" (microseconds) and "binary_data_output".
 *
 * The binary tensor data extension: when the request has an
 * Inference-Header-Content-Length header, the body is that many bytes of
 * JSON followed by the tensors whose inputs declare
 * parameters.binary_data_size, back to back in input order. Binary input
 * data is used where it lies in the body (the scan then runs in place);
 * JSON data is parsed into a new buffer. tally also takes FP16 and BF16 as
 * JSON, and non-finite floats as "NaN", "Infinity", "-Infinity".
 */
#ifndef TALLY_KSERVE_H
#define TALLY_KSERVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "tensor.h"

#define KSERVE_MODEL "cumsum"
#define KSERVE_VERSION "1"

typedef struct {
    eng_scan_desc desc;
    void *data;      /* the tensor "x": in the body, or owned when JSON */
    bool data_owned; /* free data with eng_buffer_free() */
    size_t bytes;
    const char *id; /* the request id as written (escaped), or NULL */
    size_t id_len;
    bool id_owned;      /* id is a copy, freed with the request */
    bool binary_output; /* answer y as binary data */
    bool has_timeout;
    int64_t timeout_us;
} kserve_request;

/* Parses an inference request. body (aligned to 128 bytes) is modifiable:
 * binary data is used in place, after being slid down to a 128-byte
 * boundary over the JSON header; body must outlive *out. Free *out with
 * kserve_request_free() after a success. header_len is the value of
 * Inference-Header-Content-Length, or SIZE_MAX without that header. JSON
 * tensors may take at most max_bytes. */
eng_err kserve_parse(uint8_t *body, size_t len, size_t header_len,
                     size_t max_bytes, kserve_request *out, char *msg,
                     size_t msglen);

/* Frees what kserve_parse allocated. */
void kserve_request_free(kserve_request *r);

/* The JSON header of a binary response whose output y has desc's dtype
 * and shape: a malloc'd string (length in *len), or NULL when out of
 * memory. */
char *kserve_binary_header(const kserve_request *r, size_t *len);

/* A writer for a JSON response with y's data at `data` (borrowed). */
bool kserve_json_writer(json_writer *w, const kserve_request *r,
                        const void *data);

/* Server and model metadata, model config: malloc'd JSON text. */
char *kserve_server_metadata(const char *version);
char *kserve_model_metadata(void);
char *kserve_model_config(void);

#endif
