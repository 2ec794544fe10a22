/*
 * seq_memory.c - the sequences in memory (seq_memory.h).
 *
 * The entries in the one id-keyed map (seq_map.h), and the idle entries
 * (no chunk admitted) in a list from the least recently used, which is
 * all the sweep reads. An entry that a sequence_start replaced, or that
 * ended, leaves the map at once, but is freed only when its last
 * admitted chunk is done.
 *
 * A chunk's turn: the entry's `busy` is held by one chunk at a time; the
 * others wait in its line, in admission order. A waiting slot's `turn`
 * goes WAITING -> ARMED (arm: the submitter has suspended it) -> called
 * ready; or WAITING -> TURN (its turn came before arm, which then says
 * so and the submitter goes on at once). A numbered sequence's line is
 * sorted by number, and the turn passes only to a chunk that is due; an
 * entry with waiting numbered chunks is in the STALLED list, which the
 * sweep reads for those that waited too long.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "clock.h"
#include "seq_map.h"
#include "seq_memory.h"
#include "seq_rules.h"
#include "tx_dtype.h"

enum { WAITING = 1, ARMED, TURN };
/* The lists an entry is in (one at most): IDLE (nothing pending), CLOSED
 * (ended, unnumbered, lingering linger_ms), ENDED (ended, numbered, kept
 * idle_ms for a repeat of its end), STALLED (numbered chunks waiting). */
enum { IDLE = 1, CLOSED, ENDED, STALLED, NLISTS };

struct seq_entry {
    seq_map_node node;        /* its id's, in the map */
    seq_params id;            /* for the rules' words */
    seq_entry *lprev, *lnext; /* in its list */
    int list;                 /* which: 0 (none), or one above */
    bool mapped;              /* in the map: live, or closed and lingering */
    bool closed;              /* its end was answered; lingering */
    uint64_t closed_ns;
    bool ending;  /* a sequence_end chunk is admitted */
    bool started; /* a start of it was applied (or it was loaded): a
                   * chunk behind a start that failed is not taken */
    bool busy;    /* a chunk holds the turn */
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
    seq_entry *gone_next;       /* expired, out of the map: to journal */
};

typedef struct {
    seq_backend base;
    seq_options o;
    uv_mutex_t mu;
    seq_map map;
    seq_entry *head[NLISTS], *tail[NLISTS]; /* the lists above */
    size_t live;     /* live entries in the map (not the closed ones) */
    size_t bytes;    /* every entry's carries, mapped or not (carry_bytes) */
    unsigned copies; /* 1; 2 with a journal */
    uint64_t started, ended, expired, refused, late;
    uint64_t applied, repeats, conflicts, gaps; /* numbered chunks */
    uint64_t loaded_expired; /* restore's, for expire_loaded */
    seq_journal journal;     /* append NULL: none */
    bool frozen;             /* freeze(): no carry moves any more */
    unsigned moving;         /* chunks moving their carries now (finish) */
} seq_memory;

static seq_memory *mem_of(seq_backend *b)
{
    return (seq_memory *)b;
}

static uint64_t now(const seq_memory *t)
{
    return t->o.clock ? t->o.clock(t->o.clock_user) : now_ns();
}

/* The bytes count carries take: twice for a numbered sequence (prev),
 * and twice again with a journal (the log's writer keeps a copy of each
 * live sequence's for its rewrite). Within max_bytes: no overflow. */
static size_t carry_bytes(const seq_memory *t, uint64_t count, bool numbered)
{
    return (size_t)count * sizeof(eng_carry) * (numbered ? 2 : 1) * t->copies;
}

/* Lets an entry's memory go (its bytes already uncounted). */
static void entry_dispose(seq_entry *e)
{
    free(e->carry);
    free(e->prev);
    free(e);
}

static void entry_free(seq_memory *t, seq_entry *e)
{
    t->bytes -= carry_bytes(t, e->count, e->numbered);
    entry_dispose(e);
}

/* ------------------------------------------------- the map and the lists */

static void list_remove(seq_memory *t, seq_entry *e)
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

static void list_append(seq_memory *t, seq_entry *e, int l)
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

/* Puts e in list l in the order of list_key(), which the sweep reads
 * from the oldest: a chunk that failed does not renew its sequence, and
 * an ended one that comes back from a repeat keeps its end's time, so an
 * entry may come back older than the newest. Mostly at the tail. */
