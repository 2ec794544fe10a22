/*
 * sequence.h - running sums that outlive a request: the live sequences
 * of Triton's sequence extension, whatever door their chunks come
 * through.
 *
 * A sequence is one tensor cut along its scan axis into chunks, one
 * request each (sequence_id.h names them). Each chunk is scanned alone,
 * like any request; the table joins them: it keeps, per sequence, the
 * carries (engine/carry.h: the running sum of every line so far, wider
 * than the data) and the attributes its first chunk fixed (dtype, axis,
 * mode, the shape off the axis), and adds the carries to each chunk's
 * answer.
 *
 * How a chunk goes through, for the one adapter (api/submit.c):
 *   1. seq_admit(), on the door's thread as the chunk arrives: checks
 *      the chunk against its sequence (a refusal changes nothing), reads
 *      the chunk's line totals from its input (before any in-place scan),
 *      and takes its turn. The chunks of a sequence run one at a time in
 *      the order they were admitted: *wait says whether another chunk of
 *      the sequence holds the turn now.
 *   2. A waiting chunk's submitter suspends its request and, under its
 *      own suspend handshake, calls seq_arm(): true, and the slot's
 *      ready() will be called once its turn comes (on the thread that
 *      finishes the chunk before it); false, the turn came first, and
 *      the submitter goes on at once.
 *   3. The chunk is scanned (at once, or queued: scheduler.h).
 *   4. seq_finish(), exactly once for every admitted slot, on any thread:
 *      with ok, adds the carries to the answer and advances them by the
 *      chunk's totals; without (the scan failed, expired, was cancelled
 *      or never ran), leaves them as they were. Then hands the turn on.
 * Different sequences never wait for one another.
 *
 * Numbered chunks (sequence_chunk, from 1 at the start): a sequence whose
 * start carries a number is numbered, and takes only numbered chunks
 * (an unnumbered one only unnumbered ones). Its chunks run in their
 * numbers' order, whatever their arrival's: its waiting line is sorted,
 * and the turn passes only to a chunk whose number is due (the last
 * applied one's, or the next). At seq_finish(), with the turn:
 *   - n, the next: applied, as any chunk; the table keeps the carries
 *     before it and its input's SHA-256 (dtype, shape and bytes);
 *   - n again, the last applied, with the same input: a repeat, answered
 *     from the carries before it (the first answer again); nothing moves;
 *   - anything else (the same n with another input, or an older one):
 *     STATUS_CHUNK_CONFLICT, nothing moves.
 * A chunk that arrives early waits for those before it up to reorder_ms,
 * then seq_sweep() refuses it (STATUS_CHUNK_GAP) through its ready().
 * An ended numbered sequence stays idle_ms (whatever linger_ms) for a
 * repeat of its end chunk; any other chunk of it is a conflict. A
 * numbered start on a live numbered sequence is its chunk 1 (a retry),
 * not a new sequence.
 *
 * Lifetime: sequence_start creates the sequence (or starts a live one
 * again from zero: a new one takes the id, and the old one lives on only
 * until its admitted chunks are done); sequence_end ends it once that
 * chunk has been answered (a failed end leaves it live); a sequence with
 * no chunk admitted or running for idle_ms is dropped by seq_sweep().
 * An ended sequence lingers for linger_ms, no longer live: a chunk of it
 * that arrives then (sent before the end, on another connection, as
 * perf_analyzer's last chunks over HTTP are) is taken, after the end, and
 * counted late; a start takes the id at once. With linger_ms 0 an ended
 * sequence is gone when its end is answered, and a chunk that arrives
 * while its end is admitted is refused.
 * max_sequences live ones at most (STATUS_SEQUENCES_FULL beyond; 0
 * turns sequences off), and max_bytes for the carries of all of them,
 * checked before anything is allocated.
 *
 * Where the states live is the table's backend's (seq_backend.h): in
 * memory, in memory with the log (--state-dir), or in a store replicas
 * share (--state-store); the rules above are each one's, word for word.
 * The table owns its backend, and passes every step on to it.
 *
 * Threading: every function may be called from any thread, but for
 * seq_loop_open() and seq_loop_close() (on the thread of the door's
 * loop: the loop thread, a gRPC loop thread, an HTTP thread) and
 * seq_close() and seq_table_free() (the loop thread, once no chunk is
 * admitted). ready()
 * and durable() are called with no lock held.
 */
