/*
 * metrics.h - counters and histograms for GET /metrics.
 *
 * Everything is a relaxed atomic, bumped from whichever thread sees the
 * event (HTTP threads at the end of a request, workers for device time)
 * and read when /metrics is rendered in Prometheus' text format.
 *
 * Threading: any thread (relaxed atomics); metrics_init() before the
 * threads start.
 */
#ifndef TALLY_METRICS_H
#define TALLY_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"
#include "textbuf.h"

/* A counter's value and its increase: relaxed atomics, for counts that
 * are only shown (no other memory is ordered by them). */
static inline unsigned long long counter_get(const atomic_ullong *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static inline void counter_add(atomic_ullong *a, unsigned long long n)
{
    atomic_fetch_add_explicit(a, n, memory_order_relaxed);
}

/* Status codes counted by name; others fall into "other". */
#define METRIC_STATUSES(X)                                                     \
    X(200) X(400) X(401) X(404) X(405) X(408) X(413) X(415) X(500) X(503) X(504)
#define METRIC_NSTATUS 12 /* the list plus "other" */
#define METRIC_NBUCKETS 17
/* The most route labels (the route table names them: http/router.h) */
#define METRIC_MAX_LABELS 16
/* Slots for a request's code: an HTTP status's index in the list above
 * (plus "other"), or a gRPC status code (0..16). */
#define METRIC_NCODES 17

/* The front doors, the protocol label of every request metric. */
typedef enum { METRIC_HTTP, METRIC_GRPC, METRIC_NPROTOCOLS } metric_protocol;

typedef struct {
    atomic_ullong bucket[METRIC_NBUCKETS]; /* cumulative at render time */
    atomic_ullong sum_ns, count;
} histogram;

/* The front door's counters: requests by route label and status, their
 * failures by status name, their times, bytes, and the connections. The
 * scheduler keeps its own (scheduler.h), and /metrics gathers the sections. */
typedef struct {
    const char *labels[METRIC_MAX_LABELS]; /* borrowed: "native", ... */
    unsigned nlabels;
    atomic_ullong requests[METRIC_NPROTOCOLS][METRIC_MAX_LABELS][METRIC_NCODES];
    atomic_ullong failures[METRIC_NPROTOCOLS][METRIC_MAX_LABELS][STATUS_COUNT];
    histogram total[METRIC_NPROTOCOLS][METRIC_MAX_LABELS];
    atomic_ullong bytes_in, bytes_out;
    atomic_ullong access_log_dropped; /* over the cap (reqlog.h) */
} metrics;

/* Zeroes m and names its route labels (borrowed: they must outlive m; at
 * most METRIC_MAX_LABELS; label i is what a route row's `label` i counts
 * under). */
void metrics_init(metrics *m, const char *const *labels, unsigned nlabels);

void metrics_observe(histogram *h, uint64_t ns);

/* One finished request of protocol p, under route label `label`, with
 * code `code` (an HTTP status, or a gRPC status code). st is STATUS_OK
 * for successes. */
void metrics_request(metrics *m, metric_protocol p, unsigned label, int code,
                     status_code st, uint64_t total_ns, uint64_t bytes_out);

/* Appends the build line and the requests' section of the text
 * exposition, with the requests in flight (state the caller reads). */
void metrics_render(metrics *m, const char *device, const char *version,
                    long long inflight, textbuf *o);

/* Appends the "# HELP" and "# TYPE" lines of the family name (type:
 * "counter", "gauge" or "histogram"); the caller appends its samples. */
void metrics_family(textbuf *o, const char *name, const char *type,
                    const char *help);

/* Appends a family of one sample without labels: its two lines, then
 * "name value", the value printed by fmt ("%llu", "%.9f"). */
void metrics_one(textbuf *o, const char *name, const char *type,
                 const char *help, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Appends a histogram in the text format (labels "" for none). */
void metrics_put_histogram(textbuf *o, const char *name, const char *labels,
                           histogram *h);

/* Escapes a label value (backslash, quote, newline) into out. */
void metrics_escape_label(const char *in, char *out, size_t len);

#endif
