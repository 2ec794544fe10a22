/*
 * server.h - tallyd's shared state below the API layer, in one struct
 * passed to the transport's modules.
 *
 * Who touches what (the threading model itself is written down at the top
 * of tallyd.c):
 *   cfg, version, device           set before threads start, then read-only
 *   metrics, stats, draining,      any thread, atomics
 *   inflight, buffered_bytes,
 *   last_done_ns
 *   app                            set before threads start: the API
 *                                  layer's state (api.h), which holds the
 *                                  scheduler; opaque to the layers below
 *   next_id                        any thread, atomic
 *   reqlog                         the access log and the request ends of
 *                                  both doors (core/reqlog.h): any thread
 *                                  that ends a request, under its own
 *                                  mutex
 *
 * The transports' own state (libmicrohttpd's daemon and the connections'
 * deadlines: http/http.h's http_transport; nghttp2's sessions:
 * grpc/grpc.h's grpc_transport), the scheduler's (sched/) and
 * the loop's handles (tallyd.c's) are not here, and only the layers above
 * them see them.
 */
#ifndef TALLY_SERVER_H
#define TALLY_SERVER_H

#include <stdatomic.h>
#include <uv.h>

#include "clock.h"
#include "config.h"
#include "engine.h"
#include "loop_owner.h"
#include "metrics.h"
#include "reqlog.h"
#include "stats.h"
#include "trace.h"

#define TALLYD_VERSION "0.1.0"


struct api_state;

typedef struct tallyd_server {
    tallyd_config cfg;
    /* the loop thread's (main): tallyd.c records it first, and what
     * claims that thread asserts it (loop_owner.h) */
    loop_owner main_loop;
    const char *version;
    char device[1024]; /* every device's name, for logs and build_info */
    /* the API layer's state (api.h): opaque to the layers below, which
     * only carry it; the handlers above reach their state through it */
    struct api_state *app;

    metrics metrics;
    model_stats stats;

    /* tracing: which new traces are sampled, and where sampled requests'
     * records go (NULL: no exporter; tallyd.c sets both before the
     * transports start) */
    trace_sampler sampler;
    trace_sink *traces;

    atomic_bool draining;
    /* requests being read, queued, computed or answered (drain waits
     * for none to be left) */
    atomic_llong inflight;
    atomic_ullong last_done_ns; /* when the last request was answered */
    atomic_ullong next_id;
    atomic_ullong buffered_bytes; /* room the request bodies hold, in all */
    reqlog reqlog; /* the access log, over every door (reqlog.h) */
} tallyd_server;

#endif
