/*
 * grpc_counters.c - the gRPC door's section of /metrics (grpc.h's
 * grpc_render_metrics): its connections, calls, resets and bytes. The
 * requests' own counters are every door's (core/metrics.h).
 */

#include "grpc_int.h"
#include "metrics.h"

void grpc_render_metrics(grpc_transport *t, textbuf *o)
{
    grpc_render_metrics_n(t, 1, o);
}

void grpc_render_metrics_n(grpc_transport *t, unsigned n, textbuf *o)
{
    /* each loop's own counters, summed: nothing is shared on the calls'
     * path */
    struct {
        unsigned long long opened, refused, calls, resets_received,
            abuse_closed, bytes_in, bytes_out;
    } sum = {0};
    long long open = 0;
    for (unsigned i = 0; i < n; i++) {
        grpc_counters *c = &t[i].c;
        sum.opened += counter_get(&c->opened);
        sum.refused += counter_get(&c->refused);
        sum.calls += counter_get(&c->calls);
        sum.resets_received += counter_get(&c->resets_received);
        sum.abuse_closed += counter_get(&c->abuse_closed);
        sum.bytes_in += counter_get(&c->bytes_in);
        sum.bytes_out += counter_get(&c->bytes_out);
        open += grpc_open_connections(&t[i]);
    }
    metrics_one(o, "tally_grpc_connections_total", "counter",
                "gRPC connections accepted.", "%llu", sum.opened);
    metrics_one(o, "tally_grpc_open_connections", "gauge",
                "gRPC connections open now.", "%lld", open);
    metrics_one(o, "tally_grpc_connections_refused_total", "counter",
                "gRPC connections closed at once (--max-connections, "
                "draining).",
                "%llu", sum.refused);
    metrics_one(o, "tally_grpc_calls_total", "counter",
                "gRPC request messages received whole.", "%llu", sum.calls);
    metrics_one(o, "tally_grpc_resets_received_total", "counter",
                "RST_STREAM frames clients sent.", "%llu", sum.resets_received);
    metrics_one(o, "tally_grpc_abuse_closed_total", "counter",
                "gRPC connections ended for floods or protocol errors.", "%llu",
                sum.abuse_closed);
    metrics_one(o, "tally_grpc_received_bytes_total", "counter",
                "Bytes read from gRPC connections.", "%llu", sum.bytes_in);
    metrics_one(o, "tally_grpc_sent_bytes_total", "counter",
                "Bytes written to gRPC connections.", "%llu", sum.bytes_out);
    metrics_family(o, "tally_grpc_loop_connections_total", "counter",
                   "gRPC connections each loop took (--grpc-threads; the "
                   "acceptor deals them out in turn).");
    for (unsigned i = 0; i < n; i++)
        textbuf_put(o, "tally_grpc_loop_connections_total{loop=\"%u\"} %llu\n",
                    i, counter_get(&t[i].c.opened));
}
