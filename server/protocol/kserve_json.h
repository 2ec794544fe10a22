/*
 * kserve_json.h - the KServe v2 / Open Inference Protocol inference request
 * and response in JSON, for REST (the request's model: kserve_req.h).
 *
 * The binary tensor data extension: when the request has an
 * Inference-Header-Content-Length header, the body is that many bytes of
 * JSON followed by the tensors whose inputs declare
 * parameters.binary_data_size, back to back in input order. Binary input
 * data is used where it lies in the body (the scan then runs in place);
 * JSON data is parsed into a new buffer. tally also takes FP16 and BF16 as
 * JSON, and non-finite floats as "NaN", "Infinity", "-Infinity".
 * parameters.binary_data_output, or an output's parameters.binary_data,
 * asks for y as binary data.
 *
 * Threading: any thread; a request and its writer belong to the one
 * thread that parses and answers it.
 */
#ifndef TALLY_KSERVE_JSON_H
#define TALLY_KSERVE_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "kserve_req.h"

/* Parses an inference request. body (aligned to 128 bytes) is modifiable:
 * binary data is used in place, after being slid down to a 128-byte
 * boundary over the JSON header; body must outlive *out. Free *out with
 * kserve_request_free() after a success. header_len is the value of
 * Inference-Header-Content-Length, or SIZE_MAX without that header. JSON
 * tensors may take at most max_bytes. */
eng_err kserve_parse(uint8_t *body, size_t len, size_t header_len,
                     size_t max_bytes, kserve_request *out, char *msg,
                     size_t msglen);

/* The JSON header of a binary response whose output y has desc's dtype
 * and shape: a malloc'd string (length in *len), or NULL when out of
 * memory. */
char *kserve_binary_header(const kserve_request *r, size_t *len);

/* The JSON response for an output y placed in shared memory (y_shm): its
 * name, datatype and shape, with neither data nor parameters, as Triton
 * answers (Triton's C++ client, perf_analyzer's, takes an output's
 * "parameters" to announce binary data). malloc'd, length in *len; NULL
 * when out of memory. */
char *kserve_shm_output_json(const kserve_request *r, size_t *len);

/* A writer for a JSON response with y's data at `data` (borrowed). */
bool kserve_json_writer(json_writer *w, const kserve_request *r,
                        const void *data);

/* Server and model metadata, model config (kserve_model.h) as JSON:
 * malloc'd text, or NULL when out of memory. shm, seq: whether shared
 * memory and sequences are on (kserve_extensions). seq_idle_us: the
 * sequences' idle time, for the config's sequence_batching (0: no
 * sequences, no sequence_batching). */
char *kserve_server_metadata(const char *version, bool shm, bool seq);
char *kserve_model_metadata(void);
char *kserve_model_config(uint64_t seq_idle_us);

#endif
