/*
 * state_redis.h - sequences' states in Redis, shared by every replica:
 * one record a sequence, read and replaced atomically, for a state store
 * many tallyds share (--state-store, issue 47).
 *
 * Each sequence is one Redis string under PREFIX + its id: a version
 * (VERSION_LEN bytes), then the caller's record (the sequence's whole
 * state, encoded by the caller: sequence_file.h's format). A version
 * never repeats for a key, whatever the key's lives: it is an
 * incarnation, a random 64-bit number drawn when a writer begins the
 * key anew (a sequence's start), and a count of the writes within that
 * incarnation. A key that expired and was made again by another
 * sequence of the same id has another incarnation, so that a version a
 * replica cached for the old one never matches the new one's (an ABA).
 * A read is one GET. A write is one script (EVALSHA, with EVAL when
 * Redis has forgotten it, after a restart): it replaces the value, or
 * renews the key's time to live, only when the version is still the one
 * the writer read, and otherwise answers with the value that is there
 * now, so that the writer can decide again (a chunk another replica
 * applied first is a repeat, a conflict or the state to build on).
 * Redis's Lua has no 64-bit integers and tallyd's carries are
 * float-float pairs, so the arithmetic stays in tallyd: Redis orders the
 * writes, tallyd computes them.
 *
 * A write that fails or times out may still have been applied: the
 * caller never takes its own record for the state then, and reads
 * again. Nothing here retries a write. With wait_replicas (WAIT), a
 * write is acknowledged only once that many of Redis's replicas have it,
 * so that a failover to one of them keeps it; fewer within the write's
 * time is a failure (the write is in the primary, and may or may not
 * survive a failover).
 *
 * At each connect, the store asks Redis whether it keeps what it
 * acknowledged through a restart (CONFIG GET appendonly appendfsync),
 * logs the answer when it changes (a warning when Redis would lose
 * acknowledged writes, or cannot be asked: managed services refuse
 * CONFIG), and shows it in its stats.
 *
 * A store is one connection, on a libuv loop, through an adapter for
 * hiredis: no caller's thread waits on Redis. The loop is the store's
 * own, on a thread of its own (state_redis_open), or a caller's
 * (state_redis_open_on: a door's loop, so that a reply is read on the
 * thread that answers the request, with no hand-off between threads on
 * the way). Commands are pipelined in the order they were asked for.
 * When the connection drops, what was sent fails ("connection lost") and
 * the store connects again, waiting 100 ms, then twice as long each time
 * up to 5 s; what is asked for meanwhile waits for the connection, up to
 * its deadline.
 *
 * Ownership: the store copies the ids and records it is given; the
 * record a callback sees is the store's, valid during the call.
 * Threading: state_redis_get(), _put() and _stats() from any thread;
 * callbacks run on the thread that runs the store's loop (the store's
 * thread, or for a store opened on a caller's loop, the loop thread, a
 * gRPC loop thread or an HTTP thread), with none of its locks held, one
 * at a time, in the order the replies came; _open() and _close() on one
 * thread (tallyd's main); _open_on() and _stop() on the thread that runs
 * the loop.
 */
#ifndef TALLY_STATE_REDIS_H
#define TALLY_STATE_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "redis_url.h"

typedef struct state_redis state_redis;

/* Connects, authenticates (AUTH, with the user when the URL names one),
 * selects the database and loads the script, waiting up to timeout_ms
 * for all of it: tallyd's start stops on a store it cannot use. NULL
 * with a message naming the URL (without its password) and the reason:
 * the connection refused or timed out, the password refused, the
 * database out of range. prefix: the keys' (copied; at most 64 bytes).
 * wait_replicas: a write is acknowledged once that many of Redis's
 * replicas have it (WAIT; 0: once the primary has it). */
state_redis *state_redis_open(const redis_url *u, const char *prefix,
                              uint64_t timeout_ms, unsigned wait_replicas,
                              char *msg, size_t msglen);

/* Stops the thread; every pending callback has been called (failed:
 * "the store is closing") when it returns. A store opened on a caller's
 * loop is only freed: it must have been stopped (state_redis_stop), and
 * the loop must have run since, or ended. NULL is a no-op. */
void state_redis_close(state_redis *s);

/* Another connection to like's store (its URL, key prefix, time
 * limits and wait_replicas), on loop, the caller's, whose thread then sends its commands
 * and runs its callbacks. It connects in the background (like's open
 * has checked the URL and the password): a connect that fails is tried
 * again as a lost connection is, and what is asked for meanwhile waits
 * for it, up to its deadline. NULL with msg when memory runs out. On
 * loop's thread (or before loop runs); like stays open meanwhile. */
state_redis *state_redis_open_on(const state_redis *like, uv_loop_t *loop,
                                 char *msg, size_t msglen);

