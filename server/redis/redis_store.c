/*
 * redis_store.c - a store of versioned records in Redis (redis_store.h):
 * the ops, their replies, and the queues they wait in (redis_conn.c has
 * the connection and the store's life).
 *
 * The store's loop owns everything below the mutex line of its struct
 * (redis_int.h): the hiredis context, the ops waiting for a connection,
 * the ops sent, and the timers. That loop is the store's own, on a
 * thread of its own (redis_store_open), or a caller's
 * (redis_store_open_on: a door's loop). Other threads only append to
 * `incoming` (under mu) and wake the loop, under mu too, so that the wake
 * handle is never used once the loop has closed it. The loop's own
 * thread appends the same way but does not wake itself: its prepare step
 * takes `incoming` in before the loop next waits (a request read on a
 * door's loop writes to Redis on the same turn, without a write to the
 * wake's descriptor and a turn to read it back).
 */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "redis_int.h"
#include "redis_poll.h"

const char redis_script[] =
    "local v = redis.call('GETRANGE', KEYS[1], '0', '" SCRIPT_LAST "')\n"
    "if v ~= ARGV[1] then\n"
    "  if v == '' then return 0 end\n"
    "  return redis.call('GET', KEYS[1])\n"
    "end\n"
    "if ARGV[3] == 'del' then\n"
    "  redis.call('DEL', KEYS[1])\n"
    "elseif ARGV[3] == 'ttl' then\n"
    "  redis.call('PEXPIRE', KEYS[1], ARGV[2])\n"
    "elseif ARGV[2] == 'keep' then\n"
    "  redis.call('SET', KEYS[1], ARGV[4], 'KEEPTTL')\n"
    "elseif ARGV[2] ~= '0' then\n"
    "  redis.call('SET', KEYS[1], ARGV[4], 'PX', ARGV[2])\n"
    "else\n"
    "  redis.call('SET', KEYS[1], ARGV[4])\n"
    "end\n"
    "return 1\n";

enum { OP_GET, OP_PUT };
const size_t redis_script_len = sizeof redis_script - 1;

/* ------------------------------------------------------------ the ops */

static void op_free(op *o)
{
    free(o); /* its key and value with it */
}

static const kv_version no_version;

/* The op's end, once: its callback, then (unless it is still sent, and
 * its reply will come) its memory. */
static void finish(op *o, kv_result r, kv_version version, const uint8_t *rec,
                   size_t len, const char *why)
{
    if (!o->finished) {
        o->finished = true;
        if (r == KV_FAILED)
            atomic_fetch_add(&o->s->failures, 1);
        o->done(o->ctx, r, version, rec, len, why);
    }
    if (!list_linked(&o->in_sent))
        op_free(o);
}

void redis_fail(op *o, const char *why)
{
    finish(o, KV_FAILED, no_version, NULL, 0, why);
}

/* The first op of list q (its `queued` node), or NULL. */
static op *first_queued(const list_node *q)
{
    list_node *n = list_first(q);
    return n != NULL ? container_of(n, op, queued) : NULL;
}

/* v as a value's first VERSION_LEN bytes: 32 hex digits. */
static void put_version(uint8_t *out, kv_version v)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++) {
        out[i] = (uint8_t)hex[(v.hi >> (60 - 4 * i)) & 15];
        out[16 + i] = (uint8_t)hex[(v.lo >> (60 - 4 * i)) & 15];
    }
}

/* A value as the store holds it (a version, then the record): its
 * version and record. False: not a value of tally's. (An older tallyd's
 * version, a count in 16 decimal digits and 16 hex ones, reads as hex
 * too, and is written back the same: its keys go on.) */
static bool parse_value(const char *p, size_t n, kv_version *version,
                        const uint8_t **rec, size_t *len)
{
    if (n < VERSION_LEN)
        return false;
    kv_version v = {0, 0};
    for (size_t i = 0; i < VERSION_LEN; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                            : 16;
        if (d == 16)
            return false;
        if (i < 16)
            v.hi = v.hi << 4 | d;
        else
            v.lo = v.lo << 4 | d;
    }
    if (kv_version_none(v))
        return false;
    *version = v;
    *rec = (const uint8_t *)p + VERSION_LEN;
    *len = n - VERSION_LEN;
    return true;
}

static void send_op(redis_store *s, op *o);
static void wait_for_replicas(redis_store *s, op *o);

