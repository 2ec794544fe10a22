/*
 * state_redis.c - sequences' states in Redis (state_redis.h).
 *
 * The store's loop owns everything below the mutex line: the hiredis
 * context, the ops waiting for a connection, the ops sent, and the
 * timers. That loop is the store's own, on a thread of its own
 * (state_redis_open), or a caller's (state_redis_open_on: a door's
 * loop). Other threads only append to `incoming` (under mu) and wake the
 * loop, under mu too, so that the wake handle is never used once the
 * loop has closed it. The loop's own thread appends the same way but
 * does not wake itself: its prepare step takes `incoming` in before the
 * loop next waits (a chunk read on a door's loop writes to Redis on the
 * same turn, without a write to the wake's descriptor and a turn to read
 * it back).
 *
 * hiredis's events come through an adapter of our own rather than
 * hiredis's adapters/libuv.h (0.14 in Debian 12): that one drops a poll
 * whose status is an error, and libuv reports a socket's POLLERR (a
 * refused connect, a reset) as exactly that, stopping the poll; hiredis
 * then never learns, and a connect to a port nobody listens on waits for
 * ever. Ours hands such an event to hiredis, which reads the socket's
 * error and fails the connect or drops the connection.
 */
#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "log.h"
#include "loop_owner.h"
#include "state_redis.h"

#define MAX_ID 4096
#define MAX_PREFIX 64
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define SWEEP_MS 10

/* A key holds a string: its version, VERSION_LEN bytes (the count,
 * VERSION_DIGITS decimal digits, then the incarnation, 16 hex digits),
 * then the record. The write: compare the version, then replace, delete
 * or renew the time to live. KEYS[1] the key; ARGV: the version read
 * ("" for none: GETRANGE's answer for a missing key), the time to live
 * in ms (0: none; "keep": the key's own), "put", "del" or "ttl", the new
 * value (the next version, then the record). Answers 1 (done), 0
 * (another version is there: none), or the value there. Two commands a
 * write, where a hash took three (HGET, HSET, PEXPIRE): the script's
 * cost is most of the store's time per chunk (the performance page's
 * sequence table). Counts stay below 10^16. GETRANGE's bounds are Lua
 * strings, not numbers: Redis turns a number argument into text with
 * sprintf("%.17g") on every call. The '31' is VERSION_LEN - 1
 * (a _Static_assert below ties them). */
#define VERSION_DIGITS 16
#define VERSION_LEN (VERSION_DIGITS + 16)
#define SCRIPT_LAST "31"
_Static_assert(VERSION_LEN - 1 == 31, "SCRIPT_LAST is VERSION_LEN - 1");
static const char SCRIPT[] =
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

typedef struct op op;
struct op {
    op *next;        /* incoming, or waiting */
    op *sprev, *snext; /* sent */
    state_redis *s;
    int kind;
    bool del, touch, sent, finished;
    bool eval; /* the script by its text: Redis had forgotten its SHA-1 */
    bool waiting_replicas; /* written; waiting for a WAIT to cover it */
    op *wnext;             /* in wait_queue, or in a WAIT's batch */
    uint8_t *key; /* prefix + id, in the op's own allocation */
    size_t keylen;
    state_version expect, to; /* a write's: the version read, and its own */
    uint64_t ttl_ms, deadline_ns, sent_ns;
    uint64_t not_before_ns; /* a read asked for later: sent from then on */
    uint8_t *rec; /* a write's value, after the key; NULL for a read or a
                   * delete */
    size_t len;
    state_redis_done done;
    void *ctx;
};

struct state_redis {
    redis_url url;
    char prefix[MAX_PREFIX + 1];
    char sha[41]; /* the script's SHA-1, for EVALSHA */
    size_t prefix_len;
    uv_thread_t thread;
    uv_loop_t own; /* the loop of the store's own thread */
    uv_loop_t *loop; /* &own, or the caller's (state_redis_open_on) */
    bool attached;   /* on the caller's loop: no thread of its own */
    uint64_t timeout_ms; /* the open's, for stores opened like this one */
    unsigned wait_replicas; /* WAIT after each write; 0: none */
    uv_async_t wake;
    uv_timer_t retry, sweep, open_timer, connect_timer, later;
    uv_prepare_t flush; /* the connection's writes, once a turn */
    uint64_t connect_ms; /* a connect's (and its handshake's) time */

    uv_mutex_t mu; /* guards incoming, closing, and the opening handshake */
    uv_cond_t opened_cv;
    op *incoming, *incoming_tail;
    bool closing;
    loop_owner self; /* the loop's thread: set by its first prepare step */
    int opened; /* 0 while opening, 1 open, -1 failed */
    char open_msg[512];

    /* the loop thread's */
    bool self_pending; /* it appended to incoming without a wake */
    bool stopping; /* it has seen closing */
    bool dropping; /* freeing a connection that took too long */
    redisAsyncContext *ac;
    bool up, handshake_failed;
    char handshake_err[256];
    op *waiting, *waiting_tail;
    op *delayed; /* asked for later: by not_before_ns, the soonest first */
    op *sent;
    /* --state-store-wait: written ops waiting for the next WAIT, and
     * whether one is on its way (a WAIT covers every write sent before
     * it on the connection, so one WAIT serves every op written
     * meanwhile: replication's group commit) */
    op *wait_queue, *wait_tail;
    bool wait_inflight;
    unsigned backoff_ms;
    bool ever_up;

