/*
 * sim_sut_landed.c - the simulation's adapter (sim_sut.h) for the tree
 * as it landed at a44b07c: the sequence table over its three backends
 * (seq_backend.h): memory, memory with a journal (the log's place: the
 * records it was handed, in the order it was handed them, written when
 * the simulation says), and the shared store's backend over the fake
 * store. A sweep's "gone" record reaches the journal after the sweep
 * has let its mutex go, as it does in tallyd: here one log step later
 * than the records before it, so a record appended meanwhile can come
 * first. A crash replays the written records into a new memory backend,
 * as seq_logged.c replays sequences.log.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_kv.h"
#include "seq_memory.h"
#include "seq_remote.h"
#include "sequence.h"
#include "sequence_file.h"
#include "sim_sut.h"
#include "status.h"

const bool sut_landed = true;

typedef struct {
    sim_req *q;
    sim_sut *s;
    seq_table *t;
    seq_slot slot;
    status_code refused;
    char why[512];
    int64_t in64[SIM_MAX_DATA], out64[SIM_MAX_DATA];
    int32_t in32[SIM_MAX_DATA], out32[SIM_MAX_DATA];
    eng_scan_desc d;
    eng_lines l;
    seq_params p;
    bool ok, forgotten;
} oreq;

typedef struct jrec jrec;
struct jrec {
    jrec *next;
    uint8_t *bytes;
    size_t len;
    seq_journal_done done;
    void *ctx;
};

struct sim_sut {
    sim_config cfg;
    seq_options o;
    seq_table *t; /* memory, log */
    jrec *queue, *deferred, *written;
    fake_kv *f;
    seq_table *rep[3];
};

static uint64_t clock_ns(void *user)
{
    (void)user;
    return (uint64_t)sim_now_ms() * 1000000u;
}

static uint64_t clock_ms(void *user)
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

static void tell(oreq *r, status_code st, const char *words)
{
    if (r->forgotten) {
        free(r);
        return;
    }
    int64_t v[SIM_MAX_DATA];
    for (int i = 0; i < r->q->c.n; i++)
        v[i] = r->q->c.dtype ? r->out32[i] : r->out64[i];
    sim_req *q = r->q;
    q->impl = NULL;
    sim_answer(q, !r->ok && st == STATUS_OK ? SIM_NOT_RUN : kind(st),
               st != STATUS_OK ? words : NULL, v);
    free(r);
}

/* ------------------------------------------------------------ the journal */

static jrec **tail_of(jrec **l)
{
    while (*l != NULL)
        l = &(*l)->next;
    return l;
}

static bool j_append(void *self, const seq_file_entry *x, seq_journal_done done,
                     void *ctx)
{
    sim_sut *s = self;
    jrec *j = calloc(1, sizeof *j);
    j->bytes = seq_file_encode(x, 1, &j->len);
    j->done = done;
    j->ctx = ctx;
    /* a sweep's gone record comes after its mutex is let go */
    *tail_of(x->state == SEQ_GONE ? &s->deferred : &s->queue) = j;
    return true;
}

static void jfree(jrec *j)
{
    while (j != NULL) {
        jrec *n = j->next;
        free(j->bytes);
        free(j);
        j = n;
    }
}

static seq_table *memory_table(sim_sut *s, bool journal)
{
    seq_backend *b = seq_memory_new(&s->o);
    if (journal) {
        seq_journal j = {j_append, s};
        seq_memory_set_journal(b, &j);
        for (jrec *r = s->written; r != NULL; r = r->next) {
            seq_file_entry *e;
            size_t n;
            char msg[256];
            if (seq_file_decode(r->bytes, r->len, 1, SIZE_MAX / 4, &e, &n, msg,
                                sizeof msg)) {
                seq_memory_restore(b, e, msg, sizeof msg);
                seq_file_free(e, n);
            }
        }
        seq_memory_expire_loaded(b);
    }
    return seq_table_new(&s->o, b);
}

/* ------------------------------------------------------------ the ops */

sim_sut *sut_new(const sim_config *cfg)
{
    sim_sut *s = calloc(1, sizeof *s);
    s->cfg = *cfg;
    s->o = (seq_options){.max_sequences = 64,
                         .idle_ms = cfg->idle_ms,
                         .linger_ms = cfg->linger_ms,
                         .reorder_ms = cfg->reorder_ms,
                         .max_bytes = 1 << 20,
                         .clock = clock_ns};
    if (cfg->store == SIM_STORE_FAKE) {
        s->f = fake_kv_new(cfg->seed, clock_ms, NULL);
        for (int i = 0; i < cfg->replicas; i++)
            s->rep[i] = seq_table_new(
                &s->o, seq_remote_new(fake_kv_connect(s->f), &s->o, 2000));
    } else {
        s->t = memory_table(s, cfg->store == SIM_STORE_LOG);
    }
    return s;
}

