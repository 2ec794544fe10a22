/*
 * metrics.h - counters and histograms for GET /metrics.
 *
 * Everything is a relaxed atomic, bumped from whichever thread sees the
 * event (HTTP threads at the end of a request, workers for device time)
 * and read when /metrics is rendered in Prometheus' text format.
 */
#ifndef TALLY_METRICS_H
#define TALLY_METRICS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"

typedef enum {
    ROUTE_NATIVE,
    ROUTE_INFER,
    ROUTE_METADATA,
    ROUTE_HEALTH,
    ROUTE_METRICS,
    ROUTE_OTHER,
    NROUTES
} route_id;

/* Status codes counted by name; others fall into "other". */
#define METRIC_STATUSES(X)                                                     \
    X(200) X(400) X(401) X(404) X(405) X(408) X(413) X(415) X(500) X(503) X(504)
#define METRIC_NSTATUS 12 /* the list plus "other" */
#define METRIC_NBUCKETS 17
#define METRIC_NERRORS 32 /* room for every eng_err */
_Static_assert(ENG_NERRORS <= METRIC_NERRORS,
               "metrics count failures by eng_err: make room");
#define METRIC_MAX_WORKERS 64
#define METRIC_NBATCH 8 /* le 1, 2, 4, 8, 16, 32, 64, +Inf */
#define METRIC_MAX_DEVICES 16

typedef struct {
    atomic_ullong bucket[METRIC_NBUCKETS]; /* cumulative at render time */
    atomic_ullong sum_ns, count;
} histogram;

typedef struct {
    atomic_ullong requests[NROUTES][METRIC_NSTATUS];
    atomic_ullong failures[NROUTES][METRIC_NERRORS];
    histogram total[NROUTES], queue, compute;
    atomic_ullong bytes_in, bytes_out;
    atomic_llong inflight;
    /* jobs device workers hold: taken from the queue, not yet finished */
    atomic_llong running;
    atomic_ullong connections_opened; /* keep-alive shows as few of these */
    atomic_llong connections_open;
    /* connections closed at once at --max-connections or
     * --max-client-connections, and closed for not delivering a request
     * within --idle-timeout / --request-timeout */
    atomic_ullong connections_refused, connections_timed_out;
    atomic_ullong busy_ns[METRIC_MAX_WORKERS];
    /* the devices (names borrowed, set before the workers start), which
     * one each worker runs on, and what each device did */
    const char *device_names[METRIC_MAX_DEVICES];
    unsigned ndevices, worker_device[METRIC_MAX_WORKERS];
    atomic_ullong device_jobs[METRIC_MAX_DEVICES],
        device_errors[METRIC_MAX_DEVICES];
    atomic_bool device_down[METRIC_MAX_DEVICES];
    /* jobs the host backend ran after a device refused their launch, and
     * whether it runs every job (every device has left the pool) */
    atomic_ullong host_reruns;
    atomic_bool host_fallback;
    /* launches by how many requests they served: 1, 2, 3-4, 5-8, ... */
    atomic_ullong batches[METRIC_NBATCH], batched_jobs;
    /* requests whose client left while their job waited / ran */
    atomic_ullong cancelled_queued, cancelled_running;
    /* access lines over --access-log-max-per-s, not written */
    atomic_ullong access_log_dropped;
    unsigned workers;
} metrics;

void metrics_init(metrics *m, unsigned workers);

void metrics_observe(histogram *h, uint64_t ns);

/* Names the devices (borrowed: they must outlive m) and which device each
 * worker runs on (worker w: device w % n). Before the workers start. */
void metrics_devices(metrics *m, const char *const *names, unsigned n);

/* One launch (or inline sum) that served n requests. */
void metrics_batch(metrics *m, size_t n);

/* One finished request. err is ENG_E_OK for successes. */
void metrics_request(metrics *m, route_id r, int status, eng_err err,
                     uint64_t total_ns, uint64_t bytes_in, uint64_t bytes_out);

/* Renders the text exposition into a malloc'd string (length in *len);
 * NULL when out of memory. */
char *metrics_render(metrics *m, size_t queue_depth, const char *device,
                     const char *version, size_t *len);

const char *route_name(route_id r);

#endif
