/*
 * sim_model.c - the reference model of the sequence rules and the
 * history checker (sim_model.h).
 *
 * A sequence's state is a world; a chunk's step from a world gives the
 * answers it may get and the worlds after. The checker walks the orders
 * the rules allow, depth first, remembering (chunks placed, world) pairs
 * it has seen, and keeps the worlds a segment can end in; the next
 * segment starts from those.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_model.h"

enum { ABSENT, LIVE, CLOSED };

typedef struct {
    uint8_t status, dtype;
    bool numbered, last_end;
    uint64_t applied, last_sig;
    int64_t total, prev;
    int64_t renew_lo, renew_hi; /* LIVE: its last answered chunk */
    int64_t close_lo, close_hi; /* CLOSED: its end */
} world;

static const world none;

static bool same(const world *a, const world *b)
{
    return a->status == b->status && a->dtype == b->dtype
           && a->numbered == b->numbered && a->last_end == b->last_end
           && a->applied == b->applied && a->last_sig == b->last_sig
           && a->total == b->total && a->prev == b->prev
           && a->renew_lo == b->renew_lo && a->renew_hi == b->renew_hi
           && a->close_lo == b->close_lo && a->close_hi == b->close_hi;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0x100000001b3ull;
}

static uint64_t world_hash(const world *w)
{
    uint64_t h = mix(w->status, w->dtype);
    h = mix(h, (uint64_t)w->numbered << 1 | w->last_end);
    h = mix(h, w->applied);
    h = mix(h, w->last_sig);
    h = mix(h, (uint64_t)w->total);
    h = mix(h, (uint64_t)w->prev);
    h = mix(h, (uint64_t)w->renew_lo);
    h = mix(h, (uint64_t)w->renew_hi);
    h = mix(h, (uint64_t)w->close_lo);
    return mix(h, (uint64_t)w->close_hi);
}

static uint64_t sig(const sim_chunk *c)
{
    uint64_t h = mix(c->dtype + 1, c->n);
    for (int i = 0; i < c->n; i++)
        h = mix(h, (uint64_t)c->data[i]);
    return h | 1;
}

static int64_t sum(const sim_chunk *c)
{
    int64_t s = 0;
    for (int i = 0; i < c->n; i++)
        s += c->data[i];
    return s;
}

void sim_sums(const sim_chunk *c, int64_t from, int64_t *out)
{
    for (int i = 0; i < c->n; i++)
        out[i] = from += c->data[i];
}

/* ------------------------------------------------------------ the rules */

enum { R_START, R_TAKE, R_INVALID, R_CONFLICT };
enum { X_APPLY, X_REPEAT, X_EARLY, X_CONFLICT };

/* Whether c has the flag of the chunk w applied last (a repeat keeps its
 * first send's sequence_end). */
static bool flags_match(const world *w, const sim_chunk *c)
{
    return c->end == w->last_end;
}

static int admit(const world *w, const sim_chunk *c)
{
    bool restart = c->start;
    if (restart && c->number && w->status != ABSENT && w->numbered
        && (w->status == LIVE
            || (w->applied == 1 && w->last_sig == sig(c) && flags_match(w, c))))
        restart = false;
    if (restart)
        return R_START;
    if (w->status == ABSENT || w->dtype != c->dtype
        || w->numbered != (c->number != 0))
        return R_INVALID;
    if (!w->numbered)
        return R_TAKE;
    bool closed = w->status == CLOSED;
    if (c->number < w->applied || (closed && c->number != w->applied))
        return R_CONFLICT;
    if (c->number == w->applied
        && (w->last_sig != sig(c) || !flags_match(w, c)))
        return R_CONFLICT;
    return R_TAKE;
}

static int outcome(const world *w, const sim_chunk *c)
{
    bool closed = w->status == CLOSED;
    if (c->number == w->applied + 1 && !closed)
        return X_APPLY;
    if (c->number == w->applied && w->applied > 0 && c->end == w->last_end
        && sig(c) == w->last_sig)
        return X_REPEAT;
    if (c->number > w->applied + 1 && !closed)
        return X_EARLY;
    return X_CONFLICT;
}

