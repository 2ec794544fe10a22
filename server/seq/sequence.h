/*
 * sequence.h - running sums that outlive a request: the live sequences
 * of Triton's sequence extension, whatever door their chunks come
 * through, kept in one of three stores behind core/kv.h (memory; memory
 * with the log, --state-dir; Redis, --state-store) and decided by this
 * one engine, the same way over each.
 *
 * A sequence is one tensor cut along its scan axis into chunks, one
 * request each (sequence_id.h names them). Each chunk is scanned alone,
 * like any request; the engine joins them: a sequence's state (a record
 * of sequence_file.h's format under the store key "{n:ID}" or "{s:ID}")
 * holds its carries (engine/carry.h: the running sum of every line so
 * far, wider than the data) and the attributes its first chunk fixed
 * (dtype, axis, mode, the shape off the axis), and the carries are added
 * to each chunk's answer.
 *
 * How a chunk goes, for the one adapter (api/submit.c):
 *   1. seq_admit(), on the door's thread as the chunk arrives: reads the
 *      chunk's line totals from its input (before any in-place scan) and
 *      puts it in its sequence's line on this tallyd. It never waits.
 *   2. The chunk is scanned, as any request (at once, or queued).
 *   3. seq_finish(): ok, the scan is done and the chunk takes its turn
 *      in the line; or it failed (its deadline, its client gone), and it
 *      leaves the line having changed nothing. Then the carries are added
 *      to the chunk's answer (s->out, when it was applied or answered as
 *      a repeat) and s->done() is called, exactly once, on whatever
 *      thread ended it (the caller's, before seq_finish() returns, or a
 *      worker, the tick, the log writer, a store's loop), with no lock
 *      held: over memory, the worker that scanned it, while its answer
 *      is still in that core's cache.
 *   4. seq_answer(), on the door's thread: lets go of what the slot
 *      holds.
 * The chunk's decision, at its turn, reads its sequence's state, applies
 * the rules (seq_rules.h) and writes the new state by compare-and-set;
 * the chunk ends when the store has answered, so its answer never leaves
 * before its state is kept (in the log, in Redis).
 *
 * The line (docs/sequences.md, "One rule for each race"): on one tallyd
 * a sequence's chunks are decided one at a time, in the order they
 * arrived, but that a numbered chunk goes ahead of numbered ones with
 * higher numbers, and a numbered chunk that waits for the chunks before
 * it (early: its predecessors not all applied) lets the chunks that
 * arrive meanwhile go ahead of it. An early chunk waits up to
 * reorder_ms from its arrival, and while every chunk it waits for is in
 * the line, however long they take; then it is refused (STATUS_CHUNK_GAP).
 * A chunk whose request's deadline passes while it waits for its turn
 * fails (STATUS_DEADLINE) having changed nothing. A chunk that arrived
 * behind a start that did not start its sequence (a failed scan, a full
 * store, a store that did not answer) is an orphan: an unnumbered one is
 * refused, a numbered one waits for chunk 1 as an early one does, unless
 * the sequence it finds takes it.
 *
 * Across tallyds on one store (--state-store), each one's line orders
 * its own chunks; the store's compare-and-set orders the rest, and an
 * early chunk reads again (1, 2, 4 ... 16 ms apart) for another tallyd's
 * chunk to land.
 *
 * Limits: a local store bounds its records (max_sequences live ones,
 * max_bytes of them: STATUS_SEQUENCES_FULL beyond); with a shared store,
 * max_sequences chunks in flight on this tallyd at once and max_bytes of
 * their carries, and the cache of states it keeps. A chunk whose carries
 * alone pass max_bytes is refused at admission (STATUS_TOO_LARGE).
 *
 * Ownership: the table owns its store. Threading: every function may be
 * called from any thread, but for seq_loop_open() and seq_loop_close()
 * (on the thread of the door's loop: the loop thread, a gRPC loop thread,
 * an HTTP thread) and seq_close() and seq_table_free() (the loop thread,
 * once no chunk is admitted). The table's mutex guards its lines, its
 * cache and its counts; a chunk belongs to one thread at a time: the
 * submitter's until seq_finish(), then the turn's holder's.
 */
#ifndef TALLY_SEQUENCE_H
#define TALLY_SEQUENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "carry.h"
#include "kv.h"
#include "sequence_id.h"
#include "status.h"
#include "tensor.h"
#include "textbuf.h"

typedef struct seq_table seq_table;
typedef struct seq_chunk seq_chunk;

typedef struct {
    unsigned max_sequences; /* live sequences at most; 0: sequences off */
    uint64_t idle_ms;       /* dropped after this long with no answer */
    uint64_t linger_ms;     /* an ended one takes late chunks this long */
    uint64_t reorder_ms;    /* an early numbered chunk waits this long */
    size_t max_bytes;       /* the carries of every sequence, in all */
    /* a shared store's answer is waited for this long at most (less when
     * the request's own deadline comes first) */
    uint64_t store_timeout_ms;
    /* The monotonic clock, in ns; NULL: now_ns(). */
    uint64_t (*clock)(void *user);
    void *clock_user;
} seq_options;