static void list_insert(seq_memory *t, seq_entry *e, int l)
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

/* Back in its list once nothing is pending: the closed ones' by their
 * kind, the live ones' the idle list. */
static void list_rest(seq_memory *t, seq_entry *e)
{
    if (e->closed)
        list_insert(t, e, e->numbered ? ENDED : CLOSED);
    else
        list_insert(t, e, IDLE);
}

static seq_entry *find(seq_memory *t, const seq_params *p)
{
    seq_map_node *n = seq_map_find(&t->map, p);
    return n != NULL ? (seq_entry *)((char *)n - offsetof(seq_entry, node))
                     : NULL;
}

static void map_insert(seq_memory *t, seq_entry *e)
{
    seq_map_add(&t->map, &e->node);
    e->mapped = true;
    t->live++;
}

/* Takes e out of the map (and its list); frees it when no chunk of it
 * is left. */
static void unmap(seq_memory *t, seq_entry *e)
{
    seq_map_remove(&t->map, &e->node);
    e->mapped = false;
    if (!e->closed)
        t->live--;
    if (e->pending == 0) {
        list_remove(t, e);
        entry_free(t, e);
    }
}

/* ----------------------------------------------------------- admission */

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
static void stall_update(seq_memory *t, seq_entry *e)
{
    bool want = e->numbered && e->whead != NULL;
    if (want && e->list != STALLED) {
        list_remove(t, e);
        list_append(t, e, STALLED);
    } else if (!want && e->list == STALLED) {
        list_remove(t, e);
    }
}

/* A sequence_start's new entry, in place of *e (the old one lives on
 * for its chunks): STATUS_OK, or a refusal with msg (nothing changed).
 * Under the mutex. */
static status_code start_entry(seq_memory *t, const seq_params *p,
                               const eng_scan_desc *d, uint64_t count,
                               seq_entry **e, char *msg, size_t msglen)
{
    char id[SEQ_ID_MAX + 8];
    seq_id_format(p, id, sizeof id);
    size_t need = carry_bytes(t, count, p->has_chunk);
    if ((*e == NULL || (*e)->closed) && t->live >= t->o.max_sequences) {
        snprintf(msg, msglen,
                 "sequence %s: %zu sequences are live, as many as the "
                 "server keeps (--max-sequences); end one, or retry "
                 "once one has ended or expired",
                 id, t->live);
        return STATUS_SEQUENCES_FULL;
    }
    if (need > t->o.max_bytes - t->bytes) {
        snprintf(msg, msglen,
                 "sequence %s: the live sequences' carries take %zu of "
                 "the %zu bytes the server allows (--sequence-max-bytes),"
                 " and this one needs %zu more; retry once one has ended "
                 "or expired",
                 id, t->bytes, t->o.max_bytes, need);
        return STATUS_SEQUENCES_FULL;
    }
    seq_entry *n = calloc(1, sizeof *n);
    if (n != NULL) {
        n->carry = calloc(count ? count : 1, sizeof *n->carry);
        if (p->has_chunk)
            n->prev = calloc(count ? count : 1, sizeof *n->prev);
    }
    if (n == NULL || n->carry == NULL || (p->has_chunk && n->prev == NULL)) {
        if (n != NULL)
            entry_dispose(n);
        snprintf(msg, msglen, "out of memory for a sequence");
        return STATUS_NOMEM;
    }
    if (*e != NULL) /* started again: the old one lives on for its chunks */
        unmap(t, *e);
    n->id = *p;
    n->id.start = n->id.end = n->id.has_flags = false;
    seq_key_of(p, &n->node);
    n->desc = *d;
    n->desc.axis = seq_rule_axis(d);
    n->is_float = tx_dtype_kind(d->dtype) == TX_KIND_FLOAT;
    n->count = count;
    n->numbered = p->has_chunk;
    t->bytes += need;
    map_insert(t, n);
    t->started++;
    *e = n;
    return STATUS_OK;
}

/* s's place on e: the turn now, or a wait in its line. Under the
 * mutex. */
static void take_turn(seq_memory *t, seq_entry *e, seq_slot *s, bool *wait)
{
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
}

