/*
 * sim_model.h - the sequence rules (docs/sequences.md) as a reference
 * model, and a checker that judges one sequence id's history against
 * it: the simulation's oracle (tests/sim/sim_seq.c).
 *
 * A history is what the clients saw of one id: each chunk as sent, on
 * which replica, when it arrived and when its answer came (event
 * numbers, and the fake clock's milliseconds), and the answer. The
 * checker searches for a serial order of the chunks' decisions that
 * explains every answer, as Knossos and Porcupine check a history for
 * linearizability, under the orders the rules promise:
 *   - a chunk answered before another arrived was decided before it;
 *   - on one replica, chunks are decided in the order they arrived,
 *     but a numbered chunk that waits for the chunks before it lets
 *     those that arrive meanwhile go ahead (docs/sequences.md, "One
 *     rule for each race").
 * A chunk whose answer says nothing (a 503 from the store, a crash)
 * may or may not have had its effect; one that failed before its
 * decision (its scan missed its deadline, its client left) had none.
 * Where the checker cannot know a timer's state (an expiry that may
 * have come within a decision's window), it keeps both.
 *
 * Barriers split a history where the whole store changed at once: a
 * crash of a tallyd whose sequences are in memory (all gone), a crash
 * with the log (what was logged stays), a snapshot of the store and a
 * rollback to it. None comes while a chunk of the id is in flight but
 * a crash, whose chunks in flight are then unknown.
 *
 * Threading: none; pure functions of their arguments.
 */
#ifndef TALLY_SIM_MODEL_H
#define TALLY_SIM_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_DATA 4
#define SIM_MAX_OPS 64 /* a segment's chunks of one id, at most */

/* A chunk as sent: 1-D, int64 (dtype 0) or int32 (dtype 1). */
typedef struct {
    bool start, end;
    uint64_t number; /* 0: unnumbered */
    uint8_t dtype;
    uint8_t n;
    int64_t data[SIM_MAX_DATA];
} sim_chunk;

/* What an answer says. */
enum {
    SIM_OK,       /* 200, with its values */
    SIM_INVALID,  /* 400 */
    SIM_CONFLICT, /* 409 ALREADY_EXISTS */
    SIM_GAP,      /* 409 FAILED_PRECONDITION: waited, nothing came */
    SIM_FULL,     /* 503: no room for another sequence */
    SIM_UNKNOWN,  /* a 503 from the store, or no answer (a crash): it
                   * may or may not have had its effect */
    SIM_NOT_RUN   /* failed before its decision (a deadline, a client
                   * that left): no effect */
};

typedef struct {
    uint32_t replica; /* a replica's incarnation: a restarted one is new */
    sim_chunk c;
    uint64_t admit_ev, end_ev; /* event numbers */
    int64_t admit_ms, end_ms;  /* the fake clock */
    int outcome;
    int64_t out[SIM_MAX_DATA]; /* SIM_OK's values */
    char words[200];           /* the refusal's, for the report */
} sim_op;

typedef struct {
    int64_t idle, linger, reorder; /* ms: the server's settings */
    /* An idle sequence may still be there at any time after its expiry
     * (for a server whose idle timer may run later than the rules say:
     * the landed tree's memory backend, whose pending chunks kept it). */
    bool lenient_idle;
    /* A refusal may be decided as its chunk arrives, ahead of the chunks
     * before it (the landed tree's memory backend refused at admission). */
    bool lenient_order;
    /* Replicas share the store: each decides on the state it read last. */
    bool shared;
    /* A repeat's renewal of the idle time may fail (the log's disk, a
     * store's lost write), and the repeat is answered all the same. */
    bool renew_may_fail;
} sim_timers;

enum {
    SIM_BAR_CRASH_MEM,
    SIM_BAR_CRASH_LOG,
    SIM_BAR_SNAPSHOT,
    SIM_BAR_ROLLBACK
};

typedef struct {
    int kind;
    uint64_t ev;
} sim_barrier;

/* Whether ops[0..n) (one id's, in the order they arrived) and the
 * barriers b[0..nb) (in event order) have an order the rules explain.
 * False: the report says which answer fits no state, and the history;
 * *stuck is that answer's op (n: none). */
bool sim_check(const sim_timers *t, const sim_op *ops, size_t n,
               const sim_barrier *b, size_t nb, char *report, size_t len,
               size_t *stuck);

/* The chunk's answer from a running sum `from`: inclusive prefix sums. */
void sim_sums(const sim_chunk *c, int64_t from, int64_t *out);

/* One line of a report: the op as sent and as answered. */
void sim_op_text(const sim_op *o, char *buf, size_t len);

#endif
