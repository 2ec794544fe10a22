/*
 * counters.c - the transport's section of /metrics (counters.h).
 */
#include "counters.h"
#include "metrics.h"

void http_counters_render(http_counters *c, long long open_connections,
                          textbuf *o)
{
    metrics_one(o, "tally_connections_opened_total", "counter",
                "TCP connections accepted.", "%llu", counter_get(&c->opened));
    metrics_one(o, "tally_open_connections", "gauge",
                "TCP connections open now.", "%lld", open_connections);
    metrics_one(o, "tally_connections_refused_total", "counter",
                "Connections closed as they came, at --max-connections or "
                "--max-client-connections.",
                "%llu", counter_get(&c->refused));
    metrics_one(o, "tally_connections_timed_out_total", "counter",
                "Connections closed for not delivering a whole request in "
                "time (--idle-timeout, --request-timeout).",
                "%llu", counter_get(&c->timed_out));
}