/* Whether a chunk is an orphan: behind a start of its id, on its
 * replica, that did not start its sequence (ORPHAN_MAYBE: the start's
 * answer does not say). */
enum { ORPHAN_NO, ORPHAN_YES, ORPHAN_MAYBE };

/* Whether numbered chunk c waits in w (it lets later chunks go ahead):
 * an early one, or an orphan that w cannot take (it waits for chunk 1
 * to be sent again). */
static bool waits(const world *w, const sim_chunk *c, int orphan)
{
    if (c->number == 0 || c->start)
        return false;
    int r = admit(w, c);
    if (r == R_TAKE) {
        int x = outcome(w, c);
        return x == X_EARLY || (x == X_CONFLICT && orphan != ORPHAN_NO);
    }
    return orphan != ORPHAN_NO;
}

typedef struct {
    int kind;
    bool has_values;
    int64_t values[SIM_MAX_DATA];
    world from; /* the world it was decided in (expired, or not) */
    world next;
} result;

/* The worlds w may be in at a decision within [lo, hi]: as it is, or
 * expired, or either. */
static int settle(const sim_timers *t, const world *w, int64_t lo, int64_t hi,
                  world out[2])
{
    int64_t elo, ehi;
    if (w->status == LIVE) {
        elo = w->renew_lo + t->idle;
        ehi = w->renew_hi + t->idle;
    } else if (w->status == CLOSED) {
        int64_t keep = w->numbered ? t->idle : t->linger;
        elo = w->close_lo + keep;
        ehi = w->close_hi + keep;
    } else {
        out[0] = *w;
        return 1;
    }
    if (hi < elo) {
        out[0] = *w;
        return 1;
    }
    if (lo >= ehi && !t->lenient_idle) {
        out[0] = none;
        return 1;
    }
    out[0] = *w;
    out[1] = none;
    return 2;
}

/* A chunk applied to w (on its running sum): the world after. */
static world applied(const sim_timers *t, const world *w, const sim_chunk *c,
                     int64_t lo, int64_t hi)
{
    world n = *w;
    bool live = w->status == LIVE;
    bool closing = c->end && live;
    n.status = closing || w->status == CLOSED ? CLOSED : LIVE;
    if (c->number)
        n.applied = c->number;
    n.prev = w->total;
    n.total = w->total + sum(c);
    n.last_sig = sig(c);
    n.last_end = c->end;
    if (live) {
        n.renew_lo = lo;
        n.renew_hi = hi;
    }
    if (closing) {
        n.close_lo = lo;
        n.close_hi = hi;
    }
    if (n.status == CLOSED && !n.numbered && t->linger == 0)
        n = none; /* deleted by its end */
    return n;
}

/* Every (answer, world after) of chunk c decided at [lo, hi] from w. */
static int step(const sim_timers *t, const world *w0, const sim_op *o,
                int orphaned, result *out)
{
    const sim_chunk *c = &o->c;
    world ws[2];
    int k = settle(t, w0, o->admit_ms, o->end_ms, ws), n = 0;
    for (int j = 0; j < 2 * k; j++) {
        const world *w = &ws[j / 2];
        bool orphan = j % 2 == 1;
        if (orphan ? orphaned == ORPHAN_NO : orphaned == ORPHAN_YES)
            continue;
        result *r = &out[n++];
        memset(r, 0, sizeof *r);
        r->next = *w;
        r->from = *w;
        int a = admit(w, c);
        if (orphan && a != R_START) {
            r->kind = SIM_INVALID;
            if (c->number == 0)
                continue;
            r->kind = SIM_GAP;
            if (a != R_TAKE)
                continue;
            int x = outcome(w, c);
            if (x != X_APPLY && x != X_REPEAT)
                continue;
        }
        if (a == R_START) {
            world s = none;
            s.status = LIVE;
            s.dtype = c->dtype;
            s.numbered = c->number != 0;
            r->next = applied(t, &s, c, o->admit_ms, o->end_ms);
            r->kind = SIM_OK;
            r->has_values = true;
            sim_sums(c, 0, r->values);
            continue;
        }
        if (a == R_INVALID || a == R_CONFLICT) {
            r->kind = a == R_INVALID ? SIM_INVALID : SIM_CONFLICT;
            continue;
        }
        int x = c->number ? outcome(w, c) : X_APPLY;
        if (x == X_EARLY || x == X_CONFLICT) {
            r->kind = x == X_EARLY ? SIM_GAP : SIM_CONFLICT;
            continue;
        }
        r->kind = SIM_OK;
        r->has_values = true;
        if (x == X_REPEAT) {
            sim_sums(c, w->prev, r->values);
            if (w->status == LIVE) {
                if (t->renew_may_fail) { /* or its renewal failed */
                    out[n] = *r;
                    n++;
                }
                r->next.renew_lo = o->admit_ms;
                r->next.renew_hi = o->end_ms;
            }
            continue;
        }
        sim_sums(c, w->total, r->values);
        r->next = applied(t, w, c, o->admit_ms, o->end_ms);
    }
    return n;
}

