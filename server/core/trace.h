/*
 * trace.h - W3C Trace Context (https://www.w3.org/TR/trace-context/): the
 * traceparent a request came with, and the one tally answers with.
 *
 * A request that carries a valid `traceparent` (an HTTP header, or gRPC
 * metadata of that name) continues the caller's trace: tally's request
 * gets the same trace id and flags, and a span id of its own, whose parent
 * is the caller's. A request without one, or with one that is not valid,
 * starts a new trace (flags 00: not sampled). The answer carries tally's
 * own traceparent, and the access log the trace id, so that a request can
 * be found from the caller's trace. (Spans themselves are not exported
 * yet.)
 *
 * Threading: any thread; each draws ids from a generator of its own.
 */
#ifndef TALLY_TRACE_H
#define TALLY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* A request's context: the caller's trace when traceparent (n bytes; NULL
 * for none) is valid, else a new one; a new span id either way. */
void trace_begin(trace_ctx *t, const char *traceparent, size_t n);

/* tally's traceparent: "00-<trace id>-<span id>-<flags>", NUL-terminated. */
void trace_format(const trace_ctx *t, char out[TRACE_PARENT_LEN + 1]);

/* The trace id as 32 lower-case hex digits, NUL-terminated. */
void trace_id_hex(const trace_ctx *t, char out[33]);

#endif
