/*
 * app.c - the API layer's state: the scheduler its handlers submit to,
 * built from the daemon's settings over the opened devices (api.h).
 */
#include <stdio.h>
#include <string.h>

#include "api.h"

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
        .stats = &s->stats,
    };
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
    shm_registry_free(a->shm);
    a->shm = NULL;
    uv_mutex_destroy(&a->trace_mu);
}