/* ------------------------------------------------------------ the search */

typedef struct {
    world *v;
    size_t n, cap;
} worlds;

static void worlds_add(worlds *s, const world *w)
{
    for (size_t i = 0; i < s->n; i++)
        if (same(&s->v[i], w))
            return;
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (s->v == NULL)
            abort();
    }
    s->v[s->n++] = *w;
}

/* The (placed chunks, world) pairs seen: open addressing. */
typedef struct {
    uint64_t *mask, *waited;
    world *w;
    bool *used;
    size_t cap, n;
} seen_set;

#define SEARCH_MAX 400000 /* pairs a segment may visit: then it gives up */

static bool seen_insert(seen_set *s, uint64_t mask, uint64_t waited,
                        const world *w)
{
    if (2 * (s->n + 1) > s->cap) {
        seen_set g = {0};
        g.cap = s->cap ? 2 * s->cap : 1024;
        g.mask = calloc(g.cap, sizeof *g.mask);
        g.waited = calloc(g.cap, sizeof *g.waited);
        g.w = calloc(g.cap, sizeof *g.w);
        g.used = calloc(g.cap, sizeof *g.used);
        if (g.mask == NULL || g.waited == NULL || g.w == NULL || g.used == NULL)
            abort();
        for (size_t i = 0; i < s->cap; i++)
            if (s->used[i])
                seen_insert(&g, s->mask[i], s->waited[i], &s->w[i]);
        free(s->mask);
        free(s->waited);
        free(s->w);
        free(s->used);
        *s = g;
    }
    size_t i = mix(mix(world_hash(w), mask), waited) & (s->cap - 1);
    while (s->used[i]) {
        if (s->mask[i] == mask && s->waited[i] == waited && same(&s->w[i], w))
            return false;
        i = (i + 1) & (s->cap - 1);
    }
    s->used[i] = true;
    s->mask[i] = mask;
    s->waited[i] = waited;
    s->w[i] = *w;
    s->n++;
    return true;
}

typedef struct {
    const sim_timers *t;
    const sim_op *ops;
    const int *orphan;
    size_t n;
    seen_set seen;
    worlds out;
    bool gave_up;
    /* the deepest point reached, for the report */
    size_t best_placed;
    world best_world;
    size_t best_stuck; /* the chunk no answer fitted there */
    uint8_t path[SIM_MAX_OPS], best_path[SIM_MAX_OPS];
} search;

/* Whether q waits when o is decided: in w, or in w expired by then. */
static bool waits_by(const sim_timers *t, const world *w, const sim_op *q,
                     int orphan, const sim_op *o)
{
    world ws[2];
    int k = settle(t, w, o->admit_ms, o->end_ms, ws);
    for (int i = 0; i < k; i++)
        if (waits(&ws[i], &q->c, orphan))
            return true;
    return false;
}

static bool refusal(const sim_op *o)
{
    return o->outcome == SIM_INVALID || o->outcome == SIM_CONFLICT
           || o->outcome == SIM_GAP;
}

