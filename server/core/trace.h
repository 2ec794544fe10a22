/*
 * trace.h - W3C Trace Context (https://www.w3.org/TR/trace-context/): the
 * traceparent a request came with, and the one tally answers with.
 *
 * A request that carries a valid `traceparent` (an HTTP header, or gRPC
 * metadata of that name) continues the caller's trace: tally's request
 * gets the same trace id and flags, and a span id of its own, whose parent
 * is the caller's. A request without one, or with one that is not valid,
 * starts a new trace, sampled or not as the sampler says (the caller's
 * decision, its flags' sampled bit, is kept: parent-based sampling). The
 * answer carries tally's own traceparent, and the access log the trace
 * id, so that a request can be found from the caller's trace.
 *
 * A sampled request's transport hands a trace_record (what it did, step by
 * step) to the server's trace_sink once it has ended; the exporter
 * (telemetry/exporter.h) turns records into OpenTelemetry spans.
 *
 * Threading: any thread; each draws ids from a generator of its own. A
 * sampler may be changed while requests read it.
 */
#ifndef TALLY_TRACE_H
#define TALLY_TRACE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sequence_id.h"

/* "00-" 32 hex "-" 16 hex "-" 2 hex */
#define TRACE_PARENT_LEN 55

typedef struct {
    uint8_t trace_id[16];
    uint8_t span_id[8];   /* tally's request span */
    uint8_t parent_id[8]; /* the caller's span; zero when none */
    uint8_t flags;
    bool continued; /* the trace came with the request */
} trace_ctx;

/* Parses a traceparent value of n bytes: version 00 exactly, or a later
 * version (not ff) whose first four fields have version 00's form and
 * are followed by the end or a '-'. Lower-case hex only; the trace id and
 * the parent id must not be all zeros. Fills t's trace_id, parent_id and
 * flags; false (t untouched) when the value is not valid. */
bool trace_parse(const char *v, size_t n, trace_ctx *t);

#define TRACE_SAMPLED 0x01 /* the flags' sampled bit */

/* Which new traces are sampled: those whose trace id's last 8 bytes, read
 * as a big-endian number, are below ratio x 2^64 (OpenTelemetry's
 * TraceIdRatioBased, so every service that uses it agrees). */
typedef struct {
    _Atomic uint64_t threshold; /* UINT64_MAX: all */
} trace_sampler;

/* Sets the ratio, clamped to [0, 1]. */
void trace_sampler_set(trace_sampler *s, double ratio);
double trace_sampler_ratio(trace_sampler *s);

/* A request's context: the caller's trace when traceparent (n bytes; NULL
 * for none) is valid, with its flags; else a new one, sampled as s says
 * (NULL: not sampled). A new span id either way. */
void trace_begin(trace_ctx *t, const char *traceparent, size_t n,
                 trace_sampler *s);

/* A fresh span id, never all zeros. */
void trace_span_id(uint8_t out[8]);

/* Links from a request's compute span to the spans of the other sampled
 * requests its batch served: the first TRACE_MAX_LINKS, and how many more
 * there were. */
#define TRACE_MAX_LINKS 8
typedef struct {
    struct {
        uint8_t trace_id[16], span_id[8];
    } l[TRACE_MAX_LINKS];
    unsigned n, dropped;
} trace_links;

/* What a request's job did (0 times: it had none, or it never ran). */
typedef struct {
    uint64_t enqueued_ns, started_ns, finished_ns; /* monotonic (now_ns) */
    const char *device; /* static or the daemon's; NULL: none */
    const char *placement; /* why there (scheduler.h's reasons); NULL */
    unsigned batch;     /* how many requests its launch served */
    uint64_t elements;
    trace_links links;
    /* the sequence it was a chunk of (sequence_id.h): the id's text (a
     * number's digits, or the string), "" when none */
    bool sequence_is_string;
    char sequence_id[SEQ_ID_MAX + 1];
} trace_work;

/* A finished, sampled request, as its transport saw it: the input of its
 * spans. Times are now_ns() stamps (0: the step did not happen) or
 * durations (_ns suffix after a step's name). */
/* The longest tracestate kept (W3C allows 512 bytes; longer ones are not
 * kept, as the spec lets a receiver do). */
#define TRACE_STATE_MAX 512

/* Copies a tracestate value of n bytes into out (NUL-terminated) when it
 * is at most TRACE_STATE_MAX printable ASCII bytes; else out is "". */
void trace_state_copy(const char *v, size_t n, char out[TRACE_STATE_MAX + 1]);

typedef struct {
    trace_ctx ctx;
    char trace_state[TRACE_STATE_MAX + 1]; /* the caller's tracestate */
    bool grpc;          /* a gRPC call; else HTTP */
    char method[16];    /* HTTP's method; gRPC: "POST" */
    char route[80];     /* the route's pattern, or the RPC's full name */
    char path[128];     /* as the client sent it (truncated) */
    char request_id[72];
    int status;         /* HTTP status; gRPC: its status code */
    uint64_t bytes_in, bytes_out;
    uint64_t t0, body, handler, reply, done; /* stamps */
    uint64_t decode_ns, parse_ns, render_ns; /* durations */
    trace_work work;
} trace_record;

/* Where records go: the exporter, or a test's. submit copies what it
 * keeps and must not block; it runs on the transport's threads. */
typedef struct trace_sink {
    void (*submit)(struct trace_sink *k, const trace_record *rec);
} trace_sink;

/* tally's traceparent: "00-<trace id>-<span id>-<flags>", NUL-terminated. */
void trace_format(const trace_ctx *t, char out[TRACE_PARENT_LEN + 1]);

/* The trace id as 32 lower-case hex digits, NUL-terminated. */
void trace_id_hex(const trace_ctx *t, char out[33]);

#endif