/* Stops a store opened on a caller's loop, before that loop ends: every
 * pending callback is called (failed: "the store is closing") before it
 * returns, the connection goes, and the store's handles close; reads
 * and writes asked for from then on are refused (false). Its memory
 * stays until state_redis_close(). On the loop's thread; a second call,
 * NULL, or a store of its own thread: a no-op. */
void state_redis_stop(state_redis *s);

/* A key's version (VERSION_LEN bytes in the value): n, the writes
 * within incarnation inc (a random nonzero number). n 0: no key. */
typedef struct {
    uint64_t n, inc;
} state_version;

/* The version a write after cur takes: the next count in cur's
 * incarnation, or, with anew (or when there is no key), 1 in a new
 * incarnation drawn at random. */
state_version state_version_next(state_version cur, bool anew);

/* Whether two versions are the same. */
static inline bool state_version_equal(state_version a, state_version b)
{
    return a.n == b.n && (a.n == 0 || a.inc == b.inc);
}

typedef enum {
    STATE_REDIS_OK,       /* read, or written */
    STATE_REDIS_CONFLICT, /* not written: another version is there */
    STATE_REDIS_FAILED    /* no answer: why says what (a write may or
                           * may not have been applied) */
} state_redis_result;

/* A read's or a write's end. OK for a read: version and record are the
 * key's (version n 0 and no record: there is none); OK for a write:
 * version is the one written (n 0 after a delete). CONFLICT: version and
 * record are the key's now (n 0: it is gone). why: for FAILED, else
 * NULL. */
typedef void (*state_redis_done)(void *ctx, state_redis_result r,
                                 state_version version,
                                 const uint8_t *record, size_t len,
                                 const char *why);

/* Reads sequence id's version and record. deadline_ns (the monotonic
 * clock, now_ns()): past it, done() fails with "timed out" (0: none).
 * False (done is not called) when memory runs out, the id is longer
 * than 4096 bytes or the store is closing. */
bool state_redis_get(state_redis *s, const uint8_t *id, size_t idlen,
                     uint64_t deadline_ns, state_redis_done done, void *ctx);

/* state_redis_get(), sent delay_ms from now: for a reader that waits
 * for another replica's write (an early chunk). deadline_ns counts from
 * the call, as the caller's. */
bool state_redis_get_later(state_redis *s, const uint8_t *id, size_t idlen,
                           uint64_t delay_ms, uint64_t deadline_ns,
                           state_redis_done done, void *ctx);

/* A write's time to live: STATE_REDIS_KEEP_TTL keeps the key's (its
 * deadline set by an earlier write); 0: none. */
#define STATE_REDIS_KEEP_TTL UINT64_MAX

/* Writes record as version `next` of sequence id, if its version is
 * still expect (n 0: there is no key), and gives the key ttl_ms to live;
 * with record NULL, deletes the key instead. deadline_ns and False as
 * state_redis_get(). */
bool state_redis_put(state_redis *s, const uint8_t *id, size_t idlen,
                     state_version expect, state_version next,
                     const uint8_t *record, size_t len, uint64_t ttl_ms,
                     uint64_t deadline_ns, state_redis_done done, void *ctx);

/* Gives sequence id ttl_ms more to live (from now), if its version is
 * still expect: OK with that version, or CONFLICT as a write's. */
bool state_redis_touch(state_redis *s, const uint8_t *id, size_t idlen,
                       state_version expect, uint64_t ttl_ms,
                       uint64_t deadline_ns, state_redis_done done,
                       void *ctx);

/* How much of what Redis acknowledged survives what, as Redis's
 * configuration says (CONFIG GET appendonly appendfsync, at connect). */
typedef enum {
    STATE_REDIS_DURABLE_UNKNOWN = -1, /* not asked yet, or refused */
    STATE_REDIS_DURABLE_NONE = 0,     /* appendonly no: a restart loses
                                       * what came after the last
                                       * snapshot */
    STATE_REDIS_DURABLE_CRASH = 1,    /* an AOF flushed everysec or by the
                                       * OS: kept through a crash of
                                       * Redis, not a power loss */
    STATE_REDIS_DURABLE_POWER = 2     /* appendfsync always */
} state_redis_durability;

/* For /metrics: whether the connection is up, commands answered and
 * their round trips' total time, failures (lost, timed out, refused),
 * connections made after the first, and what Redis's configuration
 * said of its durability (the store of state_redis_open's only). */
typedef struct {
    bool up;
    uint64_t answered, rtt_ns, failures, reconnects;
    state_redis_durability durability;
    bool durability_asked; /* Redis has answered CONFIG GET (or refused) */
} state_redis_stats;
void state_redis_get_stats(state_redis *s, state_redis_stats *out);

#endif
