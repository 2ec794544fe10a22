/*
 * kv_mem.c - versioned records in memory (kv_mem.h).
 *
 * Each key is an entry in the map: its committed record (version, value,
 * deadline, counted or not) and the one write the journal holds for it,
 * if any. What a reader or a writer sees is the head: the pending write's
 * result, else the committed record. The bounds count the heads, so a
 * write is refused for room when it is taken, not when it is committed.
 *
 * Expiry: the entries with a deadline sit in a list per time to live
 * (the sequences use two or three: idle, linger), in deadline order,
 * since every write of a class sets now + its ttl; a write that keeps its
 * time to live keeps its place. The sweep reads each list from its
 * oldest; a read or a write that meets a record past its deadline drops
 * it first.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "errors.h"
#include "kv_mem.h"
#include "list.h"
#include "mutex.h"

#define TTL_CLASSES 8

struct kv_val {
    atomic_uint refs;
    size_t len;
    uint8_t b[];
};

kv_val *kv_val_new(const uint8_t *b, size_t len)
{
    kv_val *v = malloc(sizeof *v + (len ? len : 1));
    if (v == NULL)
        return NULL;
    atomic_init(&v->refs, 1);
    v->len = len;
    if (len > 0)
        memcpy(v->b, b, len);
    return v;
}

static kv_val *kv_val_ref(kv_val *v)
{
    if (v != NULL)
        atomic_fetch_add(&v->refs, 1);
    return v;
}

void kv_val_unref(kv_val *v)
{
    if (v != NULL && atomic_fetch_sub(&v->refs, 1) == 1)
        free(v);
}

const uint8_t *kv_val_bytes(const kv_val *v, size_t *len)
{
    *len = v != NULL ? v->len : 0;
    return v != NULL ? v->b : NULL;
}

typedef struct entry entry;

/* A write's store-side state: its entry, its requester, its deadline
 * and what it changes in the counts (applied when it is taken). */
typedef struct {
    entry *e;
    kv_done done; /* NULL: an expiry, which nobody waits for */
    void *ctx;
    uint64_t ttl_ms, deadline_ns;
    long bytes;
    int counted;
} wpriv;

struct entry {
    keymap_node node;
    bool present;       /* a committed record */
    bool counted;       /* it counts against max_records */
    kv_version version; /* the committed record's */
    kv_val *val;
    size_t weight;        /* what the bound of bytes counts of it */
    uint64_t deadline_ns; /* monotonic; 0: none */
    int64_t deadline_ms;  /* the same, wall */
    int klass;            /* its expiry list: -1 none, TTL_CLASSES other */
    list_node by_deadline;
    kv_write *pending;
};

typedef struct {
    kv base;
    kv_mem_options o;
    mutex mu;
    keymap map;
    uint64_t ttl[TTL_CLASSES];
    list_node lists[TTL_CLASSES + 1]; /* the last: any other ttl */
    int nclasses;
    size_t counted, bytes; /* the heads' */
    uint64_t expired;
    uint64_t rng;
    kv_journal journal;
} kv_mem;

static kv_mem *mem_of(kv *k)
{
    return (kv_mem *)k;
}

static uint64_t mono(const kv_mem *m)
{
    return m->o.mono_ns != NULL ? m->o.mono_ns(m->o.clock_user) : now_ns();
}

static int64_t wall(const kv_mem *m)
{
    return m->o.wall_ms != NULL ? m->o.wall_ms(m->o.clock_user) : wall_ms();
}

/* ------------------------------------------------------------ writes */

kv_write *kv_write_new(uint8_t op, const uint8_t *key, size_t keylen)
{
    if (keylen > KEYMAP_KEY_MAX)
        return NULL;
    kv_write *w = calloc(1, sizeof *w + sizeof(wpriv));
    if (w == NULL)
        return NULL;
    w->op = op;
    w->keylen = keylen;
    if (keylen > 0)
        memcpy(w->key, key, keylen);
    w->priv = w + 1;
    return w;
}

