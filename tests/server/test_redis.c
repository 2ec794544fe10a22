/*
 * test_redis.c - the Redis client (server/redis/)
 * against Debian's redis-server, started
 * here on a free port for each case (never a mock): the URL, reads and
 * compare-and-set writes, two stores racing on one key, AUTH, a server
 * that is not there, one that stops answering, and one that restarts.
 */
#include <errno.h>
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "mailbox.h"
#include "check.h"
#include "clock.h"
#include "redis_server.h"
#include "redis_store.h"

/* ------------------------------------------------------- a call's end */

/* The versions the test's writes made, by key, each with its count: the
 * writes since the key was made (versions are drawn, not counted: the
 * test counts them to say which one it means). */
static struct {
    char key[64];
    kv_version v;
    uint64_t count;
} made[4096];
static size_t nmade;
static uv_mutex_t made_mu;
static uv_once_t made_once = UV_ONCE_INIT;

static void made_init(void)
{
    uv_mutex_init(&made_mu);
}

static void made_add(const char *key, kv_version v, uint64_t count)
{
    uv_once(&made_once, made_init);
    uv_mutex_lock(&made_mu);
    if (nmade < sizeof made / sizeof made[0]) {
        snprintf(made[nmade].key, sizeof made[nmade].key, "%s", key);
        made[nmade].v = v;
        made[nmade++].count = count;
    }
    uv_mutex_unlock(&made_mu);
}

/* The count of key's version v (0: none; UINT64_MAX: not the test's). */
static uint64_t made_count(const char *key, kv_version v)
{
    if (kv_version_none(v))
        return 0;
    uv_once(&made_once, made_init);
    uv_mutex_lock(&made_mu);
    uint64_t n = UINT64_MAX;
    for (size_t i = nmade; i-- > 0 && n == UINT64_MAX;)
        if (strcmp(made[i].key, key) == 0 && kv_version_equal(made[i].v, v))
            n = made[i].count;
    uv_mutex_unlock(&made_mu);
    return n;
}

/* The latest version of key with count n (n 0: none). */
static kv_version made_version(const char *key, uint64_t n)
{
    kv_version v = {0, 0};
    if (n == 0)
        return v;
    uv_once(&made_once, made_init);
    uv_mutex_lock(&made_mu);
    for (size_t i = nmade; i-- > 0;)
        if (strcmp(made[i].key, key) == 0 && made[i].count == n) {
            v = made[i].v;
            break;
        }
    uv_mutex_unlock(&made_mu);
    return v;
}

typedef struct {
    uv_mutex_t mu;
    uv_cond_t cv;
    int calls;
    kv_result r;
    const char *key;  /* the call's, for the counts */
    int64_t writing;  /* a write's expected count (-1: not a write) */
    uint64_t version; /* the count of the version the call saw or made */
    kv_version ver;
    char rec[2048];
    size_t len;
    bool has_rec;
    char why[512];
} waiter;

static void waiter_init(waiter *w)
{
    memset(w, 0, sizeof *w);
    w->writing = -1;
    uv_mutex_init(&w->mu);
    uv_cond_init(&w->cv);
}

static void waiter_free(waiter *w)
{
    uv_cond_destroy(&w->cv);
    uv_mutex_destroy(&w->mu);
}

static void on_done(void *ctx, kv_result r, kv_version version,
                    const uint8_t *rec, size_t len, const char *why)
{
    waiter *w = ctx;
    uv_mutex_lock(&w->mu);
    w->calls++;
    w->r = r;
    if (r == KV_OK && w->writing >= 0 && !kv_version_none(version)) {
        bool touch = made_count(w->key, version) != UINT64_MAX;
        if (!touch)
            made_add(w->key, version, (uint64_t)w->writing + 1);
    }
    w->version = w->key != NULL ? made_count(w->key, version) : 0;
    if (!kv_version_none(version))
        w->ver = version;
    w->has_rec = rec != NULL;
    w->len = len < sizeof w->rec ? len : sizeof w->rec;
    if (rec != NULL)
        memcpy(w->rec, rec, w->len);
    snprintf(w->why, sizeof w->why, "%s", why ? why : "");
    uv_cond_signal(&w->cv);
    uv_mutex_unlock(&w->mu);
}

/* Waits for the call before it (calls == want); false after 10 s. */
static bool wait_calls(waiter *w, int want)
{
    uint64_t end = now_ns() + 10000000000ull;
    uv_mutex_lock(&w->mu);
    while (w->calls < want && now_ns() < end)
        uv_cond_timedwait(&w->cv, &w->mu, 10000000);
    bool ok = w->calls >= want;
    uv_mutex_unlock(&w->mu);
    return ok;
}

