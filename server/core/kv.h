/*
 * kv.h - versioned records under keys: the small interface a shared
 * store offers (Redis's, redis/redis_store.h) and the sequences' shared
 * store reaches it through (seq/seq_remote.h), so that the tests can put
 * a fake in its place and check the decisions without a Redis.
 *
 * A record is read, written by compare-and-set on its key's version, and
 * given more time to live. A version never repeats for a key, whatever
 * the key's lives: a count of writes within an incarnation, a random
 * number drawn when a writer begins the key anew. A write at a version
 * that is no longer the key's is refused with the key's version and
 * record now, so that the writer can decide again. A write that fails
 * may still have been applied.
 *
 * A store is one connection; open_on() makes another, on a caller's
 * loop, whose replies come on that loop's thread.
 *
 * Ownership: the store copies the keys and records it is given; the
 * record a callback sees is the store's, valid during the call.
 * Threading: get, put, touch and stats from any thread; callbacks run on
 * the thread that runs the connection's loop (the store's thread, or a
 * door's: the loop thread, a gRPC loop thread, an HTTP thread), with no
 * lock of the store's held, in the order the replies came; open_on and
 * stop on the thread that runs the loop open_on was given; close on the
 * loop thread, once nothing is asked of the store.
 */
#ifndef TALLY_KV_H
#define TALLY_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct kv kv;

/* A key's version: n writes within incarnation inc (nonzero); n 0: no
 * key. */
typedef struct {
    uint64_t n, inc;
} kv_version;

static inline bool kv_version_equal(kv_version a, kv_version b)
{
    return a.n == b.n && (a.n == 0 || a.inc == b.inc);
}

typedef enum {
    KV_OK,       /* read (n 0 and no record: none); written; renewed */
    KV_CONFLICT, /* not written: the key's version and record now (n 0:
                  * it is gone) */
    KV_FAILED    /* no answer: why says what (a write may or may not have
                  * been applied) */
} kv_result;

/* A request's end: r, the key's version (after a write, the one written;
 * n 0 after a delete), its record, and why (KV_FAILED's, else NULL). */
typedef void (*kv_done)(void *ctx, kv_result r, kv_version v,
                        const uint8_t *rec, size_t len, const char *why);

/* A write's time to live: keep the key's own. */
#define KV_KEEP_TTL UINT64_MAX

/* What the store says its acknowledged writes survive. */
typedef enum {
    KV_DURABLE_UNKNOWN = -1, /* not asked yet, or it would not say */
    KV_DURABLE_NONE = 0,     /* nothing since its last snapshot */
    KV_DURABLE_CRASH = 1,    /* a crash of the store, not a power loss */
    KV_DURABLE_POWER = 2     /* a power loss */
} kv_durability;

/* For /metrics: whether the connection is up, requests answered and
 * their round trips' total time, failures (lost, timed out, refused),
 * connections made after the first, and durability (the first
 * connection's only; asked: the store has answered, or refused). */
typedef struct {
    bool up;
    uint64_t answered, rtt_ns, failures, reconnects;
    kv_durability durability;
    bool durability_asked;
} kv_stats;

/* get, put and touch: false (done is not called) when the store cannot
 * take the request (it is closing, the key is too long, memory ran out);
 * deadline_ns (the monotonic clock, 0: none): past it, done() fails with
 * "timed out". */
typedef struct {
    /* Reads key, after delay_ms (a reader that waits for another
     * client's write; 0: at once). */
    bool (*get)(kv *k, const uint8_t *key, size_t keylen, uint64_t delay_ms,
                uint64_t deadline_ns, kv_done done, void *ctx);
    /* Writes rec (NULL: deletes the key) if the key's version is still
     * expect (n 0: there is none), as the next version (anew, or no key:
     * 1 in a new incarnation), with ttl_ms to live (0: none; KV_KEEP_TTL:
     * the key's own). */
    bool (*put)(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                bool anew, const uint8_t *rec, size_t len, uint64_t ttl_ms,
                uint64_t deadline_ns, kv_done done, void *ctx);
    /* Gives the key ttl_ms more to live (from now) if its version is
     * still expect: KV_OK with that version, or KV_CONFLICT. */
    bool (*touch)(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                  uint64_t ttl_ms, uint64_t deadline_ns, kv_done done,
                  void *ctx);
    void (*stats)(kv *k, kv_stats *out);
    /* Another connection to the same store, on loop (the caller's); NULL
     * with msg when memory runs out. */
    kv *(*open_on)(kv *k, uv_loop_t *loop, char *msg, size_t msglen);
    /* Stops a connection of open_on's before its loop ends: every pending
     * callback is called (failed) first, and later requests are refused;
     * its memory stays until close(). A no-op on the first connection. */
    void (*stop)(kv *k);
    /* Frees the connection (the first: after its pending callbacks have
     * failed; one of open_on's: stopped, its loop run since or ended). */
    void (*close)(kv *k);
} kv_ops;

struct kv {
    const kv_ops *ops;
};

#endif
