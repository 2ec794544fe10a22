/*
 * counters.c - the transport's section of /metrics (counters.h).
 */
#include "counters.h"

static unsigned long long load(atomic_ullong *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

void http_counters_render(http_counters *c, long long open_connections,
                          textbuf *o)
{
    textbuf_put(o,
                "# HELP tally_connections_opened_total TCP connections "
                "accepted.\n# TYPE tally_connections_opened_total counter\n"
                "tally_connections_opened_total %llu\n",
                load(&c->opened));
    textbuf_put(
        o,
        "# HELP tally_open_connections TCP connections open now.\n"
        "# TYPE tally_open_connections gauge\ntally_open_connections %lld\n",
        open_connections);
    textbuf_put(o,
                "# HELP tally_connections_refused_total Connections closed "
                "as they came, at --max-connections or "
                "--max-client-connections.\n"
                "# TYPE tally_connections_refused_total counter\n"
                "tally_connections_refused_total %llu\n",
                load(&c->refused));
    textbuf_put(o,
                "# HELP tally_connections_timed_out_total Connections closed "
                "for not delivering a whole request in time "
                "(--idle-timeout, --request-timeout).\n"
                "# TYPE tally_connections_timed_out_total counter\n"
                "tally_connections_timed_out_total %llu\n",
                load(&c->timed_out));
}