static void send_wait(redis_store *s);

/* A WAIT's answer: how many replicas have every write sent before it,
 * which is the end of each op in its batch. */
static void on_wait(redisAsyncContext *ac, void *rp, void *priv)
{
    op *batch = priv;
    redisReply *r = rp;
    redis_store *s = ac->data;
    s->wait_inflight = false;
    char why[300] = "";
    if (r == NULL)
        snprintf(why, sizeof why, "%s",
                 s->stopping ? "the store is closing"
                             : "the connection to Redis was lost while its "
                               "replicas took the write (WAIT): it may or "
                               "may not survive a failover");
    else if (r->type != REDIS_REPLY_INTEGER)
        snprintf(
            why, sizeof why, "Redis answered WAIT with %.*s",
            (int)(r->type == REDIS_REPLY_ERROR && r->len < 200 ? r->len : 0),
            r->type == REDIS_REPLY_ERROR ? r->str : "");
    else if (r->integer < (long long)s->wait_replicas)
        snprintf(why, sizeof why,
                 "written to the primary, but %lld of the %u replicas "
                 "--state-store-wait asks for had it in time (WAIT): it may "
                 "or may not survive a failover",
                 r->integer, s->wait_replicas);
    if (r != NULL)
        atomic_fetch_add(&s->answered, 1);
    while (batch != NULL) {
        op *o = batch;
        batch = o->wnext;
        list_remove(&o->in_sent);
        if (why[0])
            redis_fail(o, why);
        else
            finish(o, KV_OK, o->del ? no_version : o->to, NULL, 0, NULL);
    }
    if (s->wait_queue != NULL && s->ac != NULL && !s->stopping)
        send_wait(s);
    else if (s->wait_queue != NULL)
        redis_fail_wait_queue(s, s->stopping
                                     ? "the store is closing"
                                     : "the connection to Redis was lost "
                                       "before its replicas took the write "
                                       "(WAIT): it may or may not survive "
                                       "a failover");
}

/* A command's reply (NULL: the connection went, or the store closes). */
static void on_reply(redisAsyncContext *ac, void *rp, void *priv)
{
    op *o = priv;
    redis_store *s = o->s;
    redisReply *r = rp;
    (void)ac;
    list_remove(&o->in_sent);
    if (r == NULL) {
        redis_fail(o, s->stopping ? "the store is closing"
                                  : "the connection to Redis was lost");
        return;
    }
    atomic_fetch_add(&s->answered, 1);
    atomic_fetch_add(&s->rtt_ns, now_ns() - o->sent_ns);
    char why[300];
    if (r->type == REDIS_REPLY_ERROR && o->kind == OP_PUT && !o->eval
        && r->len >= 8 && memcmp(r->str, "NOSCRIPT", 8) == 0 && s->up) {
        o->eval = true; /* a Redis restarted, or SCRIPT FLUSH: by text */
        send_op(s, o);
        return;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        snprintf(why, sizeof why, "Redis answered: %.*s",
                 (int)(r->len < 240 ? r->len : 240), r->str);
        redis_fail(o, why);
        return;
    }
    kv_version v = no_version;
    const uint8_t *rec = NULL;
    size_t len = 0;
    if (r->type == REDIS_REPLY_NIL && o->kind == OP_GET) {
        finish(o, KV_OK, no_version, NULL, 0, NULL); /* none */
        return;
    }
    if (r->type == REDIS_REPLY_INTEGER && o->kind == OP_PUT
        && (r->integer == 0 || r->integer == 1)) {
        if (r->integer == 0) {
            finish(o, KV_CONFLICT, no_version, NULL, 0, NULL);
        } else if (o->touch) {
            finish(o, KV_OK, o->expect, NULL, 0, NULL);
        } else if (s->wait_replicas > 0 && !o->finished && s->ac != NULL) {
            wait_for_replicas(s, o); /* acknowledged once replicas have it */
        } else {
            finish(o, KV_OK, o->del ? no_version : o->to, NULL, 0, NULL);
        }
        return;
    }
    if (r->type != REDIS_REPLY_STRING
        || !parse_value(r->str, r->len, &v, &rec, &len)) {
        redis_fail(o,
                   o->kind == OP_GET
                       ? "the key holds no state of this tallyd's (a version "
                         "and a record)"
                       : "Redis answered the write with something unexpected");
        return;
    }
    finish(o, o->kind == OP_GET ? KV_OK : KV_CONFLICT, v, rec, len, NULL);
}