/* Whether op i may be decided now (mask placed, world w). */
static bool may_go(const search *s, uint64_t mask, uint64_t waited,
                   const world *w, size_t i)
{
    const sim_op *o = &s->ops[i];
    for (size_t p = 0; p < s->n; p++) {
        if (p == i || (mask >> p & 1))
            continue;
        const sim_op *q = &s->ops[p];
        if (q->outcome == SIM_NOT_RUN)
            continue; /* it left without a decision: it held no turn */
        if (q->end_ev < o->admit_ev)
            return false; /* answered before o arrived */
        if (s->t->lenient_order && (refusal(o) || refusal(q)))
            continue;
        if (q->replica == o->replica && q->admit_ev < o->admit_ev
            && !waits_by(s->t, w, q, s->orphan[p], o)
            && !(s->t->shared && (waited >> p & 1))
            && !(o->c.number && q->c.number > o->c.number))
            return false; /* arrived before o, on o's replica, and o
                           * does not go ahead of it */
    }
    return true;
}

static bool fits(const search *s, const sim_op *o, const result *r, int orphan)
{
    const world *from = &r->from;
    if (r->kind != o->outcome)
        return false;
    if (r->kind == SIM_OK)
        return memcmp(r->values, o->out, o->c.n * sizeof *o->out) == 0;
    if (r->kind == SIM_GAP) /* it waited --sequence-reorder-ms first */
        return waits(from, &o->c, orphan)
               && o->end_ms - o->admit_ms >= s->t->reorder;
    return true;
}

static void world_text(const world *w, char *buf, size_t len);
static const char *kind_name(int k);

/* On a shared store, each replica decides on the state as it last read
 * it: a numbered chunk that waited in any world since it arrived may
 * have been passed. w lasted until `by`'s effect, at its answer at the
 * latest: the chunks that arrived by then and wait in w, added to
 * waited. */
static uint64_t waited_after(const search *s, uint64_t mask, uint64_t waited,
                             const world *w, const sim_op *by)
{
    if (!s->t->shared)
        return 0;
    for (size_t p = 0; p < s->n; p++)
        if (!(mask >> p & 1) && s->ops[p].admit_ev <= by->end_ev
            && waits(w, &s->ops[p].c, s->orphan[p]))
            waited |= (uint64_t)1 << p;
    return waited;
}
static void dfs(search *s, uint64_t mask, uint64_t waited, const world *w)
{
    if (s->gave_up || !seen_insert(&s->seen, mask, waited, w))
        return;
    if (s->seen.n > SEARCH_MAX) {
        s->gave_up = true;
        return;
    }
    /* A chunk that changes nothing (a refusal, a failure before its
     * decision) and may go now goes now: any order that puts it later
     * is this one with it moved here (the same worlds, its own
     * predecessors already placed). */
    for (bool again = true; again;) {
        again = false;
        for (size_t i = 0; i < s->n; i++) {
            const sim_op *o = &s->ops[i];
            if ((mask >> i & 1) || o->outcome == SIM_OK
                || o->outcome == SIM_UNKNOWN || !may_go(s, mask, waited, w, i))
                continue;
            bool keep = o->outcome == SIM_NOT_RUN;
            result rs[12];
            int k = keep ? 0 : step(s->t, w, o, s->orphan[i], rs);
            for (int j = 0; j < k && !keep; j++)
                keep = fits(s, o, &rs[j], s->orphan[i]) && same(&rs[j].next, w);
            if (keep) {
                s->path[__builtin_popcountll(mask)] = (uint8_t)i;
                mask |= (uint64_t)1 << i;
                waited = waited_after(s, mask, waited, w, o);
                again = true;
            }
        }
    }
    size_t placed = (size_t)__builtin_popcountll(mask);
    if (placed == s->n) {
        worlds_add(&s->out, w);
        return;
    }
    for (size_t i = 0; i < s->n; i++) {
        if ((mask >> i & 1) || !may_go(s, mask, waited, w, i))
            continue;
        const sim_op *o = &s->ops[i];
        uint64_t m = mask | (uint64_t)1 << i;
        s->path[placed] = (uint8_t)i;
        if (o->outcome == SIM_NOT_RUN) { /* no effect */
            dfs(s, m, waited_after(s, m, waited, w, o), w);
            continue;
        }
        result rs[12];
        int k = step(s->t, w, o, s->orphan[i], rs);
        if (getenv("SIM_DEBUG")) {
            char wt[300];
            world_text(w, wt, sizeof wt);
            fprintf(stderr, "depth %zu try %zu in %s:", placed, i, wt);
            for (int j = 0; j < k; j++)
                fprintf(stderr, " %s", kind_name(rs[j].kind));
            fprintf(stderr, "\n");
        }
        bool any = false;
        for (int j = 0; j < k; j++) {
            if (o->outcome == SIM_UNKNOWN) { /* its effect, or none */
                dfs(s, m, waited_after(s, m, waited, w, o), &rs[j].next);
                any = true;
            } else if (fits(s, o, &rs[j], s->orphan[i])) {
                dfs(s, m, waited_after(s, m, waited, w, o), &rs[j].next);
                any = true;
            }
        }
        if (o->outcome == SIM_UNKNOWN)
            dfs(s, m, waited_after(s, m, waited, w, o), w);
        if (!any && placed >= s->best_placed) {
            s->best_placed = placed;
            s->best_world = *w;
            s->best_stuck = i;
            memcpy(s->best_path, s->path, placed);
        }
    }
}

