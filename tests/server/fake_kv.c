/*
 * fake_kv.c - the store of fake_kv.h: records in an array, requests in
 * a queue until the test delivers them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "fake_kv.h"

typedef struct {
    uint8_t *key;
    size_t keylen;
    kv_version v;
    uint8_t *val;
    size_t len;
    uint64_t expire_ms; /* 0: none */
} record;

enum { GET, PUT, TOUCH };

typedef struct conn conn;

typedef struct {
    conn *c;
    int kind;
    uint8_t *key, *val; /* copies; val NULL: a delete (or not a put) */
    size_t keylen, len;
    kv_version expect;
    uint64_t ttl_ms, due_ms;
    kv_done done;
    void *ctx;
} request;

struct fake_kv {
    uv_mutex_t mu;
    uint64_t (*clock_ms)(void *user);
    void *user;
    uint64_t rng;
    record *recs;
    size_t nrecs, caprecs;
    request *q;
    size_t nq, capq;
    uint64_t delivered, conflicts;
    record *snap; /* fake_kv_snapshot's copy */
    size_t nsnap;
};

static void free_records(record *v, size_t n);

struct conn {
    kv base;
    fake_kv *f;
    bool stopped;
};

static uint64_t now_ms(fake_kv *f)
{
    return f->clock_ms != NULL ? f->clock_ms(f->user) : now_ns() / 1000000u;
}

/* The live record of key, expired ones dropped on the way. */
static record *find(fake_kv *f, const uint8_t *key, size_t keylen)
{
    uint64_t now = now_ms(f);
    for (size_t i = 0; i < f->nrecs; i++) {
        record *r = &f->recs[i];
        if (r->keylen != keylen || memcmp(r->key, key, keylen) != 0)
            continue;
        if (r->expire_ms != 0 && now >= r->expire_ms) {
            free(r->key);
            free(r->val);
            f->recs[i] = f->recs[--f->nrecs];
            return NULL;
        }
        return r;
    }
    return NULL;
}

static void drop(fake_kv *f, record *r)
{
    free(r->key);
    free(r->val);
    *r = f->recs[--f->nrecs];
}

static uint8_t *copy(const uint8_t *b, size_t n)
{
    uint8_t *c = malloc(n ? n : 1);
    if (c != NULL && n > 0)
        memcpy(c, b, n);
    return c;
}

static bool enqueue(conn *c, request *r, const uint8_t *key, size_t keylen,
                    const uint8_t *val, size_t len)
{
    fake_kv *f = c->f;
    if (c->stopped)
        return false;
    r->c = c;
    r->key = copy(key, keylen);
    r->keylen = keylen;
    r->val = val != NULL ? copy(val, len) : NULL;
    r->len = len;
    uv_mutex_lock(&f->mu);
    if (f->nq == f->capq) {
        size_t cap = f->capq ? 2 * f->capq : 64;
        request *q = realloc(f->q, cap * sizeof *q);
        if (q == NULL) {
            uv_mutex_unlock(&f->mu);
            free(r->key);
            free(r->val);
            return false;
        }
        f->q = q;
        f->capq = cap;
    }
    f->q[f->nq++] = *r;
    uv_mutex_unlock(&f->mu);
    return true;
}

static bool f_get(kv *k, const uint8_t *key, size_t keylen, uint64_t delay_ms,
                  uint64_t deadline_ns, kv_done done, void *ctx)
{
    (void)deadline_ns;
    conn *c = (conn *)k;
    request r = {.kind = GET,
                 .due_ms = now_ms(c->f) + delay_ms,
                 .done = done,
                 .ctx = ctx};
    return enqueue(c, &r, key, keylen, NULL, 0);
}

static bool f_put(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                  const uint8_t *rec, size_t len, uint64_t ttl_ms,
                  unsigned flags, size_t weight, uint64_t deadline_ns,
                  kv_done done, void *ctx)
{
    (void)deadline_ns, (void)flags, (void)weight;
    conn *c = (conn *)k;
    request r = {.kind = PUT,
                 .expect = expect,
                 .ttl_ms = ttl_ms,
                 .done = done,
                 .ctx = ctx};
    return enqueue(c, &r, key, keylen, rec, rec != NULL ? len : 0);
}

static bool f_touch(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                    uint64_t ttl_ms, uint64_t deadline_ns, kv_done done,
                    void *ctx)
{
    (void)deadline_ns;
    conn *c = (conn *)k;
    if (kv_version_none(expect) || ttl_ms == 0 || ttl_ms == KV_KEEP_TTL)
        return false;
    request r = {.kind = TOUCH,
                 .expect = expect,
                 .ttl_ms = ttl_ms,
                 .done = done,
                 .ctx = ctx};
    return enqueue(c, &r, key, keylen, NULL, 0);
}

static void f_stats(kv *k, kv_stats *out)
{
    (void)k;
    *out = (kv_stats){
        .up = true, .durability = KV_DURABLE_POWER, .durability_asked = true};
}

static const kv_ops ops;