static kv_result get(kv *s, waiter *w, const char *id, uint64_t deadline_ns)
{
    int want = w->calls + 1;
    w->key = id;
    w->writing = -1;
    if (!s->ops->get(s, (const uint8_t *)id, strlen(id), 0, deadline_ns,
                     on_done, w))
        return (kv_result)-1;
    return wait_calls(w, want) ? w->r : (kv_result)-1;
}

/* A write at the version of id with count `expect` (0: a key that is
 * not there). */
static kv_result put(kv *s, waiter *w, const char *id, uint64_t expect,
                     const void *rec, size_t len, uint64_t ttl_ms)
{
    int want = w->calls + 1;
    kv_version e = made_version(id, expect);
    w->key = id;
    w->writing = (int64_t)expect;
    if (!s->ops->put(s, (const uint8_t *)id, strlen(id), e, rec, len, ttl_ms, 0,
                     0, now_ns() + 5000000000ull, on_done, w))
        return (kv_result)-1;
    return wait_calls(w, want) ? w->r : (kv_result)-1;
}

static kv *open_at(unsigned port, const char *userpass, char *msg,
                   size_t msglen, uint64_t timeout_ms)
{
    char url[300];
    snprintf(url, sizeof url, "redis://%s%s127.0.0.1:%u",
             userpass ? userpass : "", userpass ? "@" : "", port);
    redis_url u;
    if (!redis_url_parse(url, &u, msg, msglen))
        return NULL;
    return redis_store_open(&u, "tally:test:", timeout_ms, 0, msg, msglen);
}

/* Closes a store; NULL is a no-op. */
static void store_close(kv *s)
{
    if (s != NULL)
        s->ops->close(s);
}

/* A redis-server on a free port, a store on it and a connection of the
 * test's own. */
typedef struct {
    pid_t pid;
    kv *s;
    redisContext *c;
} served;

/* False (a CHECK failed, and everything is stopped) when the store or
 * the connection did not come. */
static bool serve_up(served *v)
{
    unsigned port = free_port();
    char msg[512];
    v->pid = start_redis(port, NULL);
    v->s = open_at(port, NULL, msg, sizeof msg, 5000);
    CHECK(v->s != NULL, "open: %s", msg);
    v->c = sync_conn(port, NULL);
    if (v->s != NULL && v->c != NULL)
        return true;
    if (v->c != NULL)
        redisFree(v->c);
    store_close(v->s);
    stop_redis(v->pid, SIGTERM);
    return false;
}

static void serve_down(served *v)
{
    redisFree(v->c);
    store_close(v->s);
    stop_redis(v->pid, SIGTERM);
}

/* ------------------------------------------------------- the cases */

static void url_forms(void)
{
    redis_url u;
    char msg[512], text[600];
    CHECK(redis_url_parse("redis://localhost", &u, msg, sizeof msg)
              && strcmp(u.host, "localhost") == 0 && u.port == 6379 && u.db == 0
              && u.user[0] == '\0' && u.password[0] == '\0',
          "plain: %s", msg);
    CHECK(redis_url_parse("redis://h:7000/3", &u, msg, sizeof msg)
              && u.port == 7000 && u.db == 3,
          "port and db: %s", msg);
    CHECK(redis_url_parse("redis://:pw@h:1/2", &u, msg, sizeof msg)
              && strcmp(u.password, "pw") == 0 && u.user[0] == '\0'
              && u.port == 1 && u.db == 2,
          "password: %s", msg);
    CHECK(redis_url_parse("redis://me:s3cret@[::1]:6380/", &u, msg, sizeof msg)
              && strcmp(u.user, "me") == 0 && strcmp(u.password, "s3cret") == 0
              && strcmp(u.host, "::1") == 0 && u.port == 6380,
          "user, IPv6: %s", msg);
    redis_url_text(&u, text, sizeof text);
    CHECK(strcmp(text, "redis://me:***@[::1]:6380/0") == 0, "text: %s", text);
    static const char *bad[] = {
        "http://h", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x",
        "redis://h/16", "redis://h/x", "redis://pw@h", "redis://[::1",
        "rediss://h", "redis://h:1/2/3", "redis://u:s3cret@h:0",
        /* a password in every shape a first try may take */
        "rediss://:s3cret@h", "REDIS://:s3cret@h", " redis://:s3cret@h",
        "redis://s3cret@h", "redis://:s3cret@", "redis://u:s3cret@", "s3cret@h",
        "redis://:s3c@ret@h:x", "redis://u:s3cret@h/99",
        "redis://:s3cret127.0.0.1:6390", "redis://u:s3cret127.0.0.1",
        "redis://s3cret:6390x", "rediss://:s3cret[::1]:6390"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        msg[0] = '\0';
        CHECK(!redis_url_parse(bad[i], &u, msg, sizeof msg) && msg[0] != '\0',
              "%s was taken", bad[i]);
        CHECK(strstr(msg, "s3cret") == NULL && strstr(msg, "s3c") == NULL
                  && strstr(msg, "ret@") == NULL,
              "the password in: %s", msg);
    }
}