#ifndef TALLY_SEQUENCE_H
#define TALLY_SEQUENCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "carry.h"
#include "sequence_id.h"
#include "status.h"
#include "tensor.h"
#include "textbuf.h"

typedef struct seq_table seq_table;
typedef struct seq_entry seq_entry;
typedef struct seq_backend seq_backend;

typedef struct {
    unsigned max_sequences; /* live sequences at most; 0: sequences off */
    uint64_t idle_ms;       /* dropped after this long with no chunk */
    uint64_t linger_ms;     /* an ended one takes late chunks this long */
    uint64_t reorder_ms;    /* an early numbered chunk waits this long */
    size_t max_bytes;       /* the carries of every sequence, in all */
    /* The monotonic clock, in ns; NULL: now_ns(). */
    uint64_t (*clock)(void *user);
    void *clock_user;
} seq_options;

/* A chunk's place in its sequence, embedded in the submitter's record
 * (zeroed before seq_admit()), valid until seq_finish() has returned. */
typedef struct seq_slot seq_slot;
struct seq_slot {
    /* The submitter's: called once, with no lock held, when the turn of
     * an armed slot comes (seq_arm). */
    void (*ready)(seq_slot *s);
    /* The backend's: the memory backend's entry and waiting line. */
    seq_entry *e;
    seq_slot *next; /* in the entry's waiting line */
    eng_lines lines;
    eng_carry *totals; /* the chunk's line totals: &one, or malloc'd */
    eng_carry one;
    void *copy; /* float16 and bfloat16: the input, kept (carry.h) */
    bool start, end;
    int turn; /* how the wait goes: see sequence.c */
    bool numbered;
    uint64_t chunk;        /* numbered: its number */
    unsigned char sha[32]; /* numbered: its input's SHA-256 */
    uint64_t since_ns;     /* when it began to wait */
    /* The submitter's, before seq_admit(): where the backend writes its
     * refusal of a waiting slot (before ready(), or before seq_arm() says
     * the turn came): the status (STATUS_OK until then; the slot is then
     * no longer admitted, and seq_finish() must not be called for it)
     * and the words (why, whylen bytes). The request's one outcome. */
    status_code *refused;
    char *why;
    size_t whylen;
    /* With a durable backend: the submitter's, called once, on the log
     * writer or the store's thread (or, for a slot with near, the thread
     * that runs that loop), when seq_finish_durable() said *later:
     * the chunk has ended (STATUS_OK: its answer may leave; STATUS_STORE
     * with msg: its state could not be written, and nothing moved). */
    void (*durable)(seq_slot *s, status_code st, const char *msg);
    /* The memory backend's, between seq_finish_durable() and durable(). */
    void *backend;
    eng_carry *scratch; /* the new carries, until they are durable */
    /* The submitter's, before seq_finish_durable(): when the request's
     * own deadline passes (the monotonic clock; 0: none). A shared
     * store's answer is waited for until then at most. */
    uint64_t deadline_ns;
    /* The shared store's (seq_remote.h), between seq_finish_durable()
     * and durable(). */
    void *remote;
    /* The submitter's, before seq_admit(): the loop its door serves the
     * request on, as seq_loop_open() gave it there; NULL: none. A shared
     * store reads and writes the chunk's state on that loop, and durable()
     * then runs on its thread. */
    void *near;
};

/* A table with o's settings over backend b (taken: freed with the
 * table; NULL when o turns sequences off); NULL when memory runs out (b
 * is freed). Free with seq_table_free() once no chunk is admitted; NULL
 * is a no-op. */