/* Which chunks are orphans: behind a start of their id on their replica
 * (in flight when they arrived, the latest such) that did not start its
 * sequence: it failed before its decision (NOT_RUN), or its write did
 * (FULL), or the store's answer does not say (UNKNOWN). A start that
 * was taken as a retry of chunk 1 (a numbered one on a live numbered
 * sequence: a repeat, or a conflict) orphans nothing. */
static void find_orphans(const sim_op *ops, size_t n, int *orphan)
{
    for (size_t i = 0; i < n; i++) {
        orphan[i] = ORPHAN_NO;
        if (ops[i].c.start)
            continue;
        for (size_t p = i; p-- > 0;) {
            const sim_op *q = &ops[p];
            if (!q->c.start || q->replica != ops[i].replica
                || q->end_ev < ops[i].admit_ev)
                continue;
            orphan[i] = q->outcome == SIM_OK || q->outcome == SIM_CONFLICT
                            ? ORPHAN_NO
                        : q->outcome == SIM_UNKNOWN ? ORPHAN_MAYBE
                                                    : ORPHAN_YES;
            break;
        }
    }
}

static const char *kind_name(int k)
{
    static const char *names[] = {"ok",   "invalid", "conflict", "gap",
                                  "full", "unknown", "not-run"};
    return k >= 0 && k <= SIM_NOT_RUN ? names[k] : "?";
}

void sim_op_text(const sim_op *o, char *buf, size_t len)
{
    const sim_chunk *c = &o->c;
    int at = snprintf(buf, len,
                      "r%u ev %" PRIu64 "-%" PRIu64 " t %" PRId64 "-%" PRId64
                      " %s%s%s%s #%" PRIu64 " [",
                      o->replica, o->admit_ev, o->end_ev, o->admit_ms,
                      o->end_ms, c->dtype ? "int32" : "int64",
                      c->start ? " start" : "", c->end ? " end" : "",
                      c->number ? "" : " (unnumbered)", c->number);
    for (int i = 0; i < c->n && at > 0 && (size_t)at < len; i++)
        at += snprintf(buf + at, len - (size_t)at, "%s%" PRId64, i ? "," : "",
                       c->data[i]);
    if (at > 0 && (size_t)at < len)
        at += snprintf(buf + at, len - (size_t)at, "] -> %s",
                       kind_name(o->outcome));
    for (int i = 0;
         o->outcome == SIM_OK && i < c->n && at > 0 && (size_t)at < len; i++)
        at += snprintf(buf + at, len - (size_t)at, "%s%" PRId64, i ? "," : " [",
                       o->out[i]);
    if (o->outcome == SIM_OK && at > 0 && (size_t)at < len)
        at += snprintf(buf + at, len - (size_t)at, "]");
    if (o->words[0] && at > 0 && (size_t)at < len)
        snprintf(buf + at, len - (size_t)at, " \"%.120s\"", o->words);
}