static status_code mem_admit(seq_backend *b, const seq_params *p,
                             const eng_scan_desc *d, const eng_lines *l,
                             const void *in, seq_slot *s, bool *wait, char *msg,
                             size_t msglen)
{
    seq_memory *t = mem_of(b);
    status_code st =
        seq_slot_fill(p, d, l, in, t->o.max_bytes, t->copies, s, msg, msglen);
    if (st != STATUS_OK)
        return st;
    uv_mutex_lock(&t->mu);
    seq_entry *e = find(t, p);
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
    if (rule == SEQ_RULE_START)
        st = start_entry(t, p, d, eng_carry_count(l), &e, msg, msglen);
    else if (rule == SEQ_RULE_INVALID)
        st = STATUS_INVALID;
    else if (rule == SEQ_RULE_CONFLICT)
        st = STATUS_CHUNK_CONFLICT;
    if (st != STATUS_OK) { /* nothing changed but the counts */
        t->refused++;
        t->conflicts += rule == SEQ_RULE_CONFLICT;
        uv_mutex_unlock(&t->mu);
        seq_slot_drop(s);
        return st;
    }
    if (late)
        t->late++; /* sent before the end, arrived after it */
    if (p->end && !e->closed)
        e->ending = true;
    take_turn(t, e, s, wait);
    uv_mutex_unlock(&t->mu);
    return STATUS_OK;
}

static bool mem_arm(seq_backend *b, seq_slot *s)
{
    seq_memory *t = mem_of(b);
    uv_mutex_lock(&t->mu);
    bool armed = s->turn != TURN;
    if (armed)
        s->turn = ARMED;
    uv_mutex_unlock(&t->mu);
    return armed;
}

/* ------------------------------------------------------------- a finish */

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

/* Counts the chunk in t->moving, unless the backend is frozen: false
 * then, with msg (the chunk fails). */
static bool start_moving(seq_memory *t, char *msg, size_t msglen)
{
    uv_mutex_lock(&t->mu);
    bool frozen = t->frozen;
    if (!frozen)
        t->moving++;
    uv_mutex_unlock(&t->mu);
    if (frozen)
        snprintf(msg, msglen,
                 "the server is shutting down (its drain timed out); "
                 "the chunk was not added: send it again");
    return !frozen;
}

/* The chunk's first half, with the turn: what it is, its answer, and its
 * sequence's new carries (in place; or, with a journal, into s->scratch,
 * to be taken once they are durable). *moving: counted in t->moving. */
static status_code finish_begin(seq_memory *t, seq_slot *s, bool *ok, void *out,
                                int *what, bool *moving, char *msg,
                                size_t msglen)
{
    seq_entry *e = s->e;
    *what = APPLY;
    *moving = *ok && start_moving(t, msg, msglen);
    if (*ok && !*moving) {
        *ok = false;
        return STATUS_DRAINING;
    }
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
    if (!*ok)
        return STATUS_OK;
    if (*what == REPEAT) {
        seq_slot_add_carries(s, out, e->prev);
        return STATUS_OK;
    }
    if (*what != APPLY)
        return STATUS_CHUNK_CONFLICT;
    /* the turn is this chunk's: the carries are its alone */
    eng_carry *c = e->carry;
    if (t->journal.append != NULL) {
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
    return STATUS_OK;
}

/* What a finished chunk does to its entry's counts and numbers (its new
 * carries taken: a journal's are durable). Under the mutex. */
static void finish_count(seq_memory *t, seq_entry *e, seq_slot *s, bool ok,
                         int what)
{
    bool applied = ok && what == APPLY;
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
}

/* An end chunk's end: the sequence closes (it lingers, or is kept for a
 * repeat of its end), or goes; a failed end leaves it live. Under the
 * mutex. NULL when e was freed. */
static seq_entry *finish_end_chunk(seq_memory *t, seq_entry *e, bool ok,
                                   bool applied)
{
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
            return NULL;
    } else if (!e->numbered || !ok) {
        e->ending = false; /* a failed end leaves it live */
    }
    return e;
}

/* The turn, handed to the next slot that is due: that slot when its
 * ready() must be called, else NULL. Under the mutex. */
static seq_slot *pass_turn(seq_memory *t, seq_entry *e)
{
    seq_slot *next = e->whead;
    if (next == NULL || !due(e, next)) {
        e->busy = false;
        stall_update(t, e);
        return NULL;
    }
    e->whead = next->next; /* busy stays set */
    if (e->whead == NULL)
        e->wtail = NULL;
    e->running = next->chunk;
    stall_update(t, e);
    if (next->turn == ARMED) {
        next->turn = 0;
        return next;
    }
    next->turn = TURN;
    return NULL;
}

