/*
 * sequence.c - the live sequences (sequence.h).
 *
 * A map from id to entry (chained buckets), and the idle entries (no
 * chunk admitted) in a list from the least recently used, which is all
 * seq_sweep() reads. An entry that a sequence_start replaced, or that
 * ended, leaves the map at once, but is freed only when its last
 * admitted chunk is done.
 *
 * A chunk's turn: the entry's `busy` is held by one chunk at a time; the
 * others wait in its line, in admission order. A waiting slot's `turn`
 * goes WAITING -> ARMED (seq_arm: the submitter has suspended it) ->
 * called ready; or WAITING -> TURN (its turn came before seq_arm, which
 * then says so and the submitter goes on at once). A numbered
 * sequence's line is sorted by number, and the turn passes only to a
 * chunk that is due; an entry with waiting numbered chunks is in the
 * STALLED list, which seq_sweep() reads for those that waited too long.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "clock.h"
#include "sequence.h"
#include "seq_store.h"
#include "sequence_file.h"
#include "seq_rules.h"
#include "tx_dtype.h"

enum { WAITING = 1, ARMED, TURN };
/* The lists an entry is in (one at most): IDLE (nothing pending), CLOSED
 * (ended, unnumbered, lingering linger_ms), ENDED (ended, numbered, kept
 * idle_ms for a repeat of its end), STALLED (numbered chunks waiting). */
enum { IDLE = 1, CLOSED, ENDED, STALLED, NLISTS };

struct seq_entry {
    seq_params id;
    uint64_t hash;
    seq_entry *hnext;         /* in its bucket */
    seq_entry *lprev, *lnext; /* in the idle or the closed list */
    int list;                 /* which: 0 (none), IDLE or CLOSED */
    bool mapped;              /* in the map: live, or closed and lingering */
    bool closed;              /* its end was answered; lingering */
    uint64_t closed_ns;
    bool ending; /* a sequence_end chunk is admitted */
    bool started; /* a start of it was applied (or it was loaded): a
                   * chunk behind a start that failed is not taken */
    bool busy;   /* a chunk holds the turn */
    bool is_float;
    unsigned pending;        /* chunks admitted and not finished */
    uint64_t chunks;         /* chunks answered */
    seq_slot *whead, *wtail; /* waiting for the turn */
    eng_scan_desc desc;      /* axis in [0, rank); shape[axis] unused */
    uint64_t count;
    eng_carry *carry;
    uint64_t last_ns;
    /* numbered sequences (sequence.h): written by the turn's holder under
     * the mutex, read by admission under it */
    bool numbered;
    bool last_end;              /* the last applied chunk was the end */
    uint64_t applied;           /* the last applied chunk's number */
    uint64_t running;           /* the number of the chunk with the turn */
    unsigned char last_sha[32]; /* the last applied chunk's input */
    eng_carry *prev;            /* the carries before it (count) */
};

struct seq_table {
    seq_options o;
    uv_mutex_t mu;
    seq_entry **buckets;
    size_t nbuckets;              /* a power of two */
    seq_entry *head[NLISTS], *tail[NLISTS]; /* the lists above */
    size_t live;  /* live entries in the map (not the closed ones) */
    size_t bytes; /* every entry's carries, mapped or not */
    uint64_t started, ended, expired, refused, late;
    uint64_t applied, repeats, conflicts, gaps; /* numbered chunks */
    uint64_t loaded_expired; /* seq_restore()'s, for seq_expire_loaded() */
    seq_store *store; /* NULL: the carries live in memory only */
    const seq_backend *remote; /* the states live in a shared store */
    void *remote_self;
    bool frozen;     /* seq_freeze(): no carry moves any more */
    unsigned moving; /* chunks moving their carries now (seq_finish) */
};

static uint64_t now(const seq_table *t)
{
    return t->o.clock ? t->o.clock(t->o.clock_user) : now_ns();
}

static uint64_t hash_id(const seq_params *p)
{
    uint64_t h = 0xcbf29ce484222325u;
    const uint8_t *b =
        p->is_string ? (const uint8_t *)p->str : (const uint8_t *)&p->num;
    size_t n = p->is_string ? p->len : sizeof p->num;
    h ^= p->is_string;
    h *= 0x100000001b3u;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3u;
    }
    return h;
}

seq_table *seq_table_new(const seq_options *o)
{
    seq_table *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->o = *o;
    t->nbuckets = 64;
    while (t->nbuckets < o->max_sequences && t->nbuckets < ((size_t)1 << 16))
        t->nbuckets *= 2;
    t->buckets = calloc(t->nbuckets, sizeof *t->buckets);
    if (t->buckets == NULL || uv_mutex_init(&t->mu) != 0) {
        free(t->buckets);
        free(t);
        return NULL;
    }
    return t;
}

/* The bytes an entry's carries take: twice for a numbered one (prev). */
static size_t entry_bytes(const seq_entry *e)
{
    return (size_t)e->count * sizeof *e->carry * (e->numbered ? 2 : 1);
}

static void entry_free(seq_table *t, seq_entry *e)
{
    t->bytes -= entry_bytes(e);
    free(e->carry);
    free(e->prev);
    free(e);
}

void seq_table_free(seq_table *t)
{
    if (t == NULL)
        return;
    for (size_t b = 0; b < t->nbuckets; b++)
        for (seq_entry *e = t->buckets[b], *n; e != NULL; e = n) {
            n = e->hnext;
            entry_free(t, e);
        }
    free(t->buckets);
    uv_mutex_destroy(&t->mu);
    free(t);
}

bool seq_enabled(const seq_table *t)
{
    return t != NULL && t->o.max_sequences > 0;
}

uint64_t seq_idle_ms(const seq_table *t)
{
    return t->o.idle_ms;
}

/* ------------------------------------------------- the map and the list */

static seq_entry *find(seq_table *t, const seq_params *p, uint64_t h)
{
    for (seq_entry *e = t->buckets[h & (t->nbuckets - 1)]; e; e = e->hnext)
        if (e->hash == h && seq_id_equal(&e->id, p))
            return e;
    return NULL;
}

