/*
 * seq_int.h - what the engine's files share: sequence.c (the table, its
 * admission, limits, cache and counts), seq_line.c (each sequence's line
 * of chunks on this tallyd, and whose turn it is) and seq_decide.c (a
 * chunk's decision at its turn: read, rules, write). Nothing outside
 * server/seq/ includes it, but the engine's tests.
 *
 * Threading: the table's mutex guards everything of struct seq_table
 * below it, every line, and every chunk's place in its line (state,
 * orphan, poll times); the rest of a chunk belongs to one thread at a
 * time: its submitter's until seq_finish(), then, at its turn, the
 * thread that runs its decision (the caller's, a store's callbacks').
 */
#ifndef TALLY_SEQ_INT_H
#define TALLY_SEQ_INT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "keymap.h"
#include "kv.h"
#include "list.h"
#include "loop_owner.h"
#include "mutex.h"
#include "sequence.h"

/* The counters /metrics shows. */
typedef struct {
    uint64_t started, ended, refused, late, applied, repeats, conflicts, gaps,
        races;
} seq_counts;

/* One sequence's chunks on this tallyd, in the order they arrived. */
typedef struct {
    keymap_node node; /* the sequence's store key */
    list_node chunks;
    seq_chunk *turn;   /* the chunk deciding now, or NULL */
    unsigned pending;  /* pump() calls on their way (it outlives them) */
    bool pumping, again;
} seq_line;

/* The last state of a sequence this tallyd read from a shared store. */
typedef struct {
    keymap_node node;
    list_node lru; /* from the least recently used */
    kv_version version;
    uint8_t *rec; /* NULL: the store had none */
    size_t len;
} seq_cached;

struct seq_table {
    seq_options o;
    kv *store; /* NULL: sequences off */
    atomic_ullong refused_off; /* chunks refused: sequences off */
    mutex mu;                  /* guards everything below */
    keymap lines;              /* seq_line */
    keymap cache;              /* seq_cached (a shared store's) */
    list_node lru;
    size_t cached_bytes;
    size_t inflight, inflight_bytes; /* a shared store's limits */
    seq_counts c;
    bool frozen;
    unsigned writing; /* writes in flight (seq_freeze waits for them) */
    loop_owner sweeper; /* seq_sweep()'s caller: the tick thread */
    /* the connections on doors' loops (loop_open), stopped or not,
     * closed with the table */
    kv **near;
    size_t nnear, near_cap;
};

enum {
    CH_SCANNING, /* admitted; its scan runs */
    CH_READY,    /* scanned: waits for its turn */
    CH_TURN,     /* deciding */
    CH_EARLY     /* waits for the chunks before it */
};

struct seq_chunk {
    seq_table *t;
    kv *store; /* its door loop's, or the table's */
    seq_line *line;
    list_node in_line;
    int state;
    bool orphan;      /* behind a start that did not start its sequence */
    bool gap_checked; /* early past its wait, while its line holds what
                       * it waits for: woken by the line, not the clock */
    uint64_t next_poll_ns; /* early on a shared store: its next read */
    bool started;          /* a start that started its sequence, or was
                            * taken as a retry of chunk 1 */
    seq_slot *s;
    seq_params id; /* with the chunk's flags and number */
    keymap_node key;
    eng_scan_desc desc;
    uint64_t count; /* carries */
    bool is_float;
    size_t need; /* its carries' bytes, in a shared store's limits */
    uint64_t since_ns;
    unsigned rounds, polls;
    /* the write in flight */
    bool starts, late, del, was_closed;
    eng_carry *base; /* the carries the answer gets */
    uint8_t *rec;
    size_t reclen;
};

/* sequence.c: the clock; the cache of a shared store's states (a copy
 * of a key's version and record: false when nothing is cached;
 * remembering one, taken or copied, or forgetting the key); a counter
 * bumped under the mutex. */
uint64_t seq_now(const seq_table *t);
bool seq_cache_get(seq_table *t, const keymap_node *k, kv_version *version,
                   uint8_t **rec, size_t *len);
void seq_cache_put(seq_table *t, const keymap_node *k, kv_version version,
                   uint8_t *rec, size_t len, bool forget);
void seq_cache_copy(seq_table *t, const keymap_node *k, kv_version version,
                    const uint8_t *rec, size_t len);
void seq_count(seq_table *t, uint64_t *counter);

/* seq_line.c: c into its line (under the mutex); c scanned, to take its
 * turn; c parked early (its turn let go); c's end, told to its
 * submitter; whether c's line holds every numbered chunk from `from` to
 * c's number less one; the sweep's wakes; a line let go when empty. */
bool seq_line_join(seq_table *t, seq_chunk *c);
void seq_line_ready(seq_chunk *c);
void seq_line_park(seq_chunk *c, bool past);
void seq_line_end(seq_chunk *c, status_code st, const char *msg);
bool seq_line_holds(seq_chunk *c, uint64_t from);
void seq_line_sweep(seq_table *t);
void seq_line_drop_all(seq_table *t);

/* seq_decide.c: c's decision, at its turn. */
void seq_decide_begin(seq_chunk *c);

#endif
