/*
 * seq_remote.h - sequences whose states live in a store that many
 * tallyds share (--state-store): the third of the table's backends
 * (seq_backend.h). The store is reached through its small interface
 * (core/kv.h): Redis in tallyd (redis/redis_store.h), a fake in the
 * tests. Any
 * replica answers any chunk of any sequence.
 *
 * How a chunk goes (the backend's admit and finish):
 *   1. Admitted, as it arrives: its totals, copy and SHA-256
 *      are read (seq_slot_fill), and it counts against this replica's
 *      limits; it never waits for a turn.
 *   2. It is scanned alone, as any request.
 *   3. Finished: its sequence's state is decided on with the
 *      rules of seq_rules.h, the same as the table's in memory, and the
 *      new state written with a compare-and-set on the key's version
 *      (kv.h's put): one round trip when this replica's cache of
 *      the state is current. A write that finds another version there
 *      decides again on the one it found (another replica's chunk came
 *      first). A refusal, a repeat or an early chunk is decided only on
 *      a state just read. An early numbered chunk (the chunk before it
 *      not yet applied, or its sequence not yet there) reads again, 1 ms
 *      later, then 2, 4, up to 16 ms apart, for --sequence-reorder-ms
 *      from its arrival; then it is refused as the table refuses it,
 *      unless every chunk it waits for is in flight here (admitted,
 *      not ended): then it reads on, as the table's line waits for the
 *      chunks it holds.
 *      The carries are added to the answer only once Redis has
 *      acknowledged the write; a write that failed or timed out may
 *      have been applied, so the chunk gets STATUS_STORE (503) and the
 *      cached state is dropped: a retry reads the truth.
 *
 * A sequence is one Redis key, PREFIX{n:ID} for a number id or
 * PREFIX{s:ID} for a string one (the braces: Redis Cluster's hash tag),
 * holding a version and a record: sequence_file.h's file for that one
 * sequence (live or ended, its attributes, carries, and for a numbered
 * one its last chunk's number, input hash and the carries before it). Its time
 * to live is the idle expiry: idle_ms, refreshed by every applied chunk; an
 * ended unnumbered one's is linger_ms (with 0, the key is deleted by its end).
 *
 * Limits, per replica: max_sequences chunks in flight at once, and
 * max_bytes for their carries (STATUS_SEQUENCES_FULL beyond); the cache
 * of states keeps at most max_sequences records and max_bytes of them,
 * the least recently used going first. How many sequences the store
 * holds is Redis's maxmemory's to bound.
 *
 * Where a chunk's reads and writes go: each door's loop opens the store
 * once more (seq_loop_open(), so the store's open_on) and the door
 * names that loop in the slots it admits (seq_slot's near). Those
 * chunks' commands are sent, and their replies read, on that loop's
 * thread, which answers the request: no other thread is woken between
 * the reply and the answer. Chunks of no loop's (a loop whose connection
 * could not be made) go through the store's own thread.
 *
 * Ownership: the backend owns the store and the stores on doors' loops,
 * which seq_loop_close() stops and the backend's free closes, the loops'
 * first, its own last. Threading: any function from any
 * thread, but for the loop hooks (on the thread that runs the loop); a
 * chunk's durable() runs on the thread that runs its store's loop (the
 * loop thread, a gRPC loop thread or an HTTP thread: its door's; else
 * the store's thread), with no lock held.
 */
#ifndef TALLY_SEQ_REMOTE_H
#define TALLY_SEQ_REMOTE_H

#include <stdint.h>

#include "kv.h"
#include "seq_backend.h"
#include "sequence.h"

/* The backend over store (taken: closed with the backend) with the
 * table's settings o; a chunk waits for the store timeout_ms at most
 * (less when its request's deadline comes first). NULL when memory runs
 * out (store is closed). */
seq_backend *seq_remote_new(kv *store, const seq_options *o,
                            uint64_t timeout_ms);

#endif
