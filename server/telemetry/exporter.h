/*
 * exporter.h - sends sampled requests' spans to an OpenTelemetry collector
 * over OTLP/HTTP (protobuf), from a thread of its own.
 *
 * The transports hand it finished requests through its trace_sink
 * (trace.h): submit copies the record into a bounded queue and returns; a
 * full queue drops the record and counts it. A request never waits for
 * the exporter, whatever the collector does. The thread wakes every
 * interval (or when a batch's worth is queued), encodes up to a batch of
 * records (telemetry/otlp.h) and POSTs them with libcurl to the endpoint,
 * reusing its connection; an answer other than 2xx, a timeout or a
 * refused connection counts the batch's spans as failed, and they are
 * not sent again (the collector's own logs say why). Counters go to
 * /metrics.
 *
 * Ownership: the exporter is its creator's, freed by otlp_exporter_stop().
 * Threading: submit from any thread; start and stop from the loop thread
 * (tallyd.c's main); the counters (otlp_exporter_render_metrics) from
 * any thread: an HTTP thread renders /metrics.
 */
#ifndef TALLY_EXPORTER_H
#define TALLY_EXPORTER_H

#include <stddef.h>

#include "textbuf.h"
#include "trace.h"

typedef struct otlp_exporter otlp_exporter;

typedef struct {
    const char *url;     /* the collector's traces URL: .../v1/traces */
    const char *service; /* service.name */
    const char *version; /* service.version */
    size_t queue_max;    /* records waiting, at most */
    size_t batch_max;    /* records one POST carries, at most */
    unsigned interval_ms; /* the longest a record waits to be sent */
    unsigned timeout_ms;  /* one POST's limit */
} otlp_options;

/* Starts the thread. NULL with msg when it cannot (a URL libcurl does not
 * take, memory). */
otlp_exporter *otlp_exporter_start(const otlp_options *o, char *msg,
                                   size_t msglen);

/* What the transports submit to. */
trace_sink *otlp_exporter_sink(otlp_exporter *e);

/* Appends the exporter's counters in Prometheus' text format. */
void otlp_exporter_render_metrics(otlp_exporter *e, textbuf *o);

/* Sends what is queued, for at most one POST's timeout in all and until a
 * batch fails (the rest is counted as dropped), stops the thread and frees
 * the exporter. After the transports have stopped. */
void otlp_exporter_stop(otlp_exporter *e);

#endif
