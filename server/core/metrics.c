/*
 * metrics.c - counting and the Prometheus text format.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrics.h"
#include "textbuf.h"

/* Upper bounds of the latency buckets, in seconds. */
static const double bounds[METRIC_NBUCKETS - 1] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
    0.05,   0.1,     0.25,   0.5,   1,      2.5,   5,    10};

static const int statuses[] = {
#define METRIC_STATUS_VALUE(s) s,
    METRIC_STATUSES(METRIC_STATUS_VALUE)
#undef METRIC_STATUS_VALUE
};
_Static_assert(sizeof statuses / sizeof statuses[0] == METRIC_NSTATUS - 1,
               "METRIC_NSTATUS is the status list plus \"other\"");

const char *route_name(route_id r)
{
    switch (r) {
    case ROUTE_NATIVE: return "native";
    case ROUTE_INFER: return "infer";
    case ROUTE_METADATA: return "metadata";
    case ROUTE_HEALTH: return "health";
    case ROUTE_METRICS: return "metrics";
    case ROUTE_OTHER: return "other";
    case NROUTES: break;
    }
    return "other";
}

void metrics_init(metrics *m, unsigned workers)
{
    memset(m, 0, sizeof *m);
    m->workers = workers < METRIC_MAX_WORKERS ? workers : METRIC_MAX_WORKERS;
}

