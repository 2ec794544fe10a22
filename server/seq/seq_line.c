/*
 * seq_line.c - each sequence's line of chunks on this tallyd, and whose
 * turn it is (sequence.h has the rule).
 *
 * A line is made by its first chunk and let go when its last has ended
 * and no pump() is on its way to it. One chunk at a time holds its turn
 * (line->turn): pump() gives it to the first chunk, in arrival order,
 * that is ready and may go (every chunk before it has ended, is early, or
 * is numbered above it), and runs that chunk's decision with no lock
 * held. The decision ends the chunk, parks it early, or waits for its
 * store; each of those lets the turn go and pumps the line again. A pump
 * that finds another pump running on the line (a decision whose store
 * answered at once, on the same thread) leaves the next turn to it, so
 * that a line of many chunks runs in a loop, not a recursion.
 *
 * Any chunk's end wakes the line's early chunks: the state they wait on
 * may have moved, or a chunk they waited for may have left.
 */
#include <stdio.h>
#include <stdlib.h>

#include "seq_int.h"

#define POLL_MAX_MS 16 /* an early chunk's reads of a shared store, this far
                        * apart at most */

static seq_chunk *chunk_of(list_node *n)
{
    return n != NULL ? container_of(n, seq_chunk, in_line) : NULL;
}

bool seq_line_join(seq_table *t, seq_chunk *c)
{
    LOCK_HELD(&t->mu);
    keymap_node *n = keymap_find(&t->lines, &c->key);
    seq_line *l = n != NULL ? container_of(n, seq_line, node) : NULL;
    if (l == NULL) {
        l = calloc(1, sizeof *l);
        if (l == NULL)
            return false;
        l->node = c->key;
        list_init(&l->chunks);
        keymap_add(&t->lines, &l->node);
    }
    c->line = l;
    c->state = CH_SCANNING;
    list_push_back(&l->chunks, &c->in_line);
    return true;
}

/* Whether c may take the turn: every chunk before it has ended, is
 * early, or is numbered above it (c numbered). Under the mutex. */
static bool may_go(const seq_line *l, const seq_chunk *c)
{
    LOCK_HELD(&c->t->mu);
    for (list_node *n = list_first(&l->chunks); n != &c->in_line;
         n = list_next(&l->chunks, n)) {
        const seq_chunk *a = chunk_of(n);
        if (a->state == CH_EARLY)
            continue;
        if (c->id.has_chunk && a->id.has_chunk && a->id.chunk > c->id.chunk)
            continue;
        return false;
    }
    return true;
}

/* The chunk whose turn it is on l, or NULL. Under the mutex. */
static seq_chunk *next_turn(seq_table *t, seq_line *l)
{
    LOCK_HELD(&t->mu);
    if (l->turn != NULL)
        return NULL;
    for (list_node *n = list_first(&l->chunks); n != NULL;
         n = list_next(&l->chunks, n)) {
        seq_chunk *c = chunk_of(n);
        if (c->state == CH_READY && may_go(l, c))
            return c;
    }
    return NULL;
}

/* Lets l go once it is empty and nothing is on its way to it. Under the
 * mutex. */
static void line_gc(seq_table *t, seq_line *l)
{
    LOCK_HELD(&t->mu);
    if (list_empty(&l->chunks) && l->pending == 0 && !l->pumping) {
        keymap_remove(&t->lines, &l->node);
        free(l);
    }
}

/* Gives the turns that are due on l, one after another. The caller
 * counted itself in l->pending, under the mutex. No lock held. */
static void pump(seq_table *t, seq_line *l)
{
    mutex_lock(&t->mu);
    l->pending--;
    if (l->pumping) {
        l->again = true;
        mutex_unlock(&t->mu);
        return;
    }
    l->pumping = true;
    for (;;) {
        l->again = false;
        seq_chunk *c = next_turn(t, l);
        if (c == NULL) {
            if (l->again)
                continue;
            break;
        }
        c->state = CH_TURN;
        l->turn = c;
        mutex_unlock(&t->mu);
        seq_decide_begin(c);
        mutex_lock(&t->mu);
    }
    l->pumping = false;
    line_gc(t, l);
    mutex_unlock(&t->mu);
}

void seq_line_ready(seq_chunk *c)
{
    seq_table *t = c->t;
    seq_line *l = c->line;
    mutex_lock(&t->mu);
    c->state = CH_READY;
    l->pending++;
    mutex_unlock(&t->mu);
    pump(t, l);
}

void seq_line_park(seq_chunk *c, bool past)
{
    seq_table *t = c->t;
    seq_line *l = c->line;
    mutex_lock(&t->mu);
    c->state = CH_EARLY;
    c->gap_checked = past;
    if (!t->store->local) {
        uint64_t ms = (uint64_t)1 << (c->polls < 4 ? c->polls : 4);
        c->polls++;
        c->next_poll_ns = seq_now(t) + (ms < POLL_MAX_MS ? ms : POLL_MAX_MS) * 1000000u;
    }
    if (l->turn == c)
        l->turn = NULL;
    l->pending++;
    mutex_unlock(&t->mu);
    pump(t, l);
}

/* Marks the chunks behind start c, up to the next start, as orphans: it
 * did not start their sequence. Under the mutex. */
static void orphan_followers(seq_line *l, seq_chunk *c)
{
    LOCK_HELD(&c->t->mu);
    for (list_node *n = list_next(&l->chunks, &c->in_line); n != NULL;
         n = list_next(&l->chunks, n)) {
        seq_chunk *a = chunk_of(n);
        if (a->id.start)
            break;
        a->orphan = true;
    }
}

