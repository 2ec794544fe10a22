/*
 * kserve_req.h - KServe v2's inference request, described once: what the
 * JSON codec (kserve_json.c, REST) and the protobuf codec (kserve_pb.c,
 * gRPC) fill, and the rules both apply.
 *
 * Model "cumsum", version "1": input "x" (any numeric datatype and shape),
 * optional input "axis" (INT32 or INT64, one element, as in ONNX CumSum;
 * taken, not advertised in the metadata), output "y". The request's
 * parameters are one table (kserve_param_find): axis, exclusive, reverse,
 * direction, timeout (microseconds), binary_data_output, and Triton's
 * sequence_id, sequence_start, sequence_end and tally's sequence_chunk
 * (sequence_id.h); others are ignored. A tensor's parameters place it in
 * shared memory (shared_memory_region, _offset, _byte_size; the API layer
 * resolves them, api/shm.c).
 *
 * A codec walks its encoding once, reads each parameter it knows by the
 * kind the table gives (a value of another kind is refused in the
 * codec's own words: "parameters.axis must be an integer", "parameter
 * axis must be an int64_param"), and collects the inputs as
 * kserve_input. kserve_request_finish() then applies what is the same
 * in both: the inputs the model takes, where each one's data is, the
 * axis input, x's size and its data: bytes used where they lie in the
 * message (moved down to a 128-byte boundary for the scan), or the
 * codec's typed data decoded into a buffer of x's own.
 *
 * Threading: pure functions of their arguments; a request belongs to the
 * thread that parses and answers it.
 */
#ifndef TALLY_KSERVE_REQ_H
#define TALLY_KSERVE_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "scan_params.h"
#include "sequence_id.h"
#include "shm.h"
#include "tensor.h"

#include "kserve_model.h"

typedef struct {
    eng_scan_desc desc;
    uint8_t *data;   /* x: in the message, or owned (typed data) */
    bool data_owned; /* free data with eng_buffer_free() */
    size_t bytes;
    /* the request's id, echoed back (owned, NUL-terminated; NULL: none):
     * in JSON as written, escapes and all */
    char *id;
    size_t id_len;
    bool binary_output; /* REST: answer y as binary data */
    bool has_timeout;
    int64_t timeout_us; /* the "timeout" parameter, microseconds */
    seq_params seq;     /* has_id: a chunk of a sequence */
    /* Triton's system shared-memory extension: x (data NULL), or y, in a
     * region; the API layer finds the bytes */
    shm_ref x_shm, y_shm;
} kserve_request;

/* Frees what a parse allocated; r stays valid, empty. */
void kserve_request_free(kserve_request *r);

/* A parameter's kinds of value: a boolean; an integer; a string; a
 * sequence id (a number, or a string: s set); a count (an integer >= 0). */
typedef enum { KP_BOOL, KP_INT, KP_STRING, KP_ID, KP_COUNT } kserve_kind;

typedef struct {
    bool b;
    int64_t i;
    uint64_t u;
    const char *s; /* n bytes, not NUL-terminated */
    size_t n;
} kserve_value;

typedef struct {
    const char *name;
    kserve_kind kind;
    /* its name in each encoding's messages: "parameters.axis" (REST's
     * JSON), "parameter axis" (gRPC's), written once, not per request */
    const char *in_json, *in_pb;
} kserve_param;

/* The request parameter named name[0..n), or NULL: not tally's (to be
 * ignored). kserve_param_set() takes its value, read as its kind, into r
 * and p; `where` prefixes its name in messages ("parameters."). False,
 * with a message, when the value is not one it takes. */
const kserve_param *kserve_param_find(const char *name, size_t n);
bool kserve_param_set(const kserve_param *q, const kserve_value *v,
                      kserve_request *r, scan_params *p, const char *where,
                      char *msg, size_t msglen);

/* A tensor's parameters that place it in shared memory:
 * kserve_shm_param() is true when k[0..kn) is one, with the kind to read
 * it as; kserve_shm_set() takes its value into ref (`what` names the
 * tensor in messages); kserve_shm_complete() checks ref once all are
 * read. False with a message. */
bool kserve_shm_param(const char *k, size_t kn, kserve_kind *kind);
bool kserve_shm_set(shm_ref *ref, const char *k, size_t kn,
                    const kserve_value *v, const char *what, char *msg,
                    size_t msglen);
bool kserve_shm_complete(const shm_ref *ref, const char *what, char *msg,
                         size_t msglen);

/* One input, as a codec read it. */
typedef struct {
    const char *name; /* NUL-terminated or not: name_len bytes */
    size_t name_len;
    tx_dtype dtype;
    uint64_t shape[ENG_MAX_RANK];
    int rank;
    shm_ref shm;
    bool has_raw; /* its bytes lie in the message */
    const uint8_t *raw;
    uint64_t raw_len;
    bool has_typed;     /* data in the codec's own form (JSON, contents) */
    const void *typed;  /* the codec's handle on them (JSON: the text, */
    size_t typed_len;   /* typed_len bytes to the end of the header) */
    bool decoded;       /* x: decoded into the request already */
} kserve_input;

/* What kserve_request_finish() needs of a codec: its names for an
 * input's typed and raw data ("data", "parameters.binary_data_size";
 * "contents", "raw_input_contents"), the field that gives the size of
 * raw data, where parameters are named, and the decoder of typed data:
 * `elements` elements of in->dtype into dst, false with a message. */
typedef struct {
    const char *typed_name, *raw_name, *raw_field, *param_where;
    bool (*decode)(const kserve_input *in, uint64_t elements, void *dst,
                   char *msg, size_t msglen);
} kserve_codec;

/* The rules on the inputs in[0..n) (the model takes "x" and optionally
 * "axis"; each has its data in one place), then the axis input into p,
 * x's description from p into r, and x's data: raw bytes in place (moved
 * down to a 128-byte boundary, not below `base`, the message's start),
 * typed ones into a buffer of at most max_bytes. On failure r holds what
 * it held, to be freed by the caller. */
eng_err kserve_request_finish(kserve_request *r, kserve_input *in, size_t n,
                              scan_params *p, const kserve_codec *k,
                              uint8_t *base, size_t max_bytes, char *msg,
                              size_t msglen);

#endif
