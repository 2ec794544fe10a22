/*
 * seq_remote.c - sequences whose states live in a shared store
 * (seq_remote.h).
 *
 * The cache: this replica's last word from the store on each sequence
 * it served (its version and record), in a map from key to entry and a
 * list from the least recently used, under the mutex. A decision taken
 * on it is only a guess: a write's compare-and-set confirms it, and any
 * other outcome is decided again on a state just read.
 *
 * A chunk (rchunk) belongs to one thread at a time: the caller's until
 * its first read or write is submitted, then the store's, whose
 * callbacks carry it from step to step until it ends.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "log.h"
#include "seq_remote.h"
#include "seq_rules.h"
#include "sequence_file.h"
#include "tx_dtype.h"

#define KEY_MAX (SEQ_ID_MAX + 8)
#define MAX_ROUNDS 64     /* writes that found another version, at most */
#define POLL_MAX_MS 16    /* an early chunk's reads, this far apart at most */

typedef struct centry centry;
struct centry {
    centry *hnext, *lprev, *lnext;
    uint64_t hash;
    state_version version;
    uint8_t *rec;
    size_t len, keylen;
    uint8_t key[KEY_MAX];
};

typedef struct rchunk rchunk;

/* The chunks of one sequence in flight on this replica (admitted, not
 * ended): how many, how many of them start it, and the unnumbered ones
 * in the order they were admitted, which is the order they are decided
 * in, as the table in memory gives their turns. */
typedef struct lentry lentry;
struct lentry {
    lentry *hnext;
    uint64_t hash;
    size_t keylen;
    unsigned n, starts;
    rchunk *head, *tail; /* unnumbered, by admission */
    uint8_t key[KEY_MAX];
};

struct seq_remote {
    state_redis *store; /* on its own thread: the chunks of no loop's */
    seq_options o;
    uint64_t timeout_ms;
    uv_mutex_t mu; /* guards everything below */
    centry **buckets;
    size_t nbuckets;        /* a power of two */
    centry *lru, *mru;      /* the least and the most recently used */
    size_t cached, cached_bytes;
    lentry **lines; /* by key, nbuckets of them */
    size_t inflight, inflight_bytes;
    seq_counts c;
    uint64_t races; /* writes that found another version */
    /* the stores on doors' loops (seq_remote_loop_open), stopped or not,
     * freed with r */
    state_redis **near;
    size_t nnear, near_cap;
};

struct rchunk {
    seq_remote *r;
    state_redis *store; /* its door loop's, or r's own */
    lentry *line;       /* its sequence's chunks on this replica */
    rchunk *qnext;      /* unnumbered: the next admitted after it */
    bool queued;        /* unnumbered: in line->head's list */
    bool parked;        /* finished scanning, waiting for its turn */
    bool counted_start; /* one of line->starts */
    bool after_start;   /* a start of its sequence was in flight here
                         * when it was admitted */
    seq_slot *s;
    seq_params id; /* with the chunk's flags and number */
    eng_scan_desc desc;
    uint8_t key[KEY_MAX];
    size_t keylen, need;
    uint64_t count; /* carries */
    bool is_float;
    void *out;
    uint64_t since_ns;
    uint64_t req_deadline_ns; /* the request's own (0: none) */
    unsigned rounds, polls;
    /* the write in flight */
    bool starts, late, del;
    bool was_closed; /* the state it was decided on had ended */
    eng_carry *base; /* the carries the answer gets once it is written */
    uint8_t *rec;
    size_t reclen;
    /* a chunk that ended before anything was submitted: its status,
     * and its message in the caller's buffer (remote_finish()'s) */
    status_code st;
    char *sync_msg;
    size_t sync_msglen;
};

seq_remote *seq_remote_new(state_redis *store, const seq_options *o,
                           uint64_t timeout_ms)
{
    seq_remote *r = calloc(1, sizeof *r);
    if (r == NULL)
        return NULL;
    r->store = store;
    r->o = *o;
    r->timeout_ms = timeout_ms;
    r->nbuckets = 64;
    while (r->nbuckets < o->max_sequences && r->nbuckets < ((size_t)1 << 16))
        r->nbuckets *= 2;
    r->buckets = calloc(r->nbuckets, sizeof *r->buckets);
    r->lines = calloc(r->nbuckets, sizeof *r->lines);
    if (r->buckets == NULL || r->lines == NULL || uv_mutex_init(&r->mu) != 0) {
        free(r->buckets);
        free(r->lines);
        free(r);
        return NULL;
    }
    return r;
}