static void world_text(const world *w, char *buf, size_t len)
{
    static const char *st[] = {"absent", "live", "closed"};
    snprintf(buf, len,
             "%s%s dtype %d applied %" PRIu64 " total %" PRId64 " prev %" PRId64
             " last_end %d renew %" PRId64 "-%" PRId64 " close %" PRId64
             "-%" PRId64,
             st[w->status], w->numbered ? " numbered" : "", w->dtype,
             w->applied, w->total, w->prev, w->last_end, w->renew_lo,
             w->renew_hi, w->close_lo, w->close_hi);
}

static void report_failure(const search *s, const sim_op *all, size_t nall,
                           size_t seg_first, char *report, size_t len)
{
    char line[512];
    size_t at = 0;
    const sim_op *o = &s->ops[s->best_stuck];
    sim_op_text(o, line, sizeof line);
    at += (size_t)snprintf(report + at, len - at,
                           "no order of the rules explains: %s\n", line);
    world_text(&s->best_world, line, sizeof line);
    if (at < len)
        at += (size_t)snprintf(report + at, len - at,
                               "  after %zu chunks of its segment, in: %s\n",
                               s->best_placed, line);
    if (at < len)
        at += (size_t)snprintf(report + at, len - at, "  by the order:");
    for (size_t i = 0; i < s->best_placed && at < len; i++)
        at += (size_t)snprintf(report + at, len - at, " %zu",
                               seg_first + s->best_path[i]);
    if (at < len)
        at += (size_t)snprintf(report + at, len - at,
                               "\n  the id's history (segment from #%zu):\n",
                               seg_first);
    for (size_t i = 0; i < nall && at < len; i++) {
        sim_op_text(&all[i], line, sizeof line);
        at += (size_t)snprintf(report + at, len - at, "  %3zu %s\n", i, line);
    }
}

bool sim_check(const sim_timers *t, const sim_op *ops, size_t n,
               const sim_barrier *b, size_t nb, char *report, size_t len,
               size_t *stuck)
{
    *stuck = n;
    worlds cur = {0}, saved = {0};
    worlds_add(&cur, &none);
    size_t first = 0, bi = 0;
    bool ok = true;
    report[0] = '\0';
    while (ok && (first < n || bi < nb)) {
        uint64_t until = bi < nb ? b[bi].ev : UINT64_MAX;
        size_t last = first;
        while (last < n && ops[last].admit_ev < until)
            last++;
        if (last - first > SIM_MAX_OPS) {
            snprintf(report, len, "a segment of %zu chunks: too many to check",
                     last - first);
            ok = false;
            break;
        }
        if (last > first) {
            search s = {.t = t, .ops = ops + first, .n = last - first};
            int orphan[SIM_MAX_OPS];
            find_orphans(s.ops, s.n, orphan);
            s.orphan = orphan;
            for (size_t i = 0; i < cur.n; i++)
                dfs(&s, 0, 0, &cur.v[i]);
            if (s.out.n == 0 && !s.gave_up) {
                report_failure(&s, ops, n, first, report, len);
                *stuck = first + s.best_stuck;
                ok = false;
            }
            free(s.seen.mask);
            free(s.seen.waited);
            free(s.seen.w);
            free(s.seen.used);
            if (s.gave_up) /* too many orders: nothing is known after it */
                worlds_add(&s.out, &none);
            free(cur.v);
            cur = s.out;
        }
        first = last;
        if (ok && bi < nb) {
            const sim_barrier *x = &b[bi++];
            if (x->kind == SIM_BAR_CRASH_MEM) {
                cur.n = 0;
                worlds_add(&cur, &none);
            } else if (x->kind == SIM_BAR_SNAPSHOT) {
                saved.n = 0;
                for (size_t i = 0; i < cur.n; i++)
                    worlds_add(&saved, &cur.v[i]);
            } else if (x->kind == SIM_BAR_ROLLBACK) {
                cur.n = 0;
                for (size_t i = 0; i < saved.n; i++)
                    worlds_add(&cur, &saved.v[i]);
            }
        }
    }
    free(cur.v);
    free(saved.v);
    return ok;
}
