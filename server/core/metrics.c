/*
 * metrics.c - the front door's counters, and the Prometheus text format's
 * helpers that every section uses.
 */
#include <stdarg.h>
#include <stdio.h>
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

void metrics_init(metrics *m, const char *const *labels, unsigned nlabels)
{
    memset(m, 0, sizeof *m);
    m->nlabels = nlabels < METRIC_MAX_LABELS ? nlabels : METRIC_MAX_LABELS;
    for (unsigned l = 0; l < m->nlabels; l++)
        m->labels[l] = labels[l];
}

void metrics_observe(histogram *h, uint64_t ns)
{
    double s = (double)ns * 1e-9;
    size_t b = 0;
    while (b < METRIC_NBUCKETS - 1 && s > bounds[b])
        b++;
    counter_add(&h->bucket[b], 1);
    counter_add(&h->sum_ns, ns);
    counter_add(&h->count, 1);
}

/* gRPC's status codes by number, for the code label. */
static const char *const grpc_codes[METRIC_NCODES] = {
    "OK",        "CANCELLED",          "UNKNOWN",          "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED", "NOT_FOUND",  "ALREADY_EXISTS",   "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
    "UNIMPLEMENTED", "INTERNAL",       "UNAVAILABLE",      "DATA_LOSS",
    "UNAUTHENTICATED"};
static const char *const protocols[METRIC_NPROTOCOLS] = {"http", "grpc"};

void metrics_request(metrics *m, metric_protocol p, unsigned label, int code,
                     status_code st, uint64_t total_ns, uint64_t bytes_out)
{
    if (label >= m->nlabels)
        label = m->nlabels ? m->nlabels - 1 : 0;
    if ((unsigned)p >= METRIC_NPROTOCOLS)
        p = METRIC_HTTP;
    size_t si = METRIC_NSTATUS - 1;
    if (p == METRIC_GRPC)
        si = code >= 0 && code < METRIC_NCODES ? (size_t)code : 2; /* UNKNOWN */
    else
        for (size_t i = 0; i < sizeof statuses / sizeof statuses[0]; i++)
            if (statuses[i] == code)
                si = i;
    counter_add(&m->requests[p][label][si], 1);
    if (st != STATUS_OK && (unsigned)st < STATUS_COUNT)
        counter_add(&m->failures[p][label][st], 1);
    metrics_observe(&m->total[p][label], total_ns);
    counter_add(&m->bytes_out, bytes_out);
}

void metrics_put_histogram(textbuf *o, const char *name, const char *labels,
                          histogram *h)
{
    unsigned long long cum = 0;
    const char *sep = labels[0] ? "," : "";
    for (size_t b = 0; b < METRIC_NBUCKETS; b++) {
        cum += counter_get(&h->bucket[b]);
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
                (double)counter_get(&h->sum_ns) * 1e-9);
    textbuf_put(o, "%s_count%s%s%s %llu\n", name, open, labels, close,
                counter_get(&h->count));
}

void metrics_family(textbuf *o, const char *name, const char *type,
                    const char *help)
{
    textbuf_put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

void metrics_one(textbuf *o, const char *name, const char *type,
                 const char *help, const char *fmt, ...)
{
    metrics_family(o, name, type, help);
    textbuf_put(o, "%s ", name);
    va_list ap;
    va_start(ap, fmt);
    textbuf_vput(o, fmt, ap);
    va_end(ap);
    textbuf_put(o, "\n");
}

void metrics_escape_label(const char *in, char *outb, size_t len)
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

static const char *label_name(const metrics *m, unsigned l)
{
    return l < m->nlabels && m->labels[l] != NULL ? m->labels[l] : "other";
}

void metrics_render(metrics *m, const char *device, const char *version,
                    long long inflight, textbuf *o)
{
    char dev[512];
    metrics_escape_label(device, dev, sizeof dev);

    metrics_family(o, "tally_build_info", "gauge",
                   "The running tallyd: version and device.");
    textbuf_put(o, "tally_build_info{version=\"%s\",device=\"%s\"} 1\n",
                version, dev);

    metrics_family(o, "tally_requests_total", "counter",
                   "Requests by protocol (http, grpc), route and status code "
                   "(HTTP status, or gRPC code name).");
    for (unsigned p = 0; p < METRIC_NPROTOCOLS; p++)
        for (unsigned r = 0; r < m->nlabels; r++)
            for (size_t s = 0; s < METRIC_NCODES; s++) {
                unsigned long long v = counter_get(&m->requests[p][r][s]);
                if (v == 0)
                    continue;
                char code[24];
                if (p == METRIC_GRPC)
                    snprintf(code, sizeof code, "%s", grpc_codes[s]);
                else if (s < METRIC_NSTATUS - 1)
                    snprintf(code, sizeof code, "%d", statuses[s]);
                else
                    snprintf(code, sizeof code, "other");
                textbuf_put(o,
                            "tally_requests_total{protocol=\"%s\",route="
                            "\"%s\",code=\"%s\"} %llu\n",
                            protocols[p], label_name(m, r), code, v);
            }

    metrics_family(o, "tally_request_failures_total", "counter",
                   "Failed requests by protocol, route and reason.");
    for (unsigned p = 0; p < METRIC_NPROTOCOLS; p++)
        for (unsigned r = 0; r < m->nlabels; r++)
            for (int e = 1; e < STATUS_COUNT; e++) {
                unsigned long long v = counter_get(&m->failures[p][r][e]);
                if (v != 0)
                    textbuf_put(o,
                                "tally_request_failures_total{protocol=\"%s\","
                                "route=\"%s\",reason=\"%s\"} %llu\n",
                                protocols[p], label_name(m, r),
                                status_name((status_code)e), v);
            }

    metrics_family(o, "tally_request_duration_seconds", "histogram",
                   "Time from the request's first byte to its response, by "
                   "protocol and route.");
    for (unsigned p = 0; p < METRIC_NPROTOCOLS; p++)
        for (unsigned r = 0; r < m->nlabels; r++) {
            if (counter_get(&m->total[p][r].count) == 0)
                continue;
            char labels[80];
            snprintf(labels, sizeof labels, "protocol=\"%s\",route=\"%s\"",
                     protocols[p], label_name(m, r));
            metrics_put_histogram(o, "tally_request_duration_seconds", labels,
                                  &m->total[p][r]);
        }
    metrics_one(o, "tally_inflight_requests", "gauge",
                "Requests being read, queued, computed or answered.", "%lld",
                inflight);
    metrics_one(o, "tally_received_bytes_total", "counter",
                "Request body bytes received.", "%llu",
                counter_get(&m->bytes_in));
    metrics_one(o, "tally_access_log_dropped_total", "counter",
                "Access lines left out over --access-log-max-per-s, of every "
                "door.",
                "%llu", counter_get(&m->access_log_dropped));
    metrics_one(o, "tally_sent_bytes_total", "counter",
                "Response body bytes sent.", "%llu",
                counter_get(&m->bytes_out));
}
