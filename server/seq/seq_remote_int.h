/*
 * seq_remote_int.h - what the shared store's backend shares between its
 * two files: seq_remote.c (the backend: admission, its limits, the cache
 * of states and each sequence's line of chunks) and seq_decide.c (a
 * chunk's steps: decided on its sequence's state, read and written).
 * Nothing outside server/seq/ includes it, but the tests of the steps.
 *
 * Threading: the backend's mutex guards everything of struct seq_remote
 * below it; a chunk (rchunk) belongs to one thread at a time: the
 * caller's until its first read or write is submitted, then the store's,
 * whose callbacks carry it from step to step until it ends.
 */
#ifndef TALLY_SEQ_REMOTE_INT_H
#define TALLY_SEQ_REMOTE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "kv.h"
#include "seq_backend.h"
#include "seq_map.h"
#include "sequence.h"

#define KEY_MAX (SEQ_ID_MAX + 8) /* the store's key: "{s:ID}", "{n:NUM}" */

typedef struct rchunk rchunk;
typedef struct seq_remote seq_remote;

/* The last state of a sequence this replica saw in the store. */
typedef struct centry centry;
struct centry {
    seq_map_node node;
    centry *lprev, *lnext; /* from the least recently used */
    kv_version version;
    uint8_t *rec; /* NULL: the store had none */
    size_t len;
};

/* The chunks of one sequence in flight on this replica (admitted, not
 * ended): how many, how many of them start it, the unnumbered ones in
 * the order they were admitted, which is the order they are decided in,
 * as the memory backend gives their turns, and the numbered ones, which
 * an early chunk waits for as memory's line waits for those it holds. */
typedef struct {
    seq_map_node node;
    unsigned n, starts;
    rchunk *head, *tail; /* unnumbered, by admission */
    rchunk *numbered;    /* numbered, newest first */
} lentry;

struct seq_remote {
    seq_backend base;
    kv *store; /* its own connection: the chunks of no loop's */
    seq_options o;
    uint64_t timeout_ms;
    uv_mutex_t mu; /* guards everything below */
    seq_map cache; /* centry */
    centry *lru, *mru;
    size_t cached_bytes;
    seq_map lines; /* lentry */
    size_t inflight, inflight_bytes;
    seq_counts c;
    uint64_t races; /* writes that found another version */
    /* the connections on doors' loops (loop_open), stopped or not,
     * closed with the backend */
    kv **near;
    size_t nnear, near_cap;
};

struct rchunk {
    seq_remote *r;
    kv *store;          /* its door loop's, or r's own */
    lentry *line;       /* its sequence's chunks on this replica */
    rchunk *qnext;      /* the next in its line's list: unnumbered, the
                         * next admitted after it; numbered, the one
                         * admitted before it */
    bool queued;        /* unnumbered: in line->head's list */
    bool parked;        /* finished scanning, waiting for its turn */
    bool counted_start; /* one of line->starts */
    bool after_start;   /* a start of its sequence was in flight here
                         * when it was admitted */
    seq_slot *s;
    seq_params id;      /* with the chunk's flags and number */
    seq_map_node idkey; /* the id's, in the maps */
    eng_scan_desc desc;
    uint8_t key[KEY_MAX]; /* the store's */
    size_t keylen, need;
    uint64_t count; /* carries */
    bool is_float;
    void *out;
    uint64_t since_ns;
    uint64_t req_deadline_ns; /* the request's own (0: none) */
    unsigned rounds, polls;
    /* the write in flight */
    bool starts, late, del;
    bool was_closed; /* the state it was decided on had ended */
    eng_carry *base; /* the carries the answer gets once it is written */
    uint8_t *rec;
    size_t reclen;
    /* a chunk that ended before anything was submitted: its status,
     * and its message in the caller's buffer (finish's) */
    status_code st;
    char *sync_msg;
    size_t sync_msglen;
};

/* seq_remote.c: the cache of states (a copy of the key's version and
 * record: false when nothing is cached; remembering one, taken or
 * copied, or forgetting the key), a counter bumped under the mutex, and
 * a chunk let go (its buffers, its place in the limits and its line),
 * which gives the unnumbered chunk whose turn comes, if it waits. */
bool seq_remote_cache_get(seq_remote *r, const seq_map_node *k,
                          kv_version *version, uint8_t **rec, size_t *len);
void seq_remote_cache_put(seq_remote *r, const seq_map_node *k,
                          kv_version version, uint8_t *rec, size_t len,
                          bool forget);
void seq_remote_cache_copy(seq_remote *r, const seq_map_node *k,
                           kv_version version, const uint8_t *rec, size_t len);
void seq_remote_count(seq_remote *r, uint64_t *counter);
rchunk *seq_remote_release(rchunk *c);

/* Whether numbered chunks `from` to c's number less one are all in
 * flight on this replica (its line holds each, admitted before c or
 * after it): c's wait for them is not a gap yet. */
bool seq_remote_line_holds(seq_remote *r, const rchunk *c, uint64_t from);

/* seq_decide.c: a chunk's steps. decide() decides what the chunk does to
 * its sequence's state (version and record; NULL: none), either just
 * read (fresh) or the cache's guess: true when a read or a write was
 * submitted (c is the store's thread's now), false when the chunk ended
 * (sync: its status in c->st, its words in c->sync_msg; else told to its
 * submitter). read_state() reads the state afresh, then decides.
 * run_next() starts chunks whose turn came while they waited. */
bool seq_decide(rchunk *c, kv_version version, const uint8_t *rec, size_t len,
                bool fresh, bool sync);
bool seq_decide_read(rchunk *c, uint64_t delay_ms, bool sync);
void seq_decide_run_next(rchunk *c);

#endif