/* The chunk's second half: the bookkeeping under the mutex, the new
 * carries taken (committed: a journal's are durable), and the turn
 * handed on. */
static void finish_end(seq_memory *t, seq_slot *s, bool ok, int what,
                       bool moving, bool committed)
{
    seq_entry *e = s->e;
    if (!committed)
        ok = false; /* the journal failed: nothing moves */
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
    finish_count(t, e, s, ok, what);
    if (s->end && e->mapped && !e->closed)
        e = finish_end_chunk(t, e, ok, applied);
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
        next = pass_turn(t, e);
        if (e->pending == 0) {
            if (!e->mapped)
                entry_free(t, e);
            else
                list_rest(t, e);
        }
    }
    uv_mutex_unlock(&t->mu);
    if (next != NULL)
        next->ready(next);
}

/* The journal's word on a chunk's new state: the chunk ends, and its
 * submitter hears. The log writer (the journal's). */
static void on_durable(void *ctx, bool ok, const char *why)
{
    seq_slot *s = ctx;
    finish_end(s->backend, s, true, APPLY, true, ok);
    s->durable(s, ok ? STATUS_OK : STATUS_STORE, why);
}

static status_code mem_finish(seq_backend *b, seq_slot *s, bool ok, void *out,
                              bool *later, char *msg, size_t msglen)
{
    seq_memory *t = mem_of(b);
    int what;
    bool moving;
    *later = false;
    s->backend = t;
    status_code st = finish_begin(t, s, &ok, out, &what, &moving, msg, msglen);
    if (!ok || what != APPLY || t->journal.append == NULL) {
        finish_end(t, s, ok, what, moving, true);
        return st;
    }
    seq_entry *e = s->e;
    seq_file_entry x;
    /* a late chunk, after its sequence's end, leaves it ended */
    seq_record_init(&x, &e->id, &e->desc,
                    s->end || e->closed ? SEQ_ENDED : SEQ_LIVE,
                    wall_ms() + (int64_t)t->o.idle_ms, e->count, s->scratch);
    if (e->numbered)
        seq_record_numbered(&x, s->chunk, s->end, s->sha, e->carry);
    /* the slot's buffers are not needed past here; its fields are */
    if (!t->journal.append(t->journal.self, &x, on_durable, s)) {
        snprintf(msg, msglen, "out of memory writing the chunk's state");
        finish_end(t, s, ok, what, moving, false);
        return STATUS_NOMEM;
    }
    *later = true;
    return STATUS_OK;
}

/* ------------------------------------------------------------ the sweep */

/* Refuses the numbered chunks of e that waited reorder_ms or more for a
 * chunk before them (a gap ahead of them), chaining those whose ready()
 * is due onto *armed. Under the mutex. */
static void refuse_waiting(seq_memory *t, seq_entry *e, uint64_t at,
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
        seq_rule_gap(&e->id, s->chunk, next, t->o.reorder_ms, s->why,
                     s->whylen);
        *s->refused = STATUS_CHUNK_GAP;
        seq_slot_drop(s);
        t->gaps++;
        e->pending--;
        if (s->turn == ARMED) {
            s->next = *armed;
            *armed = s;
        } else {
            s->turn = TURN; /* arm() says so; it sees s->refused */
        }
    }
    stall_update(t, e);
    if (e->pending > 0)
        return;
    if (!e->mapped)
        entry_free(t, e);
    else if (!e->started) /* behind a start that failed */
        unmap(t, e);
    else
        list_rest(t, e);
}

/* Takes the head of list l out of the map and onto *gone, to be
 * journaled as gone and freed once the mutex is let go (with nothing
 * pending, nobody else can reach it). Under the mutex. */
static void expire_head(seq_memory *t, int l, seq_entry **gone)
{
    seq_entry *e = t->head[l];
    list_remove(t, e);
    seq_map_remove(&t->map, &e->node);
    e->mapped = false;
    if (!e->closed)
        t->live--;
    t->bytes -= carry_bytes(t, e->count, e->numbered);
    e->gone_next = *gone;
    *gone = e;
}

/* Nothing waits for a gone sequence's record: a crash before it is
 * written leaves a record that the next start expires. */