/* Wakes l's early chunks. Under the mutex. */
static void wake_early(seq_table *t, seq_line *l)
{
    LOCK_HELD(&t->mu);
    for (list_node *n = list_first(&l->chunks); n != NULL;
         n = list_next(&l->chunks, n))
        if (chunk_of(n)->state == CH_EARLY)
            chunk_of(n)->state = CH_READY;
}

void seq_line_end(seq_chunk *c, status_code st, const char *msg)
{
    seq_table *t = c->t;
    seq_line *l = c->line;
    seq_slot *s = c->s;
    mutex_lock(&t->mu);
    if (l->turn == c)
        l->turn = NULL;
    if (c->id.start && !c->started)
        orphan_followers(l, c);
    wake_early(t, l);
    list_remove(&c->in_line);
    if (!t->store->local) {
        t->inflight--;
        t->inflight_bytes -= c->need;
    }
    l->pending++;
    mutex_unlock(&t->mu);
    s->base = c->base;
    s->c = NULL;
    free(c->rec);
    free(c);
    if (st == STATUS_OK && s->base != NULL && s->out != NULL) {
        if (s->copy != NULL)
            eng_carry_scan(&s->lines, s->copy, s->out, s->base);
        else if (!eng_carry_zero(s->base, eng_carry_count(&s->lines)))
            eng_carry_apply(&s->lines, s->out, s->base);
    }
    char words[512];
    snprintf(words, sizeof words, "%s", msg != NULL ? msg : "");
    s->done(s, st, msg != NULL ? words : NULL);
    pump(t, l);
}

bool seq_line_holds(seq_chunk *c, uint64_t from)
{
    seq_table *t = c->t;
    mutex_lock(&t->mu);
    bool holds = from < c->id.chunk;
    for (uint64_t k = from; holds && k < c->id.chunk; k++) {
        holds = false;
        for (list_node *n = list_first(&c->line->chunks); n != NULL && !holds;
             n = list_next(&c->line->chunks, n))
            holds = chunk_of(n)->id.has_chunk && chunk_of(n)->id.chunk == k;
    }
    mutex_unlock(&t->mu);
    return holds;
}

/* ------------------------------------------------------------ the sweep */

typedef struct {
    seq_table *t;
    uint64_t now;
    seq_line **wake; /* lines with a chunk woken */
    size_t nwake, cap;
    seq_chunk **late; /* chunks past their request's deadline */
    size_t nlate, late_cap;
} sweeping;

static bool push(void ***v, size_t *n, size_t *cap, void *x)
{
    if (*n == *cap) {
        size_t c = *cap ? 2 * *cap : 16;
        void **nv = realloc(*v, c * sizeof **v);
        if (nv == NULL)
            return false;
        *v = nv;
        *cap = c;
    }
    (*v)[(*n)++] = x;
    return true;
}

/* One line's chunks, for the sweep: early ones whose wait ran out or
 * whose read is due, woken; waiting ones past their deadline, taken
 * out to fail. Under the mutex. */
static void sweep_line(keymap_node *n, void *user)
{
    sweeping *w = user;
    LOCK_HELD(&w->t->mu);
    seq_line *l = container_of(n, seq_line, node);
    uint64_t reorder = w->t->o.reorder_ms * 1000000u;
    bool woke = false;
    for (list_node *x = list_first(&l->chunks); x != NULL;
         x = list_next(&l->chunks, x)) {
        seq_chunk *c = chunk_of(x);
        uint64_t dl = c->s->deadline_ns;
        if ((c->state == CH_READY || c->state == CH_EARLY) && dl != 0
            && w->now >= dl
            && push((void ***)&w->late, &w->nlate, &w->late_cap, c)) {
            c->state = CH_TURN; /* no one else's now */
            continue;
        }
        if (c->state != CH_EARLY)
            continue;
        bool due = (!c->gap_checked && w->now - c->since_ns >= reorder)
                   || (!w->t->store->local && w->now >= c->next_poll_ns);
        if (due) {
            c->state = CH_READY;
            woke = true;
        }
    }
    if (woke && push((void ***)&w->wake, &w->nwake, &w->cap, l))
        l->pending++;
}

void seq_line_sweep(seq_table *t)
{
    sweeping w = {.t = t, .now = seq_now(t)};
    mutex_lock(&t->mu);
    keymap_each(&t->lines, sweep_line, &w);
    for (size_t i = 0; i < w.nlate; i++)
        w.late[i]->line->pending++; /* kept until its end is told */
    mutex_unlock(&t->mu);
    for (size_t i = 0; i < w.nlate; i++) {
        seq_chunk *c = w.late[i];
        seq_line *l = c->line;
        char id[SEQ_ID_MAX + 8], msg[300];
        seq_id_format(&c->id, id, sizeof id);
        snprintf(msg, sizeof msg,
                 "sequence %s: the request's deadline passed while the chunk "
                 "waited for its turn; nothing was added",
                 id);
        seq_line_end(c, STATUS_DEADLINE, msg);
        mutex_lock(&t->mu);
        l->pending--;
        line_gc(t, l);
        mutex_unlock(&t->mu);
    }
    for (size_t i = 0; i < w.nwake; i++)
        pump(t, w.wake[i]);
    free(w.late);
    free(w.wake);
}

static void drop_line(keymap_node *n, void *user)
{
    seq_table *t = user;
    seq_line *l = container_of(n, seq_line, node);
    while (!list_empty(&l->chunks)) {
        seq_chunk *c = chunk_of(list_first(&l->chunks));
        list_remove(&c->in_line);
        free(c->base);
        free(c->rec);
        free(c);
    }
    keymap_remove(&t->lines, &l->node);
    free(l);
}

void seq_line_drop_all(seq_table *t)
{
    keymap_each(&t->lines, drop_line, t);
}