static void reads_and_writes(void)
{
    served v;
    if (!serve_up(&v))
        return;
    kv *s = v.s;
    redisContext *c = v.c;
    waiter w;
    waiter_init(&w);
    CHECK(get(s, &w, "a", 0) == KV_OK && w.version == 0 && !w.has_rec,
          "a missing key: %d v%llu", w.r, (unsigned long long)w.version);
    CHECK(put(s, &w, "a", 0, "one", 3, 60000) == KV_OK && w.version == 1,
          "the first write: %d v%llu %s", w.r, (unsigned long long)w.version,
          w.why);
    CHECK(get(s, &w, "a", 0) == KV_OK && w.version == 1 && w.len == 3
              && memcmp(w.rec, "one", 3) == 0,
          "read back: %d v%llu", w.r, (unsigned long long)w.version);
    /* a writer that read nothing, late: refused, told what is there */
    CHECK(put(s, &w, "a", 0, "zzz", 3, 60000) == KV_CONFLICT && w.version == 1
              && w.len == 3 && memcmp(w.rec, "one", 3) == 0,
          "a stale write: %d v%llu", w.r, (unsigned long long)w.version);
    CHECK(put(s, &w, "a", 1, "two", 3, 60000) == KV_OK && w.version == 2,
          "the second write: %d", w.r);
    redisReply *r = redisCommand(c, "PTTL tally:test:a");
    CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer > 0
              && r->integer <= 60000,
          "the key's time to live: %lld", r ? r->integer : -9);
    if (r != NULL)
        freeReplyObject(r);
    CHECK(put(s, &w, "a", 2, "three", 5, 0) == KV_OK && w.version == 3,
          "a write with no time to live: %d", w.r);
    r = redisCommand(c, "PTTL tally:test:a");
    CHECK(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == -1,
          "persisted: %lld", r ? r->integer : -9);
    if (r != NULL)
        freeReplyObject(r);
    /* a record is bytes: zeros and all */
    uint8_t bin[1500];
    for (size_t i = 0; i < sizeof bin; i++)
        bin[i] = (uint8_t)check_rand();
    bin[0] = 0;
    bin[700] = 0;
    CHECK(put(s, &w, "a", 3, bin, sizeof bin, 60000) == KV_OK
              && get(s, &w, "a", 0) == KV_OK && w.version == 4
              && w.len == sizeof bin && memcmp(w.rec, bin, sizeof bin) == 0,
          "binary record: %d len %zu", w.r, w.len);
    /* an id is bytes too */
    const char id2[] = "seq\001{x}";
    CHECK(put(s, &w, id2, 0, "x", 1, 1000) == KV_OK, "odd id: %d", w.r);
    /* delete: only at the version read */
    CHECK(put(s, &w, "a", 3, NULL, 0, 0) == KV_CONFLICT && w.version == 4,
          "a stale delete: %d", w.r);
    CHECK(put(s, &w, "a", 4, NULL, 0, 0) == KV_OK && w.version == 0,
          "delete: %d", w.r);
    CHECK(get(s, &w, "a", 0) == KV_OK && w.version == 0 && !w.has_rec,
          "gone: v%llu", (unsigned long long)w.version);
    CHECK(put(s, &w, "a", 4, "x", 1, 0) == KV_CONFLICT && w.version == 0
              && !w.has_rec,
          "a write to a deleted key: %d v%llu", w.r,
          (unsigned long long)w.version);
    /* a key that holds something else is named as such: a string not of
     * tally's, and a key of another type (by Redis's words) */
    static const struct {
        const char *set, *id, *read_says;
    } foreign[] = {
        {"SET tally:test:b notanumberatall", "b", "no state"},
        {"HSET tally:test:h v 1 r x", "h", "WRONGTYPE"},
    };
    for (size_t i = 0; i < sizeof foreign / sizeof foreign[0]; i++) {
        r = redisCommand(c, foreign[i].set);
        if (r != NULL)
            freeReplyObject(r);
        CHECK(get(s, &w, foreign[i].id, 0) == KV_FAILED
                  && strstr(w.why, foreign[i].read_says) != NULL,
              "a foreign key %s: %d %s", foreign[i].id, w.r, w.why);
    }
    CHECK(put(s, &w, "b", 1, "x", 1, 0) == KV_FAILED
              && strstr(w.why, "unexpected") != NULL,
          "a write over a foreign key: %d %s", w.r, w.why);
    kv_stats st;
    s->ops->stats(s, &st);
    CHECK(st.up && st.answered >= 14 && st.rtt_ns > 0 && st.reconnects == 0,
          "stats: up %d, %llu answered", st.up,
          (unsigned long long)st.answered);
    waiter_free(&w);
    serve_down(&v);
}