static void list_remove(seq_table *t, seq_entry *e)
{
    int l = e->list;
    if (l == 0)
        return;
    e->list = 0;
    if (e->lprev)
        e->lprev->lnext = e->lnext;
    else
        t->head[l] = e->lnext;
    if (e->lnext)
        e->lnext->lprev = e->lprev;
    else
        t->tail[l] = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void list_append(seq_table *t, seq_entry *e, int l)
{
    e->list = l;
    e->lprev = t->tail[l];
    e->lnext = NULL;
    if (t->tail[l])
        t->tail[l]->lnext = e;
    else
        t->head[l] = e;
    t->tail[l] = e;
}

/* The time an entry's list expires it from: its last answered chunk
 * (IDLE), its end (CLOSED, ENDED). */
static uint64_t list_key(const seq_entry *e, int l)
{
    return l == IDLE ? e->last_ns : e->closed_ns;
}

/* Puts e in list l in the order of list_key(), which seq_sweep() reads
 * from the oldest: a chunk that failed does not renew its sequence, and
 * an ended one that comes back from a repeat keeps its end's time, so an
 * entry may come back older than the newest. Mostly at the tail. */
static void list_insert(seq_table *t, seq_entry *e, int l)
{
    uint64_t k = list_key(e, l);
    seq_entry *after = t->tail[l];
    while (after != NULL && list_key(after, l) > k)
        after = after->lprev;
    e->list = l;
    e->lprev = after;
    e->lnext = after != NULL ? after->lnext : t->head[l];
    if (e->lnext != NULL)
        e->lnext->lprev = e;
    else
        t->tail[l] = e;
    if (after != NULL)
        after->lnext = e;
    else
        t->head[l] = e;
}

static void idle_insert(seq_table *t, seq_entry *e)
{
    list_insert(t, e, IDLE);
}

static void map_insert(seq_table *t, seq_entry *e)
{
    seq_entry **b = &t->buckets[e->hash & (t->nbuckets - 1)];
    e->hnext = *b;
    *b = e;
    e->mapped = true;
    t->live++;
}

/* Takes e out of the map (and the idle list); frees it when no chunk of
 * it is left. */
static void unmap(seq_table *t, seq_entry *e)
{
    seq_entry **p = &t->buckets[e->hash & (t->nbuckets - 1)];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    e->mapped = false;
    if (!e->closed)
        t->live--;
    if (e->pending == 0) {
        list_remove(t, e);
        entry_free(t, e);
    }
}

/* ----------------------------------------------------------- admission */

/* What a slot holds, let go. */
void seq_slot_drop(seq_slot *s)
{
    if (s->totals != &s->one)
        free(s->totals);
    s->totals = NULL;
    free(s->copy);
    s->copy = NULL;
}

/* Whether a numbered slot may take the turn now: its number is the last
 * applied one's or the next (or older: it is answered as a conflict). */
static bool due(const seq_entry *e, const seq_slot *s)
{
    return !e->numbered || s->chunk <= e->applied + 1;
}

/* Puts s in e's waiting line: last, or a numbered one in number order
 * (after the slots with its number). */
static void line_insert(seq_entry *e, seq_slot *s)
{
    seq_slot **at = &e->whead;
    if (!e->numbered && e->wtail != NULL)
        at = &e->wtail->next;
    while (*at != NULL && (*at)->chunk <= s->chunk)
        at = &(*at)->next;
    s->next = *at;
    *at = s;
    if (s->next == NULL)
        e->wtail = s;
}

/* Keeps e in the STALLED list while numbered chunks of it wait (an entry
 * with waiting chunks has pending ones, so it is in no other list). */
static void stall_update(seq_table *t, seq_entry *e)
{
    bool want = e->numbered && e->whead != NULL;
    if (want && e->list != STALLED) {
        list_remove(t, e);
        list_append(t, e, STALLED);
    } else if (!want && e->list == STALLED) {
        list_remove(t, e);
    }
}

status_code seq_slot_fill(const seq_params *p, const eng_scan_desc *d,
                          const eng_lines *l, const void *in, size_t max_bytes,
                          seq_slot *s, char *msg, size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    uint64_t count;
    size_t per = sizeof(eng_carry) * (p->has_chunk ? 2 : 1);
    if (!eng_mul_u64(l->outer, l->inner, &count) || count > max_bytes / per) {
        snprintf(msg, msglen,
                 "sequence %s: a chunk of this shape keeps a carry for each "
                 "of its lines, %zu bytes each%s, and they would take more "
                 "than --sequence-max-bytes (%zu) alone",
                 id, per, p->has_chunk ? " in a numbered sequence" : "",
                 max_bytes);
        return STATUS_TOO_LARGE;
    }
    s->lines = *l;
    s->start = p->start;
    s->end = p->end;
    s->totals = &s->one;
    s->copy = NULL;
    if (count > 1) {
        s->totals = malloc(count * sizeof *s->totals);
        if (s->totals == NULL) {
            s->totals = &s->one;
            snprintf(msg, msglen, "out of memory for a chunk's totals");
            return STATUS_NOMEM;
        }
    }
    memset(s->totals, 0, (count ? count : 1) * sizeof *s->totals);
    eng_carry_totals(l, in, s->totals); /* before any lock: it reads it all */
    if (eng_carry_rescans(l->dtype) && l->bytes > 0) {
        s->copy = malloc(l->bytes);
        if (s->copy == NULL) {
            seq_slot_drop(s);
            snprintf(msg, msglen, "out of memory keeping a chunk's input");
            return STATUS_NOMEM;
        }
        memcpy(s->copy, in, l->bytes);
    }
    s->numbered = p->has_chunk;
    s->chunk = p->chunk;
    s->refused = STATUS_OK;
    if (p->has_chunk && !seq_rule_sha(d, in, l->bytes, s->sha)) {
        seq_slot_drop(s);
        snprintf(msg, msglen, "out of memory hashing a chunk's input");
        return STATUS_NOMEM;
    }
    return STATUS_OK;
}

status_code seq_admit(seq_table *t, const seq_params *p, const eng_scan_desc *d,
                      const eng_lines *l, const void *in, seq_slot *s,
                      bool *wait, char *msg, size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    if (!seq_enabled(t)) {
        snprintf(msg, msglen,
                 "sequence %s: this server keeps no sequences (it runs "
                 "with --max-sequences 0)",
                 id);
        return STATUS_INVALID;
    }
    if (t->remote != NULL) {
        *wait = false;
        return t->remote->admit(t->remote_self, p, d, l, in, s, msg, msglen);
    }
    status_code fst = seq_slot_fill(p, d, l, in, t->o.max_bytes, s, msg,
                                    msglen);
    if (fst != STATUS_OK)
        return fst;
    uint64_t count = eng_carry_count(l);

    uint64_t h = hash_id(p);
    uv_mutex_lock(&t->mu);
    seq_entry *e = find(t, p, h);
    status_code st = STATUS_OK;
    seq_view v = {
        .exists = e != NULL,
        .numbered = e != NULL && e->numbered,
        .closed = e != NULL && e->closed,
        .ending = e != NULL && e->ending,
        .applied = e != NULL ? e->applied : 0,
        .last_sha = e != NULL ? e->last_sha : NULL,
        .desc = e != NULL ? &e->desc : NULL,
    };
    bool late;
    int rule = seq_rule_admit(&v, p, d, s->sha, t->o.linger_ms, t->o.idle_ms,
                              &late, msg, msglen);
    bool restart = rule == SEQ_RULE_START;
    if (restart) {
        size_t need = (size_t)count * sizeof(eng_carry) * (p->has_chunk ? 2 : 1);
        if ((e == NULL || e->closed) && t->live >= t->o.max_sequences) {
            snprintf(msg, msglen,
                     "sequence %s: %zu sequences are live, as many as the "
                     "server keeps (--max-sequences); end one, or retry "
                     "once one has ended or expired",
                     id, t->live);
            st = STATUS_SEQUENCES_FULL;
        } else if (need > t->o.max_bytes - t->bytes) {
            snprintf(msg, msglen,
                     "sequence %s: the live sequences' carries take %zu of "
                     "the %zu bytes the server allows (--sequence-max-bytes),"
                     " and this one needs %zu more; retry once one has ended "
                     "or expired",
                     id, t->bytes, t->o.max_bytes, need);
            st = STATUS_SEQUENCES_FULL;
        }
        seq_entry *n = NULL;
        if (st == STATUS_OK) {
            n = calloc(1, sizeof *n);
            if (n != NULL) {
                n->carry = calloc(count ? count : 1, sizeof *n->carry);
                if (p->has_chunk)
                    n->prev = calloc(count ? count : 1, sizeof *n->prev);
            }
            if (n == NULL || n->carry == NULL
                || (p->has_chunk && n->prev == NULL)) {
                if (n != NULL) {
                    free(n->carry);
                    free(n->prev);
                }
                free(n);
                snprintf(msg, msglen, "out of memory for a sequence");
                st = STATUS_NOMEM;
            }
        }
        if (st != STATUS_OK)
            goto refused;
        if (e != NULL) /* started again: the old one lives on for its chunks */
            unmap(t, e);
        n->id = *p;
        n->id.start = n->id.end = n->id.has_flags = false;
        n->hash = h;
        n->desc = *d;
        n->desc.axis = seq_rule_axis(d);
        n->is_float = tx_dtype_kind(d->dtype) == TX_KIND_FLOAT;
        n->count = count;
        n->numbered = p->has_chunk;
        t->bytes += need;
        map_insert(t, n);
        t->started++;
        e = n;
    } else if (rule == SEQ_RULE_INVALID) {
        st = STATUS_INVALID;
    } else if (rule == SEQ_RULE_CONFLICT) {
        st = STATUS_CHUNK_CONFLICT;
        t->conflicts++;
    }
    if (st != STATUS_OK)
        goto refused;
    if (late)
        t->late++; /* sent before the end, arrived after it */
    if (p->end && !e->closed)
        e->ending = true;
    s->e = e;
    if (e->pending++ == 0)
        list_remove(t, e);
    s->next = NULL;
    if (e->busy || !due(e, s)) {
        s->turn = WAITING;
        s->since_ns = now(t);
        line_insert(e, s);
        stall_update(t, e);
        *wait = true;
    } else {
        e->busy = true;
        e->running = s->chunk;
        *wait = false;
    }
    uv_mutex_unlock(&t->mu);
    return STATUS_OK;

refused: /* nothing changed but the count; the lock is released here,
          * where it was taken */
    t->refused++;
    uv_mutex_unlock(&t->mu);
    seq_slot_drop(s);
    return st;
}

bool seq_arm(seq_table *t, seq_slot *s)
{
    uv_mutex_lock(&t->mu);
    bool armed = s->turn != TURN;
    if (armed)
        s->turn = ARMED;
    uv_mutex_unlock(&t->mu);
    return armed;
}

void seq_slot_add_carries(const seq_slot *s, void *out, const eng_carry *c)
{
    if (s->copy != NULL)
        eng_carry_scan(&s->lines, s->copy, out, c);
    else if (!eng_carry_zero(c, eng_carry_count(&s->lines)))
        eng_carry_apply(&s->lines, out, c);
}

enum { APPLY, REPEAT, CONFLICT, NOT_LIVE, GAP };

/* What a numbered chunk with the turn is (it is due, so never early):
 * the mutex is not needed to read what only the turn's holder writes. */
static int numbered_outcome(const seq_entry *e, const seq_slot *s, char *msg,
                            size_t msglen)
{
    seq_view v = {.exists = true,
                  .numbered = true,
                  .closed = e->closed,
                  .applied = e->applied,
                  .last_sha = e->last_sha,
                  .desc = &e->desc};
    switch (seq_rule_outcome(&v, &e->id, s->chunk, s->sha, msg, msglen)) {
    case SEQ_OUT_APPLY: return APPLY;
    case SEQ_OUT_REPEAT: return REPEAT;
    default: return CONFLICT;
    }
}

/* The chunk's first half, with the turn: what it is, its answer, and its
 * sequence's new carries (in place; or, with a store, into s->scratch,
 * to be taken once they are durable). *moving: counted in t->moving. */
static status_code finish_begin(seq_table *t, seq_slot *s, bool *ok,
                                void *out, int *what, bool *moving,
                                char *msg, size_t msglen)
{
    seq_entry *e = s->e;
    status_code st = STATUS_OK;
    *what = APPLY;
    if (*ok) { /* a frozen table moves no carry: the chunk fails */
        uv_mutex_lock(&t->mu);
        if (t->frozen)
            *ok = false;
        else
            t->moving++;
        uv_mutex_unlock(&t->mu);
        if (!*ok) {
            st = STATUS_DRAINING;
            snprintf(msg, msglen,
                     "the server is shutting down (its drain timed out); "
                     "the chunk was not added: send it again");
        }
    }
    *moving = *ok;
    if (*ok && !e->started && !s->start) {
        /* the start it followed failed: nothing to go on */
        if (e->numbered) {
            seq_rule_gap(&e->id, s->chunk, 1, t->o.reorder_ms, msg, msglen);
            *what = GAP;
            return STATUS_CHUNK_GAP;
        }
        seq_rule_not_live(&e->id, t->o.idle_ms, msg, msglen);
        *what = NOT_LIVE;
        return STATUS_INVALID;
    }
    if (*ok && e->numbered)
        *what = numbered_outcome(e, s, msg, msglen);
    /* the turn is this chunk's: the carries are its alone */
    if (*ok && *what == APPLY) {
        eng_carry *c = e->carry;
        if (t->store != NULL) {
            s->scratch = malloc(e->count ? e->count * sizeof *c : 1);
            if (s->scratch == NULL) {
                snprintf(msg, msglen, "out of memory for a chunk's carries");
                *ok = false;
                return STATUS_NOMEM;
            }
            memcpy(s->scratch, e->carry, e->count * sizeof *c);
            c = s->scratch;
        } else if (e->numbered) {
            memcpy(e->prev, e->carry, e->count * sizeof *e->prev);
        }
        seq_slot_add_carries(s, out, e->carry);
        eng_carry_add(c, s->totals, e->count, e->is_float);
    } else if (*ok && *what == REPEAT) {
        seq_slot_add_carries(s, out, e->prev);
    } else if (*ok) {
        st = STATUS_CHUNK_CONFLICT;
    }
    return st;
}

/* The chunk's second half: the bookkeeping under the mutex, the new
 * carries taken (committed: a store's are durable), and the turn handed
 * on. */
static void finish_end(seq_table *t, seq_slot *s, bool ok, int what,
                       bool moving, bool committed)
{
    seq_entry *e = s->e;
    if (!committed)
        ok = false; /* the store failed: nothing moves */
    if (s->scratch != NULL && !ok) {
        free(s->scratch);
        s->scratch = NULL;
    }
    seq_slot_drop(s);
    bool applied = ok && what == APPLY;

    seq_slot *next = NULL;
    uv_mutex_lock(&t->mu);
    if (moving)
        t->moving--;
    if (applied && s->scratch != NULL) { /* durable: the new carries */
        if (e->numbered) {
            free(e->prev);
            e->prev = e->carry;
        } else {
            free(e->carry);
        }
        e->carry = s->scratch;
        s->scratch = NULL;
    }
    e->pending--;
    if (applied) {
        e->chunks++;
        e->started = true;
    }
    if (ok && what == NOT_LIVE) {
        t->refused++;
    } else if (ok && what == GAP) {
        t->gaps++;
    } else if (ok && e->numbered) {
        if (what == APPLY) {
            e->applied = s->chunk;
            e->last_end = s->end;
            memcpy(e->last_sha, s->sha, 32);
            t->applied++;
        } else if (what == REPEAT) {
            t->repeats++;
        } else {
            t->conflicts++;
        }
    }
    if (s->end && e->mapped && !e->closed) {
        if (applied && (t->o.linger_ms > 0 || e->numbered)) {
            t->ended++;
            e->closed = true; /* lingers for the chunks sent before it, or
                               * for a repeat of its end */
            e->closed_ns = now(t);
            t->live--;
        } else if (applied) {
            t->ended++;
            bool last = e->pending == 0;
            unmap(t, e); /* frees it when no chunk is left */
            if (last)
                e = NULL;
        } else if (!e->numbered || !ok) {
            e->ending = false; /* a failed end leaves it live */
        }
    }
    if (e != NULL && !e->started && e->mapped && !e->closed
        && e->pending == 0) {
        unmap(t, e); /* it never started: freed */
        e = NULL;
    }
    if (e != NULL) {
        /* an answered chunk renews its sequence's idle time; a refused
         * or failed one does not */
        if (applied || (ok && what == REPEAT))
            e->last_ns = now(t);
        next = e->whead;
        if (next != NULL && due(e, next)) { /* the turn passes on; busy
                                             * stays set */
            e->whead = next->next;
            if (e->whead == NULL)
                e->wtail = NULL;
            e->running = next->chunk;
            if (next->turn == ARMED) {
                next->turn = 0;
            } else {
                next->turn = TURN;
                next = NULL;
            }
        } else {
            next = NULL;
            e->busy = false;
        }
        stall_update(t, e);
        if (e->pending == 0) {
            if (!e->mapped)
                entry_free(t, e);
            else if (e->closed)
                list_insert(t, e, e->numbered ? ENDED : CLOSED);
            else
                idle_insert(t, e);
        }
    }
    uv_mutex_unlock(&t->mu);
    if (next != NULL)
        next->ready(next);
}

status_code seq_finish(seq_table *t, seq_slot *s, bool ok, void *out,
                       char *msg, size_t msglen)
{
    bool later;
    return seq_finish_durable(t, s, ok, out, &later, msg, msglen);
}

/* The store's word on a chunk's new state (seq_store_done): the chunk
 * ends, and its submitter hears. The writer's thread. */
static void on_durable(void *ctx, bool ok, const char *why)
{
    seq_slot *s = ctx;
    finish_end(s->table, s, true, APPLY, true, ok);
    s->durable(s, ok ? STATUS_OK : STATUS_STORE, why);
}

status_code seq_finish_durable(seq_table *t, seq_slot *s, bool ok, void *out,
                               bool *later, char *msg, size_t msglen)
{
    int what;
    bool moving;
    *later = false;
    if (t->remote != NULL) {
        status_code st = STATUS_OK;
        *later = t->remote->finish(t->remote_self, s, ok, out, &st, msg,
                                   msglen);
        return st;
    }
    s->table = t;
    status_code st = finish_begin(t, s, &ok, out, &what, &moving, msg, msglen);
    if (!ok || what != APPLY || t->store == NULL) {
        finish_end(t, s, ok, what, moving, true);
        return st;
    }
    seq_entry *e = s->e;
    seq_file_entry x;
    memset(&x, 0, sizeof x);
    x.id = e->id;
    x.desc = e->desc;
    x.idle_deadline_ms = wall_ms() + (int64_t)t->o.idle_ms;
    x.count = e->count;
    x.carry = s->scratch;
    if (e->numbered) {
        x.numbered = true;
        x.applied = s->chunk;
        x.last_end = s->end;
        memcpy(x.sha, s->sha, sizeof x.sha);
        x.prev = e->carry;
    }
    /* the slot's buffers are not needed past here; its fields are */
    /* a late chunk, after its sequence's end, leaves it ended */
    if (!seq_store_append(t->store, &x,
                          s->end || e->closed ? SEQ_REC_ENDED : SEQ_REC_LIVE,
                          on_durable, s)) {
        snprintf(msg, msglen, "out of memory writing the chunk's state");
        finish_end(t, s, ok, what, moving, false);
        return STATUS_NOMEM;
    }
    *later = true;
    return STATUS_OK;
}

/* Refuses the numbered chunks of e that waited reorder_ms or more for a
 * chunk before them (a gap ahead of them), chaining those whose ready()
 * is due onto *armed. Frees e when it was unmapped and nothing is left;
 * false then. Under the mutex. */
static bool refuse_waiting(seq_table *t, seq_entry *e, uint64_t at,
                           uint64_t wait_ns, seq_slot **armed)
{
    uint64_t next = e->applied + 1;
    if (e->busy && e->running == next)
        next++;
    seq_slot **at_s = &e->whead, *before = NULL;
    while (*at_s != NULL) {
        seq_slot *s = *at_s;
        bool keep = true;
        if (s->chunk == next)
            next++; /* its turn comes after the one before it */
        else if (s->chunk > next)
            keep = at - s->since_ns < wait_ns; /* a gap before it */
        if (keep) {
            before = s;
            at_s = &s->next;
            continue;
        }
        *at_s = s->next; /* waited too long for chunk `next` */
        if (e->wtail == s)
            e->wtail = before;
        seq_rule_gap(&e->id, s->chunk, next, t->o.reorder_ms, s->msg,
                     sizeof s->msg);
        s->refused = STATUS_CHUNK_GAP;
        seq_slot_drop(s);
        t->gaps++;
        e->pending--;
        if (s->turn == ARMED) {
            s->next = *armed;
            *armed = s;
        } else {
            s->turn = TURN; /* seq_arm() says so; it sees s->refused */
        }
    }
    stall_update(t, e);
    if (e->pending == 0) {
        if (!e->mapped) {
            entry_free(t, e);
            return false;
        }
        if (!e->started) { /* behind a start that failed */
            unmap(t, e);
            return false;
        }
        if (e->closed)
            list_insert(t, e, ENDED);
        else
            idle_insert(t, e);
    }
    return true;
}

/* The store forgets an expired sequence (its record says it ended), so
 * that the log's rewrite drops it. Nothing waits for it: a crash before
 * it is written leaves a record that the next start expires. Under the
 * mutex; e has nothing pending, so its carries are still. */
static void expired_done(void *ctx, bool ok, const char *why)
{
    (void)ctx;
    (void)ok;
    (void)why;
}

static void forget(seq_table *t, const seq_entry *e)
{
    if (t->store == NULL)
        return;
    seq_file_entry x;
    memset(&x, 0, sizeof x);
    x.id = e->id;
    x.desc = e->desc;
    x.count = e->count;
    x.carry = e->carry;
    if (e->numbered && e->applied > 0) {
        x.numbered = true;
        x.applied = e->applied;
        x.prev = e->prev;
    }
    seq_store_append(t->store, &x, SEQ_REC_GONE, expired_done, NULL);
}

void seq_sweep(seq_table *t)
{
    seq_slot *armed = NULL;
    uv_mutex_lock(&t->mu);
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    while (t->head[IDLE] != NULL && at - t->head[IDLE]->last_ns >= idle) {
        forget(t, t->head[IDLE]);
        unmap(t, t->head[IDLE]); /* idle: nothing pending, so freed */
        t->expired++;
    }
    uint64_t linger = t->o.linger_ms * 1000000u;
    while (t->head[CLOSED] != NULL && at - t->head[CLOSED]->closed_ns >= linger)
        unmap(t, t->head[CLOSED]);
    while (t->head[ENDED] != NULL && at - t->head[ENDED]->closed_ns >= idle) {
        forget(t, t->head[ENDED]);
        unmap(t, t->head[ENDED]);
    }
    uint64_t wait_ns = t->o.reorder_ms * 1000000u;
    for (seq_entry *e = t->head[STALLED], *n; e != NULL; e = n) {
        n = e->lnext;
        refuse_waiting(t, e, at, wait_ns, &armed);
    }
    uv_mutex_unlock(&t->mu);
    while (armed != NULL) {
        seq_slot *s = armed;
        armed = s->next;
        s->ready(s);
    }
}

bool seq_freeze(seq_table *t, uint64_t wait_ms)
{
    uv_mutex_lock(&t->mu);
    t->frozen = true;
    for (uint64_t waited = 0; t->moving > 0 && waited < wait_ms; waited++) {
        uv_mutex_unlock(&t->mu);
        uv_sleep(1);
        uv_mutex_lock(&t->mu);
    }
    bool still = t->moving == 0;
    uv_mutex_unlock(&t->mu);
    return still;
}

size_t seq_live(seq_table *t)
{
    uv_mutex_lock(&t->mu);
    size_t n = t->live;
    uv_mutex_unlock(&t->mu);
    return n;
}

void seq_render_metrics(seq_table *t, textbuf *o)
{
    uv_mutex_lock(&t->mu);
    size_t live = t->live, bytes = t->bytes;
    uint64_t started = t->started, ended = t->ended, expired = t->expired,
             refused = t->refused, late = t->late, applied = t->applied,
             repeats = t->repeats, conflicts = t->conflicts, gaps = t->gaps;
    uv_mutex_unlock(&t->mu);
    if (t->remote != NULL) { /* the store expires them; Redis counts that */
        seq_counts c;
        t->remote->counts(t->remote_self, &c);
        live = c.live;
        bytes = c.bytes;
        started = c.started;
        ended = c.ended;
        refused += c.refused; /* seq_admit's own (sequences off) too */
        late = c.late;
        applied = c.applied;
        repeats = c.repeats;
        conflicts = c.conflicts;
        gaps = c.gaps;
    }
    textbuf_put(o,
                "# HELP tally_sequences_live Sequences live now (Triton's "
                "sequence extension).\n"
                "# TYPE tally_sequences_live gauge\n"
                "tally_sequences_live %zu\n"
                "# HELP tally_sequence_carry_bytes Bytes the live sequences' "
                "carries take (--sequence-max-bytes bounds them).\n"
                "# TYPE tally_sequence_carry_bytes gauge\n"
                "tally_sequence_carry_bytes %zu\n"
                "# HELP tally_sequences_total Sequences started, ended by "
                "their last chunk, or expired after --sequence-idle-ms.\n"
                "# TYPE tally_sequences_total counter\n"
                "tally_sequences_total{event=\"started\"} %" PRIu64 "\n"
                "tally_sequences_total{event=\"ended\"} %" PRIu64 "\n"
                "tally_sequences_total{event=\"expired\"} %" PRIu64 "\n"
                "# HELP tally_sequence_refusals_total Chunks refused for "
                "their sequence: not live, unlike its first chunk, or no "
                "room for another.\n"
                "# TYPE tally_sequence_refusals_total counter\n"
                "tally_sequence_refusals_total %" PRIu64 "\n"
                "# HELP tally_sequence_late_chunks_total Chunks that arrived "
                "after their sequence's last one (sent before it, on another "
                "connection), taken within --sequence-linger-ms.\n"
                "# TYPE tally_sequence_late_chunks_total counter\n"
                "tally_sequence_late_chunks_total %" PRIu64 "\n"
                "# HELP tally_sequence_numbered_chunks_total Numbered chunks "
                "(sequence_chunk) by outcome: applied, repeat (answered "
                "again, not added), conflict (409: a number taken by "
                "another input, or overtaken) or gap (409: the chunks "
                "before it did not come within --sequence-reorder-ms).\n"
                "# TYPE tally_sequence_numbered_chunks_total counter\n"
                "tally_sequence_numbered_chunks_total{outcome=\"applied\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"repeat\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"conflict\"} "
                "%" PRIu64 "\n"
                "tally_sequence_numbered_chunks_total{outcome=\"gap\"} "
                "%" PRIu64 "\n",
                live, bytes, started, ended, expired, refused, late, applied,
                repeats, conflicts, gaps);
    if (t->remote != NULL)
        t->remote->render_metrics(t->remote_self, o);
    if (t->store == NULL)
        return;
    seq_store_stats st;
    seq_store_get_stats(t->store, &st);
    textbuf_put(o,
                "# HELP tally_sequence_log_bytes Bytes in the sequence log "
                "(--state-dir) now.\n"
                "# TYPE tally_sequence_log_bytes gauge\n"
                "tally_sequence_log_bytes %" PRIu64 "\n"
                "# HELP tally_sequence_log_records_total Records written to "
                "the sequence log (one per applied chunk).\n"
                "# TYPE tally_sequence_log_records_total counter\n"
                "tally_sequence_log_records_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_flushes_total fdatasync calls on "
                "the sequence log (each shared by the chunks that finished "
                "together).\n"
                "# TYPE tally_sequence_log_flushes_total counter\n"
                "tally_sequence_log_flushes_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_flush_seconds_total Time in those "
                "flushes.\n"
                "# TYPE tally_sequence_log_flush_seconds_total counter\n"
                "tally_sequence_log_flush_seconds_total %.9f\n"
                "# HELP tally_sequence_log_failures_total Records that could "
                "not be written or flushed (their chunks answered 503).\n"
                "# TYPE tally_sequence_log_failures_total counter\n"
                "tally_sequence_log_failures_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_rewrites_total Times the log was "
                "rewritten with one record per live sequence.\n"
                "# TYPE tally_sequence_log_rewrites_total counter\n"
                "tally_sequence_log_rewrites_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_flush_failures_total fdatasync "
                "calls on the sequence log that failed (with everysec, the "
                "chunks after one are refused until a flush succeeds).\n"
                "# TYPE tally_sequence_log_flush_failures_total counter\n"
                "tally_sequence_log_flush_failures_total %" PRIu64 "\n",
                st.bytes, st.records, st.flushes, (double)st.flush_ns / 1e9,
                st.failures, st.rewrites, st.flush_failures);
}

/* --------------------------------------------------- the state file */

/* A saved idle deadline (wall clock, ms) as the monotonic time of the
 * sequence's last use, at most idle ns before `at`. */
static uint64_t last_use(int64_t deadline_ms, int64_t wall, uint64_t at,
                         uint64_t idle)
{
    int64_t left_ms = deadline_ms - wall;
    uint64_t left = left_ms > 0 ? (uint64_t)left_ms * 1000000u : 0;
    if (left > idle)
        left = idle;
    return at - (idle - left);
}

static void state_path(const char *dir, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

bool seq_save(seq_table *t, const char *dir, size_t *n, char *msg,
              size_t msglen)
{
    char path[4096], tmp[4096];
    state_path(dir, "sequences.state", path, sizeof path);
    state_path(dir, "sequences.state.tmp", tmp, sizeof tmp);
    uv_mutex_lock(&t->mu);
    seq_file_entry *v = calloc(t->live ? t->live : 1, sizeof *v);
    if (v == NULL) {
        uv_mutex_unlock(&t->mu);
        snprintf(msg, msglen, "%s: out of memory", path);
        return false;
    }
    size_t k = 0;
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    int64_t wall = wall_ms();
    for (size_t b = 0; b < t->nbuckets; b++)
        for (seq_entry *e = t->buckets[b]; e != NULL; e = e->hnext) {
            if (e->closed)
                continue; /* ended: nothing to go on with */
            uint64_t used = at - e->last_ns;
            v[k].id = e->id;
            v[k].desc = e->desc;
            v[k].idle_deadline_ms =
                wall + (int64_t)((used < idle ? idle - used : 0) / 1000000u);
            v[k].count = e->count;
            v[k].carry = e->carry;
            v[k].numbered = e->numbered && e->applied > 0;
            v[k].applied = e->applied;
            v[k].last_end = e->last_end;
            memcpy(v[k].sha, e->last_sha, sizeof v[k].sha);
            v[k].prev = e->prev;
            k++;
        }
    size_t len;
    uint8_t *buf = seq_file_encode(v, k, &len);
    uv_mutex_unlock(&t->mu);
    free(v);
    if (buf == NULL) {
        snprintf(msg, msglen, "%s: out of memory", path);
        return false;
    }
    bool ok = false;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot create %s: %s", tmp, strerror(errno));
        free(buf);
        return false;
    }
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    if (off < len)
        snprintf(msg, msglen, "cannot write %s: %s", tmp, strerror(errno));
    else if (fsync(fd) != 0)
        snprintf(msg, msglen, "cannot fsync %s: %s", tmp, strerror(errno));
    else
        ok = true;
    close(fd);
    free(buf);
    if (ok && rename(tmp, path) != 0) {
        snprintf(msg, msglen, "cannot rename %s to %s: %s", tmp, path,
                 strerror(errno));
        ok = false;
    }
    if (!ok) {
        unlink(tmp);
        return false;
    }
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) { /* the rename itself, on disk */
        fsync(dfd);
        close(dfd);
    }
    *n = k;
    return true;
}