void kv_write_free(kv_write *w)
{
    if (w == NULL)
        return;
    kv_val_unref(w->val);
    free(w);
}

/* ------------------------------------------------------------ entries */

static entry *find(kv_mem *m, const uint8_t *key, size_t keylen)
{
    keymap_node k;
    if (!keymap_key(&k, key, keylen))
        return NULL;
    keymap_node *n = keymap_find(&m->map, &k);
    return n != NULL ? container_of(n, entry, node) : NULL;
}

static void unlist(entry *e)
{
    if (e->klass >= 0)
        list_remove(&e->by_deadline);
    e->klass = -1;
}

/* Puts e in the expiry list of its ttl (its deadline just set). */
static void relist(kv_mem *m, entry *e, uint64_t ttl_ms)
{
    unlist(e);
    if (e->deadline_ns == 0)
        return;
    int c = 0;
    while (c < m->nclasses && m->ttl[c] != ttl_ms)
        c++;
    if (c == m->nclasses && c < TTL_CLASSES)
        m->ttl[m->nclasses++] = ttl_ms;
    e->klass = c; /* TTL_CLASSES: the list of any other ttl */
    list_push_back(&m->lists[c], &e->by_deadline);
}

/* Takes e out of the map and frees it. Under the mutex. */
static void drop(kv_mem *m, entry *e)
{
    LOCK_HELD(&m->mu);
    unlist(e);
    keymap_remove(&m->map, &e->node);
    kv_val_unref(e->val);
    free(e);
}

/* The head: what a reader or a writer sees (pending: the write the
 * journal holds; a touch changes no version). */
static kv_version head(const entry *e, kv_val **val)
{
    const kv_write *w = e != NULL ? e->pending : NULL;
    if (w != NULL && w->op == KV_W_PUT) {
        *val = w->val;
        return w->version;
    }
    if (w != NULL && w->op == KV_W_DEL) {
        *val = NULL;
        return (kv_version){0, 0};
    }
    *val = e != NULL && e->present ? e->val : NULL;
    return e != NULL && e->present ? e->version : (kv_version){0, 0};
}

static bool due(const entry *e, uint64_t now)
{
    return e->present && e->pending == NULL && e->deadline_ns != 0
           && now >= e->deadline_ns;
}

/* An expired record, gone: told to the journal (nobody waits for it),
 * then dropped. Under the mutex. */
static void expire(kv_mem *m, entry *e)
{
    LOCK_HELD(&m->mu);
    if (e->counted) {
        m->counted--;
        m->expired++;
    }
    m->bytes -= e->weight;
    if (m->journal.append != NULL) {
        kv_write *w = kv_write_new(KV_W_DEL, e->node.key, e->node.keylen);
        if (w != NULL) { /* else the replay drops it by its deadline */
            w->expect = e->version;
            w->at_ms = wall(m);
            m->journal.append(m->journal.self, w);
        }
    }
    drop(m, e);
}

/* The key's entry, an expired record dropped first. Under the mutex. */
static entry *lookup(kv_mem *m, const uint8_t *key, size_t keylen)
{
    LOCK_HELD(&m->mu);
    entry *e = find(m, key, keylen);
    if (e != NULL && due(e, mono(m))) {
        expire(m, e);
        e = NULL;
    }
    return e;
}

/* Applies w to its entry (its counts were taken with it). Under the
 * mutex. */
static void apply(kv_mem *m, kv_write *w)
{
    LOCK_HELD(&m->mu);
    wpriv *p = w->priv;
    entry *e = p->e;
    if (w->op == KV_W_DEL) {
        drop(m, e);
        return;
    }
    if (w->op == KV_W_PUT) {
        kv_val_unref(e->val);
        e->val = kv_val_ref(w->val);
        e->version = w->version;
        e->present = true;
        e->counted = (w->flags & KV_COUNTED) != 0;
        e->weight = w->weight;
    }
    if (p->ttl_ms != KV_KEEP_TTL) {
        e->deadline_ns = p->deadline_ns;
        e->deadline_ms = w->deadline_ms;
        relist(m, e, p->ttl_ms);
    }
}