void seq_remote_free(seq_remote *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->nnear; i++)
        state_redis_close(r->near[i]);
    free(r->near);
    for (centry *e = r->lru, *n; e != NULL; e = n) {
        n = e->lnext;
        free(e->rec);
        free(e);
    }
    for (size_t b = 0; b < r->nbuckets; b++) /* none, once no chunk is */
        for (lentry *l = r->lines[b], *n; l != NULL; l = n) {
            n = l->hnext;
            free(l);
        }
    free(r->buckets);
    free(r->lines);
    uv_mutex_destroy(&r->mu);
    free(r);
}

/* ------------------------------------------------------------ the cache */

static centry **slot_of(seq_remote *r, const uint8_t *k, size_t n, uint64_t h)
{
    centry **pp = &r->buckets[h & (r->nbuckets - 1)];
    while (*pp != NULL
           && ((*pp)->hash != h || (*pp)->keylen != n
               || memcmp((*pp)->key, k, n) != 0))
        pp = &(*pp)->hnext;
    return pp;
}

static void lru_unlink(seq_remote *r, centry *e)
{
    if (e->lprev != NULL)
        e->lprev->lnext = e->lnext;
    else
        r->lru = e->lnext;
    if (e->lnext != NULL)
        e->lnext->lprev = e->lprev;
    else
        r->mru = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void lru_push(seq_remote *r, centry *e)
{
    e->lprev = r->mru;
    e->lnext = NULL;
    if (r->mru != NULL)
        r->mru->lnext = e;
    else
        r->lru = e;
    r->mru = e;
}

/* Takes the entry at *pp out, and frees it. Under the mutex. */
static void uncache(seq_remote *r, centry **pp)
{
    centry *e = *pp;
    *pp = e->hnext;
    lru_unlink(r, e);
    r->cached--;
    r->cached_bytes -= e->len;
    free(e->rec);
    free(e);
}

/* A copy of key's cached version and record (*rec malloc'd; NULL with
 * version n 0: the store has none). False: nothing is cached. */
static bool cache_get(seq_remote *r, const uint8_t *k, size_t n,
                      state_version *version, uint8_t **rec, size_t *len)
{
    uint64_t h = seq_fnv1a(k, n);
    *rec = NULL;
    *len = 0;
    uv_mutex_lock(&r->mu);
    centry *e = *slot_of(r, k, n, h);
    bool hit = e != NULL;
    if (hit && e->rec != NULL) {
        *rec = malloc(e->len);
        if (*rec == NULL)
            hit = false;
        else
            memcpy(*rec, e->rec, e->len);
        *len = e->len;
    }
    if (hit) {
        *version = e->version;
        lru_unlink(r, e);
        lru_push(r, e);
    }
    uv_mutex_unlock(&r->mu);
    return hit;
}

/* Remembers key's version and record (rec NULL: the store has none), or,
 * with forget, that nothing is known of it. rec is malloc'd, and the
 * cache's from here: kept, or freed. A key already there keeps its
 * entry, which takes the new record. */
static void cache_put(seq_remote *r, const uint8_t *k, size_t n,
                      state_version version, uint8_t *rec, size_t len,
                      bool forget)
{
    uint64_t h = seq_fnv1a(k, n);
    bool keep = !forget && r->o.max_sequences > 0 && len <= r->o.max_bytes;
    uv_mutex_lock(&r->mu);
    centry **pp = slot_of(r, k, n, h);
    centry *e = *pp;
    if (e != NULL && !keep) {
        uncache(r, pp);
        e = NULL;
    } else if (e != NULL) {
        lru_unlink(r, e);
        r->cached_bytes -= e->len;
        free(e->rec);
        e->rec = NULL;
        e->len = 0;
    } else if (keep && (e = calloc(1, sizeof *e)) != NULL) {
        e->hash = h;
        e->keylen = n;
        memcpy(e->key, k, n);
        e->hnext = r->buckets[h & (r->nbuckets - 1)];
        r->buckets[h & (r->nbuckets - 1)] = e;
        r->cached++;
    }
    if (e != NULL) {
        e->version = version;
        e->rec = rec;
        e->len = rec != NULL ? len : 0;
        lru_push(r, e);
        r->cached_bytes += e->len;
        rec = NULL;
        while (r->cached > r->o.max_sequences
               || r->cached_bytes > r->o.max_bytes)
            uncache(r, slot_of(r, r->lru->key, r->lru->keylen, r->lru->hash));
    }
    uv_mutex_unlock(&r->mu);
    free(rec);
}

/* cache_put() of a record that stays the caller's (Redis's reply): a
 * copy. Out of memory, the key is forgotten: a miss costs a read. */
static void cache_put_copy(seq_remote *r, const uint8_t *k, size_t n,
                           state_version version, const uint8_t *rec,
                           size_t len)
{
    uint8_t *copy = NULL;
    if (rec != NULL && (copy = malloc(len ? len : 1)) != NULL)
        memcpy(copy, rec, len);
    cache_put(r, k, n, version, copy, len, rec != NULL && copy == NULL);
}

/* ------------------------------------------------------------ the lines */

static lentry **line_slot(seq_remote *r, const uint8_t *k, size_t n,
                          uint64_t h)
{
    lentry **pp = &r->lines[h & (r->nbuckets - 1)];
    while (*pp != NULL
           && ((*pp)->hash != h || (*pp)->keylen != n
               || memcmp((*pp)->key, k, n) != 0))
        pp = &(*pp)->hnext;
    return pp;
}

/* Puts c in its sequence's line (made when it is the first): false when
 * memory runs out. Under the mutex. */
static bool line_join(seq_remote *r, rchunk *c, bool start)
{
    uint64_t h = seq_fnv1a(c->key, c->keylen);
    lentry **pp = line_slot(r, c->key, c->keylen, h);
    lentry *l = *pp;
    if (l == NULL) {
        l = calloc(1, sizeof *l);
        if (l == NULL)
            return false;
        l->hash = h;
        l->keylen = c->keylen;
        memcpy(l->key, c->key, c->keylen);
        *pp = l;
    }
    c->line = l;
    c->after_start = l->starts > 0;
    l->n++;
    if (start) {
        l->starts++;
        c->counted_start = true;
    }
    if (!c->id.has_chunk) {
        if (l->tail != NULL)
            l->tail->qnext = c;
        else
            l->head = c;
        l->tail = c;
        c->queued = true;
    }
    return true;
}

/* Takes c out of its line; the unnumbered chunk whose turn comes now, if
 * it waits (parked), else NULL. Under the mutex. */
static rchunk *line_leave(seq_remote *r, rchunk *c)
{
    lentry *l = c->line;
    rchunk *next = NULL;
    if (l == NULL)
        return NULL;
    c->line = NULL;
    l->n--;
    if (c->counted_start)
        l->starts--;
    if (c->queued) {
        rchunk **pp = &l->head, *prev = NULL;
        while (*pp != c) {
            prev = *pp;
            pp = &(*pp)->qnext;
        }
        bool was_head = pp == &l->head;
        *pp = c->qnext;
        if (l->tail == c)
            l->tail = prev;
        c->queued = false;
        if (was_head && l->head != NULL && l->head->parked) {
            next = l->head;
            next->parked = false;
        }
    }
    if (l->n == 0) {
        uint64_t h = l->hash;
        lentry **pp = line_slot(r, l->key, l->keylen, h);
        *pp = l->hnext;
        free(l);
    }
    return next;
}

/* -------------------------------------------------------- a chunk's end */

static void count(seq_remote *r, uint64_t *counter)
{
    uv_mutex_lock(&r->mu);
    (*counter)++;
    uv_mutex_unlock(&r->mu);
}

/* Lets the chunk go: its slot's buffers, its place in the limits and in
 * its line. The chunk whose turn comes, if it waits: the caller starts
 * it (run_next). */
static rchunk *release(rchunk *c)
{
    seq_remote *r = c->r;
    seq_slot_drop(c->s);
    c->s->remote = NULL;
    uv_mutex_lock(&r->mu);
    r->inflight--;
    r->inflight_bytes -= c->need;
    rchunk *next = line_leave(r, c);
    uv_mutex_unlock(&r->mu);
    free(c->base);
    free(c->rec);
    free(c);
    return next;
}

static void run_next(rchunk *c);

/* The chunk's end: told to its submitter (sync: still on the caller's
 * thread, where seq_remote_finish() returns it). */
static void end(rchunk *c, status_code st, const char *msg, bool sync)
{
    free(c->base);
    c->base = NULL;
    free(c->rec);
    c->rec = NULL;
    if (sync) {
        c->st = st;
        snprintf(c->sync_msg, c->sync_msglen, "%s", msg != NULL ? msg : "");
        return;
    }
    seq_slot *s = c->s;
    char m[512];
    snprintf(m, sizeof m, "%s", msg != NULL ? msg : "");
    rchunk *next = release(c);
    s->durable(s, st, m);
    run_next(next);
}

/* The chunk's end on a failure of the store's: 503 STORE, "sequence ID:
 * WHAT (WHY); THEN". */
static void end_store(rchunk *c, const char *what, const char *why,
                      const char *then, bool sync)
{
    char id[SEQ_ID_MAX + 8], msg[512];
    seq_id_format(&c->id, id, sizeof id);
    snprintf(msg, sizeof msg, "sequence %s: %s (%s); %s", id, what, why, then);
    end(c, STATUS_STORE, msg, sync);
}

/* ---------------------------------------------------------- the steps */

static bool decide(rchunk *c, state_version version, const uint8_t *rec,
                   size_t len, bool fresh, bool sync);

/* An op's deadline, sent delay_ms from now: the store's time from then,
 * or the request's own deadline when that comes first. */
static uint64_t op_deadline(const rchunk *c, uint64_t delay_ms)
{
    uint64_t now = now_ns();
    uint64_t d = now + (delay_ms + c->r->timeout_ms) * 1000000u;
    if (c->req_deadline_ns != 0 && c->req_deadline_ns < d)
        d = c->req_deadline_ns > now ? c->req_deadline_ns : now + 1;
    return d;
}

static void on_get(void *ctx, state_redis_result res, state_version version,
                   const uint8_t *rec, size_t len, const char *why)
{
    rchunk *c = ctx;
    if (res != STATE_REDIS_OK) {
        end_store(c, "its state could not be read from Redis", why,
                  "nothing was added: send the chunk again", false);
        return;
    }
    cache_put_copy(c->r, c->key, c->keylen, version, rec, len);
    decide(c, version, rec, len, true, false);
}

/* Submits a read of the sequence's state (after delay_ms), which then
 * decides again; false when the store would not take it. */
static bool submit_read(rchunk *c, uint64_t delay_ms)
{
    uint64_t deadline = op_deadline(c, delay_ms);
    return delay_ms > 0
               ? state_redis_get_later(c->store, c->key, c->keylen, delay_ms,
                                       deadline, on_get, c)
               : state_redis_get(c->store, c->key, c->keylen, deadline,
                                 on_get, c);
}

static const char not_read[] =
    "the sequence's state could not be read: the store is closing or "
    "memory ran out";

/* Reads the sequence's state (after delay_ms), then decides again. */
static bool read_state(rchunk *c, uint64_t delay_ms, bool sync)
{
    bool sent = submit_read(c, delay_ms);
    if (!sent)
        end(c, STATUS_STORE, not_read, sync);
    return sent;
}

/* Starts chunks whose turn came while they waited (parked): each reads
 * its sequence's state afresh (the chunk before it may have changed it
 * on another loop), on its own store. */
static void run_next(rchunk *c)
{
    while (c != NULL) {
        if (submit_read(c, 0))
            return;
        seq_slot *s = c->s;
        rchunk *next = release(c);
        s->durable(s, STATUS_STORE, not_read);
        c = next;
    }
}

static void on_put(void *ctx, state_redis_result res, state_version version,
                   const uint8_t *rec, size_t len, const char *why)
{
    rchunk *c = ctx;
    seq_remote *r = c->r;
    if (res == STATE_REDIS_OK) {
        seq_slot_add_carries(c->s, c->out, c->base);
        uint8_t *kept = c->del ? NULL : c->rec; /* the cache's now */
        if (!c->del)
            c->rec = NULL;
        cache_put(r, c->key, c->keylen, version, kept, c->reclen, false);
        uv_mutex_lock(&r->mu);
        if (c->starts)
            r->c.started++;
        if (c->s->end && (c->starts || !c->was_closed))
            r->c.ended++;
        if (c->late)
            r->c.late++;
        if (c->id.has_chunk)
            r->c.applied++;
        uv_mutex_unlock(&r->mu);
        end(c, STATUS_OK, NULL, false);
        return;
    }
    if (res == STATE_REDIS_FAILED) {
        /* it may have been applied: what this replica knows is no more */
        cache_put(r, c->key, c->keylen, (state_version){0, 0}, NULL, 0, true);
        end_store(c, "its new state could not be written to Redis", why,
                  "the chunk may or may not have been added: send it again "
                  "(a numbered chunk sent again is answered once)",
                  false);
        return;
    }
    /* another version is there: another chunk came first */
    count(r, &r->races);
    cache_put_copy(r, c->key, c->keylen, version, rec, len);
    free(c->base);
    c->base = NULL;
    free(c->rec);
    c->rec = NULL;
    if (++c->rounds > MAX_ROUNDS) {
        char first[64];
        snprintf(first, sizeof first, "%d writes of other chunks came first",
                 MAX_ROUNDS);
        end_store(c, "its state kept changing under its write", first,
                  "nothing was added: send the chunk again", false);
        return;
    }
    decide(c, version, rec, len, true, false);
}

/* The sequence's new state after the chunk, on cur (NULL: a start),
 * written if its version is still `version`: a start begins a new
 * incarnation of the key, so that no version of an older sequence of
 * the same id can ever match its own. */
static bool write_state(rchunk *c, state_version version,
                        const seq_file_entry *cur, bool sync)
{
    seq_remote *r = c->r;
    seq_slot *s = c->s;
    size_t n = c->count ? c->count : 1;
    eng_carry few[16]; /* the new carries, until they are encoded */
    eng_carry *base = calloc(n, sizeof *base);
    eng_carry *next = n <= 16 ? few : malloc(n * sizeof *next);
    if (base == NULL || next == NULL) {
        free(base);
        if (next != few)
            free(next);
        end(c, STATUS_NOMEM, "out of memory for a chunk's carries", sync);
        return false;
    }
    if (cur != NULL)
        memcpy(base, cur->carry, c->count * sizeof *base);
    memcpy(next, base, c->count * sizeof *next);
    eng_carry_add(next, s->totals, c->count, c->is_float);
    seq_file_entry x;
    memset(&x, 0, sizeof x);
    x.id = c->id;
    x.id.start = x.id.end = x.id.has_flags = x.id.has_chunk = false;
    x.id.chunk = 0;
    x.desc = c->desc;
    x.desc.axis = seq_rule_axis(&c->desc);
    x.desc.shape[x.desc.axis] = 0;
    x.idle_deadline_ms = wall_ms() + (int64_t)r->o.idle_ms;
    x.count = c->count;
    x.carry = next;
    if (c->id.has_chunk) {
        x.numbered = true;
        x.applied = c->id.chunk;
        x.last_end = s->end;
        memcpy(x.sha, s->sha, sizeof x.sha);
        x.prev = base;
    }
    size_t reclen = 0; /* the record: 'L' or 'E', then the file */
    uint8_t *rec = seq_file_encode_after(&x, 1, 1, &reclen);
    if (next != few)
        free(next);
    if (rec == NULL) {
        free(base);
        end(c, STATUS_NOMEM, "out of memory writing a sequence's state",
            sync);
        return false;
    }
    /* ended by this chunk, or still ended (a late chunk after the end) */
    bool late = cur != NULL && c->was_closed;
    bool closed = s->end || late;
    rec[0] = closed ? 'E' : 'L';
    c->base = base;
    c->rec = rec;
    c->reclen = reclen;
    c->del = closed && !c->id.has_chunk && r->o.linger_ms == 0;
    /* a live sequence lives idle_ms from its last applied chunk; an ended
     * one from its end: linger_ms (unnumbered) or idle_ms (numbered, for
     * a repeat of its end), which a late chunk does not renew */
    uint64_t ttl = late                            ? STATE_REDIS_KEEP_TTL
                   : closed && !c->id.has_chunk ? r->o.linger_ms
                                                : r->o.idle_ms;
    state_version v = state_version_next(version, cur == NULL);
    if (!state_redis_put(c->store, c->key, c->keylen, version, v,
                         c->del ? NULL : rec, c->reclen, ttl,
                         op_deadline(c, 0), on_put, c)) {
        end(c, STATUS_STORE,
            "the sequence's state could not be written: the store is "
            "closing or memory ran out",
            sync);
        return false;
    }
    return true;
}

/* A repeat's answer goes once its sequence's idle time is renewed, as an
 * answered chunk renews it in memory; whatever Redis says (a newer
 * version, written meanwhile, renewed it too; a failure only shortens
 * its life), the repeat was decided on the state just read. */
static void on_touch(void *ctx, state_redis_result res, state_version version,
                     const uint8_t *rec, size_t len, const char *why)
{
    rchunk *c = ctx;
    (void)res, (void)version, (void)rec, (void)len, (void)why;
    seq_slot_add_carries(c->s, c->out, c->base);
    count(c->r, &c->r->c.repeats);
    end(c, STATUS_OK, NULL, false);
}

/* A numbered chunk that is the last applied one again (cur: its state,
 * just read at version): answered from the carries before it. A live
 * sequence's idle time is renewed first; an ended one keeps its own. */
static bool repeat(rchunk *c, state_version version, const seq_file_entry *cur,
                   bool closed, bool sync)
{
    seq_remote *r = c->r;
    if (closed) {
        seq_slot_add_carries(c->s, c->out, cur->prev);
        count(r, &r->c.repeats);
        end(c, STATUS_OK, NULL, sync);
        return false;
    }
    size_t n = c->count ? c->count : 1;
    c->base = malloc(n * sizeof *c->base);
    if (c->base == NULL) {
        end(c, STATUS_NOMEM, "out of memory for a chunk's carries", sync);
        return false;
    }
    memcpy(c->base, cur->prev, c->count * sizeof *c->base);
    if (!state_redis_touch(c->store, c->key, c->keylen, version, r->o.idle_ms,
                           op_deadline(c, 0), on_touch, c)) {
        end(c, STATUS_STORE,
            "the sequence's state could not be renewed: the store is "
            "closing or memory ran out",
            sync);
        return false;
    }
    return true;
}

/* An early chunk: reads again a little later, until reorder_ms from its
 * arrival; then refused as the table refuses it: chunk `next` never came
 * (absent: its sequence, whose start was admitted here before it, never
 * appeared: chunk 1). */
static bool early(rchunk *c, bool absent, uint64_t next, bool sync)
{
    seq_remote *r = c->r;
    uint64_t now = now_ns(), until = c->since_ns + r->o.reorder_ms * 1000000u;
    if (now >= until) {
        char msg[512];
        /* absent: its start never landed; it waited for chunk 1, as it
         * waits in memory behind a start that failed */
        seq_rule_gap(&c->id, c->id.chunk, absent ? 1 : next, r->o.reorder_ms,
                     msg, sizeof msg);
        count(r, &r->c.gaps);
        end(c, STATUS_CHUNK_GAP, msg, sync);
        return false;
    }
    uint64_t ms = (uint64_t)1 << (c->polls < 4 ? c->polls : 4);
    if (ms > POLL_MAX_MS)
        ms = POLL_MAX_MS;
    uint64_t left = (until - now + 999999) / 1000000;
    if (ms > left)
        ms = left;
    c->polls++;
    return read_state(c, ms, sync);
}

/* Decides what the chunk does to its sequence's state (version and
 * record; NULL: none), which is either just read (fresh) or this
 * replica's cached guess. True: a read or a write was submitted, and c
 * is the store thread's now; false: the chunk ended (end()). */
static bool decide(rchunk *c, state_version version, const uint8_t *rec,
                   size_t len, bool fresh, bool sync)
{
    seq_remote *r = c->r;
    seq_slot *s = c->s;
    char msg[512];
    seq_file_entry *cur = NULL;
    size_t n = 0;
    if (rec != NULL) {
        char err[256];
        size_t most = r->o.max_bytes > SIZE_MAX / 2 ? SIZE_MAX
                                                   : r->o.max_bytes * 2;
        bool ok = len >= 1 && (rec[0] == 'L' || rec[0] == 'E')
                  && seq_file_decode(rec + 1, len - 1, 1, most, &cur, &n,
                                     err, sizeof err);
        if (ok && (n != 1 || !seq_id_equal(&cur->id, &c->id))) {
            snprintf(err, sizeof err, "it holds another sequence");
            ok = false;
        }
        if (!ok) {
            if (rec[0] != 'L' && rec[0] != 'E')
                snprintf(err, sizeof err, "not a record of tally's");
            seq_file_free(cur, n);
            if (!fresh)
                return read_state(c, 0, sync);
            end_store(c, "its state in Redis cannot be read", err,
                      "nothing was added", sync);
            return false;
        }
    }
    seq_view v = {
        .exists = cur != NULL,
        .numbered = cur != NULL && cur->numbered,
        .closed = cur != NULL && rec[0] == 'E',
        .applied = cur != NULL ? cur->applied : 0,
        .last_sha = cur != NULL ? cur->sha : NULL,
        .desc = cur != NULL ? &cur->desc : NULL,
    };
    bool late = false, sent = false;
    c->was_closed = v.closed;
    int rule = seq_rule_admit(&v, &c->id, &c->desc, s->sha, r->o.linger_ms,
                              r->o.idle_ms, &late, msg, sizeof msg);
    if (rule == SEQ_RULE_START) {
        c->starts = true;
        c->late = false;
        sent = write_state(c, version, NULL, sync);
    } else if (!fresh) {
        /* anything but a write is decided on the truth */
        if (rule == SEQ_RULE_TAKE && (!c->id.has_chunk
                                      || seq_rule_outcome(&v, &c->id,
                                                          c->id.chunk, s->sha,
                                                          msg, sizeof msg)
                                             == SEQ_OUT_APPLY)) {
            c->starts = false;
            c->late = late;
            sent = write_state(c, version, cur, sync);
        } else {
            sent = read_state(c, 0, sync);
        }
    } else if (rule == SEQ_RULE_INVALID && !v.exists && c->id.has_chunk
               && c->after_start) {
        /* its start, admitted here before it, is on its way to Redis: it
         * waits for it, as it waits in memory behind its start's turn */
        sent = early(c, true, 1, sync);
    } else if (rule != SEQ_RULE_TAKE) {
        uv_mutex_lock(&r->mu);
        r->c.refused++;
        if (rule == SEQ_RULE_CONFLICT)
            r->c.conflicts++;
        uv_mutex_unlock(&r->mu);
        end(c,
            rule == SEQ_RULE_CONFLICT ? STATUS_CHUNK_CONFLICT
                                      : STATUS_INVALID,
            msg, sync);
    } else if (!c->id.has_chunk) {
        c->starts = false;
        c->late = late;
        sent = write_state(c, version, cur, sync);
    } else {
        switch (seq_rule_outcome(&v, &c->id, c->id.chunk, s->sha, msg,
                                 sizeof msg)) {
        case SEQ_OUT_APPLY:
            c->starts = false;
            c->late = false;
            sent = write_state(c, version, cur, sync);
            break;
        case SEQ_OUT_REPEAT:
            sent = repeat(c, version, cur, v.closed, sync);
            break;
        case SEQ_OUT_EARLY:
            sent = early(c, false, cur->applied + 1, sync);
            break;
        default:
            count(r, &r->c.conflicts);
            end(c, STATUS_CHUNK_CONFLICT, msg, sync);
            break;
        }
    }
    seq_file_free(cur, n);
    return sent;
}

/* ------------------------------------------------------------ the API */

static status_code remote_admit(void *self, const seq_params *p,
                                const eng_scan_desc *d, const eng_lines *l,
                                const void *in, seq_slot *s, char *msg,
                                size_t msglen)
{
    seq_remote *r = self;
    status_code st = seq_slot_fill(p, d, l, in, r->o.max_bytes, s, msg, msglen);
    if (st != STATUS_OK)
        return st;
    uint64_t count = eng_carry_count(l);
    size_t need = (size_t)count * sizeof(eng_carry) * (p->has_chunk ? 2 : 1);
    rchunk *c = calloc(1, sizeof *c);
    if (c == NULL) {
        seq_slot_drop(s);
        snprintf(msg, msglen, "out of memory for a chunk");
        return STATUS_NOMEM;
    }
    c->r = r;
    c->store = s->near != NULL ? s->near : r->store;
    c->s = s;
    c->id = *p;
    c->desc = *d;
    c->need = need;
    c->count = count;
    c->is_float = tx_dtype_kind(d->dtype) == TX_KIND_FLOAT;
    c->since_ns = now_ns();
    int k = p->is_string
                ? snprintf((char *)c->key, sizeof c->key, "{s:%s}", p->str)
                : snprintf((char *)c->key, sizeof c->key, "{n:%" PRIu64 "}",
                           p->num);
    c->keylen = (size_t)k;
    char id[SEQ_ID_MAX + 8];
    uv_mutex_lock(&r->mu);
    if (r->inflight >= r->o.max_sequences) {
        seq_id_format(p, id, sizeof id);
        snprintf(msg, msglen,
                 "sequence %s: %zu chunks of sequences are in flight on this "
                 "replica, as many as --max-sequences allows with "
                 "--state-store; retry after a moment",
                 id, r->inflight);
        st = STATUS_SEQUENCES_FULL;
    } else if (need > r->o.max_bytes - r->inflight_bytes) {
        seq_id_format(p, id, sizeof id);
        snprintf(msg, msglen,
                 "sequence %s: the carries of the chunks in flight on this "
                 "replica take %zu of the %zu bytes it allows "
                 "(--sequence-max-bytes), and this one needs %zu more; "
                 "retry after a moment",
                 id, r->inflight_bytes, r->o.max_bytes, need);
        st = STATUS_SEQUENCES_FULL;
    } else if (!line_join(r, c, p->start)) {
        snprintf(msg, msglen, "out of memory for a chunk");
        st = STATUS_NOMEM;
    } else {
        r->inflight++;
        r->inflight_bytes += need;
    }
    if (st != STATUS_OK)
        r->c.refused++;
    uv_mutex_unlock(&r->mu);
    if (st != STATUS_OK) {
        free(c);
        seq_slot_drop(s);
        return st;
    }
    s->remote = c;
    return STATUS_OK;
}

static bool remote_finish(void *self, seq_slot *s, bool ok, void *out,
                          status_code *st, char *msg, size_t msglen)
{
    seq_remote *r = self;
    rchunk *c = s->remote;
    *st = STATUS_OK;
    if (!ok) {
        run_next(release(c));
        return false;
    }
    c->out = out;
    c->req_deadline_ns = s->deadline_ns;
    /* an unnumbered chunk whose turn has not come (one admitted before
     * it here is still being decided) waits for it: the chunk before it
     * starts it (run_next) */
    uv_mutex_lock(&r->mu);
    bool wait = c->queued && c->line->head != c;
    c->parked = wait;
    uv_mutex_unlock(&r->mu);
    if (wait)
        return true;
    state_version version = {0, 0};
    uint8_t *rec;
    size_t len;
    c->sync_msg = msg; /* end() writes there while this runs */
    c->sync_msglen = msglen;
    bool later = cache_get(r, c->key, c->keylen, &version, &rec, &len)
                     ? decide(c, version, rec, len, false, true)
                     : read_state(c, 0, true);
    free(rec);
    if (later)
        return true; /* c is the store thread's now: not touched here */
    *st = c->st;
    run_next(release(c));
    return false;
}

static void remote_counts(void *self, seq_counts *out)
{
    seq_remote *r = self;
    uv_mutex_lock(&r->mu);
    *out = r->c;
    out->live = r->cached;
    out->bytes = r->cached_bytes + r->inflight_bytes;
    uv_mutex_unlock(&r->mu);
}

static void remote_render(void *self, textbuf *o)
{
    seq_remote *r = self;
    state_redis_stats st;
    state_redis_get_stats(r->store, &st);
    uv_mutex_lock(&r->mu);
    uint64_t races = r->races;
    for (size_t i = 0; i < r->nnear; i++) {
        if (r->near[i] == NULL)
            continue;
        state_redis_stats n;
        state_redis_get_stats(r->near[i], &n);
        st.up = st.up && n.up;
        st.answered += n.answered;
        st.rtt_ns += n.rtt_ns;
        st.failures += n.failures;
        st.reconnects += n.reconnects;
    }
    uv_mutex_unlock(&r->mu);
    textbuf_put(o,
                "# HELP tally_state_store_up Whether the connection to the "
                "sequences' shared store (--state-store) is up.\n"
                "# TYPE tally_state_store_up gauge\n"
                "tally_state_store_up %d\n"
                "# HELP tally_state_store_commands_total Reads and writes "
                "the store answered.\n"
                "# TYPE tally_state_store_commands_total counter\n"
                "tally_state_store_commands_total %" PRIu64 "\n"
                "# HELP tally_state_store_round_trip_seconds_total Time "
                "from sending those commands to their answers.\n"
                "# TYPE tally_state_store_round_trip_seconds_total counter\n"
                "tally_state_store_round_trip_seconds_total %.9f\n"
                "# HELP tally_state_store_failures_total Reads and writes "
                "that failed: the connection lost, no answer within the "
                "chunk's time, or an error from Redis (their chunks "
                "answered 503).\n"
                "# TYPE tally_state_store_failures_total counter\n"
                "tally_state_store_failures_total %" PRIu64 "\n"
                "# HELP tally_state_store_reconnects_total Connections to "
                "the store made again after one was lost.\n"
                "# TYPE tally_state_store_reconnects_total counter\n"
                "tally_state_store_reconnects_total %" PRIu64 "\n"
                "# HELP tally_state_store_races_total Writes that found "
                "another version of their sequence (another replica's chunk "
                "came first), decided again.\n"
                "# TYPE tally_state_store_races_total counter\n"
                "tally_state_store_races_total %" PRIu64 "\n"
                "# HELP tally_state_store_durability What Redis's "
                "configuration says its acknowledged writes survive: 2 a "
                "power loss (appendfsync always), 1 a restart of Redis (an "
                "append-only file), 0 nothing since its last snapshot "
                "(appendonly no), -1 unknown (CONFIG refused, or not asked "
                "yet).\n"
                "# TYPE tally_state_store_durability gauge\n"
                "tally_state_store_durability %d\n",
                st.up ? 1 : 0, st.answered, (double)st.rtt_ns / 1e9,
                st.failures, st.reconnects, races, (int)st.durability);
}

/* A connection of the store's on a door's loop: the chunks its
 * requests bring are read and written there, and their replies read on
 * the thread that answers them. NULL (logged): the store's own thread
 * serves that loop's chunks. */
static void *remote_loop_open(void *self, uv_loop_t *loop)
{
    seq_remote *r = self;
    char msg[256];
    uv_mutex_lock(&r->mu);
    if (r->nnear == r->near_cap) {
        size_t cap = r->near_cap ? r->near_cap * 2 : 8;
        state_redis **v = realloc(r->near, cap * sizeof *v);
        if (v != NULL) {
            r->near = v;
            r->near_cap = cap;
        }
    }
    size_t i = r->nnear; /* its place, kept: NULL until it is open */
    bool room = i < r->near_cap;
    if (room)
        r->near[r->nnear++] = NULL;
    uv_mutex_unlock(&r->mu);
    state_redis *st =
        room ? state_redis_open_on(r->store, loop, msg, sizeof msg) : NULL;
    if (st == NULL) {
        log_msg("sequences", "warn",
                "no connection to the state store on a door's loop (%s): "
                "the store's own thread serves its chunks",
                room ? msg : "out of memory");
        return NULL;
    }
    uv_mutex_lock(&r->mu);
    r->near[i] = st;
    uv_mutex_unlock(&r->mu);
    return st;
}

static void remote_loop_close(void *self, void *near)
{
    (void)self;
    state_redis_stop(near); /* freed with r, once no thread can use it */
}

void seq_remote_attach(seq_remote *r, seq_table *t)
{
    static const seq_backend ops = {
        .admit = remote_admit,
        .finish = remote_finish,
        .counts = remote_counts,
        .render_metrics = remote_render,
        .loop_open = remote_loop_open,
        .loop_close = remote_loop_close,
    };
    seq_set_backend(t, &ops, r);
}