/* A chunk's place in its sequence, embedded in the submitter's record
 * (zeroed before seq_admit()), valid until seq_answer() has returned. */
typedef struct seq_slot seq_slot;
struct seq_slot {
    /* The submitter's, before seq_admit(): the chunk's end (step 3): st
     * STATUS_OK when it was applied, answered as a repeat, or did not
     * run (ok false); else a refusal or a failure, with msg. */
    void (*done)(seq_slot *s, status_code st, const char *msg);
    /* The request's own deadline (the monotonic clock; 0: none): a chunk
     * waiting for its turn fails at it, and a shared store's answer is
     * waited for until then at most. */
    uint64_t deadline_ns;
    /* The loop its door serves the request on, as seq_loop_open() gave
     * it there; NULL: none. A shared store reads and writes the chunk's
     * state on that loop, and done() then runs on its thread. */
    void *near;
    /* The chunk's scanned answer (packed, its lines' view), to which the
     * carries are added before done(STATUS_OK); NULL: none (a test's
     * chunk without data). The submitter's buffer, written by the thread
     * that ends the chunk, before done(). */
    void *out;
    /* The table's, from seq_admit() to seq_answer(). */
    eng_lines lines;
    eng_carry *totals; /* the chunk's line totals: &one, or malloc'd */
    eng_carry one;
    void *copy; /* float16 and bfloat16: the input, kept (carry.h) */
    bool start, end, numbered;
    uint64_t chunk;        /* numbered: its number */
    unsigned char sha[32]; /* numbered: its input's SHA-256 */
    eng_carry *base;       /* after done(STATUS_OK): the carries added */
    seq_chunk *c;          /* the engine's, until done() */
};

/* A table with o's settings over store (taken: closed with the table;
 * NULL, or o->max_sequences 0: sequences off); NULL when memory runs out
 * (store is closed). Free with seq_table_free() once no chunk is
 * admitted; NULL is a no-op. */
seq_table *seq_table_new(const seq_options *o, kv *store);
void seq_table_free(seq_table *t);

/* What the store must finish before the process ends (the log flushed
 * and closed), once no chunk is admitted; before seq_table_free(). */
void seq_close(seq_table *t);

/* Testing (a crash): frees the table and the chunks in flight without a
 * word to their submitters, and leaves the store alone. */
void seq_table_drop(seq_table *t);

/* Whether the table keeps sequences at all. */
bool seq_enabled(const seq_table *t);

/* The idle time after which a sequence is dropped, in ms. */
uint64_t seq_idle_ms(const seq_table *t);

/* Admits a chunk of sequence p (p->has_id) whose scan is d (packed,
 * collapsed as l; in: its input, read for its totals). STATUS_OK: s is
 * admitted, and seq_finish() must follow. Otherwise, with msg, nothing
 * changed: STATUS_INVALID (sequences off), STATUS_SEQUENCES_FULL (a
 * shared store's limits on chunks in flight), STATUS_TOO_LARGE (the
 * chunk's carries alone pass max_bytes) or STATUS_NOMEM. */
status_code seq_admit(seq_table *t, const seq_params *p, const eng_scan_desc *d,
                      const eng_lines *l, const void *in, seq_slot *s,
                      char *msg, size_t msglen);

/* Ends an admitted slot's scan (step 3): ok, the chunk takes its turn;
 * not, it leaves having changed nothing. s->done() comes once, maybe
 * before this returns. */
void seq_finish(seq_table *t, seq_slot *s, bool ok);

/* After done() (step 4): lets go of what s holds. Once per admitted
 * slot. */
void seq_answer(seq_slot *s);

/* A door's loop, as the store serves it: a shared store's connection on
 * that loop (a receiver on mb, the loop's mailbox), for the slots
 * admitted there (seq_slot's near). NULL: the store keeps nothing there.
 * Call on the loop's thread once it is made, and seq_loop_close() there
 * before it ends; the table outlives both. */
struct mailbox;
void *seq_loop_open(seq_table *t, struct mailbox *mb);
void seq_loop_close(seq_table *t, void *near);

/* The tick: the store drops what expired; early chunks whose wait ran
 * out, or whose read of a shared store is due, decide again; chunks
 * waiting for their turn past their request's deadline fail. */
void seq_sweep(seq_table *t);

/* Stops every running sum where it is, for a drain that timed out: from
 * now on a chunk that would write fails with STATUS_DRAINING, and this
 * waits, up to wait_ms, for the writes in flight. True: none is. Not
 * undone. */
bool seq_freeze(seq_table *t, uint64_t wait_ms);

/* Live sequences now. */
size_t seq_live(seq_table *t);

/* Appends the table's section of /metrics: live sequences, their
 * carries' bytes, the counters of started, ended, expired and refused
 * ones, and the store's own (the log's, Redis's). */
void seq_render_metrics(seq_table *t, textbuf *o);

#endif