/* Undoes a taken write's counts, and drops an entry it made. Under the
 * mutex. */
static void undo(kv_mem *m, kv_write *w)
{
    LOCK_HELD(&m->mu);
    wpriv *p = w->priv;
    m->bytes -= (size_t)p->bytes;
    m->counted -= (size_t)p->counted;
    if (!p->e->present && p->e->pending == NULL)
        drop(m, p->e);
}

/* ------------------------------------------------------------ the ops */

static bool m_get(kv *k, const uint8_t *key, size_t keylen, uint64_t delay_ms,
                  uint64_t deadline_ns, kv_done done, void *ctx)
{
    (void)delay_ms, (void)deadline_ns;
    kv_mem *m = mem_of(k);
    if (keylen > KEYMAP_KEY_MAX)
        return false;
    mutex_lock(&m->mu);
    kv_val *val;
    kv_version v = head(lookup(m, key, keylen), &val);
    kv_val_ref(val);
    mutex_unlock(&m->mu);
    done(ctx, KV_OK, v, val != NULL ? val->b : NULL, val != NULL ? val->len : 0,
         NULL);
    kv_val_unref(val);
    return true;
}

/* The answer to a refused write, told with no lock held. */
typedef struct {
    kv_result r;
    kv_version v;
    kv_val *val;
    char why[200];
} refusal;

static void tell(refusal *f, kv_done done, void *ctx)
{
    done(ctx, f->r, f->v, f->val != NULL ? f->val->b : NULL,
         f->val != NULL ? f->val->len : 0, f->why[0] ? f->why : NULL);
    kv_val_unref(f->val);
}

/* Whether w (its counts in p) fits the bounds: else *f says why. */
static bool fits(kv_mem *m, const wpriv *p, refusal *f)
{
    if (p->counted > 0 && m->o.max_records > 0
        && m->counted + 1 > m->o.max_records) {
        f->r = KV_FULL;
        return msg_fail(f->why, sizeof f->why,
                        "%zu records are counted, as many as the store keeps",
                        m->counted);
    }
    if (p->bytes > 0 && m->o.max_bytes > 0
        && (size_t)p->bytes > m->o.max_bytes - m->bytes) {
        f->r = KV_FULL;
        return msg_fail(
            f->why, sizeof f->why,
            "the records take %zu of the %zu bytes the store allows, "
            "and this one needs %ld more",
            m->bytes, m->o.max_bytes, p->bytes);
    }
    return true;
}

/* Takes write w for key: checked (expect, bounds), then applied (no
 * journal) or handed to the journal. True: taken (done comes); false
 * with *f: refused (the caller tells it). Under the mutex. */