/* The written ops queued so far, covered by one WAIT: its timeout is
 * the latest of their deadlines (an op whose own passes sooner is failed
 * by the sweep). */
static void send_wait(redis_store *s)
{
    op *batch = s->wait_queue;
    s->wait_queue = s->wait_tail = NULL;
    uint64_t now = now_ns(), last = 0;
    for (op *o = batch; o != NULL; o = o->wnext)
        last = o->deadline_ns == 0     ? UINT64_MAX
               : o->deadline_ns > last ? o->deadline_ns
                                       : last;
    uint64_t left = last == UINT64_MAX ? s->timeout_ms
                    : last > now       ? (last - now) / 1000000u
                                       : 0;
    char n[16], ms[24];
    snprintf(n, sizeof n, "%u", s->wait_replicas);
    snprintf(ms, sizeof ms, "%llu", (unsigned long long)(left ? left : 1));
    const char *argv[] = {"WAIT", n, ms};
    if (redisAsyncCommandArgv(s->ac, on_wait, batch, 3, argv, NULL)
        != REDIS_OK) {
        while (batch != NULL) {
            op *o = batch;
            batch = o->wnext;
            list_remove(&o->in_sent);
            redis_fail(o, "the write's WAIT could not be sent to Redis");
        }
        return;
    }
    s->wait_inflight = true;
}

/* The written ops no WAIT was sent for, failed: the connection went. */
void redis_fail_wait_queue(redis_store *s, const char *why)
{
    op *o = s->wait_queue;
    s->wait_queue = s->wait_tail = NULL;
    while (o != NULL) {
        op *next = o->wnext;
        list_remove(&o->in_sent);
        redis_fail(o, why);
        o = next;
    }
}

/* A written op waits for a WAIT: the next one, or one sent now. It stays
 * in the sent list, where the sweep sees its deadline. */
static void wait_for_replicas(redis_store *s, op *o)
{
    o->waiting_replicas = true;
    o->wnext = NULL;
    list_push_back(&s->sent, &o->in_sent);
    if (s->wait_tail != NULL)
        s->wait_tail->wnext = o;
    else
        s->wait_queue = o;
    s->wait_tail = o;
    if (!s->wait_inflight)
        send_wait(s);
}

static void send_op(redis_store *s, op *o)
{
    char expect[VERSION_LEN + 1], ttl[24];
    const char *argv[8];
    size_t argl[8];
    int argc;
    if (o->kind == OP_GET) {
        argv[0] = "GET";
        argv[1] = (const char *)o->key;
        argl[0] = 3;
        argl[1] = o->keylen;
        argc = 2;
    } else {
        expect[0] = '\0';
        if (!kv_version_none(o->expect)) {
            put_version((uint8_t *)expect, o->expect);
            expect[VERSION_LEN] = '\0';
        }
        if (o->ttl_ms == KV_KEEP_TTL)
            snprintf(ttl, sizeof ttl, "keep");
        else
            snprintf(ttl, sizeof ttl, "%llu", (unsigned long long)o->ttl_ms);
        argv[0] = o->eval ? "EVAL" : "EVALSHA";
        argv[1] = o->eval ? redis_script : s->sha;
        argv[2] = "1";
        argv[3] = (const char *)o->key;
        argv[4] = expect;
        argv[5] = ttl;
        argv[6] = o->touch ? "ttl" : o->del ? "del" : "put";
        argv[7] = o->rec != NULL ? (const char *)o->rec : "";
        argc = 8;
        for (int i = 0; i < argc; i++)
            argl[i] = i == 3   ? o->keylen
                      : i == 7 ? (o->rec != NULL ? o->len : 0)
                               : strlen(argv[i]);
    }
    o->sent_ns = now_ns();
    if (redisAsyncCommandArgv(s->ac, on_reply, o, argc, argv, argl)
        != REDIS_OK) {
        redis_fail(o, "the command could not be sent to Redis");
        return;
    }
    list_push_back(&s->sent, &o->in_sent);
}

