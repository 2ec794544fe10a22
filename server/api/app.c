/*
 * app.c - the API layer's state: the scheduler its handlers submit to,
 * built from the daemon's settings over the opened devices (api.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "api.h"
#include "kv_log.h"
#include "kv_mem.h"
#include "log.h"
#include "redis_store.h"
#include "sequence_file.h"

/* The sequences' settings, for the engine. */
static seq_options seq_settings(const tallyd_config *c)
{
    seq_options so = {
        .max_sequences = c->max_sequences,
        .idle_ms = c->sequence_idle_ms,
        .linger_ms = c->sequence_linger_ms,
        .reorder_ms = c->sequence_reorder_ms,
        .max_bytes = c->sequence_max_bytes,
        .store_timeout_ms = c->state_store_timeout_ms,
    };
    return so;
}

bool api_start(api_state *a, tallyd_server *s, eng_engine *const *devices,
               const char *const *names, unsigned n, char *msg, size_t msglen)
{
    OWNER_ASSERT(&s->main_loop);
    memset(a, 0, sizeof *a);
    uv_mutex_init(&a->trace_mu);
    uv_mutex_init(&a->watch_mu);
    list_init(&a->watches);
    if (!sched_engines(&a->backend, devices, n,
                       tallyd_config_host_threads(&s->cfg)))
        return msg_fail(msg, msglen, "out of memory");
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
    o.placement = any_device && s->cfg.placement == TALLYD_PLACE_COST
                      ? SCHED_PLACE_COST
                      : SCHED_PLACE_DEVICE;
    a->sched = sched_new(&o, &a->backend);
    if (a->sched == NULL)
        return msg_fail(msg, msglen, "out of memory");
    if (s->cfg.allow_shared_memory) {
        a->shm = shm_registry_new(s->cfg.shm_max_regions, s->cfg.shm_max_bytes);
        if (a->shm == NULL)
            return msg_fail(msg, msglen, "out of memory");
    }
    s->app = a;
    return sched_start(a->sched, msg, msglen) == ENG_E_OK;
}

/* --state-store's store: the connection, checked. */
static kv *redis_kv(tallyd_server *s, char *msg, size_t msglen)
{
    redis_url u;
    if (!redis_url_parse(s->cfg.state_store, &u, msg, msglen))
        return NULL;
    kv *redis = redis_store_open(&u, s->cfg.state_store_prefix,
                                 s->cfg.state_store_timeout_ms,
                                 s->cfg.state_store_wait, msg, msglen);
    if (redis == NULL)
        return NULL;
    char shown[600];
    redis_url_text(&u, shown, sizeof shown);
    log_msg("sequences", "info",
            "sequences' states live in %s, under keys %s{...}", shown,
            s->cfg.state_store_prefix);
    return redis;
}

/* An older tallyd's log record (a whole sequence's state) as a write of
 * the store (kv_log.h's upgrade hook). */
static bool upgrade_record(void *user, const uint8_t *payload, size_t len,
                           kv_write *w)
{
    (void)user;
    int state;
    bool numbered;
    uint64_t count;
    if (!seq_record_info(payload, len, w->key, &w->keylen, &state, &numbered,
                         &count, &w->deadline_ms))
        return false;
    w->weight = (size_t)count * sizeof(eng_carry) * (numbered ? 2 : 1);
    bool gone = state == SEQ_GONE || (state == SEQ_ENDED && !numbered);
    w->op = gone ? KV_W_DEL : KV_W_PUT;
    w->flags = state == SEQ_LIVE ? KV_COUNTED : 0;
    return true;
}

/* --state-dir's store: the directory's lock, its log read back. */
static kv *logged_kv(tallyd_server *s, const kv_mem_options *mo, char *msg,
                     size_t msglen)
{
    kv_log_options lo = {
        .dir = s->cfg.state_dir,
        .fsync = s->cfg.state_fsync == TALLYD_FSYNC_EVERYSEC
                     ? KV_FSYNC_EVERYSEC
                     : KV_FSYNC_ALWAYS,
        .mem = *mo,
        .faults =
            {
                .err = s->cfg.fault_state == TALLYD_FAULT_EIO      ? EIO
                       : s->cfg.fault_state == TALLYD_FAULT_ENOSPC ? ENOSPC
                                                                   : 0,
                .sync = s->cfg.fault_state == TALLYD_FAULT_FSYNC,
                .after = s->cfg.fault_state_after,
            },
        .upgrade = upgrade_record,
    };
    kv *k = kv_log_open(&lo, msg, msglen);
    if (k == NULL)
        return NULL;
    size_t expired, torn;
    kv_log_loaded(k, &expired, &torn);
    kv_stats st;
    k->ops->stats(k, &st);
    if (expired > 0 || st.records > 0)
        log_msg("sequences", "info",
                "%zu sequences loaded from %s; %zu more had been idle past "
                "--sequence-idle-ms and were dropped",
                st.records, s->cfg.state_dir, expired);
    return k;
}

bool api_sequences_load(api_state *a, tallyd_server *s, char *msg,
                        size_t msglen)
{
    seq_options so = seq_settings(&s->cfg);
    kv_mem_options mo = {.max_records = so.max_sequences,
                         .max_bytes = so.max_bytes};
    kv *store = NULL;
    if (so.max_sequences == 0)
        store = NULL; /* sequences off */
    else if (s->cfg.state_store[0] != '\0')
        store = redis_kv(s, msg, msglen);
    else if (s->cfg.state_dir[0] != '\0')
        store = logged_kv(s, &mo, msg, msglen);
    else if ((store = kv_mem_new(&mo)) == NULL)
        snprintf(msg, msglen, "out of memory");
    if (so.max_sequences > 0 && store == NULL)
        return false;
    a->seqs = seq_table_new(&so, store);
    if (a->seqs == NULL)
        return msg_fail(msg, msglen, "out of memory");
    return true;
}

void *api_loop_open(tallyd_server *s, mailbox *mb)
{
    return seq_loop_open(s->app->seqs, mb);
}

void api_loop_close(tallyd_server *s, void *data)
{
    seq_loop_close(s->app->seqs, data);
}

void api_sequences_close(api_state *a, tallyd_server *s)
{
    OWNER_ASSERT(&s->main_loop);
    if (!seq_enabled(a->seqs))
        return;
    size_t live = seq_live(a->seqs);
    bool kept = s->cfg.state_dir[0] != '\0' || s->cfg.state_store[0] != '\0';
    if (!kept && live > 0)
        log_msg("sequences", "warn",
                "%zu live sequences dropped: tallyd runs without "
                "--state-dir or --state-store",
                live);
    else if (s->cfg.state_dir[0] != '\0')
        log_msg("sequences", "info", "%zu live sequences kept in %s", live,
                s->cfg.state_dir);
    seq_close(a->seqs); /* the log: every applied chunk in it, flushed */
}

void api_sequences_close_now(api_state *a, tallyd_server *s)
{
    OWNER_ASSERT(&s->main_loop);
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
