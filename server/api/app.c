/*
 * app.c - the API layer's state: the scheduler its handlers submit to,
 * built from the daemon's settings over the opened devices (api.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "log.h"

bool api_start(api_state *a, tallyd_server *s, eng_engine *const *devices,
               const char *const *names, unsigned n, char *msg, size_t msglen)
{
    memset(a, 0, sizeof *a);
    uv_mutex_init(&a->trace_mu);
    if (!sched_engines(&a->backend, devices, n)) {
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
     * background and join the pool when done */
    for (unsigned d = 0; d < n && d < SCHED_MAX_DEVICES; d++)
        o.cold[d] = !s->cfg.warmup && !eng_engine_is_host(devices[d]);
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
    seq_options so = {
        .max_sequences = s->cfg.max_sequences,
        .idle_ms = s->cfg.sequence_idle_ms,
        .linger_ms = s->cfg.sequence_linger_ms,
        .reorder_ms = s->cfg.sequence_reorder_ms,
        .max_bytes = s->cfg.sequence_max_bytes,
    };
    a->seqs = seq_table_new(&so);
    if (a->seqs == NULL) {
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    s->app = a;
    return sched_start(a->sched, msg, msglen) == ENG_E_OK;
}

bool api_sequences_load(api_state *a, tallyd_server *s, char *msg,
                        size_t msglen)
{
    const char *dir = s->cfg.state_dir;
    if (dir == NULL || dir[0] == '\0' || !seq_enabled(a->seqs))
        return true;
    /* a drain must be able to write there: found out now, not then */
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(msg, msglen,
                 "--state-dir %s: %s (the live sequences are written there "
                 "at a drain)",
                 dir, strerror(errno));
        return false;
    }
    size_t n, expired;
    if (!seq_load(a->seqs, dir, &n, &expired, msg, msglen))
        return false;
    if (n > 0 || expired > 0)
        log_msg("sequences", "info",
                "%zu sequences loaded from %s/sequences.state; %zu more had "
                "been idle past --sequence-idle-ms and were dropped",
                n, dir, expired);
    return true;
}

bool api_sequences_save(api_state *a, tallyd_server *s)
{
    if (a->seqs == NULL || !seq_enabled(a->seqs))
        return true;
    size_t live = seq_live(a->seqs);
    const char *dir = s->cfg.state_dir;
    if (dir == NULL || dir[0] == '\0') {
        if (live > 0)
            log_msg("sequences", "warn",
                    "%zu live sequences dropped: tallyd runs without "
                    "--state-dir",
                    live);
        return true;
    }
    char msg[512];
    size_t n;
    if (!seq_save(a->seqs, dir, &n, msg, sizeof msg)) {
        log_msg("sequences", "error", "%zu live sequences lost: %s", live, msg);
        return false;
    }
    log_msg("sequences", "info",
            "%zu live sequences written to "
            "%s/sequences.state",
            n, dir);
    return true;
}

bool api_sequences_save_now(api_state *a, tallyd_server *s)
{
    if (a->seqs == NULL || !seq_enabled(a->seqs))
        return true;
    if (!seq_freeze(a->seqs, 1000)) {
        log_msg("sequences", "error",
                "%zu live sequences lost: chunks were still adding their "
                "sums after 1 s",
                seq_live(a->seqs));
        return false;
    }
    return api_sequences_save(a, s);
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
    seq_table_free(a->seqs);
    a->seqs = NULL;
    shm_registry_free(a->shm);
    a->shm = NULL;
    uv_mutex_destroy(&a->trace_mu);
}