    atomic_bool stat_up;
    atomic_ullong answered, rtt_ns, failures, reconnects;
    atomic_int durability; /* state_redis_durability */
    atomic_bool durability_asked;
};

/* ------------------------------------------------------------ the URL */

static bool all_digits(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

static unsigned long small_number(const char *p, size_t n)
{
    unsigned long v = 0;
    for (size_t i = 0; i < n && v < 1000000; i++)
        v = v * 10 + (unsigned long)(p[i] - '0');
    return v;
}

void redis_url_text(const redis_url *u, char *out, size_t len)
{
    bool v6 = strchr(u->host, ':') != NULL;
    snprintf(out, len, "redis://%s%s%s%s%s%s:%u/%u", u->user,
             u->password[0] ? ":***" : "", u->user[0] || u->password[0] ? "@" : "",
             v6 ? "[" : "", u->host, v6 ? "]" : "", u->port, u->db);
}

/* text as a message may quote it: everything before its last '@' that
 * may be a password (after the user and its ':', or, with no ':', the
 * whole part between the scheme and the '@') is "***", whatever the
 * scheme's spelling or the spaces around it; a long text is cut. */
static void redis_url_shown(const char *text, char *out, size_t len)
{
    const char *at = strrchr(text, '@');
    if (at == NULL) {
        snprintf(out, len, "%.200s", text);
        return;
    }
    const char *from = strstr(text, "://");
    from = from != NULL && from < at ? from + 3 : text;
    const char *colon = memchr(from, ':', (size_t)(at - from));
    const char *keep = colon != NULL ? colon + 1 : from;
    size_t head = (size_t)(keep - text);
    snprintf(out, len, "%.*s***%.200s", (int)(head < 200 ? head : 200), text,
             at);
}

bool redis_url_parse(const char *text, redis_url *out, char *msg,
                     size_t msglen)
{
    memset(out, 0, sizeof *out);
    out->port = 6379;
    /* what a message may quote: the URL with what may be a password cut
     * out, whatever its shape */
    char shown[600];
    redis_url_shown(text, shown, sizeof shown);
    const char *at = strrchr(text, '@');
    if (strncmp(text, "redis://", 8) != 0) {
        snprintf(msg, msglen,
                 "\"%s\" is not a Redis URL: it must begin with redis:// "
                 "(redis://[[user]:password@]host[:port][/db]; Debian's "
                 "hiredis has no TLS, so rediss:// is not taken)",
                 shown);
        return false;
    }
    const char *p = text + 8;
    if (at != NULL) {
        const char *c = memchr(p, ':', (size_t)(at - p));
        size_t ulen = c != NULL ? (size_t)(c - p) : (size_t)(at - p);
        size_t plen = c != NULL ? (size_t)(at - c - 1) : 0;
        if (ulen >= sizeof out->user || plen >= sizeof out->password) {
            snprintf(msg, msglen, "%s: the user or the password is too long",
                     shown);
            return false;
        }
        memcpy(out->user, p, ulen);
        if (c != NULL)
            memcpy(out->password, c + 1, plen);
        if (c == NULL) { /* redis://password@host is not a form Redis uses */
            snprintf(msg, msglen,
                     "%s: a password goes after a colon "
                     "(redis://:password@host or redis://user:password@host)",
                     shown);
            return false;
        }
        p = at + 1;
    }
    const char *host = p, *host_end;
    if (*p == '[') {
        host = p + 1;
        host_end = strchr(host, ']');
        if (host_end == NULL) {
            snprintf(msg, msglen, "%s: an IPv6 address without its ']'",
                     shown);
            return false;
        }
        p = host_end + 1;
    } else {
        host_end = p + strcspn(p, ":/");
        p = host_end;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof out->host) {
        snprintf(msg, msglen, "%s: %s", shown,
                 hlen == 0 ? "no host" : "the host name is too long");
        return false;
    }
    memcpy(out->host, host, hlen);
    if (*p == ':') {
        p++;
        size_t n = strcspn(p, "/");
        unsigned long port = small_number(p, n);
        if (!all_digits(p, n) || port < 1 || port > 65535) {
            snprintf(msg, msglen, "%s: the port must be 1 to 65535", shown);
            return false;
        }
        out->port = (unsigned)port;
        p += n;
    }
    if (*p == '/') {
        p++;
        size_t n = strlen(p);
        if (n > 0) {
            unsigned long db = small_number(p, n);
            if (!all_digits(p, n) || db > 15) {
                snprintf(msg, msglen,
                         "%s: the database must be a number, 0 to 15", shown);
                return false;
            }
            out->db = (unsigned)db;
        }
        p += n;
    }
    if (*p != '\0') {
        snprintf(msg, msglen, "%s: unexpected \"%.40s\" after the host",
                 shown, p);
        return false;
    }
    return true;
}

/* ------------------------------------------------------------ the ops */

state_version state_version_next(state_version cur, bool anew)
{
    if (!anew && cur.n != 0)
        return (state_version){cur.n + 1, cur.inc};
    state_version v = {1, 0};
    while (v.inc == 0) {
        unsigned char b[8];
        if (RAND_bytes(b, sizeof b) != 1) { /* not seeded: a weaker draw */
            uint64_t z = now_ns() ^ (uint64_t)(uintptr_t)&v;
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            memcpy(b, &z, sizeof b);
        }
        for (int i = 0; i < 8; i++)
            v.inc = v.inc << 8 | b[i];
    }
    return v;
}

static void op_free(op *o)
{
    free(o); /* its key and value with it */
}

static const state_version no_version;

/* The op's end, once: its callback, then (unless it is still sent, and
 * its reply will come) its memory. */
static void finish(op *o, state_redis_result r, state_version version,
                   const uint8_t *rec, size_t len, const char *why)
{
    if (!o->finished) {
        o->finished = true;
        if (r == STATE_REDIS_FAILED)
            atomic_fetch_add(&o->s->failures, 1);
        o->done(o->ctx, r, version, rec, len, why);
    }
    if (!o->sent)
        op_free(o);
}

static void fail(op *o, const char *why)
{
    finish(o, STATE_REDIS_FAILED, no_version, NULL, 0, why);
}

static void unlink_sent(state_redis *s, op *o)
{
    if (o->sprev != NULL)
        o->sprev->snext = o->snext;
    else
        s->sent = o->snext;
    if (o->snext != NULL)
        o->snext->sprev = o->sprev;
    o->sprev = o->snext = NULL;
}

static void link_sent(state_redis *s, op *o)
{
    o->sent = true;
    o->snext = s->sent;
    if (s->sent != NULL)
        s->sent->sprev = o;
    s->sent = o;
}

/* v as a value's first VERSION_LEN bytes. */
static void put_version(uint8_t *out, state_version v)
{
    uint64_t n = v.n;
    for (int i = VERSION_DIGITS - 1; i >= 0; i--) {
        out[i] = (uint8_t)('0' + n % 10);
        n /= 10;
    }
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 16; i++)
        out[VERSION_DIGITS + i] = (uint8_t)hex[(v.inc >> (60 - 4 * i)) & 15];
}