static void gone_done(void *ctx, bool ok, const char *why)
{
    (void)ctx, (void)ok, (void)why;
}

/* The expired sequences' ends, journaled (so that the log's rewrite
 * drops them: an unnumbered lingering one ended already), and freed.
 * No lock held: encoding is the journal's work, out of everyone's way. */
static void forget(seq_memory *t, seq_entry *gone)
{
    while (gone != NULL) {
        seq_entry *e = gone;
        gone = e->gone_next;
        if (t->journal.append != NULL && (e->numbered || !e->closed)) {
            seq_file_entry x;
            seq_record_init(&x, &e->id, &e->desc, SEQ_GONE, 0, e->count,
                            e->carry);
            if (e->numbered && e->applied > 0)
                seq_record_numbered(&x, e->applied, e->last_end, e->last_sha,
                                    e->prev);
            t->journal.append(t->journal.self, &x, gone_done, NULL);
        }
        entry_dispose(e);
    }
}

static void mem_sweep(seq_backend *b)
{
    seq_memory *t = mem_of(b);
    seq_slot *armed = NULL;
    seq_entry *gone = NULL;
    uv_mutex_lock(&t->mu);
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    while (t->head[IDLE] != NULL && at - t->head[IDLE]->last_ns >= idle) {
        expire_head(t, IDLE, &gone);
        t->expired++;
    }
    uint64_t linger = t->o.linger_ms * 1000000u;
    while (t->head[CLOSED] != NULL && at - t->head[CLOSED]->closed_ns >= linger)
        expire_head(t, CLOSED, &gone);
    while (t->head[ENDED] != NULL && at - t->head[ENDED]->closed_ns >= idle)
        expire_head(t, ENDED, &gone);
    uint64_t wait_ns = t->o.reorder_ms * 1000000u;
    for (seq_entry *e = t->head[STALLED], *n; e != NULL; e = n) {
        n = e->lnext;
        refuse_waiting(t, e, at, wait_ns, &armed);
    }
    uv_mutex_unlock(&t->mu);
    forget(t, gone);
    while (armed != NULL) {
        seq_slot *s = armed;
        armed = s->next;
        s->ready(s);
    }
}