void redis_send_waiting(redis_store *s)
{
    OWNER_ASSERT(&s->mb->owner);
    bool any = false;
    for (op *o; s->up && (o = first_queued(&s->waiting)) != NULL;) {
        list_remove(&o->queued);
        send_op(s, o);
        any = true;
    }
    /* written now, not at the socket's next writable event: the socket
     * almost always takes it, and the poll's write interest, turned on
     * and off again before the loop polls, costs no epoll_ctl(2) then
     * (what hiredis cannot write stays, and the poll writes it later) */
    if (any && s->ac != NULL)
        redisAsyncHandleWrite(s->ac);
}

/* Ops past their deadline: failed now; a sent one's reply, when it
 * comes, is dropped. */
static void on_sweep(uv_timer_t *t)
{
    redis_store *s = t->data;
    uint64_t now = now_ns();
    for (list_node *n = list_first(&s->waiting), *next; n != NULL; n = next) {
        next = list_next(&s->waiting, n);
        op *o = container_of(n, op, queued);
        if (o->deadline_ns != 0 && now >= o->deadline_ns) {
            list_remove(&o->queued);
            redis_fail(o, "timed out waiting for a connection to Redis");
        }
    }
    for (list_node *n = list_first(&s->sent); n != NULL;
         n = list_next(&s->sent, n)) {
        op *o = container_of(n, op, in_sent);
        if (!o->finished && o->deadline_ns != 0 && now >= o->deadline_ns)
            redis_fail(o,
                       o->waiting_replicas
                           ? "timed out waiting for Redis's replicas to take "
                             "the write (WAIT): it is in the primary, and may "
                             "or may not survive a failover"
                           : "timed out waiting for Redis's answer");
    }
    if (list_empty(&s->waiting) && list_empty(&s->sent))
        uv_timer_stop(&s->sweep);
}
/* o, at the end of the ops waiting for the connection. */
static void wait_for_connection(redis_store *s, op *o)
{
    list_push_back(&s->waiting, &o->queued);
}

