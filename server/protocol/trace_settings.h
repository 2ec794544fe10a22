/*
 * trace_settings.h - the JSON of Triton's trace extension over REST, as far as
 * it maps onto tally's tracing (OpenTelemetry spans, sampled by ratio):
 *
 *   GET  /v2/trace/setting   {"trace_level": ["TIMESTAMPS"], "trace_rate":
 *                             "100", "trace_count": "-1", "log_frequency":
 *                             "0", "trace_file": "", "trace_mode":
 *                             "opentelemetry", "sample_ratio": 0.01}
 *   POST /v2/trace/setting   any of those members, to change them; null
 *                            puts a member back to tallyd's start-up value
 *
 * trace_rate N samples one new trace in N (ratio 1/N); trace_level ["OFF"]
 * samples none and ["TIMESTAMPS"] turns it back on ("TENSORS" is refused:
 * spans carry no tensors). sample_ratio, tally's own, sets the ratio
 * exactly. trace_count (-1), log_frequency (0), trace_file ("") and
 * trace_mode ("opentelemetry") only take the value they have: tally keeps
 * no trace file and has no count limit.
 *
 * Threading: none of its own; any thread.
 */
#ifndef TALLY_TRACE_SETTINGS_H
#define TALLY_TRACE_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most bytes a settings body may have. */
#define TRACE_JSON_BODY_MAX 4096

typedef struct {
    bool on;      /* trace_level is not OFF */
    double ratio; /* of new traces sampled while on, in (0, 1] */
} trace_setting;

/* Applies a POST body to *t (defaults: what null puts back). False with
 * a message, and *t untouched, for anything it cannot apply. */
bool trace_settings_update(const uint8_t *body, size_t len, trace_setting *t,
                       const trace_setting *defaults, char *msg,
                       size_t msglen);

/* The settings' JSON: malloc'd, NULL when out of memory. */
char *trace_settings_render(const trace_setting *t);

#endif
