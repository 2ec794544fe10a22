/*
 * app.c - the API layer's state: the scheduler its handlers submit to,
 * built from the daemon's settings over the opened devices (api.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "log.h"
#include "redis_store.h"
#include "seq_logged.h"
#include "seq_memory.h"
#include "seq_remote.h"

/* The sequences' settings, for the table and for the shared store. */
static seq_options seq_settings(const tallyd_config *c)
{
    seq_options so = {
        .max_sequences = c->max_sequences,
        .idle_ms = c->sequence_idle_ms,
        .linger_ms = c->sequence_linger_ms,
        .reorder_ms = c->sequence_reorder_ms,
        .max_bytes = c->sequence_max_bytes,
    };
    return so;
}

bool api_start(api_state *a, tallyd_server *s, eng_engine *const *devices,
               const char *const *names, unsigned n, char *msg, size_t msglen)
{
    memset(a, 0, sizeof *a);
    uv_mutex_init(&a->trace_mu);
    uv_mutex_init(&a->watch_mu);
    if (!sched_engines(&a->backend, devices, n,
                       tallyd_config_host_threads(&s->cfg))) {
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    sched_options o = {
        .workers = s->cfg.workers,
        .devices = n,
        .device_names = names,
        .queue_depth = s->cfg.queue_depth,
        .max_batch = s->cfg.max_batch,
        .max_queue_delay_us = s->cfg.max_queue_delay_us,
        .device_max_failures = s->cfg.device_max_failures,
        .fault_delay_ms = s->cfg.fault_delay_ms,
        .fault_build_ms = s->cfg.fault_build_ms,
        .stats = &s->stats,
    };
    /* without --warmup, the OpenCL devices build their kernels in the
     * background and join the pool when done; a pool of the host backend
     * alone (--device host) has nothing to place by cost */
    bool any_device = false;
    for (unsigned d = 0; d < n && d < SCHED_MAX_DEVICES; d++) {
        o.cold[d] = !s->cfg.warmup && !eng_engine_is_host(devices[d]);
        any_device |= !eng_engine_is_host(devices[d]);
    }
    o.placement = any_device && strcmp(s->cfg.placement, "cost") == 0
                      ? SCHED_PLACE_COST
                      : SCHED_PLACE_DEVICE;
    a->sched = sched_new(&o, &a->backend);
    if (a->sched == NULL) {
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    if (s->cfg.allow_shared_memory) {
        a->shm = shm_registry_new(s->cfg.shm_max_regions, s->cfg.shm_max_bytes);
        if (a->shm == NULL) {
            snprintf(msg, msglen, "out of memory");
            return false;
        }
    }
    s->app = a;
    return sched_start(a->sched, msg, msglen) == ENG_E_OK;
}

/* --state-store's backend: the connection, checked, and the sequences
 * over it. */
static seq_backend *remote_backend(tallyd_server *s, const seq_options *so,
                                   char *msg, size_t msglen)
{
    redis_url u;
    if (!redis_url_parse(s->cfg.state_store, &u, msg, msglen))
        return NULL;
    kv *redis = redis_store_open(&u, s->cfg.state_store_prefix,
                                 s->cfg.state_store_timeout_ms,
                                 s->cfg.state_store_wait, msg, msglen);
    seq_backend *b =
        redis != NULL
            ? seq_remote_new(redis, so, s->cfg.state_store_timeout_ms)
            : NULL;
    if (b == NULL) {
        if (redis != NULL)
            snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    char shown[600];
    redis_url_text(&u, shown, sizeof shown);
    log_msg("sequences", "info",
            "sequences' states live in %s, under keys %s{...}", shown,
            s->cfg.state_store_prefix);
    return b;
}

bool api_sequences_load(api_state *a, tallyd_server *s, char *msg,
                        size_t msglen)
{
    seq_options so = seq_settings(&s->cfg);
    seq_backend *b = NULL;
    if (so.max_sequences == 0) {
        b = NULL; /* sequences off */
    } else if (s->cfg.state_store[0] != '\0') {
        b = remote_backend(s, &so, msg, msglen);
        if (b == NULL)
            return false;
    } else if (s->cfg.state_dir[0] != '\0') {
        seq_fsync mode = SEQ_FSYNC_ALWAYS;
        seq_fsync_parse(s->cfg.state_fsync, &mode);
        seq_log_faults f = {
            .err = strcmp(s->cfg.fault_state, "eio") == 0      ? EIO
                   : strcmp(s->cfg.fault_state, "enospc") == 0 ? ENOSPC
                                                               : 0,
            .sync = strcmp(s->cfg.fault_state, "fsync") == 0,
            .after = s->cfg.fault_state_after,
        };
        b = seq_logged_open(s->cfg.state_dir, mode, &so, &f, msg, msglen);
        if (b == NULL)
            return false;
    } else {
        b = seq_memory_new(&so);
        if (b == NULL) {
            snprintf(msg, msglen, "out of memory");
            return false;
        }
    }
    a->seqs = seq_table_new(&so, b);
    if (a->seqs == NULL) {
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    return true;
}

void *api_loop_open(tallyd_server *s, uv_loop_t *loop)
{
    return seq_loop_open(s->app->seqs, loop);
}

void api_loop_close(tallyd_server *s, void *data)
{
    seq_loop_close(s->app->seqs, data);
}

void api_sequences_close(api_state *a, tallyd_server *s)
{
    if (!seq_enabled(a->seqs))
        return;
    size_t live = seq_live(a->seqs);
    if (!seq_durable(a->seqs) && live > 0)
        log_msg("sequences", "warn",
                "%zu live sequences dropped: tallyd runs without "
                "--state-dir or --state-store",
                live);
    seq_close(a->seqs); /* the log: every applied chunk in it, flushed */
    (void)s;
}

void api_sequences_close_now(api_state *a, tallyd_server *s)
{
    if (!seq_enabled(a->seqs))
        return;
    /* nothing moves from now on; what was answered is in the log */
    if (!seq_freeze(a->seqs, 1000))
        log_msg("sequences", "error",
                "chunks were still being written after 1 s; the log has "
                "those that were answered");
    api_sequences_close(a, s);
}

void api_stop(api_state *a)
{
    if (a->sched != NULL)
        sched_stop(a->sched);
    sched_free(a->sched);
    a->sched = NULL;
    sched_engines_free(&a->backend);
}

void api_free(api_state *a)
{
    seq_table_free(a->seqs); /* its backend with it: a log, a store */
    a->seqs = NULL;
    shm_registry_free(a->shm);
    a->shm = NULL;
    uv_mutex_destroy(&a->trace_mu);
    uv_mutex_destroy(&a->watch_mu);
}
