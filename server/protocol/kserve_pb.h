/*
 * kserve_pb.h - KServe's inference request and response, in protobuf's
 * wire format (proto/grpc_service.proto: inference.ModelInferRequest and
 * ModelInferResponse).
 *
 * The request's top-level fields are walked here by hand, so that the
 * tensor in raw_input_contents is used where it lies in the message (the
 * scan then runs in place), as the REST binary path uses its body; the
 * small nested messages (inputs, outputs, parameters) are unpacked with
 * protobuf-c. Typed contents (fp32_contents, int_contents, ...) are
 * converted into a new buffer. The request's model is kserve_req.h's, as
 * REST's is; a version "" is the model's one version. Its parameters'
 * kinds are InferParameter's: bool_param, int64_param (or uint64_param),
 * string_param; a sequence id a uint64_param, a non-negative int64_param
 * or a string_param.
 *
 * The response is written as its bytes before y's data (kserve_pb_head),
 * then y's bytes, wherever they are: the last field, raw_output_contents,
 * is the tensor itself.
 *
 * Threading: none of its own; any thread.
 */
#ifndef TALLY_KSERVE_PB_H
#define TALLY_KSERVE_PB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kserve_req.h"

/* Parses a ModelInferRequest of len bytes at msg, which is modifiable and
 * must outlive *out when x came raw: the tensor is used in place, after
 * being moved down to a 128-byte boundary over the fields before it when
 * it is not on one (msg itself is so aligned). Typed contents may take at
 * most max_bytes. ENG_E_INVALID (and _DTYPE, _RANK, _AXIS, _TOO_LARGE,
 * _NOMEM) with a message; *not_found is set when the failure is an
 * unknown model or version (NOT_FOUND rather than INVALID_ARGUMENT). Free
 * *out with kserve_request_free() after a success. */
eng_err kserve_pb_parse(uint8_t *msg, size_t len, size_t max_bytes,
                       kserve_request *out, bool *not_found, char *err,
                       size_t errlen);

/* Where the bulk of a ModelInferRequest starts: the offset in the message
 * of the last raw_input_contents entry that begins in its first n bytes,
 * or SIZE_MAX when none does. The transport uses it to place a large
 * message so that the tensor lands on a 128-byte boundary. */
size_t kserve_pb_bulk_offset(const uint8_t *prefix, size_t n);

/* The bytes of a ModelInferResponse before y's data, for a request r and
 * an output of r's dtype and shape (model_name, model_version, id,
 * outputs[0], then raw_output_contents' tag and length): malloc'd, length
 * in *len; NULL when out of memory. When y was placed in shared memory
 * (r->y_shm), it is the whole response: y's entry carries the region's
 * parameters, and its raw_output_contents entry is empty. */
uint8_t *kserve_pb_head(const kserve_request *r, size_t *len);

/* The same head wrapped as a ModelStreamInferResponse's infer_response,
 * for ModelStreamInfer. */
uint8_t *kserve_pb_stream_head(const kserve_request *r, size_t *len);

/* A ModelStreamInferResponse carrying only error_message (a failure on a
 * stream, which goes on): malloc'd, NULL when out of memory. */
uint8_t *kserve_pb_stream_error(const char *message, size_t *len);

#endif