/* Two stores, two threads, one counter: read, add one, write at the
 * version read, again on a conflict. Every increment lands once. */
typedef struct {
    kv *s;
    int n, conflicts, failures;
} racer;

static void race(void *arg)
{
    racer *r = arg;
    waiter w;
    waiter_init(&w);
    for (int i = 0; i < r->n; i++) {
        for (;;) {
            if (get(r->s, &w, "counter", 0) != KV_OK) {
                r->failures++;
                break;
            }
            char buf[32];
            long v = w.has_rec ? strtol(w.rec, NULL, 10) : 0;
            int len = snprintf(buf, sizeof buf, "%ld", v + 1);
            kv_result res =
                put(r->s, &w, "counter", w.version, buf, (size_t)len + 1, 0);
            if (res == KV_OK)
                break;
            if (res != KV_CONFLICT) {
                r->failures++;
                break;
            }
            r->conflicts++;
        }
    }
    waiter_free(&w);
}

static void two_writers(void)
{
    unsigned port = free_port();
    pid_t pid = start_redis(port, NULL);
    char msg[512];
    kv *a = open_at(port, NULL, msg, sizeof msg, 5000),
       *b = open_at(port, NULL, msg, sizeof msg, 5000);
    CHECK(a != NULL && b != NULL, "open: %s", msg);
    if (a != NULL && b != NULL) {
        racer ra = {a, 300, 0, 0}, rb = {b, 300, 0, 0};
        uv_thread_t ta, tb;
        uv_thread_create(&ta, race, &ra);
        uv_thread_create(&tb, race, &rb);
        uv_thread_join(&ta);
        uv_thread_join(&tb);
        waiter w;
        waiter_init(&w);
        CHECK(get(a, &w, "counter", 0) == KV_OK && w.version == 600
                  && strcmp(w.rec, "600") == 0,
              "600 increments: version %llu, count %s (%d and %d conflicts)",
              (unsigned long long)w.version, w.rec, ra.conflicts, rb.conflicts);
        CHECK(ra.failures == 0 && rb.failures == 0, "failures: %d %d",
              ra.failures, rb.failures);
        printf("    %d and %d conflicts\n", ra.conflicts, rb.conflicts);
        waiter_free(&w);
    }
    store_close(a);
    store_close(b);
    stop_redis(pid, SIGTERM);
}

static void passwords(void)
{
    unsigned port = free_port();
    pid_t pid = start_redis(port, "s3cret");
    char msg[512];
    kv *s = open_at(port, NULL, msg, sizeof msg, 5000);
    CHECK(s == NULL && strstr(msg, "NOAUTH") != NULL
              && strstr(msg, "redis://127.0.0.1:") != NULL,
          "no password: %s", msg);
    store_close(s);
    s = open_at(port, ":wrong", msg, sizeof msg, 5000);
    CHECK(s == NULL && strstr(msg, "wrong") == NULL
              && strstr(msg, "redis://:***@127.0.0.1:") != NULL
              && strstr(msg, "refused") != NULL,
          "a wrong password: %s", msg);
    store_close(s);
    s = open_at(port, "default:s3cret", msg, sizeof msg, 5000);
    CHECK(s != NULL, "the right password, user default: %s", msg);
    waiter w;
    waiter_init(&w);
    if (s != NULL)
        CHECK(put(s, &w, "p", 0, "x", 1, 1000) == KV_OK,
              "a write after AUTH: %d %s", w.r, w.why);
    store_close(s);
    waiter_free(&w);
    stop_redis(pid, SIGTERM);
}

static void nobody_there(void)
{
    unsigned port = free_port();
    char msg[512];
    uint64_t t0 = now_ns();
    kv *s = open_at(port, NULL, msg, sizeof msg, 3000);
    char want[64];
    snprintf(want, sizeof want, "redis://127.0.0.1:%u/0", port);
    CHECK(s == NULL && strstr(msg, want) != NULL
              && strstr(msg, "cannot connect") != NULL,
          "nothing listening: %s", msg);
    CHECK(now_ns() - t0 < 2000000000ull, "took %.1f s",
          (double)(now_ns() - t0) / 1e9);
    store_close(s);
    /* a server that takes the connection and never answers */
    pid_t pid = start_redis(port, NULL);
    kill(pid, SIGSTOP);
    t0 = now_ns();
    s = open_at(port, NULL, msg, sizeof msg, 300);
    CHECK(s == NULL && strstr(msg, "no answer in time") != NULL,
          "a stopped server: %s", msg);
    CHECK(now_ns() - t0 < 2000000000ull, "its timeout took %.1f s",
          (double)(now_ns() - t0) / 1e9);
    store_close(s);
    stop_redis(pid, SIGTERM);
}