seq_table *seq_table_new(const seq_options *o, seq_backend *b);
void seq_table_free(seq_table *t);

/* What the backend must finish before the process ends (the log flushed
 * and closed), once no chunk is admitted; before seq_table_free(). */
void seq_close(seq_table *t);

/* Whether the table keeps sequences at all (max_sequences > 0). */
bool seq_enabled(const seq_table *t);

/* The idle time after which a sequence is dropped, in ms. */
uint64_t seq_idle_ms(const seq_table *t);

/* Admits a chunk of sequence p (p->has_id) whose scan is d (packed,
 * collapsed as l; in: its input, read for its totals). STATUS_OK: s is
 * admitted, and *wait says whether it must wait for its turn. Otherwise,
 * with msg, nothing changed: STATUS_INVALID (no live sequence and no
 * sequence_start; a chunk that differs from its sequence; sequences off),
 * STATUS_SEQUENCES_FULL (no room for another sequence), STATUS_TOO_LARGE
 * (the chunk's carries alone pass max_bytes) or STATUS_NOMEM (the carries'
 * budget is spent, or memory ran out). */
status_code seq_admit(seq_table *t, const seq_params *p, const eng_scan_desc *d,
                      const eng_lines *l, const void *in, seq_slot *s,
                      bool *wait, char *msg, size_t msglen);

/* For a slot that must wait (step 2 above). False: the turn came, or
 * the slot was refused (s->refused) meanwhile. */
bool seq_arm(seq_table *t, seq_slot *s);

/* Ends an admitted slot's chunk (step 4): with ok, out is its scanned
 * answer (l's view), to which the carries are added. STATUS_OK, or with
 * msg (out is not an answer then; nothing moved): STATUS_CHUNK_CONFLICT
 * for a numbered chunk, STATUS_DRAINING once the table is frozen. For a
 * table whose chunks end at once (!seq_durable()). */
status_code seq_finish(seq_table *t, seq_slot *s, bool ok, void *out, char *msg,
                       size_t msglen);

/* seq_finish() for any table: when the backend keeps the chunk's new
 * state durably (a log, a store), it is written there first, and the
 * chunk ends (its carries move, the turn passes on) once that is done:
 * then *later is true, the status is STATUS_OK, and s->durable() comes
 * later with the outcome (and out is the answer by then). Otherwise
 * *later is false and it is seq_finish(). */
status_code seq_finish_durable(seq_table *t, seq_slot *s, bool ok, void *out,
                               bool *later, char *msg, size_t msglen);

/* Whether the table's chunks may end later (seq_finish_durable). */
bool seq_durable(const seq_table *t);

/* A door's loop, as the backend serves it: a shared store's connection
 * on that loop (seq_remote.h), for the slots admitted there (seq_slot's
 * near). NULL: the backend keeps nothing there. Call on the loop's
 * thread once it is made, and seq_loop_close() there before it ends; the
 * table outlives both. */
void *seq_loop_open(seq_table *t, struct uv_loop_s *loop);
void seq_loop_close(seq_table *t, void *near);

/* Drops the sequences idle for idle_ms or more (counted as expired), and
 * refuses the numbered chunks that waited reorder_ms for the chunks
 * before them (calling their ready() with no lock held). */
void seq_sweep(seq_table *t);

/* Stops every carry where it is, for a drain that timed out: from now on
 * seq_finish() fails every chunk with STATUS_DRAINING, and this waits,
 * up to wait_ms, for the chunks that are adding their carries now. True:
 * none is. Not undone. */
bool seq_freeze(seq_table *t, uint64_t wait_ms);

/* Live sequences now. */
size_t seq_live(seq_table *t);

/* Appends the table's section of /metrics: live sequences, their
 * carries' bytes, the counters of started, ended, expired and refused
 * ones, and the backend's own (the log's, the store's). */
void seq_render_metrics(seq_table *t, textbuf *o);

#endif