void sut_free(sim_sut *s)
{
    seq_table_free(s->t);
    for (int i = 0; i < 3; i++)
        seq_table_free(s->rep[i]);
    fake_kv_free(s->f);
    jfree(s->queue);
    jfree(s->deferred);
    jfree(s->written);
    free(s);
}

static void on_ready(seq_slot *slot)
{
    oreq *r = (oreq *)((char *)slot - offsetof(oreq, slot));
    if (r->refused != STATUS_OK) {
        r->ok = true;
        tell(r, r->refused, r->why);
        return;
    }
    if (!r->forgotten)
        sim_scan(r->q);
}

static void on_durable(seq_slot *slot, status_code st, const char *msg)
{
    oreq *r = (oreq *)((char *)slot - offsetof(oreq, slot));
    tell(r, st, msg);
}

void sut_submit(sim_sut *s, sim_req *q)
{
    oreq *r = calloc(1, sizeof *r);
    r->q = q;
    r->s = s;
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
    r->slot.ready = on_ready;
    r->slot.durable = on_durable;
    r->slot.refused = &r->refused;
    r->slot.why = r->why;
    r->slot.whylen = sizeof r->why;
    bool wait;
    const void *in = q->c.dtype ? (const void *)r->in32 : (const void *)r->in64;
    status_code st = seq_admit(r->t, &r->p, &r->d, &r->l, in, &r->slot, &wait,
                               msg, sizeof msg);
    if (st != STATUS_OK) {
        r->ok = true;
        tell(r, st, msg);
        return;
    }
    if (wait && seq_arm(r->t, &r->slot))
        return; /* on_ready comes */
    if (r->refused != STATUS_OK) {
        r->ok = true;
        tell(r, r->refused, r->why);
        return;
    }
    sim_scan(q);
}

void sut_scanned(sim_sut *s, sim_req *q, bool ok)
{
    (void)s;
    oreq *r = q->impl;
    r->ok = ok;
    int64_t a = 0;
    for (int i = 0; i < q->c.n; i++) {
        a += q->c.data[i];
        r->out64[i] = a;
        r->out32[i] = (int32_t)a;
    }
    void *out = q->c.dtype ? (void *)r->out32 : (void *)r->out64;
    bool later;
    char msg[512];
    status_code st =
        seq_finish_durable(r->t, &r->slot, ok, out, &later, msg, sizeof msg);
    if (!later)
        tell(r, st, msg);
}

void sut_sweep(sim_sut *s)
{
    seq_sweep(s->t);
    for (int i = 0; i < 3; i++)
        seq_sweep(s->rep[i]);
}

size_t sut_pending(sim_sut *s)
{
    return s->f != NULL ? fake_kv_pending(s->f) : 0;
}

void sut_deliver(sim_sut *s, size_t i, int fate)
{
    fake_kv_deliver(s->f, i,
                    fate == 0   ? FAKE_APPLY
                    : fate == 1 ? FAKE_LOST_BEFORE
                                : FAKE_LOST_AFTER);
}

bool sut_log_waiting(sim_sut *s)
{
    return s->queue != NULL || s->deferred != NULL;
}

void sut_log_step(sim_sut *s, bool fail)
{
    jrec *batch = s->queue;
    s->queue = s->deferred;
    s->deferred = NULL;
    while (batch != NULL) {
        jrec *j = batch;
        batch = j->next;
        j->next = NULL;
        seq_journal_done done = j->done;
        void *ctx = j->ctx;
        if (fail) {
            jfree(j);
        } else {
            *tail_of(&s->written) = j;
        }
        done(ctx, !fail,
             fail ? "cannot write the sequence log: No space left" : NULL);
    }
}

void sut_crash(sim_sut *s, uint64_t keep)
{
    jrec **at = &s->queue;
    while (*at != NULL && keep-- > 0) /* written, never acknowledged */
        at = &(*at)->next;
    jrec *lost = *at;
    *at = NULL;
    *tail_of(&s->written) = s->queue;
    s->queue = NULL;
    jfree(lost);
    jfree(s->deferred);
    s->deferred = NULL;
    seq_table *old = s->t;
    s->t = memory_table(s, s->cfg.store == SIM_STORE_LOG);
    (void)old; /* its pending chunks are lost with it, as in a crash */
    if (s->cfg.store != SIM_STORE_LOG)
        jfree(s->written), s->written = NULL;
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
    s->rep[replica] = seq_table_new(
        &s->o, seq_remote_new(fake_kv_connect(s->f), &s->o, 2000));
    seq_table_free(old); /* its requests' ends come to forgotten records */
}

void sut_forget(sim_sut *s, sim_req *q)
{
    (void)s;
    oreq *r = q->impl;
    if (r != NULL)
        r->forgotten = true;
    q->impl = NULL;
}