static kv *f_open_on(kv *k, struct mailbox *mb, char *msg, size_t msglen)
{
    (void)mb, (void)msg, (void)msglen;
    return fake_kv_connect(((conn *)k)->f);
}

/* Fails every request of c still queued (its connection went). */
static void fail_queued(conn *c)
{
    fake_kv *f = c->f;
    for (;;) {
        uv_mutex_lock(&f->mu);
        size_t i = 0;
        while (i < f->nq && f->q[i].c != c)
            i++;
        if (i == f->nq) {
            uv_mutex_unlock(&f->mu);
            return;
        }
        request r = f->q[i];
        memmove(&f->q[i], &f->q[i + 1], (f->nq - i - 1) * sizeof r);
        f->nq--;
        uv_mutex_unlock(&f->mu);
        free(r.key);
        free(r.val);
        r.done(r.ctx, KV_FAILED, (kv_version){0, 0}, NULL, 0,
               "the store is closing");
    }
}

static void f_stop(kv *k)
{
    conn *c = (conn *)k;
    c->stopped = true;
    fail_queued(c);
}

static void f_close(kv *k)
{
    if (k == NULL)
        return;
    f_stop(k);
    free(k);
}

static const kv_ops ops = {
    .get = f_get,
    .put = f_put,
    .touch = f_touch,
    .stats = f_stats,
    .open_on = f_open_on,
    .stop = f_stop,
    .close = f_close,
};

fake_kv *fake_kv_new(uint64_t seed, uint64_t (*clock_ms)(void *user),
                     void *user)
{
    fake_kv *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    uv_mutex_init(&f->mu);
    f->clock_ms = clock_ms;
    f->user = user;
    f->rng = seed;
    return f;
}

void fake_kv_free(fake_kv *f)
{
    if (f == NULL)
        return;
    for (size_t i = 0; i < f->nrecs; i++) {
        free(f->recs[i].key);
        free(f->recs[i].val);
    }
    for (size_t i = 0; i < f->nq; i++) {
        free(f->q[i].key);
        free(f->q[i].val);
    }
    free(f->recs);
    free_records(f->snap, f->nsnap);
    free(f->q);
    uv_mutex_destroy(&f->mu);
    free(f);
}

kv *fake_kv_connect(fake_kv *f)
{
    conn *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->base.ops = &ops;
    c->f = f;
    return &c->base;
}

/* Whether q[at] is the oldest due request of its connection (Redis
 * answers one connection's commands in the order they were sent). Under
 * mu. */
static bool head(fake_kv *f, size_t at, uint64_t now)
{
    for (size_t k = 0; k < at; k++)
        if (f->q[k].c == f->q[at].c && f->q[k].due_ms <= now)
            return false;
    return true;
}

size_t fake_kv_pending(fake_kv *f)
{
    uv_mutex_lock(&f->mu);
    uint64_t now = now_ms(f);
    size_t n = 0;
    for (size_t i = 0; i < f->nq; i++)
        n += f->q[i].due_ms <= now && head(f, i, now);
    uv_mutex_unlock(&f->mu);
    return n;
}

/* Applies r to the records: its answer in *res, *v, and the record it
 * sees (the store's, until the next change). Under mu. */
static void apply(fake_kv *f, const request *r, kv_result *res, kv_version *v,
                  const uint8_t **val, size_t *len)
{
    record *x = find(f, r->key, r->keylen);
    kv_version cur = x != NULL ? x->v : (kv_version){0, 0};
    *res = KV_OK;
    *v = cur;
    *val = x != NULL ? x->val : NULL;
    *len = x != NULL ? x->len : 0;
    if (r->kind == GET)
        return;
    if (!kv_version_equal(cur, r->expect)) {
        *res = KV_CONFLICT;
        f->conflicts++;
        return;
    }
    uint64_t now = now_ms(f);
    if (r->kind == TOUCH) {
        if (x == NULL) { /* a touch of no key: refused as a conflict */
            *res = KV_CONFLICT;
            return;
        }
        x->expire_ms = now + r->ttl_ms;
        return;
    }
    kv_version next = kv_version_draw(&f->rng);
    *val = NULL;
    *len = 0;
    if (r->val == NULL) { /* a delete */
        if (x != NULL)
            drop(f, x);
        *v = (kv_version){0, 0};
        return;
    }
    if (x == NULL) {
        if (f->nrecs == f->caprecs) {
            size_t cap = f->caprecs ? 2 * f->caprecs : 64;
            f->recs = realloc(f->recs, cap * sizeof *f->recs);
            f->caprecs = cap;
        }
        x = &f->recs[f->nrecs++];
        *x = (record){.key = copy(r->key, r->keylen), .keylen = r->keylen};
    }
    free(x->val);
    x->val = copy(r->val, r->len);
    x->len = r->len;
    x->v = next;
    if (r->ttl_ms != KV_KEEP_TTL)
        x->expire_ms = r->ttl_ms ? now + r->ttl_ms : 0;
    *v = next;
}

