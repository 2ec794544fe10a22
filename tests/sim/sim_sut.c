/*
 * sim_sut.c - the simulation's adapter (sim_sut.h): the sequences'
 * engine (server/seq/sequence.h) over each of its stores, every clock
 * the simulation's:
 *   - memory (store/kv_mem.h);
 *   - the log (store/kv_log.h) in a directory of its own, its writer run
 *     batch by batch when the simulation says (manual), a crash cutting
 *     the batch it was writing anywhere, and the store read back;
 *   - the fake store (tests/server/fake_kv.h) under one to three
 *     replicas, each a table of its own, its answers delivered, lost or
 *     rolled back when the simulation says.
 */
#define _GNU_SOURCE /* mkdtemp */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake_kv.h"
#include "kv_log.h"
#include "kv_mem.h"
#include "list.h"
#include "seq_int.h"
#include "sequence.h"
#include "sim_sut.h"
#include "status.h"
#include "temp_dir.h"

const bool sut_landed = false;

#define MAX_REQS 512

typedef struct {
    sim_req *q;
    seq_slot slot;
    int64_t in64[SIM_MAX_DATA], out64[SIM_MAX_DATA];
    int32_t in32[SIM_MAX_DATA], out32[SIM_MAX_DATA];
    eng_scan_desc d;
    eng_lines l;
    seq_params p;
    seq_table *t;
    bool ok, forgotten, used;
} nreq;

struct sim_sut {
    sim_config cfg;
    seq_options o;
    kv_mem_options mo;
    char dir[128]; /* the log's */
    kv *store;     /* memory, the log */
    seq_table *t;
    fake_kv *f;
    seq_table *rep[3];
    nreq reqs[MAX_REQS];
};

/* The clocks: monotonic ns and wall ms, both the simulation's. */
static uint64_t mono_ns(void *user)
{
    (void)user;
    return (uint64_t)sim_now_ms() * 1000000u;
}

static int64_t wall(void *user)
{
    (void)user;
    return 1700000000000 + sim_now_ms();
}

static uint64_t fake_ms(void *user)
{
    (void)user;
    return (uint64_t)sim_now_ms();
}

static int kind(status_code st)
{
    switch (st) {
    case STATUS_OK: return SIM_OK;
    case STATUS_INVALID: return SIM_INVALID;
    case STATUS_CHUNK_CONFLICT: return SIM_CONFLICT;
    case STATUS_CHUNK_GAP: return SIM_GAP;
    case STATUS_SEQUENCES_FULL: return SIM_FULL;
    case STATUS_DEADLINE: return SIM_NOT_RUN;
    default: return SIM_UNKNOWN;
    }
}

/* The chunk's end (sequence.h's done): its answer, its carries added. */
static void on_done(seq_slot *slot, status_code st, const char *msg)
{
    nreq *r = container_of(slot, nreq, slot);
    seq_answer(slot);
    if (r->forgotten)
        return;
    int64_t v[SIM_MAX_DATA];
    for (int i = 0; i < r->q->c.n; i++)
        v[i] = r->q->c.dtype ? r->out32[i] : r->out64[i];
    sim_req *q = r->q;
    q->impl = NULL;
    sim_answer(q, st == STATUS_OK && !r->ok ? SIM_NOT_RUN : kind(st),
               st != STATUS_OK ? msg : NULL, v);
}

/* ------------------------------------------------------------ stores */

static seq_table *local_table(sim_sut *s)
{
    char msg[512];
    if (s->cfg.store == SIM_STORE_MEMORY) {
        s->store = kv_mem_new(&s->mo);
    } else {
        kv_log_options lo = {.dir = s->dir,
                             .fsync = KV_FSYNC_ALWAYS,
                             .mem = s->mo,
                             .manual = true,
                             .prealloc = 4096};
        s->store = kv_log_open(&lo, msg, sizeof msg);
        if (s->store == NULL) {
            fprintf(stderr, "sim_seq: the log will not open: %s\n", msg);
            abort();
        }
    }
    return seq_table_new(&s->o, s->store);
}

sim_sut *sut_new(const sim_config *cfg)
{
    sim_sut *s = calloc(1, sizeof *s);
    s->cfg = *cfg;
    s->o = (seq_options){.max_sequences = 64,
                         .idle_ms = cfg->idle_ms,
                         .linger_ms = cfg->linger_ms,
                         .reorder_ms = cfg->reorder_ms,
                         .max_bytes = 1 << 20,
                         .store_timeout_ms = 2000,
                         .clock = mono_ns};
    s->mo = (kv_mem_options){.max_records = 64,
                             .max_bytes = 1 << 20,
                             .mono_ns = mono_ns,
                             .wall_ms = wall,
                             .seed = cfg->seed | 1};
    if (cfg->store == SIM_STORE_FAKE) {
        s->f = fake_kv_new(cfg->seed, fake_ms, NULL);
        for (int i = 0; i < cfg->replicas; i++)
            s->rep[i] = seq_table_new(&s->o, fake_kv_connect(s->f));
        return s;
    }
    if (cfg->store == SIM_STORE_LOG) {
        const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(s->dir, sizeof s->dir, "%s/tally-sim-XXXXXX", base);
        if (mkdtemp(s->dir) == NULL) {
            perror("sim_seq: mkdtemp");
            abort();
        }
    }
    s->t = local_table(s);
    return s;
}

