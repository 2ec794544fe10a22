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
 * Threading: every function may be called from any thread (relaxed
 * atomics); a rendering may mix counts from just before and just after a
 * concurrent update.
 */
#ifndef TALLY_STATS_H
#define TALLY_STATS_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The largest batch counted by size; larger ones count here. */
#define STATS_MAX_BATCH 64

typedef struct {
    atomic_ullong count, ns;
} stats_duration;

typedef struct {
    atomic_ullong inference_count, execution_count, last_inference_ms;
    stats_duration success, fail, queue, compute_input, compute_infer,
        compute_output;
    struct {
        stats_duration compute_input, compute_infer, compute_output;
    } batch[STATS_MAX_BATCH + 1]; /* [b]: executions of batch size b */
} model_stats;

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
