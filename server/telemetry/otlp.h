/*
 * otlp.h - finished requests as OpenTelemetry spans, in OTLP's protobuf
 * encoding (an ExportTraceServiceRequest, proto/otlp_trace.proto).
 *
 * Each record (trace.h) becomes a tree of spans in the request's trace:
 *   - the request's own span (kind SERVER, the id its traceparent answer
 *     named), parented to the caller's span when the trace came with the
 *     request, and named and attributed by OpenTelemetry's conventions
 *     for HTTP servers ("POST /v1/cumsum", http.request.method,
 *     http.route, url.path, http.response.status_code, body sizes) or RPC
 *     servers ("inference.GRPCInferenceService/ModelInfer", rpc.system,
 *     rpc.service, rpc.method, rpc.grpc.status_code, and the message's
 *     bytes as tally.message.bytes_in and _out), with tally.request_id
 *     over HTTP;
 *   - a child for each step that happened: receive (the body arriving),
 *     decode (its Content-Encoding), parse, queue (waiting for a worker),
 *     compute (tally.device, tally.placement, tally.batch_size,
 *     tally.elements), render
 *     (writing the answer) and send.
 * Server errors (HTTP 5xx; gRPC's UNKNOWN, DEADLINE_EXCEEDED,
 * UNIMPLEMENTED, INTERNAL, UNAVAILABLE, DATA_LOSS) set the span's status
 * to ERROR; client errors leave it unset, as the conventions say.
 *
 * Every string it writes is valid UTF-8, as protobuf requires: an
 * attribute's text that is not is written as U+FFFD, and the span names
 * come from route tables. A record's trace_state must be printable ASCII
 * (trace_state_copy makes it so).
 *
 * Threading: any thread; no state.
 */
#ifndef TALLY_OTLP_H
#define TALLY_OTLP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "trace.h"

/* The most spans one record becomes. */
#define OTLP_SPANS_PER_RECORD 8

/* What encoding needs, allocated once for batches of at most max
 * records and reused (a batch's messages are built in it). NULL when
 * memory runs out. One thread at a time. */
typedef struct otlp_encoder otlp_encoder;
otlp_encoder *otlp_encoder_new(size_t max);
void otlp_encoder_free(otlp_encoder *e);

/* Encodes n records (at most the encoder's max) for service `service` at
 * `version` (the resource's service.name and service.version). wall_ns
 * and mono_ns are one reading of CLOCK_REALTIME and of now_ns() taken
 * together: the records' stamps become Unix times through them. *out
 * (*len bytes) is the encoder's, valid until its next encoding; *spans
 * says how many spans it holds. False when memory runs out. */
bool otlp_encode(otlp_encoder *e, const trace_record *recs, size_t n,
                 const char *service, const char *version, uint64_t wall_ns,
                 uint64_t mono_ns, const uint8_t **out, size_t *len,
                 size_t *spans);

#endif