static bool take(kv_mem *m, kv_write *w, uint64_t ttl_ms, refusal *f)
{
    LOCK_HELD(&m->mu);
    wpriv *p = w->priv;
    entry *e = lookup(m, w->key, w->keylen);
    kv_val *hv;
    kv_version hver = head(e, &hv);
    if (e != NULL && e->pending != NULL) {
        f->r = KV_FAILED;
        return msg_fail(f->why, sizeof f->why,
                        "another write of this key is being logged");
    }
    if (!kv_version_equal(hver, w->expect)
        || (w->op == KV_W_TOUCH && kv_version_none(hver))) {
        f->r = KV_CONFLICT;
        f->v = hver;
        f->val = kv_val_ref(hv);
        return false;
    }
    size_t was = e != NULL && e->present ? e->weight : 0;
    bool was_counted = e != NULL && e->present && e->counted;
    uint64_t now = mono(m);
    w->at_ms = wall(m);
    p->ttl_ms = ttl_ms;
    if (w->op == KV_W_PUT) {
        w->version = kv_version_draw(&m->rng);
        p->bytes = (long)w->weight - (long)was;
        p->counted = ((w->flags & KV_COUNTED) != 0) - was_counted;
    } else if (w->op == KV_W_DEL) {
        p->bytes = -(long)was;
        p->counted = -(int)was_counted;
    } else {
        w->version = w->expect;
    }
    if (ttl_ms == KV_KEEP_TTL && e != NULL) {
        w->deadline_ms = e->deadline_ms;
    } else if (ttl_ms != KV_KEEP_TTL && ttl_ms != 0) {
        p->deadline_ns = now + ttl_ms * 1000000u;
        w->deadline_ms = w->at_ms + (int64_t)ttl_ms;
    }
    if (!fits(m, p, f))
        return false;
    if (e == NULL) {
        e = calloc(1, sizeof *e);
        if (e == NULL) {
            f->r = KV_FAILED;
            return msg_fail(f->why, sizeof f->why, "out of memory");
        }
        keymap_key(&e->node, w->key, w->keylen);
        e->klass = -1;
        keymap_add(&m->map, &e->node);
    }
    p->e = e;
    m->bytes += (size_t)p->bytes;
    m->counted += (size_t)p->counted;
    if (m->journal.append != NULL) {
        e->pending = w;
        m->journal.append(m->journal.self, w);
    } else {
        apply(m, w);
    }
    return true;
}

/* A write: taken, or refused at once. */
static bool write_op(kv *k, kv_write *w, uint64_t ttl_ms, kv_done done,
                     void *ctx)
{
    kv_mem *m = mem_of(k);
    wpriv *p = w->priv;
    p->done = done;
    p->ctx = ctx;
    refusal f = {.r = KV_OK};
    mutex_lock(&m->mu);
    bool taken = take(m, w, ttl_ms, &f);
    bool journal = m->journal.append != NULL;
    mutex_unlock(&m->mu);
    if (!taken) {
        kv_write_free(w);
        tell(&f, done, ctx);
        return true;
    }
    if (!journal) { /* applied: answered now */
        kv_version v = w->op == KV_W_DEL ? (kv_version){0, 0} : w->version;
        kv_write_free(w);
        done(ctx, KV_OK, v, NULL, 0, NULL);
    }
    return true;
}

static bool m_put(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                  const uint8_t *rec, size_t len, uint64_t ttl_ms,
                  unsigned flags, size_t weight, uint64_t deadline_ns,
                  kv_done done, void *ctx)
{
    (void)deadline_ns;
    kv_write *w = kv_write_new(rec != NULL ? KV_W_PUT : KV_W_DEL, key, keylen);
    if (w == NULL)
        return false;
    w->expect = expect;
    w->flags = (uint8_t)(flags & KV_COUNTED);
    w->weight = rec != NULL ? (weight ? weight : len) : 0;
    if (rec != NULL && (w->val = kv_val_new(rec, len)) == NULL) {
        kv_write_free(w);
        return false;
    }
    return write_op(k, w, rec != NULL ? ttl_ms : KV_KEEP_TTL, done, ctx);
}

static bool m_touch(kv *k, const uint8_t *key, size_t keylen,
                    kv_version expect, uint64_t ttl_ms, uint64_t deadline_ns,
                    kv_done done, void *ctx)
{
    (void)deadline_ns;
    if (kv_version_none(expect) || ttl_ms == 0 || ttl_ms == KV_KEEP_TTL)
        return false;
    kv_write *w = kv_write_new(KV_W_TOUCH, key, keylen);
    if (w == NULL)
        return false;
    w->expect = expect;
    return write_op(k, w, ttl_ms, done, ctx);
}

void kv_mem_commit(kv *k, kv_write *w, bool ok, const char *why)
{
    kv_mem *m = mem_of(k);
    wpriv *p = w->priv;
    if (p->done == NULL) { /* an expiry: applied when it was taken */
        kv_write_free(w);
        return;
    }
    mutex_lock(&m->mu);
    p->e->pending = NULL;
    if (ok)
        apply(m, w);
    else
        undo(m, w);
    mutex_unlock(&m->mu);
    kv_version v = !ok || w->op == KV_W_DEL ? (kv_version){0, 0} : w->version;
    p->done(p->ctx, ok ? KV_OK : KV_FAILED, v, NULL, 0, ok ? NULL : why);
    kv_write_free(w);
}

