/*
 * seq_remote.c - sequences whose states live in a store that replicas
 * share (seq_remote.h): the backend, its admission and limits, the cache
 * of the last states seen, and each sequence's line of chunks on this
 * replica; seq_decide.c has a chunk's steps.
 *
 * The cache: this replica's last word from the store on each sequence
 * it served (its version and record), in a map from id (seq_map.h) and a
 * list from the least recently used, under the mutex. A decision taken
 * on it is only a guess (seq_decide.c).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "log.h"
#include "seq_remote.h"
#include "seq_remote_int.h"
#include "tx_dtype.h"

static seq_remote *remote_of(seq_backend *b)
{
    return (seq_remote *)b;
}

/* ------------------------------------------------------------ the cache */

static centry *centry_of(seq_map_node *n)
{
    return n != NULL ? (centry *)((char *)n - offsetof(centry, node)) : NULL;
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

/* Takes e out, and frees it. Under the mutex. */
static void uncache(seq_remote *r, centry *e)
{
    seq_map_remove(&r->cache, &e->node);
    lru_unlink(r, e);
    r->cached_bytes -= e->len;
    free(e->rec);
    free(e);
}

bool seq_remote_cache_get(seq_remote *r, const seq_map_node *k,
                          kv_version *version, uint8_t **rec, size_t *len)
{
    *rec = NULL;
    *len = 0;
    uv_mutex_lock(&r->mu);
    centry *e = centry_of(seq_map_find_key(&r->cache, k));
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

void seq_remote_cache_put(seq_remote *r, const seq_map_node *k,
                          kv_version version, uint8_t *rec, size_t len,
                          bool forget)
{
    bool keep = !forget && r->o.max_sequences > 0 && len <= r->o.max_bytes;
    uv_mutex_lock(&r->mu);
    centry *e = centry_of(seq_map_find_key(&r->cache, k));
    if (e != NULL && !keep) {
        uncache(r, e);
        e = NULL;
    } else if (e != NULL) {
        lru_unlink(r, e);
        r->cached_bytes -= e->len;
        free(e->rec);
        e->rec = NULL;
        e->len = 0;
    } else if (keep && (e = calloc(1, sizeof *e)) != NULL) {
        e->node = *k;
        seq_map_add(&r->cache, &e->node);
    }
    if (e != NULL) {
        e->version = version;
        e->rec = rec;
        e->len = rec != NULL ? len : 0;
        lru_push(r, e);
        r->cached_bytes += e->len;
        rec = NULL;
        while (r->cache.n > r->o.max_sequences
               || r->cached_bytes > r->o.max_bytes)
            uncache(r, r->lru);
    }
    uv_mutex_unlock(&r->mu);
    free(rec);
}

void seq_remote_cache_copy(seq_remote *r, const seq_map_node *k,
                           kv_version version, const uint8_t *rec, size_t len)
{
    uint8_t *copy = NULL;
    if (rec != NULL && (copy = malloc(len ? len : 1)) != NULL)
        memcpy(copy, rec, len);
    seq_remote_cache_put(r, k, version, copy, len, rec != NULL && copy == NULL);
}

/* ------------------------------------------------------------ the lines */

/* Puts c in its sequence's line (made when it is the first): false when
 * memory runs out. Under the mutex. */
static bool line_join(seq_remote *r, rchunk *c, bool start)
{
    seq_map_node *n = seq_map_find_key(&r->lines, &c->idkey);
    lentry *l =
        n != NULL ? (lentry *)((char *)n - offsetof(lentry, node)) : NULL;
    if (l == NULL) {
        l = calloc(1, sizeof *l);
        if (l == NULL)
            return false;
        l->node = c->idkey;
        seq_map_add(&r->lines, &l->node);
    }
    c->line = l;
    c->after_start = l->starts > 0;
    l->n++;
    if (start) {
        l->starts++;
        c->counted_start = true;
    }
    if (c->id.has_chunk) {
        c->qnext = l->numbered;
        l->numbered = c;
    } else {
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
    if (c->id.has_chunk) {
        rchunk **pp = &l->numbered;
        while (*pp != c)
            pp = &(*pp)->qnext;
        *pp = c->qnext;
    }
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
        seq_map_remove(&r->lines, &l->node);
        free(l);
    }
    return next;
}

bool seq_remote_line_holds(seq_remote *r, const rchunk *c, uint64_t from)
{
    uv_mutex_lock(&r->mu);
    const lentry *l = c->line;
    /* c is one of the line's n */
    bool holds =
        l != NULL && from < c->id.chunk && c->id.chunk - from < l->n;
    for (uint64_t k = from; holds && k < c->id.chunk; k++) {
        const rchunk *o = l->numbered;
        while (o != NULL && o->id.chunk != k)
            o = o->qnext;
        holds = o != NULL;
    }
    uv_mutex_unlock(&r->mu);
    return holds;
}

/* -------------------------------------------------------- a chunk's end */

void seq_remote_count(seq_remote *r, uint64_t *counter)
{
    uv_mutex_lock(&r->mu);
    (*counter)++;
    uv_mutex_unlock(&r->mu);
}

rchunk *seq_remote_release(rchunk *c)
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

/* ------------------------------------------------------------ the API */

static status_code remote_admit(seq_backend *b, const seq_params *p,
                                const eng_scan_desc *d, const eng_lines *l,
                                const void *in, seq_slot *s, bool *wait,
                                char *msg, size_t msglen)
{
    seq_remote *r = remote_of(b);
    *wait = false; /* the store orders its writes; a line orders the
                    * unnumbered chunks at their finish */
    status_code st =
        seq_slot_fill(p, d, l, in, r->o.max_bytes, 1, s, msg, msglen);
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
    seq_key_of(p, &c->idkey);
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

static status_code remote_finish(seq_backend *b, seq_slot *s, bool ok,
                                 void *out, bool *later, char *msg,
                                 size_t msglen)
{
    seq_remote *r = remote_of(b);
    rchunk *c = s->remote;
    *later = false;
    if (!ok) {
        seq_decide_run_next(seq_remote_release(c));
        return STATUS_OK;
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
    if (wait) {
        *later = true;
        return STATUS_OK;
    }
    kv_version version = {0, 0};
    uint8_t *rec;
    size_t len;
    c->sync_msg = msg; /* end() writes there while this runs */
    c->sync_msglen = msglen;
    *later = seq_remote_cache_get(r, &c->idkey, &version, &rec, &len)
                 ? seq_decide(c, version, rec, len, false, true)
                 : seq_decide_read(c, 0, true);
    free(rec);
    if (*later)
        return STATUS_OK; /* c is the store's thread's now: not touched */
    status_code st = c->st;
    seq_decide_run_next(seq_remote_release(c));
    return st;
}

static void remote_counts(seq_backend *b, seq_counts *out)
{
    seq_remote *r = remote_of(b);
    uv_mutex_lock(&r->mu);
    *out = r->c;
    out->live = r->cache.n;
    out->bytes = r->cached_bytes + r->inflight_bytes;
    uv_mutex_unlock(&r->mu);
}

static void remote_render(seq_backend *b, textbuf *o)
{
    seq_remote *r = remote_of(b);
    kv_stats st;
    r->store->ops->stats(r->store, &st);
    uv_mutex_lock(&r->mu);
    uint64_t races = r->races;
    for (size_t i = 0; i < r->nnear; i++) {
        if (r->near[i] == NULL)
            continue;
        kv_stats n;
        r->near[i]->ops->stats(r->near[i], &n);
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
                st.failures, st.reconnects, races, st.durability);
}

/* A connection of the store's on a door's loop: the chunks its
 * requests bring are read and written there, and their replies read on
 * the thread that answers them. NULL (logged): the store's own thread
 * serves that loop's chunks. */
static void *remote_loop_open(seq_backend *b, uv_loop_t *loop)
{
    seq_remote *r = remote_of(b);
    char msg[256];
    uv_mutex_lock(&r->mu);
    if (r->nnear == r->near_cap) {
        size_t cap = r->near_cap ? r->near_cap * 2 : 8;
        kv **v = realloc(r->near, cap * sizeof *v);
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
    kv *st =
        room ? r->store->ops->open_on(r->store, loop, msg, sizeof msg) : NULL;
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

static void remote_loop_close(seq_backend *b, void *near)
{
    (void)b;
    kv *k = near;
    k->ops->stop(k); /* closed with the backend, once no thread uses it */
}

static bool remote_arm(seq_backend *b, seq_slot *s)
{
    (void)b, (void)s;
    return false; /* admit never says wait */
}

static void remote_sweep(seq_backend *b)
{
    (void)b; /* the store expires the states: their keys' time to live */
}

static bool remote_freeze(seq_backend *b, uint64_t wait_ms)
{
    (void)b, (void)wait_ms;
    return true; /* nothing moves here: a chunk's write is the store's */
}

static void remote_free(seq_backend *b)
{
    seq_remote *r = remote_of(b);
    for (size_t i = 0; i < r->nnear; i++)
        if (r->near[i] != NULL)
            r->near[i]->ops->close(r->near[i]);
    free(r->near);
    /* the connection last: a chunk still waiting for it (a drain that
     * timed out) fails with "the store is closing" */
    r->store->ops->close(r->store);
    while (r->lru != NULL)
        uncache(r, r->lru);
    seq_map_free(&r->cache);
    seq_map_free(&r->lines); /* empty, once no chunk is */
    uv_mutex_destroy(&r->mu);
    free(r);
}

seq_backend *seq_remote_new(kv *store, const seq_options *o,
                            uint64_t timeout_ms)
{
    static const seq_backend_ops ops = {
        .admit = remote_admit,
        .arm = remote_arm,
        .finish = remote_finish,
        .sweep = remote_sweep,
        .freeze = remote_freeze,
        .counts = remote_counts,
        .render_metrics = remote_render,
        .loop_open = remote_loop_open,
        .loop_close = remote_loop_close,
        .free = remote_free,
    };
    seq_remote *r = calloc(1, sizeof *r);
    if (r == NULL) {
        store->ops->close(store);
        return NULL;
    }
    r->base.ops = &ops;
    r->base.durable = true;
    r->store = store;
    r->o = *o;
    r->timeout_ms = timeout_ms;
    if (!seq_map_init(&r->cache) || !seq_map_init(&r->lines)
        || uv_mutex_init(&r->mu) != 0) {
        seq_map_free(&r->cache);
        seq_map_free(&r->lines);
        store->ops->close(store);
        free(r);
        return NULL;
    }
    return &r->base;
}