void sut_free(sim_sut *s)
{
    seq_table_free(s->t);
    for (int i = 0; i < 3; i++)
        seq_table_free(s->rep[i]);
    fake_kv_free(s->f);
    if (s->dir[0])
        temp_dir_remove(s->dir);
    free(s);
}

/* ------------------------------------------------------------ requests */

void sut_submit(sim_sut *s, sim_req *q)
{
    nreq *r = NULL;
    for (size_t i = 0; i < MAX_REQS && r == NULL; i++)
        if (!s->reqs[i].used)
            r = &s->reqs[i];
    memset(r, 0, sizeof *r);
    r->used = true;
    r->q = q;
    q->impl = r;
    r->t = s->t != NULL ? s->t : s->rep[q->replica];
    char msg[512];
    seq_id_number(&r->p, 101 + (uint64_t)q->id, msg, sizeof msg);
    r->p.start = q->c.start;
    r->p.end = q->c.end;
    r->p.has_flags = q->c.start || q->c.end;
    if (q->c.number)
        seq_chunk_number(&r->p, q->c.number, msg, sizeof msg);
    r->d = (eng_scan_desc){.dtype = q->c.dtype ? TX_INT32 : TX_INT64,
                           .rank = 1,
                           .shape = {q->c.n}};
    eng_lines_from_desc(&r->d, &r->l, msg, sizeof msg);
    for (int i = 0; i < q->c.n; i++) {
        r->in64[i] = q->c.data[i];
        r->in32[i] = (int32_t)q->c.data[i];
    }
    r->slot.done = on_done;
    r->slot.out = q->c.dtype ? (void *)r->out32 : (void *)r->out64;
    const void *in = q->c.dtype ? (const void *)r->in32 : (const void *)r->in64;
    status_code st =
        seq_admit(r->t, &r->p, &r->d, &r->l, in, &r->slot, msg, sizeof msg);
    if (st != STATUS_OK) {
        r->used = false;
        q->impl = NULL;
        sim_answer(q, kind(st), msg, NULL);
        return;
    }
    sim_scan(q);
}

void sut_scanned(sim_sut *s, sim_req *q, bool ok)
{
    (void)s;
    nreq *r = q->impl;
    r->ok = ok;
    int64_t a = 0;
    for (int i = 0; i < q->c.n; i++) {
        a += q->c.data[i];
        r->out64[i] = a;
        r->out32[i] = (int32_t)a;
    }
    seq_finish(r->t, &r->slot, ok);
}

void sut_sweep(sim_sut *s)
{
    seq_sweep(s->t);
    for (int i = 0; i < 3; i++)
        seq_sweep(s->rep[i]);
}

bool sut_forget(sim_sut *s, sim_req *q)
{
    nreq *r = q->impl;
    q->impl = NULL;
    if (r == NULL)
        return false;
    r->forgotten = true;
    /* a memory store answers a write as it takes it: only a chunk at its
     * turn over the log or the fake store may have written */
    return s->cfg.store != SIM_STORE_MEMORY && r->slot.c != NULL
           && r->slot.c->state == CH_TURN;
}

/* ------------------------------------------------------------ the store */

size_t sut_pending(sim_sut *s)
{
    return s->f != NULL ? fake_kv_pending(s->f) : 0;
}

void sut_deliver(sim_sut *s, size_t i, int fate)
{
    fake_kv_deliver(s->f, i, fate == 0   ? FAKE_APPLY
                             : fate == 1 ? FAKE_LOST_BEFORE
                                         : FAKE_LOST_AFTER);
}

bool sut_log_waiting(sim_sut *s)
{
    return s->cfg.store == SIM_STORE_LOG && kv_log_waiting(s->store);
}

void sut_log_step(sim_sut *s, bool fail)
{
    if (fail)
        kv_log_fail_writes(s->store, ENOSPC, 0, 0);
    kv_log_step(s->store);
    if (fail)
        kv_log_fail_writes(s->store, 0, 0, 0);
}

void sut_crash(sim_sut *s, uint64_t keep)
{
    seq_table_drop(s->t); /* its chunks in flight: lost, unanswered */
    if (s->cfg.store == SIM_STORE_LOG)
        kv_log_crash(s->store, keep);
    else
        s->store->ops->close(s->store);
    for (size_t i = 0; i < MAX_REQS; i++)
        s->reqs[i].used = s->reqs[i].used && !s->reqs[i].forgotten;
    s->t = local_table(s);
}

void sut_snapshot(sim_sut *s)
{
    fake_kv_snapshot(s->f);
}

void sut_rollback(sim_sut *s)
{
    fake_kv_rollback(s->f);
}

void sut_kill(sim_sut *s, int replica)
{
    seq_table *old = s->rep[replica];
    s->rep[replica] = seq_table_new(&s->o, fake_kv_connect(s->f));
    /* its store's requests fail first, ending their chunks (forgotten);
     * the chunks not waiting on the store are dropped with it */
    seq_table_free(old);
}