static void stops_and_restarts(void)
{
    unsigned port = free_port();
    pid_t pid = start_redis(port, NULL);
    char msg[512];
    kv *s = open_at(port, NULL, msg, sizeof msg, 5000);
    CHECK(s != NULL, "open: %s", msg);
    if (s == NULL) {
        stop_redis(pid, SIGTERM);
        return;
    }
    waiter w;
    waiter_init(&w);
    CHECK(put(s, &w, "k", 0, "x", 1, 0) == KV_OK, "write: %d", w.r);

    /* it stops answering: a deadline ends the wait, once */
    kill(pid, SIGSTOP);
    uint64_t t0 = now_ns();
    CHECK(get(s, &w, "k", now_ns() + 200000000ull) == KV_FAILED
              && strstr(w.why, "timed out") != NULL,
          "a stopped server: %d %s", w.r, w.why);
    CHECK(now_ns() - t0 < 1000000000ull, "the deadline took %.2f s",
          (double)(now_ns() - t0) / 1e9);
    int calls = w.calls;
    kill(pid, SIGCONT);
    CHECK(get(s, &w, "k", 0) == KV_OK && w.version == 1, "answering again: %d",
          w.r);
    CHECK(w.calls == calls + 1, "the late reply was not dropped: %d calls",
          w.calls - calls);

    /* it dies: what is asked for fails, then it comes back (empty: no
     * persistence here), and the store connects again by itself */
    stop_redis(pid, SIGKILL);
    CHECK(get(s, &w, "k", now_ns() + 300000000ull) == KV_FAILED,
          "a dead server: %d", w.r);
    pid = start_redis(port, NULL);
    kv_result r = (kv_result)-1;
    for (int i = 0; i < 100 && r != KV_OK; i++) {
        r = get(s, &w, "k", now_ns() + 200000000ull);
        if (r != KV_OK)
            uv_sleep(50);
    }
    CHECK(r == KV_OK && w.version == 0, "after the restart: %d v%llu %s", r,
          (unsigned long long)w.version, w.why);
    kv_stats st;
    s->ops->stats(s, &st);
    CHECK(st.up && st.reconnects >= 1 && st.failures >= 2,
          "stats: up %d, %llu reconnects, %llu failures", st.up,
          (unsigned long long)st.reconnects, (unsigned long long)st.failures);
    /* what is asked for during the outage waits for the connection (once
     * the store has seen the connection go: what was sent before fails) */
    stop_redis(pid, SIGKILL);
    for (int i = 0; i < 200; i++) {
        s->ops->stats(s, &st);
        if (!st.up)
            break;
        uv_sleep(10);
    }
    CHECK(!st.up, "the store did not see Redis go");
    int want = w.calls + 1;
    kv_version none = {0, 0};
    w.key = "k";
    w.writing = 0;
    CHECK(s->ops->put(s, (const uint8_t *)"k", 1, none, (const uint8_t *)"y", 1,
                      0, 0, 0, now_ns() + 8000000000ull, on_done, &w),
          "a write while it is down");
    uv_sleep(200);
    pid = start_redis(port, NULL);
    CHECK(wait_calls(&w, want) && w.r == KV_OK && w.version == 1,
          "a write that waited for the connection: %d %s", w.r, w.why);
    store_close(s);
    waiter_free(&w);
    stop_redis(pid, SIGTERM);
}

/* Writes larger than the socket takes at once, several queued together:
 * the store's flush before the loop waits leaves the rest to the poll
 * for writability, and every byte arrives. */