/* A value as the store holds it (a version, then the record): its
 * version and record. False: not a value of tally's (of this version's
 * format: an older tallyd's 16-digit versions are not taken). */
static bool parse_value(const char *p, size_t n, state_version *version,
                        const uint8_t **rec, size_t *len)
{
    if (n < VERSION_LEN || !all_digits(p, VERSION_DIGITS))
        return false;
    state_version v = {0, 0};
    for (size_t i = 0; i < VERSION_DIGITS; i++)
        v.n = v.n * 10 + (uint64_t)(p[i] - '0');
    for (size_t i = VERSION_DIGITS; i < VERSION_LEN; i++) {
        char c = p[i];
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                            : 16;
        if (d == 16)
            return false;
        v.inc = v.inc << 4 | d;
    }
    if (v.n == 0 || v.inc == 0)
        return false;
    *version = v;
    *rec = (const uint8_t *)p + VERSION_LEN;
    *len = n - VERSION_LEN;
    return true;
}

static void send_op(state_redis *s, op *o);
static void wait_for_replicas(state_redis *s, op *o);
static void fail_wait_queue(state_redis *s, const char *why);

static void send_wait(state_redis *s);

/* A WAIT's answer: how many replicas have every write sent before it,
 * which is the end of each op in its batch. */
static void on_wait(redisAsyncContext *ac, void *rp, void *priv)
{
    op *batch = priv;
    redisReply *r = rp;
    state_redis *s = ac->data;
    s->wait_inflight = false;
    char why[300] = "";
    if (r == NULL)
        snprintf(why, sizeof why, "%s",
                 s->stopping ? "the store is closing"
                             : "the connection to Redis was lost while its "
                               "replicas took the write (WAIT): it may or "
                               "may not survive a failover");
    else if (r->type != REDIS_REPLY_INTEGER)
        snprintf(why, sizeof why, "Redis answered WAIT with %.*s",
                 (int)(r->type == REDIS_REPLY_ERROR && r->len < 200 ? r->len
                                                                     : 0),
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
        unlink_sent(s, o);
        o->sent = false;
        if (why[0])
            fail(o, why);
        else
            finish(o, STATE_REDIS_OK, o->del ? no_version : o->to, NULL, 0,
                   NULL);
    }
    if (s->wait_queue != NULL && s->ac != NULL && !s->stopping)
        send_wait(s);
    else if (s->wait_queue != NULL)
        fail_wait_queue(s, s->stopping ? "the store is closing"
                                       : "the connection to Redis was lost "
                                         "before its replicas took the write "
                                         "(WAIT): it may or may not survive "
                                         "a failover");
}

