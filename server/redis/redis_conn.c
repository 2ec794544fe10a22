/*
 * redis_conn.c - the Redis client's connection and the store's life
 * (redis_store.h): connecting, the handshake (AUTH, SELECT, the script,
 * PING, and a look at Redis's durability settings), reconnecting with
 * backoff, and the store's thread, open, stop and close. redis_store.c
 * has the ops that go over the connection.
 */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "errors.h"
#include "log.h"
#include "redis_int.h"
#include "redis_poll.h"

/* ------------------------------------------------------ the connection */

static void connect_now(redis_store *s);

static void opened(redis_store *s, int how, const char *why)
{
    uv_mutex_lock(&s->mu);
    if (s->opened == 0) {
        s->opened = how;
        if (why != NULL) {
            char u[400];
            redis_url_text(&s->url, u, sizeof u);
            snprintf(s->open_msg, sizeof s->open_msg, "state store %s: %s", u,
                     why);
        }
        uv_cond_signal(&s->opened_cv);
    }
    uv_mutex_unlock(&s->mu);
}

static void on_retry(uv_timer_t *t)
{
    connect_now(t->data);
}

static void retry_later(redis_store *s)
{
    if (s->stopping || s->opened != 1)
        return; /* while opening, a failure is the open's */
    uv_timer_start(&s->retry, on_retry, s->backoff_ms, 0);
    s->backoff_ms =
        s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : s->backoff_ms * 2;
}

/* The handshake's replies: the first error is kept; the last reply
 * (PING's) decides. */
static void on_handshake(redisAsyncContext *ac, void *rp, void *priv)
{
    redis_store *s = ac->data;
    redisReply *r = rp;
    bool last = priv != NULL;
    if (r == NULL)
        return; /* the connection went: on_disconnect says so */
    if (r->type == REDIS_REPLY_ERROR && !s->handshake_failed) {
        s->handshake_failed = true;
        snprintf(s->handshake_err, sizeof s->handshake_err, "%.*s",
                 (int)(r->len < 200 ? r->len : 200), r->str);
    }
    if (!last)
        return;
    if (s->handshake_failed) {
        char why[320];
        snprintf(why, sizeof why, "Redis refused the connection: %s",
                 s->handshake_err);
        log_msg("state", "error", "%s", why);
        opened(s, -1, why);
        redisAsyncDisconnect(ac); /* on_disconnect retries, once open */
        return;
    }
    s->up = true;
    uv_timer_stop(&s->connect_timer);
    atomic_store(&s->stat_up, true);
    s->backoff_ms = BACKOFF_MIN_MS;
    if (s->ever_up) {
        atomic_fetch_add(&s->reconnects, 1);
        log_msg("state", "info", "connected to Redis again");
    }
    s->ever_up = true;
    opened(s, 1, NULL);
    redis_send_waiting(s);
}

/* What Redis's configuration says of its durability (CONFIG GET's
 * answer, pairs of names and values), logged when it changes. */
