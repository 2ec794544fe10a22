/*
 * grpc_counters.c - the gRPC door's section of /metrics (grpc.h's
 * grpc_render_metrics): its connections, calls, resets and bytes. The
 * requests' own counters are every door's (core/metrics.h).
 */
#include <stdatomic.h>

#include "grpc_int.h"

void grpc_render_metrics(grpc_transport *t, textbuf *o)
{
    grpc_counters *k = &t->c;
#define LOAD(x) ((unsigned long long)atomic_load_explicit(&(x), memory_order_relaxed))
    textbuf_put(o,
                "# HELP tally_grpc_connections_total gRPC connections "
                "accepted.\n# TYPE tally_grpc_connections_total counter\n"
                "tally_grpc_connections_total %llu\n"
                "# HELP tally_grpc_open_connections gRPC connections open "
                "now.\n# TYPE tally_grpc_open_connections gauge\n"
                "tally_grpc_open_connections %lld\n"
                "# HELP tally_grpc_connections_refused_total gRPC connections "
                "closed at once (--max-connections, draining).\n"
                "# TYPE tally_grpc_connections_refused_total counter\n"
                "tally_grpc_connections_refused_total %llu\n"
                "# HELP tally_grpc_calls_total gRPC request messages "
                "received whole.\n# TYPE tally_grpc_calls_total counter\n"
                "tally_grpc_calls_total %llu\n"
                "# HELP tally_grpc_resets_received_total RST_STREAM frames "
                "clients sent.\n# TYPE tally_grpc_resets_received_total "
                "counter\ntally_grpc_resets_received_total %llu\n"
                "# HELP tally_grpc_abuse_closed_total gRPC connections "
                "ended for floods or protocol errors.\n"
                "# TYPE tally_grpc_abuse_closed_total counter\n"
                "tally_grpc_abuse_closed_total %llu\n"
                "# HELP tally_grpc_received_bytes_total Bytes read from gRPC "
                "connections.\n# TYPE tally_grpc_received_bytes_total "
                "counter\ntally_grpc_received_bytes_total %llu\n"
                "# HELP tally_grpc_sent_bytes_total Bytes written to gRPC "
                "connections.\n# TYPE tally_grpc_sent_bytes_total counter\n"
                "tally_grpc_sent_bytes_total %llu\n",
                LOAD(k->opened), grpc_open_connections(t), LOAD(k->refused),
                LOAD(k->calls), LOAD(k->resets_received),
                LOAD(k->abuse_closed),
                LOAD(k->bytes_in), LOAD(k->bytes_out));
#undef LOAD
}