/* A command's reply (NULL: the connection went, or the store closes). */
static void on_reply(redisAsyncContext *ac, void *rp, void *priv)
{
    op *o = priv;
    state_redis *s = o->s;
    redisReply *r = rp;
    (void)ac;
    unlink_sent(s, o);
    o->sent = false;
    if (r == NULL) {
        fail(o, s->stopping ? "the store is closing"
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
        fail(o, why);
        return;
    }
    state_version v = no_version;
    const uint8_t *rec = NULL;
    size_t len = 0;
    if (r->type == REDIS_REPLY_NIL && o->kind == OP_GET) {
        finish(o, STATE_REDIS_OK, no_version, NULL, 0, NULL); /* none */
        return;
    }
    if (r->type == REDIS_REPLY_INTEGER && o->kind == OP_PUT
        && (r->integer == 0 || r->integer == 1)) {
        if (r->integer == 0) {
            finish(o, STATE_REDIS_CONFLICT, no_version, NULL, 0, NULL);
        } else if (o->touch) {
            finish(o, STATE_REDIS_OK, o->expect, NULL, 0, NULL);
        } else if (s->wait_replicas > 0 && !o->finished && s->ac != NULL) {
            wait_for_replicas(s, o); /* acknowledged once replicas have it */
        } else {
            finish(o, STATE_REDIS_OK, o->del ? no_version : o->to, NULL,
                   0, NULL);
        }
        return;
    }
    if (r->type != REDIS_REPLY_STRING
        || !parse_value(r->str, r->len, &v, &rec, &len)) {
        fail(o, o->kind == OP_GET
                    ? "the key holds no state of this tallyd's (a version "
                      "and a record)"
                    : "Redis answered the write with something unexpected");
        return;
    }
    finish(o, o->kind == OP_GET ? STATE_REDIS_OK : STATE_REDIS_CONFLICT, v,
           rec, len, NULL);
}

/* The written ops queued so far, covered by one WAIT: its timeout is
 * the latest of their deadlines (an op whose own passes sooner is failed
 * by the sweep). */
static void send_wait(state_redis *s)
{
    op *batch = s->wait_queue;
    s->wait_queue = s->wait_tail = NULL;
    uint64_t now = now_ns(), last = 0;
    for (op *o = batch; o != NULL; o = o->wnext)
        last = o->deadline_ns == 0 ? UINT64_MAX
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
            unlink_sent(s, o);
            o->sent = false;
            fail(o, "the write's WAIT could not be sent to Redis");
        }
        return;
    }
    s->wait_inflight = true;
}

/* The written ops no WAIT was sent for, failed: the connection went. */
static void fail_wait_queue(state_redis *s, const char *why)
{
    op *o = s->wait_queue;
    s->wait_queue = s->wait_tail = NULL;
    while (o != NULL) {
        op *next = o->wnext;
        unlink_sent(s, o);
        o->sent = false;
        fail(o, why);
        o = next;
    }
}

/* A written op waits for a WAIT: the next one, or one sent now. It stays
 * in the sent list, where the sweep sees its deadline. */
static void wait_for_replicas(state_redis *s, op *o)
{
    o->waiting_replicas = true;
    o->wnext = NULL;
    link_sent(s, o);
    if (s->wait_tail != NULL)
        s->wait_tail->wnext = o;
    else
        s->wait_queue = o;
    s->wait_tail = o;
    if (!s->wait_inflight)
        send_wait(s);
}

static void send_op(state_redis *s, op *o)
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
        if (o->expect.n != 0) {
            put_version((uint8_t *)expect, o->expect);
            expect[VERSION_LEN] = '\0';
        }
        if (o->ttl_ms == STATE_REDIS_KEEP_TTL)
            snprintf(ttl, sizeof ttl, "keep");
        else
            snprintf(ttl, sizeof ttl, "%llu", (unsigned long long)o->ttl_ms);
        argv[0] = o->eval ? "EVAL" : "EVALSHA";
        argv[1] = o->eval ? SCRIPT : s->sha;
        argv[2] = "1";
        argv[3] = (const char *)o->key;
        argv[4] = expect;
        argv[5] = ttl;
        argv[6] = o->touch ? "ttl" : o->del ? "del" : "put";
        argv[7] = o->rec != NULL ? (const char *)o->rec : "";
        argc = 8;
        for (int i = 0; i < argc; i++)
            argl[i] = i == 3 ? o->keylen
                      : i == 7 ? (o->rec != NULL ? o->len : 0)
                               : strlen(argv[i]);
    }
    o->sent_ns = now_ns();
    if (redisAsyncCommandArgv(s->ac, on_reply, o, argc, argv, argl)
        != REDIS_OK) {
        fail(o, "the command could not be sent to Redis");
        return;
    }
    link_sent(s, o);
}

