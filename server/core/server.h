/*
 * server.h - tallyd's shared state below the API layer, in one struct
 * passed to the transport's modules.
 *
 * Who touches what (the threading model itself is written down at the top
 * of tallyd.c):
 *   cfg, version, device           set before threads start, then read-only
 *   metrics, stats, draining,      any thread, atomics
 *   inflight, buffered_bytes,
 *   refused_*
 *   mhd                            MHD threads; the loop thread quiesces and
 *                                  stops it
 *   conns                          HTTP threads register connections; the
 *                                  loop thread sweeps them (its own lock)
 *   accesslog                      HTTP threads write through it, the loop
 *                                  thread ticks it (atomics)
 *   auth                           set before threads start; HTTP threads
 *                                  check against it, the loop thread
 *                                  reloads it (its own lock: http/auth.h)
 *   app                            set before threads start: the API
 *                                  layer's state (api.h), which holds the
 *                                  scheduler; opaque to the layers below
 *   loop and its handles           the loop thread only
 *
 * The scheduler (sched/) is not here: it sits beside the transport, and
 * only the layer above both (api/) and tallyd.c see it.
 */
#ifndef TALLY_SERVER_H
#define TALLY_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "clock.h"
#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "stats.h"

#define TALLYD_VERSION "0.1.0"

struct MHD_Daemon;
struct http_routes;
struct http_auth;
struct http_conns;
struct http_accesslog;

typedef struct tallyd_server {
    tallyd_config cfg;
    const char *version;
    char device[1024]; /* every device's name, for logs and build_info */
    void *app;         /* the API layer's (api.h) */

    metrics metrics;
    model_stats stats;

    struct MHD_Daemon *mhd;
    const struct http_routes *routes; /* given to http_start */
    unsigned port;                    /* the port actually bound */
    bool tls;                         /* serving HTTPS */
    struct http_auth *auth;   /* the bearer tokens; NULL: none required */
    struct http_conns *conns; /* open connections' deadlines (http/conns.h) */
    struct http_accesslog *accesslog; /* which requests get a line */

    uv_loop_t *loop;
    uv_signal_t sigterm, sigint, sighup;
    uv_timer_t tick;
    unsigned ticks;

    atomic_bool draining;
    /* the transport's state: requests being read, queued, computed or
     * answered, and connections open (drain waits on both) */
    atomic_llong inflight, open_connections;
    uint64_t drain_started_ns;
    atomic_ullong last_done_ns; /* when the last request was answered */
    atomic_ullong next_id;
    atomic_ullong buffered_bytes; /* room the request bodies hold, in all */
    /* refused connections not yet logged, and when that was last done */
    atomic_ullong refused_unlogged, refused_logged_ns;
    int exit_code;
} tallyd_server;

#endif