void metrics_observe(histogram *h, uint64_t ns)
{
    double s = (double)ns * 1e-9;
    size_t b = 0;
    while (b < METRIC_NBUCKETS - 1 && s > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

void metrics_devices(metrics *m, const char *const *names, unsigned n)
{
    m->ndevices = n < METRIC_MAX_DEVICES ? n : METRIC_MAX_DEVICES;
    for (unsigned d = 0; d < m->ndevices; d++)
        m->device_names[d] = names[d];
    for (unsigned w = 0; w < METRIC_MAX_WORKERS; w++)
        m->worker_device[w] = m->ndevices ? w % m->ndevices : 0;
}

void metrics_batch(metrics *m, size_t n)
{
    size_t b = 0;
    while (b < METRIC_NBATCH - 1 && n > ((size_t)1 << b))
        b++;
    atomic_fetch_add_explicit(&m->batches[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->batched_jobs, n, memory_order_relaxed);
}

void metrics_request(metrics *m, route_id r, int status, eng_err err,
                     uint64_t total_ns, uint64_t bytes_in, uint64_t bytes_out)
{
    size_t si = METRIC_NSTATUS - 1;
    for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
        if (statuses[i] == status)
            si = i;
    atomic_fetch_add_explicit(&m->requests[r][si], 1, memory_order_relaxed);
    if (err != ENG_E_OK && (unsigned)err < METRIC_NERRORS)
        atomic_fetch_add_explicit(&m->failures[r][err], 1,
                                  memory_order_relaxed);
    metrics_observe(&m->total[r], total_ns);
    atomic_fetch_add_explicit(&m->bytes_in, bytes_in, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->bytes_out, bytes_out, memory_order_relaxed);
}

static unsigned long long load(atomic_ullong *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static void put_histogram(textbuf *o, const char *name, const char *labels,
                          histogram *h)
{
    unsigned long long cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (size_t b = 0; b < METRIC_NBUCKETS; b++) {
        cum += load(&h->bucket[b]);
        if (b < METRIC_NBUCKETS - 1)
            textbuf_put(o, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep,
                        bounds[b], cum);
        else
            textbuf_put(o, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", name, labels,
                        sep, cum);
    }
    /* no braces at all when there are no labels */
    const char *open = labels[0] ? "{" : "", *close = labels[0] ? "}" : "";
    textbuf_put(o, "%s_sum%s%s%s %.9f\n", name, open, labels, close,
                (double)load(&h->sum_ns) * 1e-9);
    textbuf_put(o, "%s_count%s%s%s %llu\n", name, open, labels, close,
                load(&h->count));
}

/* Escapes a label value (backslash, quote, newline). */
static void escape_label(const char *in, char *outb, size_t len)
{
    size_t n = 0;
    for (; *in != '\0' && n + 2 < len; in++) {
        if (*in == '\\' || *in == '"') {
            outb[n++] = '\\';
            outb[n++] = *in;
        } else if (*in == '\n') {
            outb[n++] = '\\';
            outb[n++] = 'n';
        } else {
            outb[n++] = *in;
        }
    }
    outb[n] = '\0';
}

char *metrics_render(metrics *m, size_t queue_depth, const char *device,
                     const char *version, size_t *len)
{
    textbuf o;
    textbuf_init(&o, 8192);
    char dev[512];
    escape_label(device, dev, sizeof dev);

    textbuf_put(
        &o,
        "# HELP tally_build_info The running tallyd: version and device.\n"
        "# TYPE tally_build_info gauge\n"
        "tally_build_info{version=\"%s\",device=\"%s\"} 1\n",
        version, dev);

    textbuf_put(&o,
                "# HELP tally_requests_total HTTP requests by route and status "
                "code.\n# TYPE tally_requests_total counter\n");
    for (int r = 0; r < NROUTES; r++)
        for (size_t s = 0; s < METRIC_NSTATUS; s++) {
            unsigned long long v = load(&m->requests[r][s]);
            if (v == 0)
                continue;
            if (s < METRIC_NSTATUS - 1)
                textbuf_put(
                    &o, "tally_requests_total{route=\"%s\",code=\"%d\"} %llu\n",
                    route_name((route_id)r), statuses[s], v);
            else
                textbuf_put(&o,
                            "tally_requests_total{route=\"%s\",code=\"other\"} "
                            "%llu\n",
                            route_name((route_id)r), v);
        }

    textbuf_put(&o,
                "# HELP tally_request_failures_total Failed requests by route "
                "and reason.\n# TYPE tally_request_failures_total counter\n");
    for (int r = 0; r < NROUTES; r++)
        for (int e = 1; e < METRIC_NERRORS; e++) {
            unsigned long long v = load(&m->failures[r][e]);
            if (v != 0)
                textbuf_put(&o,
                            "tally_request_failures_total{route=\"%s\","
                            "reason=\"%s\"} %llu\n",
                            route_name((route_id)r), eng_err_name((eng_err)e),
                            v);
        }

    textbuf_put(&o,
                "# HELP tally_request_duration_seconds Time from the request's "
                "first byte to its response, by route.\n"
                "# TYPE tally_request_duration_seconds histogram\n");
    for (int r = 0; r < NROUTES; r++) {
        if (load(&m->total[r].count) == 0)
            continue;
        char labels[64];
        snprintf(labels, sizeof labels, "route=\"%s\"",
                 route_name((route_id)r));
        put_histogram(&o, "tally_request_duration_seconds", labels,
                      &m->total[r]);
    }
    textbuf_put(&o,
                "# HELP tally_queue_duration_seconds Time jobs waited for a "
                "worker.\n# TYPE tally_queue_duration_seconds histogram\n");
    put_histogram(&o, "tally_queue_duration_seconds", "", &m->queue);
    textbuf_put(
        &o, "# HELP tally_compute_duration_seconds Time a worker spent on a "
            "job (data movement and kernel).\n"
            "# TYPE tally_compute_duration_seconds histogram\n");
    put_histogram(&o, "tally_compute_duration_seconds", "", &m->compute);

    textbuf_put(&o,
                "# HELP tally_queue_depth Jobs waiting for a worker.\n"
                "# TYPE tally_queue_depth gauge\ntally_queue_depth %zu\n",
                queue_depth);
    textbuf_put(&o,
                "# HELP tally_running_jobs Jobs device workers hold: taken "
                "from the queue, not yet finished.\n"
                "# TYPE tally_running_jobs gauge\ntally_running_jobs %lld\n",
                (long long)atomic_load(&m->running));
    textbuf_put(&o,
                "# HELP tally_inflight_requests Requests being read, queued, "
                "computed or answered.\n# TYPE tally_inflight_requests gauge\n"
                "tally_inflight_requests %lld\n",
                (long long)atomic_load(&m->inflight));
    textbuf_put(&o,
                "# HELP tally_connections_opened_total TCP connections "
                "accepted.\n# TYPE tally_connections_opened_total counter\n"
                "tally_connections_opened_total %llu\n",
                load(&m->connections_opened));
    textbuf_put(
        &o,
        "# HELP tally_open_connections TCP connections open now.\n"
        "# TYPE tally_open_connections gauge\ntally_open_connections %lld\n",
        (long long)atomic_load(&m->connections_open));
    textbuf_put(&o,
                "# HELP tally_connections_refused_total Connections closed "
                "as they came, at --max-connections or "
                "--max-client-connections.\n"
                "# TYPE tally_connections_refused_total counter\n"
                "tally_connections_refused_total %llu\n",
                load(&m->connections_refused));
    textbuf_put(&o,
                "# HELP tally_connections_timed_out_total Connections closed "
                "for not delivering a whole request in time "
                "(--idle-timeout, --request-timeout).\n"
                "# TYPE tally_connections_timed_out_total counter\n"
                "tally_connections_timed_out_total %llu\n",
                load(&m->connections_timed_out));
    textbuf_put(&o,
                "# HELP tally_access_log_dropped_total Access lines left out "
                "over --access-log-max-per-s.\n"
                "# TYPE tally_access_log_dropped_total counter\n"
                "tally_access_log_dropped_total %llu\n",
                load(&m->access_log_dropped));
    textbuf_put(&o,
                "# HELP tally_received_bytes_total Request body bytes "
                "received.\n# TYPE tally_received_bytes_total counter\n"
                "tally_received_bytes_total %llu\n",
                load(&m->bytes_in));
    textbuf_put(&o,
                "# HELP tally_sent_bytes_total Response body bytes sent.\n"
                "# TYPE tally_sent_bytes_total counter\n"
                "tally_sent_bytes_total %llu\n",
                load(&m->bytes_out));
    textbuf_put(&o, "# HELP tally_batch_size Requests served by one launch "
                    "(dynamic batching; inline sums count as 1).\n"
                    "# TYPE tally_batch_size histogram\n");
    unsigned long long cum = 0, launches = 0;
    for (size_t b = 0; b < METRIC_NBATCH; b++)
        launches += load(&m->batches[b]);
    for (size_t b = 0; b < METRIC_NBATCH; b++) {
        cum += load(&m->batches[b]);
        if (b < METRIC_NBATCH - 1)
            textbuf_put(&o, "tally_batch_size_bucket{le=\"%u\"} %llu\n",
                        1u << b, cum);
        else
            textbuf_put(&o, "tally_batch_size_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    textbuf_put(&o, "tally_batch_size_sum %llu\ntally_batch_size_count %llu\n",
                load(&m->batched_jobs), launches);
    textbuf_put(&o,
                "# HELP tally_cancelled_total Requests whose client closed "
                "the connection while their job waited (dropped unrun) or "
                "ran (answer discarded).\n"
                "# TYPE tally_cancelled_total counter\n"
                "tally_cancelled_total{when=\"queued\"} %llu\n"
                "tally_cancelled_total{when=\"running\"} %llu\n",
                load(&m->cancelled_queued), load(&m->cancelled_running));
    /* each device's label: its own name, or the whole description when
     * none was set */
    char names[METRIC_MAX_DEVICES][512];
    unsigned nd = m->ndevices ? m->ndevices : 1;
    for (unsigned d = 0; d < nd; d++)
        escape_label(m->ndevices ? m->device_names[d] : device, names[d],
                     sizeof names[d]);
    textbuf_put(
        &o, "# HELP tally_device_busy_seconds_total Time each device worker "
            "spent computing.\n# TYPE tally_device_busy_seconds_total "
            "counter\n");
    for (unsigned w = 0; w < m->workers; w++)
        textbuf_put(
            &o,
            "tally_device_busy_seconds_total{worker=\"%u\",device=\"%s\"} "
            "%.9f\n",
            w, names[m->ndevices ? m->worker_device[w] : 0],
            (double)load(&m->busy_ns[w]) * 1e-9);
    textbuf_put(&o, "# HELP tally_device_jobs_total Jobs each device ran.\n"
                    "# TYPE tally_device_jobs_total counter\n");
    for (unsigned d = 0; d < nd; d++)
        textbuf_put(&o, "tally_device_jobs_total{device=\"%s\"} %llu\n",
                    names[d], load(&m->device_jobs[d]));
    textbuf_put(&o, "# HELP tally_device_errors_total Launches that failed on "
                    "each device.\n# TYPE tally_device_errors_total counter\n");
    for (unsigned d = 0; d < nd; d++)
        textbuf_put(&o, "tally_device_errors_total{device=\"%s\"} %llu\n",
                    names[d], load(&m->device_errors[d]));
    textbuf_put(&o,
                "# HELP tally_device_up Whether each device is in the pool (0 "
                "once --device-max-failures launches in a row failed).\n"
                "# TYPE tally_device_up gauge\n");
    for (unsigned d = 0; d < nd; d++)
        textbuf_put(&o, "tally_device_up{device=\"%s\"} %d\n", names[d],
                    atomic_load(&m->device_down[d]) ? 0 : 1);
    textbuf_put(&o,
                "# HELP tally_host_reruns_total Jobs a device failed to run "
                "(its launch refused) that the host backend ran instead.\n"
                "# TYPE tally_host_reruns_total counter\n"
                "tally_host_reruns_total %llu\n"
                "# HELP tally_host_fallback Whether every device has left "
                "the pool and the host backend runs every job.\n"
                "# TYPE tally_host_fallback gauge\ntally_host_fallback %d\n",
                load(&m->host_reruns), atomic_load(&m->host_fallback) ? 1 : 0);
    return textbuf_take(&o, len);
}