static void big_writes(void)
{
    enum { KEYS = 8, BIG = 4 << 20 };
    served v;
    if (!serve_up(&v))
        return;
    kv *s = v.s;
    redisContext *c = v.c;
    uint8_t *rec = malloc((size_t)KEYS * BIG);
    waiter *w = calloc(KEYS, sizeof *w);
    if (rec == NULL || w == NULL) {
        CHECK(false, "out of memory");
        free(rec);
        free(w);
        serve_down(&v);
        return;
    }
    uint64_t seed = now_ns(), x = seed | 1;
    printf("big_writes: seed %llu\n", (unsigned long long)seed);
    for (size_t i = 0; i < (size_t)KEYS * BIG; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        rec[i] = (uint8_t)x;
    }
    char id[KEYS][16];
    for (int k = 0; k < KEYS; k++) {
        waiter_init(&w[k]);
        snprintf(id[k], sizeof id[k], "big%d", k);
        kv_version none = {0, 0};
        w[k].key = id[k];
        w[k].writing = 0;
        CHECK(s->ops->put(s, (const uint8_t *)id[k], strlen(id[k]), none,
                          rec + (size_t)k * BIG, BIG, 60000, 0, 0,
                          now_ns() + 30000000000ull, on_done, &w[k]),
              "put %d refused", k);
    }
    for (int k = 0; k < KEYS; k++) {
        CHECK(wait_calls(&w[k], 1) && w[k].r == KV_OK, "put %d: %d (%s)", k,
              (int)w[k].r, w[k].why);
        redisReply *r = redisCommand(c, "GET tally:test:%s", id[k]);
        char ver[33];
        snprintf(ver, sizeof ver, "%016llx%016llx",
                 (unsigned long long)w[k].ver.hi,
                 (unsigned long long)w[k].ver.lo);
        CHECK(r != NULL && r->type == REDIS_REPLY_STRING && r->len == 32 + BIG
                  && memcmp(r->str, ver, 32) == 0
                  && memcmp(r->str + 32, rec + (size_t)k * BIG, BIG) == 0,
              "key %d holds another value (%zu bytes)", k,
              r != NULL && r->type == REDIS_REPLY_STRING ? (size_t)r->len : 0);
        if (r != NULL)
            freeReplyObject(r);
        waiter_free(&w[k]);
    }
    free(w);
    free(rec);
    serve_down(&v);
}

/* ---------------------------------------------- a store on a caller's loop */

typedef struct {
    uv_loop_t loop;
    mailbox mb;    /* the loop's, which the store takes a receiver on */
    mailbox_rx rx; /* the door's: stops the store, then closes the mailbox */
    uv_thread_t thread;
    kv *near;
} door_loop;

static void on_ask(mailbox_rx *rx, mailbox_item *items)
{
    door_loop *d = rx->data;
    (void)items;
    d->near->ops->stop(d->near);
    d->near->ops->stop(d->near); /* a second stop: nothing */
    mailbox_leave(&d->rx);
    mailbox_close(&d->mb);
}

static void run_door_loop(void *arg)
{
    door_loop *d = arg;
    mailbox_own(&d->mb);
    uv_run(&d->loop, UV_RUN_DEFAULT);
}

typedef struct {
    waiter w;
    uv_thread_t on; /* the thread the last callback ran on */
} tracked;

static void on_done_where(void *ctx, kv_result r, kv_version version,
                          const uint8_t *rec, size_t len, const char *why)
{
    tracked *t = ctx;
    t->on = uv_thread_self(); /* before on_done wakes the test */
    on_done(&t->w, r, version, rec, len, why);
}

/* ->ops->open_on(,): a second connection on a loop of the caller's
 * (a door's), whose thread runs its callbacks; the same keys as the
 * store it copies; stopped before its loop ends, which then closes with
 * nothing of the store's left on it. */