bool seq_load(seq_table *t, const char *dir, size_t *n, size_t *expired,
              char *msg, size_t msglen)
{
    char path[4096];
    state_path(dir, "sequences.state", path, sizeof path);
    *n = *expired = 0;
    struct stat st;
    if (stat(path, &st) != 0) {
        if (errno == ENOENT)
            return true; /* nothing was saved */
        snprintf(msg, msglen, "cannot read %s: %s", path, strerror(errno));
        return false;
    }
    /* what the limits allow: the carries, and each record's fixed part
     * with the longest id and shape */
    size_t cap = t->o.max_bytes;
    size_t per = 64 + SEQ_ID_MAX + 8 * ENG_MAX_RANK;
    if (t->o.max_sequences > (SIZE_MAX - cap - 64) / per)
        cap = SIZE_MAX;
    else
        cap += 64 + per * t->o.max_sequences;
    if ((uint64_t)st.st_size > cap) {
        snprintf(msg, msglen,
                 "%s is %lld bytes, more than this server's limits hold "
                 "(--max-sequences, --sequence-max-bytes)",
                 path, (long long)st.st_size);
        return false;
    }
    char err[256];
    size_t len = (size_t)st.st_size, got = 0;
    uint8_t *buf = malloc(len ? len : 1);
    int fd = buf != NULL ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    while (fd >= 0 && got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (fd >= 0)
        close(fd);
    if (buf == NULL || fd < 0 || got < len) {
        snprintf(msg, msglen, "cannot read %s: %s", path,
                 buf == NULL ? "out of memory" : strerror(errno));
        free(buf);
        return false;
    }
    seq_file_entry *v;
    size_t k;
    bool ok = seq_file_decode(buf, len, t->o.max_sequences, t->o.max_bytes, &v,
                              &k, err, sizeof err);
    free(buf);
    if (!ok) {
        snprintf(msg, msglen,
                 "%s is not a state this tallyd can take: %s; nothing was "
                 "loaded (move it away to start without it)",
                 path, err);
        return false;
    }
    /* every entry built before any goes live: all or nothing */
    seq_entry **es = calloc(k ? k : 1, sizeof *es);
    for (size_t i = 0; es != NULL && i < k; i++) {
        es[i] = calloc(1, sizeof **es);
        if (es[i] == NULL) {
            for (size_t j = 0; j < i; j++)
                free(es[j]);
            free(es);
            es = NULL;
        }
    }
    if (es == NULL) {
        seq_file_free(v, k);
        snprintf(msg, msglen, "%s: out of memory loading it", path);
        return false;
    }
    uv_mutex_lock(&t->mu);
    int64_t wall = wall_ms();
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    const char *dup = NULL;
    for (size_t i = 0; i < k && dup == NULL; i++) {
        seq_entry *e = es[i];
        e->id = v[i].id;
        e->hash = hash_id(&e->id);
        if (find(t, &e->id, e->hash) != NULL) {
            dup = "an id is written twice";
            break;
        }
        e->desc = v[i].desc;
        e->is_float = tx_dtype_kind(e->desc.dtype) == TX_KIND_FLOAT;
        e->count = v[i].count;
        e->carry = v[i].carry;
        v[i].carry = NULL;
        e->numbered = v[i].numbered;
        if (e->numbered) {
            e->applied = v[i].applied;
            e->last_end = v[i].last_end;
            memcpy(e->last_sha, v[i].sha, sizeof e->last_sha);
            e->prev = v[i].prev;
            v[i].prev = NULL;
        }
        e->last_ns = last_use(v[i].idle_deadline_ms, wall, at, idle);
        e->started = true;
        t->bytes += entry_bytes(e);
        map_insert(t, e);
        idle_insert(t, e);
        es[i] = NULL;
    }
    if (dup != NULL) { /* undo: the table was empty */
        for (size_t b = 0; b < t->nbuckets; b++)
            while (t->buckets[b] != NULL)
                unmap(t, t->buckets[b]);
        for (size_t i = 0; i < k; i++)
            free(es[i]);
        uv_mutex_unlock(&t->mu);
        free(es);
        seq_file_free(v, k);
        snprintf(msg, msglen,
                 "%s is not a state this tallyd can take: %s; nothing was "
                 "loaded (move it away to start without it)",
                 path, dup);
        return false;
    }
    size_t before = t->expired;
    while (t->head[IDLE] != NULL && at - t->head[IDLE]->last_ns >= idle) {
        unmap(t, t->head[IDLE]);
        t->expired++;
    }
    *expired = t->expired - before;
    *n = t->live;
    uv_mutex_unlock(&t->mu);
    free(es);
    seq_file_free(v, k);
    return true;
}

void seq_set_store(seq_table *t, struct seq_store *store)
{
    t->store = store;
}

void seq_set_backend(seq_table *t, const seq_backend *b, void *self)
{
    t->remote = b;
    t->remote_self = self;
}

void *seq_loop_open(seq_table *t, struct uv_loop_s *loop)
{
    if (t == NULL || t->remote == NULL || t->remote->loop_open == NULL)
        return NULL;
    return t->remote->loop_open(t->remote_self, loop);
}

void seq_loop_close(seq_table *t, void *near)
{
    if (near != NULL && t != NULL && t->remote != NULL
        && t->remote->loop_close != NULL)
        t->remote->loop_close(t->remote_self, near);
}

bool seq_durable(const seq_table *t)
{
    if (t->remote != NULL)
        return true;
    return t != NULL && t->store != NULL;
}

seq_file_entry *seq_export(seq_table *t, size_t *n, bool *oom)
{
    uv_mutex_lock(&t->mu);
    *n = 0;
    *oom = false;
    size_t all = 0;
    for (size_t b = 0; b < t->nbuckets; b++)
        for (seq_entry *e = t->buckets[b]; e != NULL; e = e->hnext)
            all++;
    seq_file_entry *v = calloc(all ? all : 1, sizeof *v);
    if (v == NULL) {
        *oom = true;
        uv_mutex_unlock(&t->mu);
        return NULL;
    }
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    int64_t wall = wall_ms();
    size_t k = 0;
    for (size_t b = 0; b < t->nbuckets; b++)
        for (seq_entry *e = t->buckets[b]; e != NULL; e = e->hnext) {
            if (e->closed && !e->numbered)
                continue; /* lingering: nothing to go on with */
            uint64_t used = at - (e->closed ? e->closed_ns : e->last_ns);
            v[k].id = e->id;
            v[k].desc = e->desc;
            v[k].idle_deadline_ms =
                wall + (int64_t)((used < idle ? idle - used : 0) / 1000000u);
            v[k].count = e->count;
            v[k].carry = e->carry;
            v[k].numbered = e->numbered && e->applied > 0;
            v[k].applied = e->applied;
            v[k].last_end = e->last_end;
            memcpy(v[k].sha, e->last_sha, sizeof v[k].sha);
            v[k].prev = e->prev;
            v[k].ended = e->closed;
            k++;
        }
    uv_mutex_unlock(&t->mu);
    *n = k;
    return v;
}

bool seq_restore(seq_table *t, seq_file_entry *x, int how, char *msg,
                 size_t msglen)
{
    uint64_t h = hash_id(&x->id);
    uv_mutex_lock(&t->mu);
    seq_entry *old = find(t, &x->id, h);
    if (old != NULL)
        unmap(t, old); /* nothing pending at the start: freed */
    /* gone, or ended without numbers: nothing to keep; an ended numbered
     * one is kept, closed, for a repeat of its end chunk */
    bool closed = how == SEQ_REC_ENDED;
    if (how == SEQ_REC_GONE || (closed && !x->numbered)) {
        uv_mutex_unlock(&t->mu);
        return true;
    }
    /* one whose idle deadline passed while tallyd was down is not taken:
     * it would be dropped at once (seq_expire_loaded), and it may be one
     * that expired before the crash, its "gone" record not yet written,
     * whose place a new sequence took: counted, it could push the
     * others past the limits they kept */
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    uint64_t used = last_use(x->idle_deadline_ms, wall_ms(), at, idle);
    if (at - used >= idle) {
        if (!closed)
            t->expired++, t->loaded_expired++;
        uv_mutex_unlock(&t->mu);
        return true;
    }
    size_t need = (size_t)x->count * sizeof(eng_carry) * (x->numbered ? 2 : 1);
    if ((!closed && t->live >= t->o.max_sequences)
        || need > t->o.max_bytes - t->bytes) {
        uv_mutex_unlock(&t->mu);
        snprintf(msg, msglen,
                 "more sequences, or larger, than this server's limits hold "
                 "(--max-sequences, --sequence-max-bytes)");
        return false;
    }
    seq_entry *e = calloc(1, sizeof *e);
    if (e == NULL) {
        uv_mutex_unlock(&t->mu);
        snprintf(msg, msglen, "out of memory");
        return false;
    }
    e->id = x->id;
    e->hash = h;
    e->desc = x->desc;
    e->is_float = tx_dtype_kind(e->desc.dtype) == TX_KIND_FLOAT;
    e->count = x->count;
    e->carry = x->carry;
    x->carry = NULL;
    e->numbered = x->numbered;
    if (e->numbered) {
        e->applied = x->applied;
        e->last_end = x->last_end;
        memcpy(e->last_sha, x->sha, sizeof e->last_sha);
        e->prev = x->prev;
        x->prev = NULL;
    }
    e->last_ns = used;
    e->started = true;
    t->bytes += entry_bytes(e);
    map_insert(t, e);
    if (closed) { /* kept idle_ms from its end, as seq_sweep() keeps it */
        e->closed = true;
        e->closed_ns = e->last_ns;
        t->live--;
        list_insert(t, e, ENDED);
    } else {
        idle_insert(t, e);
    }
    uv_mutex_unlock(&t->mu);
    return true;
}

size_t seq_expire_loaded(seq_table *t)
{
    uv_mutex_lock(&t->mu);
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    size_t before = t->expired - t->loaded_expired;
    t->loaded_expired = 0;
    for (seq_entry *e = t->head[IDLE], *n; e != NULL; e = n) {
        n = e->lnext;
        if (at - e->last_ns >= idle) {
            unmap(t, e);
            t->expired++;
        }
    }
    for (seq_entry *e = t->head[ENDED], *n; e != NULL; e = n) {
        n = e->lnext;
        if (at - e->closed_ns >= idle)
            unmap(t, e);
    }
    size_t k = t->expired - before;
    uv_mutex_unlock(&t->mu);
    return k;
}