static void on_config(redisAsyncContext *ac, void *rp, void *priv)
{
    redis_store *s = ac->data;
    redisReply *r = rp;
    (void)priv;
    if (r == NULL || s->handshake_failed)
        return; /* the connection went: asked again at the next */
    const char *aof = NULL, *fsync = NULL;
    if (r->type == REDIS_REPLY_ARRAY) /* RESP2: name, value, ... */
        for (size_t i = 0; i + 1 < r->elements; i += 2) {
            const redisReply *k = r->element[i], *v = r->element[i + 1];
            if (k->type != REDIS_REPLY_STRING || v->type != REDIS_REPLY_STRING)
                continue;
            if (strcmp(k->str, "appendonly") == 0)
                aof = v->str;
            else if (strcmp(k->str, "appendfsync") == 0)
                fsync = v->str;
        }
    kv_durability d = KV_DURABLE_UNKNOWN;
    if (aof != NULL && strcmp(aof, "no") == 0)
        d = KV_DURABLE_NONE;
    else if (aof != NULL && fsync != NULL)
        d = strcmp(fsync, "always") == 0 ? KV_DURABLE_POWER : KV_DURABLE_CRASH;
    int was = atomic_exchange(&s->durability, (int)d);
    bool known = atomic_exchange(&s->durability_asked, true);
    if (was == (int)d && known)
        return;
    char u[400];
    redis_url_text(&s->url, u, sizeof u);
    switch (d) {
    case KV_DURABLE_NONE:
        log_msg("state", "warn",
                "Redis at %s runs without its append-only file (appendonly "
                "no): a restart of Redis loses every write it acknowledged "
                "since its last snapshot; set appendonly yes "
                "(docs/durability.md)",
                u);
        break;
    case KV_DURABLE_CRASH:
        log_msg("state", "info",
                "Redis at %s keeps an append-only file (appendfsync %s): "
                "what it acknowledged survives a restart of Redis, not a "
                "power loss of its machine (docs/durability.md)",
                u, fsync);
        break;
    case KV_DURABLE_POWER:
        log_msg("state", "info",
                "Redis at %s flushes its append-only file at every write "
                "(appendfsync always): what it acknowledged survives a "
                "restart and a power loss (docs/durability.md)",
                u);
        break;
    default:
        log_msg("state", "warn",
                "Redis at %s did not say how it keeps its data (CONFIG GET: "
                "%.200s): tallyd cannot tell whether a restart of Redis "
                "keeps what it acknowledged (docs/durability.md)",
                u,
                r->type == REDIS_REPLY_ERROR ? r->str
                                             : "an answer without appendonly");
        break;
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    redis_store *s = ac->data;
    if (status != REDIS_OK) {
        /* hiredis frees the context after this */
        char why[300];
        snprintf(why, sizeof why, "cannot connect: %s", ac->errstr);
        s->ac = NULL;
        if (s->opened == 1)
            log_msg("state", "warn", "Redis: %s", why);
        opened(s, -1, why);
        retry_later(s);
        return;
    }
    redisAsyncContext *c = (redisAsyncContext *)ac;
    s->handshake_failed = false;
    if (s->url.password[0] != '\0') {
        if (s->url.user[0] != '\0') {
            const char *argv[] = {"AUTH", s->url.user, s->url.password};
            redisAsyncCommandArgv(c, on_handshake, NULL, 3, argv, NULL);
        } else {
            const char *argv[] = {"AUTH", s->url.password};
            redisAsyncCommandArgv(c, on_handshake, NULL, 2, argv, NULL);
        }
    }
    if (s->url.db != 0)
        redisAsyncCommand(c, on_handshake, NULL, "SELECT %u", s->url.db);
    /* the writes name the script by its SHA-1 (EVALSHA) from now on */
    const char *load[] = {"SCRIPT", "LOAD", redis_script};
    redisAsyncCommandArgv(c, on_handshake, NULL, 3, load, NULL);
    redisAsyncCommand(c, on_handshake, s, "PING");
    if (!s->attached) { /* the stores on doors' loops: the same Redis */
        const char *cfg[] = {"CONFIG", "GET", "appendonly", "appendfsync"};
        redisAsyncCommandArgv(c, on_config, NULL, 4, cfg, NULL);
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    redis_store *s = ac->data;
    (void)status;
    bool was_up = s->up;
    s->ac = NULL;
    s->up = false;
    s->wait_inflight = false;
    redis_fail_wait_queue(s,
                          "the connection to Redis was lost before its "
                          "replicas took the write (WAIT): it may or may not "
                          "survive a failover");
    uv_timer_stop(&s->connect_timer);
    atomic_store(&s->stat_up, false);
    if (s->stopping || s->dropping)
        return;
    if (was_up)
        log_msg("state", "warn",
                "the connection to Redis was lost; connecting again");
    char why[300];
    if (!was_up && ac->err != 0)
        snprintf(why, sizeof why, "cannot connect: %s", ac->errstr);
    else
        snprintf(why, sizeof why,
                 "the connection was closed during the handshake");
    opened(s, -1, why);
    retry_later(s);
}

/* A connect, or its handshake, that took longer than the open's time (a
 * host that drops packets): given up, and tried again later. */
static void on_connect_timeout(uv_timer_t *t)
{
    redis_store *s = t->data;
    if (s->ac == NULL || s->up)
        return;
    redisAsyncContext *ac = s->ac;
    s->ac = NULL;
    s->dropping = true;
    redisAsyncFree(ac);
    s->dropping = false;
    if (s->opened == 1)
        log_msg("state", "warn", "Redis: no answer to a connect in %llu ms",
                (unsigned long long)s->connect_ms);
    retry_later(s);
}

static void connect_now(redis_store *s)
{
    if (s->stopping || s->ac != NULL)
        return;
    redisAsyncContext *ac = redisAsyncConnect(s->url.host, (int)s->url.port);
    if (ac == NULL || ac->err) {
        char why[300];
        snprintf(why, sizeof why, "cannot connect: %s",
                 ac != NULL ? ac->errstr : "out of memory");
        if (ac != NULL)
            redisAsyncFree(ac);
        opened(s, -1, why);
        retry_later(s);
        return;
    }
    ac->data = s;
    if (!redis_poll_attach(ac, s->loop)) {
        redisAsyncFree(ac);
        opened(s, -1, "cannot watch the connection (libuv)");
        retry_later(s);
        return;
    }
    redisAsyncSetConnectCallback(ac, on_connect);
    redisAsyncSetDisconnectCallback(ac, on_disconnect);
    s->ac = ac;
    uv_timer_start(&s->connect_timer, on_connect_timeout, s->connect_ms, 0);
}

static void on_open_timeout(uv_timer_t *t)
{
    redis_store *s = t->data;
    opened(s, -1, "no answer in time (is the host reachable?)");
}
static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

/* The handles a store made on its loop. */
static uv_handle_t *const *handles(redis_store *s, uv_handle_t *out[6])
{
    out[0] = (uv_handle_t *)&s->retry;
    out[1] = (uv_handle_t *)&s->sweep;
    out[2] = (uv_handle_t *)&s->open_timer;
    out[3] = (uv_handle_t *)&s->connect_timer;
    out[4] = (uv_handle_t *)&s->later;
    out[5] = (uv_handle_t *)&s->flush;
    return out;
}

/* Closing (s->closing set): every op not yet answered fails, the
 * connection goes (its sent ops fail through hiredis), and the handles
 * close; the store's own loop then ends. Its loop's thread. */
void redis_shut(redis_store *s)
{
    OWNER_ASSERT(&s->mb->owner);
    s->stopping = true;
    list_node *queues[] = {&s->delayed, &s->waiting};
    for (size_t i = 0; i < 2; i++)
        for (list_node *n; (n = list_first(queues[i])) != NULL;) {
            list_remove(n);
            redis_fail(container_of(n, op, queued), "the store is closing");
        }
    if (s->ac != NULL) {
        redisAsyncContext *ac = s->ac;
        s->ac = NULL;
        redisAsyncFree(ac); /* the sent ops' callbacks: NULL replies */
    }
    redis_fail_wait_queue(s, "the store is closing");
    for (mailbox_item *i = mailbox_leave(&s->in), *n; i != NULL; i = n) {
        n = i->next;
        redis_fail((op *)i, "the store is closing");
    }
    if (!s->attached) {
        mailbox_close(&s->own_mb);
        uv_walk(s->loop, close_handle, NULL);
        return;
    }
    uv_handle_t *h[6];
    handles(s, h);
    for (int i = 0; i < 6; i++)
        close_handle(h[i], NULL);
}

static void run(void *arg)
{
    redis_store *s = arg;
    mailbox_own(s->mb);
    connect_now(s);
    uv_run(s->loop, UV_RUN_DEFAULT);
}

/* The store's handles on s->loop, and its receiver on s->mb (made here
 * when the loop is its own), made by the loop's thread or before the
 * loop runs. False: the loop's mailbox has no room (nothing is made). */
static bool init_handles(redis_store *s)
{
    if (s->mb == &s->own_mb)
        mailbox_init(s->mb, s->loop);
    if (!mailbox_listen(s->mb, &s->in, 0, redis_on_mail, s))
        return false;
    uv_timer_t *timers[] = {&s->retry, &s->sweep, &s->open_timer,
                            &s->connect_timer, &s->later};
    for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++) {
        uv_timer_init(s->loop, timers[i]);
        timers[i]->data = s;
    }
    uv_prepare_init(s->loop, &s->flush);
    s->flush.data = s;
    uv_prepare_start(&s->flush, redis_on_flush);
    return true;
}

/* A store not yet on any loop: URL, prefix, the script's SHA-1, locks. */
static redis_store *new_store(const redis_url *u, const char *prefix,
                              uint64_t timeout_ms, unsigned wait_replicas,
                              char *msg, size_t msglen)
{
    if (strlen(prefix) > MAX_PREFIX)
        return msg_fail_as(NULL, msg, msglen,
                           "the key prefix is longer than %d bytes",
                           MAX_PREFIX);
    redis_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return msg_fail_as(NULL, msg, msglen, "out of memory");
    list_init(&s->waiting);
    list_init(&s->delayed);
    list_init(&s->sent);
    s->url = *u;
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (EVP_Digest(redis_script, redis_script_len, md, &mdlen, EVP_sha1(), NULL)
            != 1
        || mdlen != 20) {
        snprintf(msg, msglen, "cannot hash the script (OpenSSL)");
        free(s);
        return NULL;
    }
    for (int i = 0; i < 20; i++)
        snprintf(s->sha + 2 * i, 3, "%02x", md[i]);
    s->prefix_len = strlen(s->prefix);
    s->backoff_ms = BACKOFF_MIN_MS;
    s->timeout_ms = timeout_ms;
    s->connect_ms = timeout_ms;
    s->wait_replicas = wait_replicas;
    atomic_init(&s->durability, KV_DURABLE_UNKNOWN);
    s->base.ops = &redis_ops;
    uv_mutex_init(&s->mu);
    uv_cond_init(&s->opened_cv);
    return s;
}

static void free_store(redis_store *s)
{
    uv_cond_destroy(&s->opened_cv);
    uv_mutex_destroy(&s->mu);
    free(s);
}

kv *redis_store_open(const redis_url *u, const char *prefix,
                     uint64_t timeout_ms, unsigned wait_replicas, char *msg,
                     size_t msglen)
{
    redis_store *s =
        new_store(u, prefix, timeout_ms, wait_replicas, msg, msglen);
    if (s == NULL)
        return NULL;
    s->loop = &s->own;
    s->mb = &s->own_mb;
    if (uv_loop_init(s->loop) != 0) {
        snprintf(msg, msglen, "out of memory");
        free_store(s);
        return NULL;
    }
    init_handles(s); /* its own mailbox has room */
    uv_timer_start(&s->open_timer, on_open_timeout, timeout_ms, 0);
    uv_unref((uv_handle_t *)&s->open_timer);
    if (uv_thread_create(&s->thread, run, s) != 0) {
        snprintf(msg, msglen, "cannot start the state store's thread");
        uv_walk(s->loop, close_handle, NULL);
        uv_run(s->loop, UV_RUN_DEFAULT);
        uv_loop_close(s->loop);
        free_store(s);
        return NULL;
    }
    uv_mutex_lock(&s->mu);
    while (s->opened == 0)
        uv_cond_wait(&s->opened_cv, &s->mu);
    int how = s->opened;
    uv_mutex_unlock(&s->mu);
    if (how != 1) {
        snprintf(msg, msglen, "%s", s->open_msg);
        redis_close(&s->base);
        return NULL;
    }
    return &s->base;
}

kv *redis_open_on(kv *k, mailbox *mb, char *msg, size_t msglen)
{
    const redis_store *like = (const redis_store *)k;
    redis_store *s = new_store(&like->url, like->prefix, like->timeout_ms,
                               like->wait_replicas, msg, msglen);
    if (s == NULL)
        return NULL;
    s->loop = mb->loop;
    s->mb = mb;
    s->attached = true;
    /* open already: its connect's failures are retried, as a lost
     * connection's are, and what is asked meanwhile waits for it */
    s->opened = 1;
    if (!init_handles(s)) {
        snprintf(msg, msglen, "the loop's mailbox has no room");
        free_store(s);
        return NULL;
    }
    connect_now(s);
    return &s->base;
}

void redis_stop(kv *k)
{
    redis_store *s = (redis_store *)k;
    if (s == NULL || !s->attached)
        return;
    if (!atomic_exchange(&s->closing, true))
        mailbox_drain(&s->in); /* fails what came in, then redis_shut() */
}

void redis_close(kv *k)
{
    redis_store *s = (redis_store *)k;
    if (s == NULL)
        return;
    if (s->attached) { /* stopped, and its handles' closes have run */
        free_store(s);
        return;
    }
    atomic_store(&s->closing, true);
    mailbox_post(&s->in, NULL);
    uv_thread_join(&s->thread);
    uv_loop_close(s->loop);
    free_store(s);
}