static bool mem_freeze(seq_backend *b, uint64_t wait_ms)
{
    seq_memory *t = mem_of(b);
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

static void mem_counts(seq_backend *b, seq_counts *c)
{
    seq_memory *t = mem_of(b);
    uv_mutex_lock(&t->mu);
    *c = (seq_counts){t->live,    t->bytes,     t->started, t->ended,
                      t->expired, t->refused,   t->late,    t->applied,
                      t->repeats, t->conflicts, t->gaps};
    uv_mutex_unlock(&t->mu);
}

static void free_one(seq_map_node *n, void *user)
{
    seq_memory *t = user;
    entry_free(t, (seq_entry *)((char *)n - offsetof(seq_entry, node)));
}

static void mem_free(seq_backend *b)
{
    seq_memory *t = mem_of(b);
    seq_map_each(&t->map, free_one, t);
    seq_map_free(&t->map);
    uv_mutex_destroy(&t->mu);
    free(t);
}

/* ------------------------------------------------------- the log's side */

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

void seq_memory_set_journal(seq_backend *b, const seq_journal *j)
{
    mem_of(b)->journal = *j;
    b->durable = j->append != NULL;
    mem_of(b)->copies = j->append != NULL ? 2 : 1;
}

/* An entry for record x (its carries taken), at last use `used`. */
static seq_entry *entry_of(seq_file_entry *x, uint64_t used)
{
    seq_entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    e->id = x->id;
    seq_key_of(&e->id, &e->node);
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
    return e;
}

bool seq_memory_restore(seq_backend *b, seq_file_entry *x, char *msg,
                        size_t msglen)
{
    seq_memory *t = mem_of(b);
    uv_mutex_lock(&t->mu);
    seq_entry *old = find(t, &x->id);
    if (old != NULL)
        unmap(t, old); /* nothing pending at the start: freed */
    /* gone, or ended without numbers: nothing to keep; an ended numbered
     * one is kept, closed, for a repeat of its end chunk */
    bool closed = x->state == SEQ_ENDED;
    if (x->state == SEQ_GONE || (closed && !x->numbered)) {
        uv_mutex_unlock(&t->mu);
        return true;
    }
    /* one whose idle deadline passed while tallyd was down is not taken:
     * it would be dropped at once, and it may be one that expired before
     * the crash, its "gone" record not yet written, whose place a new
     * sequence took: counted, it could push the others past the limits
     * they kept */
    uint64_t at = now(t), idle = t->o.idle_ms * 1000000u;
    uint64_t used = last_use(x->idle_deadline_ms, wall_ms(), at, idle);
    if (at - used >= idle) {
        if (!closed)
            t->expired++, t->loaded_expired++;
        uv_mutex_unlock(&t->mu);
        return true;
    }
    bool full =
        carry_bytes(t, x->count, x->numbered) > t->o.max_bytes - t->bytes
        || (!closed && t->live >= t->o.max_sequences);
    seq_entry *e = full ? NULL : entry_of(x, used);
    if (e == NULL) {
        uv_mutex_unlock(&t->mu);
        snprintf(msg, msglen, "%s",
                 full ? "more sequences, or larger, than this server's "
                        "limits hold (--max-sequences, --sequence-max-bytes)"
                      : "out of memory");
        return false;
    }
    t->bytes += carry_bytes(t, e->count, e->numbered);
    map_insert(t, e);
    if (closed) { /* kept idle_ms from its end, as the sweep keeps it */
        e->closed = true;
        e->closed_ns = e->last_ns;
        t->live--;
        list_insert(t, e, ENDED);
    } else {
        list_insert(t, e, IDLE);
    }
    uv_mutex_unlock(&t->mu);
    return true;
}

size_t seq_memory_expire_loaded(seq_backend *b)
{
    seq_memory *t = mem_of(b);
    uv_mutex_lock(&t->mu);
    size_t k = t->loaded_expired;
    t->loaded_expired = 0;
    uv_mutex_unlock(&t->mu);
    return k;
}

typedef struct {
    seq_memory *t;
    seq_file_entry *v;
    size_t k;
    uint64_t at, idle;
    int64_t wall;
} exporting;

static void export_one(seq_map_node *n, void *user)
{
    exporting *x = user;
    seq_entry *e = (seq_entry *)((char *)n - offsetof(seq_entry, node));
    if (e->closed && !e->numbered)
        return; /* lingering: nothing to go on with */
    uint64_t used = x->at - (e->closed ? e->closed_ns : e->last_ns);
    int64_t deadline =
        x->wall + (int64_t)((used < x->idle ? x->idle - used : 0) / 1000000u);
    seq_file_entry *r = &x->v[x->k++];
    seq_record_init(r, &e->id, &e->desc, e->closed ? SEQ_ENDED : SEQ_LIVE,
                    deadline, e->count, e->carry);
    if (e->numbered && e->applied > 0)
        seq_record_numbered(r, e->applied, e->last_end, e->last_sha, e->prev);
}

seq_file_entry *seq_memory_export(seq_backend *b, size_t *n, bool *oom)
{
    seq_memory *t = mem_of(b);
    uv_mutex_lock(&t->mu);
    *n = 0;
    *oom = false;
    exporting x = {t,
                   calloc(t->map.n ? t->map.n : 1, sizeof *x.v),
                   0,
                   now(t),
                   t->o.idle_ms * 1000000u,
                   wall_ms()};
    if (x.v == NULL) {
        *oom = true;
        uv_mutex_unlock(&t->mu);
        return NULL;
    }
    seq_map_each(&t->map, export_one, &x);
    uv_mutex_unlock(&t->mu);
    *n = x.k;
    return x.v;
}

/* ------------------------------------------------------------ the backend */

seq_backend *seq_memory_new(const seq_options *o)
{
    static const seq_backend_ops ops = {
        .admit = mem_admit,
        .arm = mem_arm,
        .finish = mem_finish,
        .sweep = mem_sweep,
        .freeze = mem_freeze,
        .counts = mem_counts,
        .free = mem_free,
    };
    seq_memory *t = calloc(1, sizeof *t);
    if (t == NULL)
        return NULL;
    t->base.ops = &ops;
    t->o = *o;
    t->copies = 1;
    if (!seq_map_init(&t->map) || uv_mutex_init(&t->mu) != 0) {
        seq_map_free(&t->map);
        free(t);
        return NULL;
    }
    return &t->base;
}
