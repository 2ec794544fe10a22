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
#include "seq_remote.h"
#include "seq_store.h"
#include "state_redis.h"

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
    a->state_lock = -1;
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
    seq_options so = seq_settings(&s->cfg);
    a->seqs = seq_table_new(&so);
    if (a->seqs == NULL) {
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    s->app = a;
    return sched_start(a->sched, msg, msglen) == ENG_E_OK;
}

/* One record of the log, into the table (seq_log_decode's each). */
static bool restore_one(void *user, seq_file_entry *e, int how)
{
    char msg[256];
    if (seq_restore(user, e, how, msg, sizeof msg))
        return true;
    log_msg("sequences", "error", "%s", msg);
    return false;
}

/* Reads DIR/sequences.log into the table; false with a message naming the
 * file and the offset where it is damaged. */
static bool replay_log(api_state *a, const char *dir, size_t max_bytes,
                       char *msg, size_t msglen)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/sequences.log", dir);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return true;
        snprintf(msg, msglen, "cannot read %.300s: %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    uint8_t *buf = NULL;
    size_t len = 0, got = 0;
    if (fstat(fd, &st) == 0) {
        len = (size_t)st.st_size;
        buf = malloc(len ? len : 1);
    }
    while (buf != NULL && got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (buf == NULL || got < len) {
        snprintf(msg, msglen, "cannot read %.300s: %s", path,
                 buf == NULL ? "out of memory" : strerror(errno));
        free(buf);
        return false;
    }
    size_t torn = 0;
    char err[256];
    bool ok = seq_log_decode(buf, len, 1, max_bytes, restore_one, a->seqs,
                             &torn, err, sizeof err);
    free(buf);
    if (!ok) {
        snprintf(msg, msglen,
                 "%.300s is not a log this tallyd can take: %s; tallyd "
                 "does not start (move it away to start without it)",
                 path, err);
        return false;
    }
    if (torn > 0)
        log_msg("sequences", "warn",
                "%s: its last %zu bytes were a record cut short by a crash "
                "(never answered): dropped",
                path, torn);
    return true;
}

/* --state-store: the connection, and the table's backend over it. */
static bool open_remote(api_state *a, tallyd_server *s, char *msg,
                        size_t msglen)
{
    redis_url u;
    if (!redis_url_parse(s->cfg.state_store, &u, msg, msglen))
        return false;
    a->redis = state_redis_open(&u, s->cfg.state_store_prefix,
                                s->cfg.state_store_timeout_ms,
                                s->cfg.state_store_wait, msg, msglen);
    if (a->redis == NULL)
        return false;
    seq_options so = seq_settings(&s->cfg);
    a->remote = seq_remote_new(a->redis, &so, s->cfg.state_store_timeout_ms);
    if (a->remote == NULL) {
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    seq_remote_attach(a->remote, a->seqs);
    char shown[600];
    redis_url_text(&u, shown, sizeof shown);
    log_msg("sequences", "info",
            "sequences' states live in %s, under keys %s{...}", shown,
            s->cfg.state_store_prefix);
    return true;
}

bool api_sequences_load(api_state *a, tallyd_server *s, char *msg,
                        size_t msglen)
{
    if (s->cfg.state_store[0] != '\0' && seq_enabled(a->seqs))
        return open_remote(a, s, msg, msglen);
    const char *dir = s->cfg.state_dir;
    if (dir == NULL || dir[0] == '\0' || !seq_enabled(a->seqs))
        return true;
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(msg, msglen,
                 "--state-dir %s: %s (every applied chunk of a sequence is "
                 "logged there)",
                 dir, strerror(errno));
        return false;
    }
    a->state_lock = seq_store_lock(dir, msg, msglen);
    if (a->state_lock < 0)
        return false;
    /* a drain's state file (before the log), then the log on top */
    size_t n, expired;
    if (!seq_load(a->seqs, dir, &n, &expired, msg, msglen))
        return false;
    if (!replay_log(a, dir, s->cfg.sequence_max_bytes, msg, msglen))
        return false;
    expired += seq_expire_loaded(a->seqs);
    /* a fresh log holds them all; then the state file can go */
    bool oom;
    seq_file_entry *v = seq_export(a->seqs, &n, &oom);
    if (v == NULL && oom) {
        snprintf(msg, msglen, "out of memory loading the sequences");
        return false;
    }
    seq_fsync mode = SEQ_FSYNC_ALWAYS;
    seq_fsync_parse(s->cfg.state_fsync, &mode);
    a->store = seq_store_open(dir, mode, v, n, msg, msglen);
    free(v);
    if (a->store == NULL)
        return false;
    if (s->cfg.fault_state[0] != '\0') {
        bool sync = strcmp(s->cfg.fault_state, "fsync") == 0;
        int err = strcmp(s->cfg.fault_state, "eio") == 0 ? EIO : ENOSPC;
        seq_store_fail_writes(a->store, sync ? 0 : err, sync ? EIO : 0,
                              s->cfg.fault_state_after);
    }
    seq_set_store(a->seqs, a->store);
    char path[4096];
    snprintf(path, sizeof path, "%s/sequences.state", dir);
    if (unlink(path) != 0 && errno != ENOENT) {
        snprintf(msg, msglen, "cannot remove %.300s: %s", path,
                 strerror(errno));
        return false;
    }
    if (n > 0 || expired > 0)
        log_msg("sequences", "info",
                "%zu sequences loaded from %s; %zu more had been idle past "
                "--sequence-idle-ms and were dropped",
                n, dir, expired);
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

bool api_sequences_save(api_state *a, tallyd_server *s)
{
    if (a->seqs == NULL || !seq_enabled(a->seqs))
        return true;
    size_t live = seq_live(a->seqs);
    if (a->remote != NULL) /* every answered chunk is in Redis */
        return true;
    if (a->store != NULL) { /* every applied chunk is in the log */
        seq_store_close(a->store);
        a->store = NULL;
        log_msg("sequences", "info", "%zu live sequences kept in %s", live,
                s->cfg.state_dir);
        return true;
    }
    if (live > 0)
        log_msg("sequences", "warn",
                "%zu live sequences dropped: tallyd runs without "
                "--state-dir",
                live);
    return true;
}

bool api_sequences_save_now(api_state *a, tallyd_server *s)
{
    if (a->seqs == NULL || !seq_enabled(a->seqs))
        return true;
    /* nothing moves from now on; what was answered is in the log */
    if (!seq_freeze(a->seqs, 1000))
        log_msg("sequences", "error",
                "chunks were still being written after 1 s; the log has "
                "those that were answered");
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
    /* the connection first: a chunk still waiting for Redis (a drain
     * that timed out) fails with "the store is closing" */
    state_redis_close(a->redis);
    a->redis = NULL;
    seq_remote_free(a->remote);
    a->remote = NULL;
    seq_table_free(a->seqs);
    a->seqs = NULL;
    seq_store_unlock(a->state_lock);
    a->state_lock = -1;
    shm_registry_free(a->shm);
    a->shm = NULL;
    uv_mutex_destroy(&a->trace_mu);
    uv_mutex_destroy(&a->watch_mu);
}