static void m_stats(kv *k, kv_stats *out)
{
    kv_mem *m = mem_of(k);
    mutex_lock(&m->mu);
    *out = (kv_stats){.up = true,
                      .durability = m->journal.append != NULL
                                        ? KV_DURABLE_POWER
                                        : KV_DURABLE_NONE,
                      .durability_asked = true,
                      .records = m->counted,
                      .bytes = m->bytes,
                      .expired = m->expired};
    mutex_unlock(&m->mu);
}

static void m_sweep(kv *k)
{
    kv_mem *m = mem_of(k);
    mutex_lock(&m->mu);
    uint64_t now = mono(m);
    for (int c = 0; c <= TTL_CLASSES; c++) {
        list_node *head = &m->lists[c];
        for (list_node *n = list_first(head), *next; n != NULL; n = next) {
            next = list_next(head, n);
            entry *e = container_of(n, entry, by_deadline);
            if (due(e, now))
                expire(m, e);
            else if (c < TTL_CLASSES && e->pending == NULL)
                break; /* the rest of a class are later */
        }
    }
    mutex_unlock(&m->mu);
}

static void free_entry(keymap_node *n, void *user)
{
    (void)user;
    entry *e = container_of(n, entry, node);
    kv_val_unref(e->val);
    free(e);
}

static void m_close(kv *k)
{
    if (k == NULL)
        return;
    kv_mem *m = mem_of(k);
    keymap_each(&m->map, free_entry, NULL);
    keymap_free(&m->map);
    mutex_destroy(&m->mu);
    free(m);
}

/* ------------------------------------------------------------ the log's */

void kv_mem_set_journal(kv *k, const kv_journal *j)
{
    mem_of(k)->journal = *j;
}

/* Takes e's record out of the counts, and drops it. Under the mutex. */
static void discount(kv_mem *m, entry *e)
{
    LOCK_HELD(&m->mu);
    m->bytes -= e->weight;
    m->counted -= e->counted;
    drop(m, e);
}

/* e's deadline from a logged one (wall ms; 0: none), in the list that
 * the sweep reads whole. Under the mutex. */
static void replay_deadline(kv_mem *m, entry *e, int64_t ms)
{
    LOCK_HELD(&m->mu);
    unlist(e);
    e->deadline_ms = ms;
    e->deadline_ns = 0;
    if (ms == 0)
        return;
    int64_t left = ms - wall(m);
    e->deadline_ns = left > 0 ? mono(m) + (uint64_t)left * 1000000u : 1;
    e->klass = TTL_CLASSES;
    list_push_back(&m->lists[TTL_CLASSES], &e->by_deadline);
}

bool kv_mem_replay(kv *k, const kv_write *w, bool force, bool *applied)
{
    kv_mem *m = mem_of(k);
    *applied = false;
    mutex_lock(&m->mu);
    entry *e = find(m, w->key, w->keylen);
    /* It had expired when w was written (its own end, had the disk no
     * room for it), unless w was written over it: then the store saw it
     * live, by its own clock, however near its deadline in wall ms. */
    if (e != NULL && e->deadline_ms != 0 && e->deadline_ms <= w->at_ms
        && !kv_version_equal(e->version, w->expect)) {
        discount(m, e);
        e = NULL;
    }
    kv_version cur = e != NULL ? e->version : (kv_version){0, 0};
    bool ok = true, take = force || kv_version_equal(cur, w->expect);
    if (take && w->op == KV_W_PUT) {
        if (e == NULL && (e = calloc(1, sizeof *e)) != NULL) {
            keymap_key(&e->node, w->key, w->keylen);
            e->klass = -1;
            keymap_add(&m->map, &e->node);
        }
        ok = e != NULL;
        if (ok) {
            m->bytes -= e->weight;
            m->counted -= e->counted;
            kv_val_unref(e->val);
            e->val = kv_val_ref(w->val);
            e->version = force ? kv_version_draw(&m->rng) : w->version;
            e->present = true;
            e->counted = (w->flags & KV_COUNTED) != 0;
            e->weight = w->weight;
            m->bytes += e->weight;
            m->counted += e->counted;
            replay_deadline(m, e, w->deadline_ms);
            *applied = true;
        }
    } else if (take && w->op == KV_W_TOUCH && e != NULL) {
        replay_deadline(m, e, w->deadline_ms);
        *applied = true;
    } else if (take && w->op == KV_W_DEL && e != NULL) {
        discount(m, e);
        *applied = true;
    }
    bool within = (m->o.max_records == 0 || m->counted <= m->o.max_records)
                  && (m->o.max_bytes == 0 || m->bytes <= m->o.max_bytes);
    mutex_unlock(&m->mu);
    return ok && within;
}