static void on_a_loop(void)
{
    served v;
    if (!serve_up(&v))
        return;
    door_loop d;
    memset(&d, 0, sizeof d);
    char msg[512];
    CHECK(uv_loop_init(&d.loop) == 0, "loop");
    mailbox_init(&d.mb, &d.loop);
    mailbox_listen(&d.mb, &d.rx, 0, on_ask, &d);
    d.near = v.s->ops->open_on(v.s, &d.mb, msg, sizeof msg);
    CHECK(d.near != NULL, "open_on: %s", msg);
    if (d.near == NULL) {
        mailbox_leave(&d.rx);
        mailbox_close(&d.mb);
        uv_run(&d.loop, UV_RUN_DEFAULT);
        uv_loop_close(&d.loop);
        serve_down(&v);
        return;
    }
    CHECK(uv_thread_create(&d.thread, run_door_loop, &d) == 0, "thread");
    tracked t;
    waiter_init(&t.w);
    /* asked for at once: it waits for the connection it is making */
    int want = t.w.calls + 1;
    kv_version none = {0, 0};
    t.w.key = "L";
    t.w.writing = 0;
    CHECK(d.near->ops->put(d.near, (const uint8_t *)"L", 1, none,
                           (const uint8_t *)"one", 3, 60000, 0, 0,
                           now_ns() + 5000000000ull, on_done_where, &t)
              && wait_calls(&t.w, want) && t.w.r == KV_OK && t.w.version == 1,
          "a write on the loop's connection: %d v%llu %s", t.w.r,
          (unsigned long long)t.w.version, t.w.why);
    CHECK(uv_thread_equal(&t.on, &d.thread), "its callback on another thread");
    waiter w;
    waiter_init(&w);
    CHECK(get(v.s, &w, "L", 0) == KV_OK && w.version == 1 && w.len == 3
              && memcmp(w.rec, "one", 3) == 0,
          "the other store reads it: %d v%llu", w.r,
          (unsigned long long)w.version);
    CHECK(put(v.s, &w, "L", 1, "two", 3, 60000) == KV_OK, "write: %d", w.r);
    want = t.w.calls + 1;
    CHECK(d.near->ops->get(d.near, (const uint8_t *)"L", 1, 0, 0, on_done_where,
                           &t)
              && wait_calls(&t.w, want) && t.w.r == KV_OK && t.w.version == 2
              && memcmp(t.w.rec, "two", 3) == 0,
          "and the loop's reads the other's: %d v%llu", t.w.r,
          (unsigned long long)t.w.version);
    /* a read asked for a minute from now, when the store stops */
    want = t.w.calls + 1;
    CHECK(d.near->ops->get(d.near, (const uint8_t *)"L", 1, 60000, 0,
                           on_done_where, &t),
          "a later read");
    mailbox_post(&d.rx, NULL);
    CHECK(wait_calls(&t.w, want) && t.w.r == KV_FAILED
              && strstr(t.w.why, "closing") != NULL,
          "the later read when it stopped: %d %s", t.w.r, t.w.why);
    uv_thread_join(&d.thread); /* the loop ended: nothing of the store's */
    CHECK(!d.near->ops->get(d.near, (const uint8_t *)"L", 1, 0, 0,
                            on_done_where, &t),
          "a read after the stop was taken");
    CHECK(uv_loop_close(&d.loop) == 0, "a handle of the store's still open");
    store_close(d.near);
    CHECK(get(v.s, &w, "L", 0) == KV_OK && w.version == 2,
          "the first store goes on: %d %s", w.r, w.why);
    waiter_free(&t.w);
    waiter_free(&w);
    serve_down(&v);
}

/* A key's versions never repeat across its lives: a key deleted, or
 * expired, and made again has a version of its own, and a write at a
 * version of the old one is refused (the ABA a sequence id used again
 * would otherwise meet). */
static void incarnations(void)
{
    served v;
    if (!serve_up(&v))
        return;
    kv *s = v.s;
    waiter w;
    waiter_init(&w);
    CHECK(put(s, &w, "i", 0, "a", 1, 60000) == KV_OK
              && put(s, &w, "i", 1, "b", 1, 60000) == KV_OK && w.version == 2,
          "two writes: %d v%llu", w.r, (unsigned long long)w.version);
    kv_version old = w.ver;
    CHECK(put(s, &w, "i", 2, NULL, 0, 0) == KV_OK, "delete: %d", w.r);
    CHECK(put(s, &w, "i", 0, "c", 1, 60000) == KV_OK
              && put(s, &w, "i", 1, "d", 1, 60000) == KV_OK && w.version == 2
              && !kv_version_equal(w.ver, old),
          "made again: %d v%llu, version %llx (was %llx)", w.r,
          (unsigned long long)w.version, (unsigned long long)w.ver.lo,
          (unsigned long long)old.lo);
    kv_version cur = w.ver;
    int want = w.calls + 1;
    w.writing = -1;
    CHECK(s->ops->put(s, (const uint8_t *)"i", 1, old, (const uint8_t *)"x", 1,
                      60000, 0, 0, now_ns() + 5000000000ull, on_done, &w)
              && wait_calls(&w, want) && w.r == KV_CONFLICT
              && kv_version_equal(w.ver, cur) && w.len == 1 && w.rec[0] == 'd',
          "a write at the old incarnation's version: %d", w.r);
    /* the same through an expiry */
    CHECK(put(s, &w, "e", 0, "a", 1, 50) == KV_OK, "write: %d", w.r);
    old = w.ver;
    uv_sleep(150);
    CHECK(get(s, &w, "e", 0) == KV_OK && w.version == 0, "expired: v%llu",
          (unsigned long long)w.version);
    CHECK(put(s, &w, "e", 0, "b", 1, 60000) == KV_OK && w.version == 1
              && !kv_version_equal(w.ver, old),
          "made again after its expiry: %d", w.r);
    want = w.calls + 1;
    w.writing = -1;
    CHECK(s->ops->put(s, (const uint8_t *)"e", 1, old, (const uint8_t *)"x", 1,
                      60000, 0, 0, now_ns() + 5000000000ull, on_done, &w)
              && wait_calls(&w, want) && w.r == KV_CONFLICT && w.rec[0] == 'b',
          "a write at the expired key's version: %d", w.r);
    waiter_free(&w);
    serve_down(&v);
}