/* Delivers the i-th due head (of connection only, when not NULL). */
static bool deliver(fake_kv *f, const kv *only, size_t i, fake_fate fate)
{
    uv_mutex_lock(&f->mu);
    uint64_t now = now_ms(f);
    size_t at = 0, seen = 0;
    for (; at < f->nq; at++)
        if (f->q[at].due_ms <= now && head(f, at, now)
            && (only == NULL || &f->q[at].c->base == only) && seen++ == i)
            break;
    if (at == f->nq) {
        uv_mutex_unlock(&f->mu);
        return false;
    }
    request r = f->q[at];
    memmove(&f->q[at], &f->q[at + 1], (f->nq - at - 1) * sizeof r);
    f->nq--;
    f->delivered++;
    kv_result res = KV_FAILED;
    kv_version v = {0, 0};
    const uint8_t *val = NULL;
    size_t len = 0;
    uint8_t *seen_val = NULL;
    if (fate != FAKE_LOST_BEFORE) {
        apply(f, &r, &res, &v, &val, &len);
        seen_val = val != NULL ? copy(val, len) : NULL; /* past the lock */
    }
    uv_mutex_unlock(&f->mu);
    if (getenv("FAKE_KV_TRACE") != NULL)
        fprintf(
            stderr,
            "fake_kv: conn %p %s %.*s expect %016llx -> %d v %016llx fate %d\n",
            (void *)r.c,
            r.kind == GET   ? "get"
            : r.kind == PUT ? (r.val ? "put" : "del")
                            : "touch",
            (int)r.keylen, (const char *)r.key, (unsigned long long)r.expect.lo,
            (int)res, (unsigned long long)v.lo, (int)fate);
    if (fate == FAKE_APPLY)
        r.done(r.ctx, res, v, seen_val, seen_val != NULL ? len : 0, NULL);
    else
        r.done(r.ctx, KV_FAILED, (kv_version){0, 0}, NULL, 0,
               "connection lost");
    free(seen_val);
    free(r.key);
    free(r.val);
    return true;
}

bool fake_kv_deliver(fake_kv *f, size_t i, fake_fate fate)
{
    return deliver(f, NULL, i, fate);
}

bool fake_kv_deliver_from(fake_kv *f, const kv *c, fake_fate fate)
{
    return deliver(f, c, 0, fate);
}

size_t fake_kv_settle(fake_kv *f)
{
    size_t n = 0;
    while (fake_kv_deliver(f, 0, FAKE_APPLY))
        n++;
    return n;
}

const uint8_t *fake_kv_peek(fake_kv *f, const uint8_t *key, size_t keylen,
                            size_t *len, kv_version *v)
{
    uv_mutex_lock(&f->mu);
    record *x = find(f, key, keylen);
    *v = x != NULL ? x->v : (kv_version){0, 0};
    *len = x != NULL ? x->len : 0;
    const uint8_t *val = x != NULL ? x->val : NULL;
    uv_mutex_unlock(&f->mu);
    return val;
}

void fake_kv_expire(fake_kv *f, const uint8_t *key, size_t keylen)
{
    uv_mutex_lock(&f->mu);
    record *x = find(f, key, keylen);
    if (x != NULL)
        drop(f, x);
    uv_mutex_unlock(&f->mu);
}

size_t fake_kv_queued(fake_kv *f, const kv *c)
{
    uv_mutex_lock(&f->mu);
    size_t n = 0;
    for (size_t i = 0; i < f->nq; i++)
        n += c == NULL || &f->q[i].c->base == c;
    uv_mutex_unlock(&f->mu);
    return n;
}

static record *copy_records(const record *from, size_t n)
{
    record *v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; v != NULL && i < n; i++) {
        v[i] = from[i];
        v[i].key = copy(from[i].key, from[i].keylen);
        v[i].val = copy(from[i].val, from[i].len);
    }
    return v;
}

static void free_records(record *v, size_t n)
{
    for (size_t i = 0; v != NULL && i < n; i++) {
        free(v[i].key);
        free(v[i].val);
    }
    free(v);
}

void fake_kv_snapshot(fake_kv *f)
{
    uv_mutex_lock(&f->mu);
    free_records(f->snap, f->nsnap);
    f->snap = copy_records(f->recs, f->nrecs);
    f->nsnap = f->nrecs;
    uv_mutex_unlock(&f->mu);
}

void fake_kv_rollback(fake_kv *f)
{
    uv_mutex_lock(&f->mu);
    free_records(f->recs, f->nrecs);
    f->recs = copy_records(f->snap, f->nsnap);
    f->nrecs = f->caprecs = f->nsnap ? f->nsnap : 1;
    f->nrecs = f->nsnap;
    uv_mutex_unlock(&f->mu);
}

void fake_kv_counts(fake_kv *f, uint64_t *delivered, uint64_t *conflicts)
{
    uv_mutex_lock(&f->mu);
    *delivered = f->delivered;
    *conflicts = f->conflicts;
    uv_mutex_unlock(&f->mu);
}
