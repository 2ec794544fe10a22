/*
 * sim_sut.h - what the simulation (sim_seq.c) drives: the sequences'
 * engine over one of its stores, as one or more replicas, with every
 * source of concurrency in the simulation's hands: when a chunk's scan
 * ends, when the store answers, when the log writer runs, the clock.
 *
 * The simulation hands a request to a replica (sut_submit); the
 * adapter tells it back, through sim_scan() and sim_answer(), when the
 * request may be scanned and what it was answered. Everything runs on
 * the simulation's one thread.
 */
#ifndef TALLY_SIM_SUT_H
#define TALLY_SIM_SUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sim_model.h"

enum { SIM_STORE_MEMORY, SIM_STORE_LOG, SIM_STORE_FAKE };

typedef struct {
    int store;
    int replicas; /* SIM_STORE_FAKE: 1 to 3; else 1 */
    int ids;      /* sequence ids in play */
    uint64_t idle_ms, linger_ms, reorder_ms;
    uint64_t seed;
} sim_config;

typedef struct sim_req sim_req;
struct sim_req {
    size_t op;   /* its op in the history (sim_seq.c) */
    int id;      /* which id: 0 .. ids - 1 */
    int replica; /* which replica's slot */
    sim_chunk c;
    int state;  /* SIM_REQ_* */
    void *impl; /* the adapter's */
};

enum {
    SIM_REQ_WAITING,  /* admitted, not yet to be scanned */
    SIM_REQ_SCANNING, /* being scanned: sut_scanned() ends it */
    SIM_REQ_ENDING,   /* scanned: waits for its answer */
    SIM_REQ_DONE
};

typedef struct sim_sut sim_sut;

/* Whether the adapter drives the tree as it landed at a44b07c, whose
 * rules differ from docs/sequences.md's in two ways the simulation then
 * leaves alone: a repeat with other flags was a repeat, and an idle
 * sequence with a chunk in flight was kept past its expiry. */
extern const bool sut_landed;

/* The simulation's side, which the adapter calls: the clock (ms), q may
 * be scanned now, q's answer (a status_code, its words, and for
 * STATUS_OK its values). */
int64_t sim_now_ms(void);
void sim_scan(sim_req *q);
void sim_answer(sim_req *q, int status, const char *words,
                const int64_t *values);

sim_sut *sut_new(const sim_config *cfg);
void sut_free(sim_sut *s);

/* q arrives at its replica. */
void sut_submit(sim_sut *s, sim_req *q);
/* q's scan ends: ok, or failed (its deadline, its client gone). */
void sut_scanned(sim_sut *s, sim_req *q, bool ok);
/* The tick's sweep. */
void sut_sweep(sim_sut *s);

/* The store's answers waiting to be delivered (fake store), and one
 * delivered: fate 0 applied, 1 lost before it was applied, 2 applied
 * and its answer lost. */
size_t sut_pending(sim_sut *s);
void sut_deliver(sim_sut *s, size_t i, int fate);

/* The log's writer (the log store): whether records wait, and one
 * batch written (or its write failed: a full disk). */
bool sut_log_waiting(sim_sut *s);
void sut_log_step(sim_sut *s, bool fail);

/* A crash of every replica (memory, log): the requests in flight are
 * never answered (the simulation marks them), and the replicas start
 * again from what the store kept; for the log, only the first `keep`
 * of the records written since the last flush survive (a power cut in
 * the middle of a batch). */
void sut_crash(sim_sut *s, uint64_t keep);

/* The fake store: a snapshot, and a rollback to it (Redis restarted
 * from an older snapshot, or a failover to a replica that lagged). */
void sut_snapshot(sim_sut *s);
void sut_rollback(sim_sut *s);

/* One replica killed and started again (fake store): its requests in
 * flight are never answered. */
void sut_kill(sim_sut *s, int replica);

/* Drops a request the simulation gave up on (a crash, a kill), before
 * its replica goes: whether it may have had its effect (it was deciding,
 * its write on its way to the store or the log); the adapter frees what
 * it holds for it. */
bool sut_forget(sim_sut *s, sim_req *q);

#endif