static void send_waiting(state_redis *s)
{
    bool any = false;
    while (s->up && s->waiting != NULL) {
        op *o = s->waiting;
        s->waiting = o->next;
        if (s->waiting == NULL)
            s->waiting_tail = NULL;
        o->next = NULL;
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
    state_redis *s = t->data;
    uint64_t now = now_ns();
    for (op **pp = &s->waiting, *prev = NULL; *pp != NULL;) {
        op *o = *pp;
        if (o->deadline_ns != 0 && now >= o->deadline_ns) {
            *pp = o->next;
            if (s->waiting_tail == o)
                s->waiting_tail = prev;
            o->next = NULL;
            fail(o, "timed out waiting for a connection to Redis");
        } else {
            prev = o;
            pp = &o->next;
        }
    }
    for (op *o = s->sent; o != NULL; o = o->snext)
        if (!o->finished && o->deadline_ns != 0 && now >= o->deadline_ns)
            fail(o, o->waiting_replicas
                        ? "timed out waiting for Redis's replicas to take "
                          "the write (WAIT): it is in the primary, and may "
                          "or may not survive a failover"
                        : "timed out waiting for Redis's answer");
    if (s->waiting == NULL && s->sent == NULL)
        uv_timer_stop(&s->sweep);
}

/* ------------------------------------------------------ the adapter */

/* A connected context's writes wait for the loop's prepare step
 * (rpoll_flush, before the loop next waits): hiredis asks for
 * writability after each command it queues and lets go once its buffer
 * is out, and libuv pays two epoll_ctl calls for each change of a poll,
 * and a turn of the loop for the writability it reports at once. So the
 * poll watches writability only while the socket has refused a write's
 * end, and a batch of commands is one write(2), in the same turn. */
typedef struct {
    redisAsyncContext *ac; /* NULL once hiredis let go */
    uv_poll_t h;
    int events;  /* what hiredis asked for */
    int armed;   /* what the poll watches */
    bool flush;    /* a write waits for the prepare step */
    bool flushing; /* in rpoll_flush: a write asked for is a real one */
} rpoll;

static void rpoll_cb(uv_poll_t *h, int status, int events)
{
    rpoll *p = h->data;
    if (p->ac == NULL)
        return;
    if (status < 0) {
        /* POLLERR (libuv stopped the poll): hiredis finds the error on
         * the socket, on a connect's write or a connection's read */
        if (!(p->ac->c.flags & REDIS_CONNECTED))
            redisAsyncHandleWrite(p->ac);
        else
            redisAsyncHandleRead(p->ac);
        return;
    }
    if (events & UV_READABLE)
        redisAsyncHandleRead(p->ac);
    if (p->ac != NULL && (events & UV_WRITABLE))
        redisAsyncHandleWrite(p->ac);
}

static void rpoll_update(rpoll *p, int add, int del)
{
    p->events = (p->events | add) & ~del;
    int want = p->events;
    if ((want & UV_WRITABLE) && !p->flushing
        && (p->ac->c.flags & REDIS_CONNECTED)) {
        want &= ~UV_WRITABLE;
        p->flush = true;
    }
    if (want == p->armed)
        return;
    p->armed = want;
    if (want)
        uv_poll_start(&p->h, want, rpoll_cb);
    else
        uv_poll_stop(&p->h);
}

/* The writes hiredis asked for since the last turn, made now; one the
 * socket cannot take whole arms the poll (hiredis asks again, inside). */
static void rpoll_flush(rpoll *p)
{
    if (!p->flush || p->ac == NULL)
        return;
    p->flush = false;
    p->flushing = true;
    redisAsyncHandleWrite(p->ac); /* may let go of the context */
    p->flushing = false;
}

static void rpoll_add_read(void *d) { rpoll_update(d, UV_READABLE, 0); }
static void rpoll_del_read(void *d) { rpoll_update(d, 0, UV_READABLE); }
static void rpoll_add_write(void *d) { rpoll_update(d, UV_WRITABLE, 0); }
static void rpoll_del_write(void *d) { rpoll_update(d, 0, UV_WRITABLE); }

static void rpoll_closed(uv_handle_t *h)
{
    free(h->data);
}

static void rpoll_cleanup(void *d)
{
    rpoll *p = d;
    p->ac = NULL;
    uv_close((uv_handle_t *)&p->h, rpoll_closed);
}

static bool rpoll_attach(redisAsyncContext *ac, uv_loop_t *loop)
{
    rpoll *p = calloc(1, sizeof *p);
    if (p == NULL)
        return false;
    if (uv_poll_init(loop, &p->h, ac->c.fd) != 0) {
        free(p);
        return false;
    }
    p->ac = ac;
    p->h.data = p;
    ac->ev.data = p;
    ac->ev.addRead = rpoll_add_read;
    ac->ev.delRead = rpoll_del_read;
    ac->ev.addWrite = rpoll_add_write;
    ac->ev.delWrite = rpoll_del_write;
    ac->ev.cleanup = rpoll_cleanup;
    return true;
}

static void on_wake(uv_async_t *a);

/* The loop's prepare step: what the loop's own thread submitted is taken
 * in (on_wake's work), and the connection's queued commands go out. */
static void on_flush(uv_prepare_t *h)
{
    state_redis *s = h->data;
    if (!atomic_load_explicit(&s->self.known, memory_order_relaxed))
        loop_owner_set(&s->self);
    while (s->self_pending) { /* its callbacks may submit again */
        s->self_pending = false;
        on_wake(&s->wake);
    }
    if (s->ac != NULL)
        rpoll_flush(s->ac->ev.data);
}

/* ------------------------------------------------------ the connection */

static void connect_now(state_redis *s);

static void opened(state_redis *s, int how, const char *why)
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

static void retry_later(state_redis *s)
{
    if (s->stopping || s->opened != 1)
        return; /* while opening, a failure is the open's */
    uv_timer_start(&s->retry, on_retry, s->backoff_ms, 0);
    s->backoff_ms = s->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS
                                                       : s->backoff_ms * 2;
}

/* The handshake's replies: the first error is kept; the last reply
 * (PING's) decides. */
static void on_handshake(redisAsyncContext *ac, void *rp, void *priv)
{
    state_redis *s = ac->data;
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
    send_waiting(s);
}

/* What Redis's configuration says of its durability (CONFIG GET's
 * answer, pairs of names and values), logged when it changes. */
static void on_config(redisAsyncContext *ac, void *rp, void *priv)
{
    state_redis *s = ac->data;
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
    state_redis_durability d = STATE_REDIS_DURABLE_UNKNOWN;
    if (aof != NULL && strcmp(aof, "no") == 0)
        d = STATE_REDIS_DURABLE_NONE;
    else if (aof != NULL && fsync != NULL)
        d = strcmp(fsync, "always") == 0 ? STATE_REDIS_DURABLE_POWER
                                         : STATE_REDIS_DURABLE_CRASH;
    int was = atomic_exchange(&s->durability, (int)d);
    bool known = atomic_exchange(&s->durability_asked, true);
    if (was == (int)d && known)
        return;
    char u[400];
    redis_url_text(&s->url, u, sizeof u);
    switch (d) {
    case STATE_REDIS_DURABLE_NONE:
        log_msg("state", "warn",
                "Redis at %s runs without its append-only file (appendonly "
                "no): a restart of Redis loses every running sum written "
                "since its last snapshot, though tallyd answered those "
                "chunks; set appendonly yes (docs/durability.md)",
                u);
        break;
    case STATE_REDIS_DURABLE_CRASH:
        log_msg("state", "info",
                "Redis at %s keeps an append-only file (appendfsync %s): "
                "what it acknowledged survives a restart of Redis, not a "
                "power loss of its machine (docs/durability.md)",
                u, fsync);
        break;
    case STATE_REDIS_DURABLE_POWER:
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
                "keeps the running sums it acknowledged (docs/durability.md)",
                u,
                r->type == REDIS_REPLY_ERROR ? r->str
                                             : "an answer without appendonly");
        break;
    }
}