static long long pttl(redisContext *c, const char *key)
{
    redisReply *r = redisCommand(c, "PTTL %s", key);
    long long t = r != NULL && r->type == REDIS_REPLY_INTEGER ? r->integer : -9;
    if (r != NULL)
        freeReplyObject(r);
    return t;
}

/* A touch renews a key's time to live at its version only; a write with
 * KV_KEEP_TTL keeps the deadline an earlier write set. */
static void touch_and_keep(void)
{
    served v;
    if (!serve_up(&v))
        return;
    kv *s = v.s;
    waiter w;
    waiter_init(&w);
    CHECK(put(s, &w, "t", 0, "a", 1, 10000) == KV_OK, "write: %d", w.r);
    kv_version at = w.ver;
    int want = w.calls + 1;
    CHECK(s->ops->touch(s, (const uint8_t *)"t", 1, at, 300000,
                        now_ns() + 5000000000ull, on_done, &w)
              && wait_calls(&w, want) && w.r == KV_OK
              && kv_version_equal(w.ver, at),
          "a touch: %d", w.r);
    long long t = pttl(v.c, "tally:test:t");
    CHECK(t > 10000 && t <= 300000, "renewed: %lld ms", t);
    CHECK(put(s, &w, "t", 1, "b", 1, KV_KEEP_TTL) == KV_OK && w.version == 2,
          "a write that keeps the deadline: %d", w.r);
    t = pttl(v.c, "tally:test:t");
    CHECK(t > 10000 && t <= 300000, "kept: %lld ms", t);
    want = w.calls + 1;
    CHECK(s->ops->touch(s, (const uint8_t *)"t", 1, at, 1000,
                        now_ns() + 5000000000ull, on_done, &w)
              && wait_calls(&w, want) && w.r == KV_CONFLICT && w.version == 2
              && w.rec[0] == 'b',
          "a touch at an old version: %d", w.r);
    t = pttl(v.c, "tally:test:t");
    CHECK(t > 10000, "an old touch changed it: %lld ms", t);
    waiter_free(&w);
    serve_down(&v);
}

/* What Redis's configuration says of its durability, in the store's
 * stats: none without an append-only file, unknown when CONFIG is
 * refused (as managed services refuse it). */
static kv_durability durability_of(kv *s)
{
    kv_stats st;
    for (int i = 0; i < 200; i++) {
        s->ops->stats(s, &st);
        if (st.durability_asked)
            break;
        uv_sleep(10);
    }
    return st.durability;
}

static void durability(void)
{
    static const struct {
        const char *const args[8];
        kv_durability want;
    } cases[] = {
        {{NULL}, KV_DURABLE_NONE},
        {{"--appendonly", "yes", "--appendfsync", "everysec", NULL},
         KV_DURABLE_CRASH},
        {{"--appendonly", "yes", "--appendfsync", "always", NULL},
         KV_DURABLE_POWER},
        {{"--rename-command", "CONFIG", "", NULL}, KV_DURABLE_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char dir[64], msg[512];
        snprintf(dir, sizeof dir, "/tmp/tally-redis-XXXXXX");
        CHECK(mkdtemp(dir) != NULL, "mkdtemp");
        const char *args[12];
        size_t n = 0;
        args[n++] = "--dir";
        args[n++] = dir;
        for (size_t k = 0; cases[i].args[k] != NULL; k++)
            args[n++] = cases[i].args[k];
        args[n] = NULL;
        unsigned port = free_port();
        pid_t pid = start_redis_with(port, NULL, args);
        kv *s = open_at(port, NULL, msg, sizeof msg, 5000);
        CHECK(s != NULL, "open: %s", msg);
        if (s != NULL)
            CHECK(durability_of(s) == cases[i].want, "case %zu: %d, not %d", i,
                  (int)durability_of(s), (int)cases[i].want);
        store_close(s);
        stop_redis(pid, SIGTERM);
        char rm[128];
        snprintf(rm, sizeof rm, "rm -rf %s", dir);
        CHECK(system(rm) == 0, "%s", rm);
    }
}

static const check_case cases[] = {
    {"url_forms", url_forms},
    {"reads_and_writes", reads_and_writes},
    {"two_writers", two_writers},
    {"big_writes", big_writes},
    {"passwords", passwords},
    {"nobody_there", nobody_there},
    {"stops_and_restarts", stops_and_restarts},
    {"on_a_loop", on_a_loop},
    {"incarnations", incarnations},
    {"touch_and_keep", touch_and_keep},
    {"durability", durability},
};

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
