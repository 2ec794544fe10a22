/*
 * server.h - tallyd's shared state, in one struct passed to every module.
 *
 * Who touches what (the threading model itself is written down at the top
 * of tallyd.c):
 *   cfg, devices (but down),       set before threads start, then read-only
 *   version, device
 *   devices[].down, .failures      workers, atomic
 *   fallback                       workers, under fallback_mu
 *   queue                          any thread, under its own mutex
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
 *   loop and its handles           the loop thread only
 *   workers                        started and joined by the loop thread
 */
#ifndef TALLY_SERVER_H
#define TALLY_SERVER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "config.h"
#include "engine.h"
#include "metrics.h"
#include "queue.h"
#include "stats.h"

#define TALLYD_VERSION "0.1.0"

struct MHD_Daemon;
struct http_routes;
struct http_auth;
struct http_conns;
struct http_accesslog;
typedef struct worker worker;

/* The most devices one daemon drives. */
#define TALLYD_MAX_DEVICES 16

/* A compute device of the pool. */
typedef struct {
    eng_engine *engine;
    char name[400];   /* "P:D platform / device (layout)": unique, the label */
    atomic_bool down; /* out of the pool: --device-max-failures */
    atomic_uint failures; /* failed launches in a row */
} tallyd_device;

typedef struct tallyd_server {
    tallyd_config cfg;
    const char *version;
    tallyd_device devices[TALLYD_MAX_DEVICES];
    unsigned ndevices;
    /* the host backend, opened when every device has been taken out */
    uv_mutex_t fallback_mu;
    eng_engine *fallback;
    char device[1024]; /* every device's name, for logs and build_info */

    job_queue queue;
    worker *workers;
    unsigned nworkers;
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
    uint64_t drain_started_ns;
    atomic_ullong last_done_ns; /* when the last request was answered */
    atomic_ullong next_id;
    atomic_ullong buffered_bytes; /* room the request bodies hold, in all */
    /* refused connections not yet logged, and when that was last done */
    atomic_ullong refused_unlogged, refused_logged_ns;
    int exit_code;
} tallyd_server;

#endif
