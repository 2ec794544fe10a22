/*
 * stats.h - the model's inference statistics, in the shape of Triton's
 * statistics extension (GET /v2/models/cumsum/stats), so that clients such
 * as perf_analyzer can show where the server spent a request's time.
 *
 * Requests are counted when they end: a success or a failure with its
 * whole time; a success also adds its time in the queue, reading its input
 * (compute_input: decoding and parsing the body), the scan (compute_infer)
 * and writing the answer (compute_output). Executions (one scan, which may
 * serve a batch of requests) are counted by the code that runs them, per
 * batch size.
 *
 * Threading: every function but stats_init() may be called from any
 * thread. One mutex is held for an update's few additions and for a
 * snapshot's copy, so that a snapshot is consistent: a request's steps
 * are all in it or none is. perf_analyzer stops with "Server side
 * statistics compute counts must be the same" when compute_input,
 * compute_infer and compute_output differ in count between two of its
 * reads, as they could when each was a separate atomic (met under
 * AddressSanitizer, whose slower code widened the window).
 */
#ifndef TALLY_STATS_H
#define TALLY_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "config.h"

/* The largest batch counted by size: --max-batch's most. */
#define STATS_MAX_BATCH TALLYD_MAX_BATCH

typedef struct {
    uint64_t count, ns;
} stats_duration;

/* The statistics' values: what a snapshot copies out. */
typedef struct {
    uint64_t inference_count, execution_count, last_inference_ms;
    stats_duration success, fail, queue, compute_input, compute_infer,
        compute_output;
    struct {
        stats_duration compute_input, compute_infer, compute_output;
    } batch[STATS_MAX_BATCH + 1]; /* [b]: executions of batch size b */
} stats_view;

typedef struct {
    uv_mutex_t mu;
    stats_view v; /* under mu */
} model_stats;

/* Before any thread counts. */
void stats_init(model_stats *m);

/* A consistent copy of the values, for the renderers (REST's JSON below,
 * gRPC's ModelStatistics). */
void stats_snapshot(model_stats *m, stats_view *out);

/* A request that ended: ok, with its whole time and its steps (the steps
 * are added only for successes). */
void stats_request(model_stats *m, bool ok, uint64_t total_ns,
                   uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns,
                   uint64_t output_ns);

/* One execution that served `batch` requests: gathering their inputs,
 * the scan, and scattering the outputs. */
void stats_execution(model_stats *m, unsigned batch, uint64_t input_ns,
                     uint64_t infer_ns, uint64_t output_ns);

/* Renders {"model_stats": [...]} for the model name and version: a
 * malloc'd string (length in *len), or NULL when out of memory. The names
 * are written as they are (they must need no escaping). */
char *stats_render(model_stats *m, const char *name, const char *version,
                   size_t *len);

#endif
