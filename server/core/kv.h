/*
 * kv.h - versioned records under keys: the one interface the sequences'
 * engine (seq/sequence.h) keeps its states through, and the stores
 * behind it offer:
 *   - memory (store/kv_mem.h): this tallyd's own;
 *   - memory whose writes complete once the log has them (--state-dir:
 *     store/kv_log.h);
 *   - Redis, which replicas share (--state-store: redis/redis_store.h);
 * and a fake in the tests, whose answers the test delivers.
 *
 * A record is read, written by compare-and-set on its key's version, and
 * given more time to live, which runs from the write (or the renewal):
 * once it has run out, the next read of the key finds no record, however
 * late the sweep. Every write draws a new version at random (a
 * 128-bit value), so a version never repeats for a key, whatever the
 * store lost: a rollback, a snapshot restored or a failover gives the key
 * back an older version, and a cache that saw a later write can never
 * match it again (an ABA). A write at a version that is no longer the
 * key's is refused with the key's version and record now, so that the
 * writer can decide again. A write that fails may still have been applied
 * (a shared store's), or surely was not (a local store's: see `local`).
 *
 * A local store is this process's own, and nothing else writes it: the
 * last answer it gave is the truth until the next write. Its reads answer
 * before the call returns; its writes too, or (with the log) from the
 * log writer once the record is durable.
 *
 * Ownership: the store copies the keys and records it is given; the
 * record a callback sees is the store's, valid during the call.
 * Threading: get, put, touch, stats and sweep from any thread; callbacks
 * run with no lock of the store's held, in the order the store took the
 * requests, on the thread that runs the connection's loop (Redis: the
 * store's thread, or a door's: the loop thread, a gRPC loop thread, an
 * HTTP thread), or, for a local store, on the caller's (before the call
 * returns) or the log writer; open_on and stop on the thread that runs
 * the loop open_on was given; flush and close on the loop thread, once
 * nothing is asked of the store.
 */
#ifndef TALLY_KV_H
#define TALLY_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "textbuf.h"

struct mailbox;

typedef struct kv kv;

/* A key's version: a value drawn for the write that made it; all zero:
 * no key. */
typedef struct {
    uint64_t hi, lo;
} kv_version;

static inline bool kv_version_equal(kv_version a, kv_version b)
{
    return a.hi == b.hi && a.lo == b.lo;
}

static inline bool kv_version_none(kv_version v)
{
    return v.hi == 0 && v.lo == 0;
}

/* A new version from *state (a splitmix64 stream; seed it with
 * kv_seed()): never all zero. kv_version_new() draws from a stream of
 * the calling thread's, seeded from the system's random source. */
kv_version kv_version_draw(uint64_t *state);
kv_version kv_version_new(void);

/* A seed from the system's random source (getrandom; the clock and the
 * address space where it has none). */
uint64_t kv_seed(void);

typedef enum {
    KV_OK,       /* read (no version and no record: none); written; renewed */
    KV_CONFLICT, /* not written: the key's version and record now (none:
                  * it is gone) */
    KV_FAILED,   /* no answer: why says what (a shared store's write may or
                  * may not have been applied; a local store's was not) */
    KV_FULL      /* not written: the store holds as many records, or as
                  * many bytes, as it may (a local store's bounds) */
} kv_result;

/* A request's end: r, the key's version (after a write, the one written;
 * none after a delete), its record, and why (KV_FAILED's and KV_FULL's,
 * else NULL). */
typedef void (*kv_done)(void *ctx, kv_result r, kv_version v,
                        const uint8_t *rec, size_t len, const char *why);

/* A write's time to live: keep the key's own. */
#define KV_KEEP_TTL UINT64_MAX

/* A write's record counts against the store's bound of records (a live
 * sequence; an ended one does not). */
#define KV_COUNTED 1u

/* What the store says its acknowledged writes survive. */
typedef enum {
    KV_DURABLE_UNKNOWN = -1, /* not asked yet, or it would not say */
    KV_DURABLE_NONE = 0,     /* nothing since its last snapshot */
    KV_DURABLE_CRASH = 1,    /* a crash of the store, not a power loss */
    KV_DURABLE_POWER = 2     /* a power loss */
} kv_durability;

/* For /metrics: whether the connection is up, requests answered and
 * their round trips' total time, failures (lost, timed out, refused),
 * connections made after the first, durability (the first connection's
 * only; asked: the store has answered, or refused); a local store's
 * records (those counted), their weights, and those that expired. */
typedef struct {
    bool up;
    uint64_t answered, rtt_ns, failures, reconnects;
    kv_durability durability;
    bool durability_asked;
    size_t records, bytes;
    uint64_t expired;
} kv_stats;

/* get, put and touch: false (done is not called) when the store cannot
 * take the request (it is closing, the key is too long, memory ran out);
 * deadline_ns (the monotonic clock, 0: none): past it, done() fails with
 * "timed out". */
typedef struct {
    /* Reads key, after delay_ms (a reader that waits for another
     * client's write; 0: at once; a local store reads at once). */
    bool (*get)(kv *k, const uint8_t *key, size_t keylen, uint64_t delay_ms,
                uint64_t deadline_ns, kv_done done, void *ctx);
    /* Writes rec (NULL: deletes the key) if the key's version is still
     * expect (none: there is no key), as a new version, with ttl_ms to
     * live (0: none; KV_KEEP_TTL: the key's own); flags: KV_COUNTED;
     * weight: what a local store's bound of bytes counts of it (0: its
     * length). */
    bool (*put)(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                const uint8_t *rec, size_t len, uint64_t ttl_ms, unsigned flags,
                size_t weight, uint64_t deadline_ns, kv_done done, void *ctx);
    /* Gives the key ttl_ms more to live (from now) if its version is
     * still expect: KV_OK with that version, or KV_CONFLICT. */
    bool (*touch)(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                  uint64_t ttl_ms, uint64_t deadline_ns, kv_done done,
                  void *ctx);
    void (*stats)(kv *k, kv_stats *out);
    /* Optional (NULL: none). Drops the records whose time to live has run
     * out (a local store; a shared one expires its own). */
    void (*sweep)(kv *k);
    /* Optional. The store's own lines of /metrics. */
    void (*render_metrics)(kv *k, textbuf *o);
    /* Optional. Another connection to the same store, on the loop of mb
     * (the caller's, whose mailbox it takes a receiver on); NULL with msg
     * when memory runs out or mb has no room. */
    kv *(*open_on)(kv *k, struct mailbox *mb, char *msg, size_t msglen);
    /* Optional. Stops a connection of open_on's before its loop ends:
     * every pending callback is called (failed) first, and later requests
     * are refused; its memory stays until close(). */
    void (*stop)(kv *k);
    /* Optional. What must be done before the process ends, once nothing
     * is asked of the store: the log flushed and closed. */
    void (*flush)(kv *k);
    /* Frees the connection (the first: after its pending callbacks have
     * failed; one of open_on's: stopped, its loop run since or ended). */
    void (*close)(kv *k);
} kv_ops;

struct kv {
    const kv_ops *ops;
    bool local; /* this process's own store (above) */
};

#endif