/* The waiting ops sent, if the connection is up; swept meanwhile. */
static void send_now(redis_store *s)
{
    if (!list_empty(&s->waiting) && !uv_is_active((uv_handle_t *)&s->sweep))
        uv_timer_start(&s->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    redis_send_waiting(s);
}

static void on_later(uv_timer_t *t);

/* Arms the timer for the soonest delayed op. */
static void arm_later(redis_store *s)
{
    op *first = first_queued(&s->delayed);
    if (first == NULL) {
        uv_timer_stop(&s->later);
        return;
    }
    uint64_t now = now_ns(), at = first->not_before_ns;
    uint64_t ms = at > now ? (at - now + 999999) / 1000000 : 0;
    uv_timer_start(&s->later, on_later, ms, 0);
}

/* Puts o among the delayed ops, in time order. */
static void delay(redis_store *s, op *o)
{
    list_node *at = list_first(&s->delayed);
    while (at != NULL
           && container_of(at, op, queued)->not_before_ns <= o->not_before_ns)
        at = list_next(&s->delayed, at);
    list_insert_before(at != NULL ? at : &s->delayed, &o->queued);
    arm_later(s);
}

/* The delayed ops whose time has come join the others. */
static void on_later(uv_timer_t *t)
{
    redis_store *s = t->data;
    uint64_t now = now_ns();
    for (op *o; (o = first_queued(&s->delayed)) != NULL
                && o->not_before_ns <= now;) {
        list_remove(&o->queued);
        wait_for_connection(s, o);
    }
    arm_later(s);
    send_now(s);
}

void redis_on_mail(mailbox_rx *rx, mailbox_item *items)
{
    redis_store *s = rx->data;
    bool closing = atomic_load(&s->closing);
    while (items != NULL) {
        op *o = (op *)items;
        items = items->next;
        if (closing) {
            redis_fail(o, "the store is closing");
            continue;
        }
        if (o->not_before_ns > now_ns())
            delay(s, o);
        else
            wait_for_connection(s, o);
    }
    if (closing)
        redis_shut(s);
    else
        send_now(s);
}

/* The loop's prepare step: the connection's queued commands go out. The
 * first names the loop's thread (a door's loop is opened on before it
 * runs). */
void redis_on_flush(uv_prepare_t *h)
{
    redis_store *s = h->data;
    if (!atomic_load_explicit(&s->mb->owner.known, memory_order_relaxed))
        mailbox_own(s->mb);
    if (s->ac != NULL)
        redis_poll_flush(s->ac);
}

/* ------------------------------------------------------ the callers */

/* done() only ever runs on the store's loop: a closed store's op is
 * freed here, and the caller told. */
static bool submit(redis_store *s, op *o)
{
    if (mailbox_post(&s->in, &o->in))
        return true;
    op_free(o);
    return false;
}

/* An op, with room after it for its key and vlen bytes of value (o->rec,
 * left to the caller to fill), in one allocation. */
static op *new_op(redis_store *s, int kind, const uint8_t *id, size_t idlen,
                  size_t vlen, uint64_t deadline_ns, kv_done done, void *ctx)
{
    size_t klen = s->prefix_len + idlen;
    if (idlen > MAX_ID || vlen > SIZE_MAX - sizeof(op) - klen - 1)
        return NULL;
    op *o = malloc(sizeof *o + klen + 1 + vlen);
    if (o == NULL)
        return NULL;
    memset(o, 0, sizeof *o);
    o->key = (uint8_t *)(o + 1);
    memcpy(o->key, s->prefix, s->prefix_len);
    memcpy(o->key + s->prefix_len, id, idlen);
    o->key[klen] = '\0';
    o->keylen = klen;
    if (vlen > 0) {
        o->rec = o->key + klen + 1;
        o->len = vlen;
    }
    o->s = s;
    o->kind = kind;
    o->deadline_ns = deadline_ns;
    o->done = done;
    o->ctx = ctx;
    return o;
}

static bool kv_get(kv *k, const uint8_t *id, size_t idlen, uint64_t delay_ms,
                   uint64_t deadline_ns, kv_done done, void *ctx)
{
    redis_store *s = (redis_store *)k;
    op *o = new_op(s, OP_GET, id, idlen, 0, deadline_ns, done, ctx);
    if (o == NULL)
        return false;
    if (delay_ms > 0)
        o->not_before_ns = now_ns() + delay_ms * 1000000u;
    return submit(s, o);
}

static bool kv_put(kv *k, const uint8_t *id, size_t idlen, kv_version expect,
                   const uint8_t *record, size_t len, uint64_t ttl_ms,
                   unsigned flags, size_t weight, uint64_t deadline_ns,
                   kv_done done, void *ctx)
{
    redis_store *s = (redis_store *)k;
    (void)flags, (void)weight; /* Redis's maxmemory bounds what it holds */
    kv_version next = kv_version_new();
    /* the value: the next version, then the record */
    if (record != NULL && len > SIZE_MAX - VERSION_LEN)
        return false;
    op *o = new_op(s, OP_PUT, id, idlen, record != NULL ? VERSION_LEN + len : 0,
                   deadline_ns, done, ctx);
    if (o == NULL)
        return false;
    o->expect = expect;
    o->to = next;
    o->ttl_ms = ttl_ms;
    o->del = record == NULL;
    if (record != NULL) {
        put_version(o->rec, next);
        memcpy(o->rec + VERSION_LEN, record, len);
    }
    return submit(s, o);
}

static bool kv_touch(kv *k, const uint8_t *id, size_t idlen, kv_version expect,
                     uint64_t ttl_ms, uint64_t deadline_ns, kv_done done,
                     void *ctx)
{
    redis_store *s = (redis_store *)k;
    if (kv_version_none(expect) || ttl_ms == 0 || ttl_ms == KV_KEEP_TTL)
        return false;
    op *o = new_op(s, OP_PUT, id, idlen, 0, deadline_ns, done, ctx);
    if (o == NULL)
        return false;
    o->expect = expect;
    o->ttl_ms = ttl_ms;
    o->touch = true;
    return submit(s, o);
}

static void kv_get_stats(kv *k, kv_stats *out)
{
    redis_store *s = (redis_store *)k;
    out->up = atomic_load(&s->stat_up);
    out->answered = atomic_load(&s->answered);
    out->rtt_ns = atomic_load(&s->rtt_ns);
    out->failures = atomic_load(&s->failures);
    out->reconnects = atomic_load(&s->reconnects);
    out->durability = (kv_durability)atomic_load(&s->durability);
    out->durability_asked = atomic_load(&s->durability_asked);
}

const kv_ops redis_ops = {
    .get = kv_get,
    .put = kv_put,
    .touch = kv_touch,
    .stats = kv_get_stats,
    .open_on = redis_open_on,
    .stop = redis_stop,
    .close = redis_close,
};