static void on_connect(const redisAsyncContext *ac, int status)
{
    state_redis *s = ac->data;
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
    const char *load[] = {"SCRIPT", "LOAD", SCRIPT};
    redisAsyncCommandArgv(c, on_handshake, NULL, 3, load, NULL);
    redisAsyncCommand(c, on_handshake, s, "PING");
    if (!s->attached) { /* the stores on doors' loops: the same Redis */
        const char *cfg[] = {"CONFIG", "GET", "appendonly", "appendfsync"};
        redisAsyncCommandArgv(c, on_config, NULL, 4, cfg, NULL);
    }
}

static void on_disconnect(const redisAsyncContext *ac, int status)
{
    state_redis *s = ac->data;
    (void)status;
    bool was_up = s->up;
    s->ac = NULL;
    s->up = false;
    s->wait_inflight = false;
    fail_wait_queue(s, "the connection to Redis was lost before its "
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
    state_redis *s = t->data;
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

static void connect_now(state_redis *s)
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
    if (!rpoll_attach(ac, s->loop)) {
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
    state_redis *s = t->data;
    opened(s, -1, "no answer in time (is the host reachable?)");
}

/* ------------------------------------------------------ the thread */

static void close_handle(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h))
        uv_close(h, NULL);
}

static void on_later(uv_timer_t *t);

/* Arms the timer for the soonest delayed op. */
static void arm_later(state_redis *s)
{
    if (s->delayed == NULL) {
        uv_timer_stop(&s->later);
        return;
    }
    uint64_t now = now_ns(), at = s->delayed->not_before_ns;
    uint64_t ms = at > now ? (at - now + 999999) / 1000000 : 0;
    uv_timer_start(&s->later, on_later, ms, 0);
}

/* Puts o among the delayed ops, in time order. */
static void delay(state_redis *s, op *o)
{
    op **pp = &s->delayed;
    while (*pp != NULL && (*pp)->not_before_ns <= o->not_before_ns)
        pp = &(*pp)->next;
    o->next = *pp;
    *pp = o;
    arm_later(s);
}

