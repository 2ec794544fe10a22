/*
 * reqlog.h - the end of every request, whichever door it came through:
 * one record, and one path that feeds the metrics, Triton's statistics
 * (through the route's or method's hook), the access log, the trace
 * exporter and the in-flight count.
 *
 * A door carries one req_record in its request, from the request's
 * arrival to its end (http/request.h's rec, grpc_int.h's grpc_call rec):
 * what the door knows itself (the route, its status, bytes, and the
 * receive and send stamps) and what the adapter writes into it (parse,
 * queue, compute and the job: api/submit.h). At the end the door sets
 * what only the end knows (done, failed, the bytes read) and hands the
 * record, as it is, to req_end(), which does the rest the same way for
 * REST and gRPC. Only a sampled request's record is copied, into the
 * trace exporter's own (telemetry/), which outlives the request.
 *
 * The access log: --access-log=errors (the default) writes a line for a
 * request that failed (REST: status 400 and up, 499 and 408 included;
 * gRPC: any status but OK) or was slow (it took --slow-request-ms or
 * more), at most --access-log-max-per-s lines a second over both doors
 * together: the lines over the cap are counted in
 * tally_access_log_dropped_total, and one warning a second says how many
 * were left out. --access-log=all writes every request's line, uncapped;
 * off writes none. BENCHMARKS.md has what each costs at full load.
 *
 * The cap counts lines per wall-clock second of now_ns(): the first
 * request of a new second (or the loop's tick) swaps the counters, and
 * whoever swaps writes the warning for the second that ended. Two threads
 * that race across the boundary may let a line or two more through; the
 * cap bounds volume, not an exact count.
 *
 * Threading: req_end() on any door's thread (HTTP threads, gRPC's loop),
 * at the end of a request; reqlog_tick() on the loop thread. The counters
 * are atomics; the lines go through log_access, which has its own lock.
 * Ownership: the record and everything it points to are the door's; they
 * need only live through the call.
 */
#ifndef TALLY_CORE_REQLOG_H
#define TALLY_CORE_REQLOG_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "metrics.h"
#include "status.h"
#include "trace.h"

struct tallyd_server;
typedef struct req_record req_record;

/* A route's or method's own end (Triton's statistics for the inference
 * routes); NULL: none. total_ns is the request's whole time. */
typedef void (*req_ended_fn)(struct tallyd_server *s, const req_record *rec,
                             uint64_t total_ns);

struct req_record {
    metric_protocol door; /* METRIC_HTTP or METRIC_GRPC */
    unsigned label;       /* the route's or method's metrics label */
    req_ended_fn ended;
    int status;       /* HTTP status; gRPC: its status code */
    status_code err;  /* STATUS_OK, or why it failed */
    bool failed;      /* by the door's rule (above) */
    const char *method;     /* HTTP's method; gRPC: the RPC's ("ModelInfer") */
    const char *path;       /* as the client sent it; may be NULL */
    const char *route;      /* the route's pattern, or the RPC's full name */
    const char *request_id; /* NULL: none (gRPC) */
    const trace_ctx *trace;
    const char *tracestate; /* the caller's, for a sampled trace; or NULL */
    size_t bytes_in, bytes_out;
    /* stamps (now_ns; 0: not reached): arrival, the body or message
     * whole, the handler's start, the answer queued, the end */
    uint64_t t0, body, handler, reply, done;
    /* durations of the steps: the door's (decode, render, gzip) and the
     * adapter's (parse, queue, compute) */
    uint64_t decode_ns, parse_ns, queue_ns, compute_ns, render_ns, gzip_ns;
    trace_work ran; /* what its job did; zero: no job */
    int terminated; /* REST: libmicrohttpd's termination code, 0: none */
    bool in_flight; /* it counted in tallyd_server's inflight */
};

/* The access log's settings and per-second counters, one per server
 * (tallyd_server's `reqlog`). */
typedef struct {
    tallyd_access_mode mode;
    uint64_t slow_ns;   /* 0: none is slow */
    unsigned max_per_s; /* 0: no cap */
    atomic_ullong second;  /* now_ns() / 1e9 of the counters below */
    atomic_uint lines;     /* written this second */
    atomic_ullong dropped; /* left out this second */
} reqlog;

/* Takes the settings from cfg. Before any thread serves. */
void reqlog_init(reqlog *a, const tallyd_config *cfg);

/* The request's end, as above; then, if it counted as in flight, it no
 * longer does. */
void req_end(struct tallyd_server *s, const req_record *rec);

/* Writes the warning for lines left out in a second that has ended, if
 * any; so a burst that stops is still reported. Any thread (the loop
 * thread's tick calls it every 100 ms). */
void reqlog_tick(reqlog *a, uint64_t now_ns);

#endif
