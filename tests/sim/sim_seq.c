/*
 * sim_seq.c - a deterministic simulation of the sequences, as
 * FoundationDB tests itself: the engine over its stores (sim_sut.h), a
 * fake clock, and one seeded scheduler that decides, step by step, what
 * happens next: a chunk arrives (a start, the next chunk, a repeat, an
 * early one, one of another sequence's kind, several at once), a scan
 * ends or fails (its deadline, its client gone), the store answers or
 * loses a write, the log writer writes or finds the disk full, the clock
 * moves and the sweep runs, a tallyd crashes at any record of its log
 * and replays it, a replica dies, Redis rolls back to a snapshot. Each
 * history then drains (every request answered), and every id's answers
 * are checked against the reference model (sim_model.h).
 *
 *     sim_seq [--seconds S] [--histories N] [--store memory|log|fake]
 *
 * Histories are drawn from TALLY_SIM_SEED (else the clock), one seed
 * each, printed with a failure: TALLY_SIM_SEED=N sim_seq --histories 1
 * replays that one history exactly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim_model.h"
#include "sim_sut.h"

#define MAX_IDS 3
#define MAX_REQS 512
#define MAX_BARRIERS 64

/* ------------------------------------------------------------ the world */

static uint64_t rng;

static uint64_t rnd(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t below(uint64_t n)
{
    return rnd() % n;
}

static bool chance(double p)
{
    return (double)(rnd() >> 11) * 0x1p-53 < p;
}

/* What the generator believes of an id, from the answers it saw: enough
 * to send chunks that mean something (the next number, a repeat). */
typedef struct {
    bool live, numbered, has_last;
    uint64_t next;
    sim_chunk last;
} belief;

typedef struct {
    sim_config cfg;
    sim_sut *sut;
    int64_t now;
    uint64_t ev;
    sim_op ops[MAX_IDS][MAX_REQS];
    size_t nops[MAX_IDS];
    sim_barrier bars[MAX_BARRIERS];
    size_t nbars;
    sim_req reqs[MAX_REQS];
    size_t nreqs;
    belief b[MAX_IDS];
    uint32_t incarnation[3]; /* each replica's, for the checker */
    size_t inflight;
    bool snapshot;
} history;

static history h;

int64_t sim_now_ms(void)
{
    return h.now;
}

void sim_scan(sim_req *q)
{
    q->state = SIM_REQ_SCANNING;
}

/* kind: the model's (the adapter maps a status_code to it). */
void sim_answer(sim_req *q, int kind, const char *words, const int64_t *values)
{
    sim_op *o = &h.ops[q->id][q->op];
    o->end_ev = ++h.ev;
    o->end_ms = h.now;
    o->outcome = kind;
    if (kind == SIM_OK && values != NULL)
        memcpy(o->out, values, o->c.n * sizeof *values);
    snprintf(o->words, sizeof o->words, "%s", words != NULL ? words : "");
    q->state = SIM_REQ_DONE;
    h.inflight--;
    belief *b = &h.b[q->id];
    if (kind != SIM_OK)
        return;
    const sim_chunk *c = &q->c;
    if (c->start) {
        b->live = true;
        b->numbered = c->number != 0;
    }
    b->next = c->number + 1;
    b->last = *c;
    b->has_last = true;
    if (c->end)
        b->live = false;
}

/* ------------------------------------------------------------ requests */

static void fill(sim_chunk *c, uint8_t dtype)
{
    c->dtype = dtype;
    c->n = (uint8_t)(1 + below(SIM_MAX_DATA));
    for (int i = 0; i < c->n; i++)
        c->data[i] = (int64_t)below(101) - 50;
}

/* A chunk for id, as a client that believes b would send it. */
static sim_chunk draw_chunk(const belief *b)
{
    sim_chunk c;
    memset(&c, 0, sizeof c);
    fill(&c, 0);
    double r = (double)(rnd() >> 11) * 0x1p-53;
    if (!b->live) {
        if (r < 0.8) {
            c.start = true;
            c.number = chance(0.5) ? 1 : 0;
            c.end = chance(0.05);
        } else if (r < 0.9 && b->has_last && b->last.number) {
            c = b->last; /* its end again */
        } else {
            c.number = chance(0.5) ? 2 : 0;
        }
        return c;
    }
    uint64_t next = b->numbered ? b->next : 0;
    if (r < 0.45) {
        c.number = next;
        c.end = chance(0.12);
    } else if (r < 0.57) { /* a start again (a retry of chunk 1 when
                            * numbered and live) */
        c.start = true;
        c.number = chance(0.5) ? 1 : 0;
    } else if (r < 0.67 && b->has_last && b->last.number) {
        c = b->last; /* a retry of the last one */
    } else if (r < 0.69 && b->has_last && b->last.number && !sut_landed) {
        c = b->last; /* the same with other flags */
        c.end = !c.end;
    } else if (r < 0.80 && b->numbered) {
        c.number = next + 1 + below(2); /* early */
    } else if (r < 0.83 && b->numbered && next > 2) {
        c.number = 1 + below(next - 1); /* older */
    } else if (r < 0.86) {
        c.number = next;
        fill(&c, 1); /* another dtype */
    } else if (r < 0.89) {
        c.number = b->numbered ? 0 : 1 + below(3); /* the other kind */
    } else {
        c.number = next;
    }
    return c;
}

static void submit(int id, int replica, const sim_chunk *c)
{
    if (h.nreqs == MAX_REQS || h.nops[id] == SIM_MAX_OPS) /* checkable */
        return;
    sim_req *q = &h.reqs[h.nreqs++];
    memset(q, 0, sizeof *q);
    q->id = id;
    q->replica = replica;
    q->c = *c;
    q->op = h.nops[id]++;
    sim_op *o = &h.ops[id][q->op];
    memset(o, 0, sizeof *o);
    o->replica = (uint32_t)replica << 16 | h.incarnation[replica];
    o->c = *c;
    o->admit_ev = ++h.ev;
    o->admit_ms = h.now;
    o->end_ev = UINT64_MAX;
    o->outcome = -1;
    q->state = SIM_REQ_WAITING;
    h.inflight++;
    sut_submit(h.sut, q);
}

static bool serial; /* --serial: one request of an id in flight at most */

static bool id_busy(int id)
{
    for (size_t i = 0; i < h.nreqs; i++)
        if (h.reqs[i].id == id && h.reqs[i].state != SIM_REQ_DONE)
            return true;
    return false;
}

static void submit_some(void)
{
    int id = (int)below((uint64_t)h.cfg.ids);
    int rep = (int)below((uint64_t)h.cfg.replicas);
    if (serial && id_busy(id))
        return;
    belief *b = &h.b[id];
    sim_chunk c = draw_chunk(b);
    submit(id, rep, &c);
    if (!serial && chance(0.15)) { /* chunks sent at once, as a stream's */
        int more = 1 + (int)below(2);
        for (int i = 0; i < more; i++) {
            sim_chunk d;
            memset(&d, 0, sizeof d);
            fill(&d, 0);
            d.number = c.number ? c.number + 1 + (uint64_t)i : 0;
            d.end = i == more - 1 && chance(0.2);
            submit(id, chance(0.8) ? rep : (int)below((uint64_t)h.cfg.replicas),
                   &d);
        }
    }
}

/* The requests in flight in state st: how many, and the k-th. */
static sim_req *nth(int st, size_t k, size_t *count)
{
    size_t n = 0;
    sim_req *pick = NULL;
    for (size_t i = 0; i < h.nreqs; i++)
        if (h.reqs[i].state == st) {
            if (n == k)
                pick = &h.reqs[i];
            n++;
        }
    if (count != NULL)
        *count = n;
    return pick;
}

/* Every request in flight (of replica r; -1: all) is never answered. */
static void lose_inflight(int r)
{
    for (size_t i = 0; i < h.nreqs; i++) {
        sim_req *q = &h.reqs[i];
        if (q->state == SIM_REQ_DONE || (r >= 0 && q->replica != r))
            continue;
        bool maybe = sut_forget(h.sut, q);
        sim_answer(q, maybe ? SIM_UNKNOWN : SIM_NOT_RUN,
                   "no answer: the server went", NULL);
    }
}

static void barrier(int kind)
{
    if (h.nbars < MAX_BARRIERS)
        h.bars[h.nbars++] = (sim_barrier){kind, ++h.ev};
}

static void tick(int64_t ms)
{
    h.now += ms;
    sut_sweep(h.sut);
}

/* ------------------------------------------------------------ a history */

static void one_step(void)
{
    size_t scanning, pending = sut_pending(h.sut);
    nth(SIM_REQ_SCANNING, 0, &scanning);
    bool logq = sut_log_waiting(h.sut);
    double w_submit = 3, w_scan = scanning ? 3 : 0, w_deliver = pending ? 3 : 0,
           w_log = logq ? 2 : 0, w_clock = 1.2, w_fault = 0.25;
    double total = w_submit + w_scan + w_deliver + w_log + w_clock + w_fault;
    double r = (double)(rnd() >> 11) * 0x1p-53 * total;
    if ((r -= w_submit) < 0) {
        submit_some();
    } else if ((r -= w_scan) < 0) {
        sim_req *q = nth(SIM_REQ_SCANNING, below(scanning), NULL);
        q->state = SIM_REQ_ENDING;
        sut_scanned(h.sut, q, !chance(0.08));
    } else if ((r -= w_deliver) < 0) {
        int fate = chance(0.9) ? 0 : chance(0.5) ? 1 : 2;
        sut_deliver(h.sut, below(pending), fate);
    } else if ((r -= w_log) < 0) {
        sut_log_step(h.sut, chance(0.04));
    } else if ((r -= w_clock) < 0) {
        int64_t idle = (int64_t)h.cfg.idle_ms,
                reorder = (int64_t)h.cfg.reorder_ms;
        int64_t steps[] = {1,        1,           2,
                           5,        reorder / 2, reorder + 1,
                           idle / 2, idle + 1,    (int64_t)h.cfg.linger_ms + 1};
        tick(steps[below(sizeof steps / sizeof *steps)]);
    } else {
        int st = h.cfg.store;
        if (st != SIM_STORE_FAKE && chance(0.3)) {
            lose_inflight(-1);
            barrier(st == SIM_STORE_LOG ? SIM_BAR_CRASH_LOG
                                        : SIM_BAR_CRASH_MEM);
            sut_crash(h.sut, below(4));
        } else if (st == SIM_STORE_FAKE && h.inflight == 0 && !h.snapshot) {
            barrier(SIM_BAR_SNAPSHOT);
            sut_snapshot(h.sut);
            h.snapshot = true;
        } else if (st == SIM_STORE_FAKE && h.inflight == 0 && chance(0.5)) {
            barrier(SIM_BAR_ROLLBACK);
            sut_rollback(h.sut);
        } else if (st == SIM_STORE_FAKE && chance(0.3)) {
            int rep = (int)below((uint64_t)h.cfg.replicas);
            lose_inflight(rep);
            h.incarnation[rep]++;
            sut_kill(h.sut, rep);
        }
    }
}

/* Every request answered: scans end, the store and the log answer, the
 * clock moves. False when one never is. */
static bool drain(void)
{
    for (int i = 0; i < 20000 && h.inflight > 0; i++) {
        sim_req *q;
        while ((q = nth(SIM_REQ_SCANNING, 0, NULL)) != NULL) {
            q->state = SIM_REQ_ENDING;
            sut_scanned(h.sut, q, true);
        }
        while (sut_pending(h.sut) > 0)
            sut_deliver(h.sut, 0, 0);
        while (sut_log_waiting(h.sut))
            sut_log_step(h.sut, false);
        if (h.inflight > 0)
            tick(1);
    }
    return h.inflight == 0;
}

/* For the landed tree (sut_landed): which of issue 70's items a failure
 * looks like, from its history (a guess, for the tally printed at the
 * end; the report is the evidence). */
static const char *classify(int id, size_t stuck)
{
    const sim_op *ops = h.ops[id], *o = &ops[stuck];
    int before = -1; /* the last barrier before o */
    for (size_t b = 0; b < h.nbars; b++)
        if (h.bars[b].ev < o->admit_ev)
            before = h.bars[b].kind;
    if (h.cfg.store == SIM_STORE_FAKE && o->c.number) {
        for (size_t i = 0; i < stuck; i++) {
            const sim_op *p = &ops[i];
            if (p->c.start && p->replica == o->replica
                && p->admit_ev < o->admit_ev && p->end_ev > o->admit_ev
                && o->outcome != SIM_OK)
                return p->outcome == SIM_OK
                           ? "5 a numbered chunk behind its start refused"
                           : "a chunk behind a start that failed";
        }
    }
    if (h.cfg.store == SIM_STORE_FAKE && before == SIM_BAR_ROLLBACK) {
        /* a write answered between the snapshot and the rollback: lost */
        uint64_t snap = 0, back = 0;
        for (size_t b = 0; b < h.nbars; b++)
            if (h.bars[b].ev < o->admit_ev) {
                if (h.bars[b].kind == SIM_BAR_SNAPSHOT)
                    snap = h.bars[b].ev;
                else if (h.bars[b].kind == SIM_BAR_ROLLBACK)
                    back = h.bars[b].ev;
            }
        for (size_t i = 0; i < stuck; i++)
            if (ops[i].outcome == SIM_OK && ops[i].end_ev > snap
                && ops[i].end_ev < back)
                return "3 versions repeat after a rollback";
    }
    if (h.cfg.store == SIM_STORE_LOG && before == SIM_BAR_CRASH_LOG) {
        /* a chunk that arrived before a start and ended after it */
        for (size_t i = 0; i < stuck; i++)
            for (size_t j = 0;
                 ops[i].c.start && ops[i].outcome == SIM_OK && j < i; j++)
                if ((ops[j].outcome == SIM_OK || ops[j].outcome == SIM_UNKNOWN)
                    && ops[j].end_ev > ops[i].end_ev)
                    return "1 the old sequence back after a restart";
        /* a start as its id expired: nothing answered for idle_ms before */
        for (size_t i = 0; i < stuck; i++) {
            if (!ops[i].c.start || ops[i].outcome != SIM_OK)
                continue;
            int64_t last = -1;
            for (size_t j = 0; j < i; j++)
                if (ops[j].outcome == SIM_OK && ops[j].end_ms > last)
                    last = ops[j].end_ms;
            if (last >= 0 && ops[i].admit_ms - last >= (int64_t)h.cfg.idle_ms
                && o->outcome == SIM_INVALID)
                return "2 a start lost at its id's expiry, after a restart";
        }
        return "other, after a restart";
    }
    /* a start answered before a chunk that arrived ahead of it */
    for (size_t i = 0; i < stuck; i++)
        for (size_t j = 0; ops[i].c.start && ops[i].outcome == SIM_OK && j < i;
             j++)
            if (ops[j].replica == ops[i].replica && ops[j].outcome == SIM_OK
                && ops[j].end_ev > ops[i].end_ev && !ops[j].c.number)
                return "a start went ahead of the chunks before it";
    for (size_t i = 0; i < stuck; i++) {
        const sim_op *p = &ops[i];
        if (p->c.start && p->replica == o->replica
            && (p->outcome == SIM_NOT_RUN || p->outcome == SIM_FULL)
            && p->end_ev < o->admit_ev && o->outcome == SIM_INVALID
            && h.cfg.store != SIM_STORE_FAKE)
            return "4 a failed start destroyed the live sequence";
    }
    return "other";
}

static const char *last_class;
static bool quiet; /* --keep-going: a line a failure */

static bool check_all(uint64_t seed, char *report, size_t len)
{
    sim_timers t = {(int64_t)h.cfg.idle_ms,
                    (int64_t)h.cfg.linger_ms,
                    (int64_t)h.cfg.reorder_ms,
                    sut_landed,
                    sut_landed,
                    h.cfg.store == SIM_STORE_FAKE,
                    h.cfg.store != SIM_STORE_MEMORY};
    for (int id = 0; id < h.cfg.ids; id++) {
        size_t stuck;
        if (!sim_check(&t, h.ops[id], h.nops[id], h.bars, h.nbars, report, len,
                       &stuck)) {
            last_class = sut_landed && stuck < h.nops[id] ? classify(id, stuck)
                                                          : "other";
            if (quiet)
                return false;
            fprintf(
                stderr,
                "sim_seq: history %" PRIu64
                " (replay with TALLY_SIM_SEED=%" PRIu64
                " sim_seq --histories 1), store %s, %d replicas, idle %" PRIu64
                " linger %" PRIu64 " reorder %" PRIu64 " ms: id %d:\n%s",
                seed, seed,
                h.cfg.store == SIM_STORE_MEMORY ? "memory"
                : h.cfg.store == SIM_STORE_LOG  ? "log"
                                                : "fake",
                h.cfg.replicas, h.cfg.idle_ms, h.cfg.linger_ms,
                h.cfg.reorder_ms, id, report);
            for (size_t b = 0; b < h.nbars; b++)
                fprintf(stderr, "  barrier %d at ev %" PRIu64 "\n",
                        h.bars[b].kind, h.bars[b].ev);
            return false;
        }
    }
    return true;
}

static bool run_history(uint64_t seed, int store)
{
    static char report[1 << 16];
    rng = seed;
    memset(&h, 0, sizeof h);
    h.cfg.store = store >= 0 ? store : (int)below(3);
    h.cfg.replicas = h.cfg.store == SIM_STORE_FAKE ? 1 + (int)below(3) : 1;
    if (serial && h.cfg.store == SIM_STORE_FAKE)
        h.cfg.replicas = 2 + (int)below(2);
    h.cfg.ids = 1 + (int)below(MAX_IDS);
    h.cfg.idle_ms = 100;
    h.cfg.linger_ms = chance(0.2) ? 0 : 40;
    h.cfg.reorder_ms = 30;
    h.cfg.seed = rnd();
    h.now = 1000;
    h.sut = sut_new(&h.cfg);
    int steps = 20 + (int)below(60);
    for (int i = 0; i < steps; i++)
        one_step();
    bool drained = drain();
    if (!drained)
        fprintf(stderr,
                "sim_seq: history %" PRIu64 ": %zu requests never answered\n",
                seed, h.inflight);
    bool ok = drained && check_all(seed, report, sizeof report);
    sut_free(h.sut);
    return ok;
}

typedef struct {
    const char *name;
    uint64_t count, first, seed;
} failure_class;
static failure_class classes[16];
static size_t nclasses;

static void tally(const char *name, uint64_t at, uint64_t seed)
{
    size_t i = 0;
    while (i < nclasses && strcmp(classes[i].name, name) != 0)
        i++;
    if (i == nclasses && nclasses < 16)
        classes[nclasses++] = (failure_class){name, 0, at, seed};
    if (i < 16)
        classes[i].count++;
}

int main(int argc, char **argv)
{
    double seconds = 5;
    uint64_t histories = 0;
    int store = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--keep-going") == 0) {
            quiet = true;
        } else if (strcmp(a, "--serial") == 0) {
            serial = true;
        } else if (strcmp(a, "--seconds") == 0 && v != NULL) {
            seconds = strtod(v, NULL);
            i++;
        } else if (strcmp(a, "--histories") == 0 && v != NULL) {
            histories = strtoull(v, NULL, 10);
            i++;
        } else if (strcmp(a, "--store") == 0 && v != NULL) {
            store = strcmp(v, "memory") == 0 ? SIM_STORE_MEMORY
                    : strcmp(v, "log") == 0  ? SIM_STORE_LOG
                    : strcmp(v, "fake") == 0 ? SIM_STORE_FAKE
                                             : -1;
            i++;
        } else {
            fprintf(stderr,
                    "usage: sim_seq [--seconds S | --histories N] [--store "
                    "memory|log|fake] [--serial] [--keep-going]\n");
            return 2;
        }
    }
    const char *env = getenv("TALLY_SIM_SEED");
    uint64_t seed = env != NULL ? strtoull(env, NULL, 0)
                                : (uint64_t)time(NULL) * 2654435761u;
    printf("sim_seq: seed %" PRIu64 " (replay with TALLY_SIM_SEED=%" PRIu64
           ")\n",
           seed, seed);
    fflush(stdout);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t n = 0, failed = 0;
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        double el = (double)(t.tv_sec - t0.tv_sec)
                    + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
        if (histories ? n >= histories : el >= seconds)
            break;
        uint64_t hs = n == 0 ? seed : seed + n * 0x9e3779b97f4a7c15ull;
        n++;
        if (!run_history(hs, store)) {
            failed++;
            if (!quiet)
                break;
            tally(last_class != NULL ? last_class : "never answered", n, hs);
        }
    }
    for (size_t i = 0; i < nclasses; i++)
        printf("sim_seq: %-55s %6" PRIu64 " histories, the first after %" PRIu64
               " (TALLY_SIM_SEED=%" PRIu64 ")\n",
               classes[i].name, classes[i].count, classes[i].first,
               classes[i].seed);
    clock_gettime(CLOCK_MONOTONIC, &t);
    double el =
        (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
    printf("sim_seq: %" PRIu64 " histories in %.1f s (%.0f a second), %" PRIu64
           " failed\n",
           n, el, (double)n / (el > 0 ? el : 1), failed);
    return failed ? 1 : 0;
}