/* The delayed ops whose time has come join the others. */
static void on_later(uv_timer_t *t)
{
    state_redis *s = t->data;
    uint64_t now = now_ns();
    while (s->delayed != NULL && s->delayed->not_before_ns <= now) {
        op *o = s->delayed;
        s->delayed = o->next;
        o->next = NULL;
        if (s->waiting_tail != NULL)
            s->waiting_tail->next = o;
        else
            s->waiting = o;
        s->waiting_tail = o;
    }
    arm_later(s);
    if (s->waiting != NULL && !uv_is_active((uv_handle_t *)&s->sweep))
        uv_timer_start(&s->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    send_waiting(s);
}

/* The handles a store made on its loop. */
static uv_handle_t *const *handles(state_redis *s, uv_handle_t *out[7])
{
    out[0] = (uv_handle_t *)&s->wake;
    out[1] = (uv_handle_t *)&s->retry;
    out[2] = (uv_handle_t *)&s->sweep;
    out[3] = (uv_handle_t *)&s->open_timer;
    out[4] = (uv_handle_t *)&s->connect_timer;
    out[5] = (uv_handle_t *)&s->later;
    out[6] = (uv_handle_t *)&s->flush;
    return out;
}

/* Closing (s->closing set): every op not yet answered fails, the
 * connection goes (its sent ops fail through hiredis), and the handles
 * close; the store's own loop then ends. Its loop's thread. */
static void shut(state_redis *s)
{
    s->stopping = true;
    while (s->delayed != NULL) {
        op *o = s->delayed;
        s->delayed = o->next;
        o->next = NULL;
        fail(o, "the store is closing");
    }
    while (s->waiting != NULL) {
        op *o = s->waiting;
        s->waiting = o->next;
        o->next = NULL;
        fail(o, "the store is closing");
    }
    s->waiting_tail = NULL;
    if (s->ac != NULL) {
        redisAsyncContext *ac = s->ac;
        s->ac = NULL;
        redisAsyncFree(ac); /* the sent ops' callbacks: NULL replies */
    }
    fail_wait_queue(s, "the store is closing");
    if (!s->attached) {
        uv_walk(s->loop, close_handle, NULL);
        return;
    }
    uv_handle_t *h[7];
    handles(s, h);
    for (int i = 0; i < 7; i++)
        close_handle(h[i], NULL);
}

static void on_wake(uv_async_t *a)
{
    state_redis *s = a->data;
    uv_mutex_lock(&s->mu);
    op *in = s->incoming;
    s->incoming = s->incoming_tail = NULL;
    bool closing = s->closing;
    uv_mutex_unlock(&s->mu);
    for (op *o = in, *next; o != NULL; o = next) {
        next = o->next;
        o->next = NULL;
        if (closing) {
            fail(o, "the store is closing");
            continue;
        }
        if (o->not_before_ns > now_ns()) {
            delay(s, o);
            continue;
        }
        if (s->waiting_tail != NULL)
            s->waiting_tail->next = o;
        else
            s->waiting = o;
        s->waiting_tail = o;
    }
    if (closing) {
        shut(s);
        return;
    }
    if (s->waiting != NULL && !uv_is_active((uv_handle_t *)&s->sweep))
        uv_timer_start(&s->sweep, on_sweep, SWEEP_MS, SWEEP_MS);
    send_waiting(s);
}

static void run(void *arg)
{
    state_redis *s = arg;
    connect_now(s);
    uv_run(s->loop, UV_RUN_DEFAULT);
}

/* The store's handles on s->loop, made by the loop's thread or before
 * the loop runs. */
static void init_handles(state_redis *s)
{
    uv_async_init(s->loop, &s->wake, on_wake);
    s->wake.data = s;
    uv_timer_t *timers[] = {&s->retry, &s->sweep, &s->open_timer,
                            &s->connect_timer, &s->later};
    for (size_t i = 0; i < sizeof timers / sizeof timers[0]; i++) {
        uv_timer_init(s->loop, timers[i]);
        timers[i]->data = s;
    }
    uv_prepare_init(s->loop, &s->flush);
    s->flush.data = s;
    uv_prepare_start(&s->flush, on_flush);
}

/* A store not yet on any loop: URL, prefix, the script's SHA-1, locks. */
static state_redis *new_store(const redis_url *u, const char *prefix,
                              uint64_t timeout_ms, unsigned wait_replicas,
                              char *msg, size_t msglen)
{
    if (strlen(prefix) > MAX_PREFIX) {
        snprintf(msg, msglen, "the key prefix is longer than %d bytes",
                 MAX_PREFIX);
        return NULL;
    }
    state_redis *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    s->url = *u;
    snprintf(s->prefix, sizeof s->prefix, "%s", prefix);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned mdlen = 0;
    if (EVP_Digest(SCRIPT, sizeof SCRIPT - 1, md, &mdlen, EVP_sha1(), NULL) != 1
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
    atomic_init(&s->durability, STATE_REDIS_DURABLE_UNKNOWN);
    uv_mutex_init(&s->mu);
    uv_cond_init(&s->opened_cv);
    return s;
}

static void free_store(state_redis *s)
{
    uv_cond_destroy(&s->opened_cv);
    uv_mutex_destroy(&s->mu);
    free(s);
}

state_redis *state_redis_open(const redis_url *u, const char *prefix,
                              uint64_t timeout_ms, unsigned wait_replicas,
                              char *msg, size_t msglen)
{
    state_redis *s = new_store(u, prefix, timeout_ms, wait_replicas, msg,
                               msglen);
    if (s == NULL)
        return NULL;
    s->loop = &s->own;
    if (uv_loop_init(s->loop) != 0) {
        snprintf(msg, msglen, "out of memory");
        free_store(s);
        return NULL;
    }
    init_handles(s);
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
        state_redis_close(s);
        return NULL;
    }
    return s;
}

state_redis *state_redis_open_on(const state_redis *like, uv_loop_t *loop,
                                 char *msg, size_t msglen)
{
    state_redis *s =
        new_store(&like->url, like->prefix, like->timeout_ms,
                  like->wait_replicas, msg, msglen);
    if (s == NULL)
        return NULL;
    s->loop = loop;
    s->attached = true;
    /* open already: its connect's failures are retried, as a lost
     * connection's are, and what is asked meanwhile waits for it */
    s->opened = 1;
    init_handles(s);
    connect_now(s);
    return s;
}

void state_redis_stop(state_redis *s)
{
    if (s == NULL || !s->attached)
        return;
    uv_mutex_lock(&s->mu);
    bool was = s->closing;
    s->closing = true;
    uv_mutex_unlock(&s->mu);
    if (!was)
        on_wake(&s->wake); /* fails what came in, then shut() */
}

void state_redis_close(state_redis *s)
{
    if (s == NULL)
        return;
    if (s->attached) { /* stopped, and its handles' closes have run */
        free_store(s);
        return;
    }
    uv_mutex_lock(&s->mu);
    s->closing = true;
    uv_async_send(&s->wake);
    uv_mutex_unlock(&s->mu);
    uv_thread_join(&s->thread);
    uv_loop_close(s->loop);
    free_store(s);
}

/* ------------------------------------------------------ the callers */

static bool submit(state_redis *s, op *o)
{
    bool own = loop_owner_is_me(&s->self);
    uv_mutex_lock(&s->mu);
    bool closing = s->closing;
    if (!closing) {
        if (s->incoming_tail != NULL)
            s->incoming_tail->next = o;
        else
            s->incoming = o;
        s->incoming_tail = o;
        /* under mu: the loop closes the handle only once closing; its
         * own thread takes incoming in at its prepare step instead */
        if (own)
            s->self_pending = true;
        else
            uv_async_send(&s->wake);
    }
    uv_mutex_unlock(&s->mu);
    if (closing) { /* done() only ever runs on the store's loop */
        op_free(o);
        return false;
    }
    return true;
}

/* An op, with room after it for its key and vlen bytes of value (o->rec,
 * left to the caller to fill), in one allocation. */
static op *new_op(state_redis *s, int kind, const uint8_t *id, size_t idlen,
                  size_t vlen, uint64_t deadline_ns, state_redis_done done,
                  void *ctx)
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

bool state_redis_get(state_redis *s, const uint8_t *id, size_t idlen,
                     uint64_t deadline_ns, state_redis_done done, void *ctx)
{
    op *o = new_op(s, OP_GET, id, idlen, 0, deadline_ns, done, ctx);
    return o != NULL && submit(s, o);
}

bool state_redis_put(state_redis *s, const uint8_t *id, size_t idlen,
                     state_version expect, state_version next,
                     const uint8_t *record, size_t len, uint64_t ttl_ms,
                     uint64_t deadline_ns, state_redis_done done, void *ctx)
{
    /* counts stay below 10^16: one a chunk, for a sequence that lives no
     * longer than its idle time between chunks */
    if (next.n == 0 || next.n > 9999999999999999ull || next.inc == 0)
        return false;
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

bool state_redis_touch(state_redis *s, const uint8_t *id, size_t idlen,
                       state_version expect, uint64_t ttl_ms,
                       uint64_t deadline_ns, state_redis_done done, void *ctx)
{
    if (expect.n == 0 || ttl_ms == 0 || ttl_ms == STATE_REDIS_KEEP_TTL)
        return false;
    op *o = new_op(s, OP_PUT, id, idlen, 0, deadline_ns, done, ctx);
    if (o == NULL)
        return false;
    o->expect = expect;
    o->ttl_ms = ttl_ms;
    o->touch = true;
    return submit(s, o);
}

bool state_redis_get_later(state_redis *s, const uint8_t *id, size_t idlen,
                           uint64_t delay_ms, uint64_t deadline_ns,
                           state_redis_done done, void *ctx)
{
    op *o = new_op(s, OP_GET, id, idlen, 0, deadline_ns, done, ctx);
    if (o == NULL)
        return false;
    o->not_before_ns = now_ns() + delay_ms * 1000000u;
    return submit(s, o);
}

void state_redis_get_stats(state_redis *s, state_redis_stats *out)
{
    out->up = atomic_load(&s->stat_up);
    out->answered = atomic_load(&s->answered);
    out->rtt_ns = atomic_load(&s->rtt_ns);
    out->failures = atomic_load(&s->failures);
    out->reconnects = atomic_load(&s->reconnects);
    out->durability = (state_redis_durability)atomic_load(&s->durability);
    out->durability_asked = atomic_load(&s->durability_asked);
}