typedef struct {
    kv_mem *m;
    uint64_t now;
    size_t counted;
} expiring;

static void expire_one(keymap_node *n, void *user)
{
    expiring *x = user;
    entry *e = container_of(n, entry, node);
    if (!due(e, x->now))
        return;
    x->counted += e->counted;
    discount(x->m, e);
}

size_t kv_mem_expire_now(kv *k)
{
    kv_mem *m = mem_of(k);
    mutex_lock(&m->mu);
    expiring x = {m, mono(m), 0};
    keymap_each(&m->map, expire_one, &x);
    mutex_unlock(&m->mu);
    return x.counted;
}

typedef struct {
    kv_write *head, **tail;
    size_t n, bytes;
    bool oom;
    int64_t at;
} snapping;

static void snap_one(keymap_node *n, void *user)
{
    snapping *s = user;
    entry *e = container_of(n, entry, node);
    if (!e->present || s->oom)
        return;
    kv_write *w = kv_write_new(KV_W_PUT, e->node.key, e->node.keylen);
    if (w == NULL) {
        s->oom = true;
        return;
    }
    w->flags = e->counted ? KV_COUNTED : 0;
    w->version = e->version;
    w->deadline_ms = e->deadline_ms;
    w->at_ms = s->at;
    w->weight = e->weight;
    w->val = kv_val_ref(e->val);
    *s->tail = w;
    s->tail = &w->next;
    s->n++;
    s->bytes += e->weight;
}

kv_write *kv_mem_snapshot(kv *k, size_t *n, size_t *bytes, bool *oom)
{
    kv_mem *m = mem_of(k);
    snapping s = {NULL, NULL, 0, 0, false, 0};
    s.tail = &s.head;
    mutex_lock(&m->mu);
    s.at = wall(m);
    keymap_each(&m->map, snap_one, &s);
    mutex_unlock(&m->mu);
    if (s.oom) {
        while (s.head != NULL) {
            kv_write *w = s.head;
            s.head = w->next;
            kv_write_free(w);
        }
        s.n = s.bytes = 0;
    }
    *n = s.n;
    *bytes = s.bytes;
    *oom = s.oom;
    return s.head;
}

/* ------------------------------------------------------------ the store */

kv *kv_mem_new(const kv_mem_options *o)
{
    static const kv_ops ops = {
        .get = m_get,
        .put = m_put,
        .touch = m_touch,
        .stats = m_stats,
        .sweep = m_sweep,
        .close = m_close,
    };
    kv_mem *m = calloc(1, sizeof *m);
    if (m == NULL)
        return NULL;
    m->base.ops = &ops;
    m->base.local = true;
    m->o = *o;
    m->rng = o->seed != 0 ? o->seed : kv_seed();
    for (int c = 0; c <= TTL_CLASSES; c++)
        list_init(&m->lists[c]);
    if (!keymap_init(&m->map) || mutex_init(&m->mu) != 0) {
        keymap_free(&m->map);
        free(m);
        return NULL;
    }
    return &m->base;
}
