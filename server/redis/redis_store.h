/*
 * redis_store.h - versioned records in Redis, shared by every client
 * that names the same keys: read, replaced by compare-and-set on the
 * version, given more time to live. It knows nothing of what the records
 * say (the sequences' engine, seq/sequence.h, is its one user).
 *
 * Each record is one Redis string under PREFIX + its key: a version
 * (VERSION_LEN bytes), then the caller's bytes. A version is a 128-bit
 * value drawn for each write, so it never repeats for a key, whatever
 * Redis lost: after a restart from an older snapshot, or a failover to a
 * replica that lagged, the key is back at an older version, and a client
 * that cached a lost write's version can never match it (an ABA). A read
 * is one GET.
 * A write is one script (EVALSHA, with EVAL when Redis has forgotten it,
 * after a restart): it replaces the value, deletes it, or renews the
 * key's time to live, only when the version is still the one the writer
 * read, and otherwise answers with the value that is there now, so that
 * the writer can decide again. Redis orders the writes; the caller
 * computes them.
 *
 * A write that fails or times out may still have been applied: the
 * caller never takes its own record for the key's then, and reads
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
 * A store is one connection (redis_conn.c), on a libuv loop, through an
 * adapter for hiredis (redis_poll.c): no caller's thread waits on Redis.
 * The loop is the store's own, on a thread of its own (redis_store_open),
 * or a caller's (kv.h's open_on: a door's loop, so that a reply is read
 * on the thread that answers the request, with no hand-off between
 * threads on the way). Commands are pipelined in the order they were
 * asked for. When the connection drops, what was sent fails ("connection
 * lost") and the store connects again, waiting 100 ms, then twice as
 * long each time up to 5 s; what is asked for meanwhile waits for the
 * connection, up to its deadline.
 *
 * Ownership and threading: kv.h's; redis_store_open() on the loop
 * thread.
 */
#ifndef TALLY_REDIS_STORE_H
#define TALLY_REDIS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "kv.h"
#include "redis_url.h"

typedef struct redis_store redis_store;

/* Connects, authenticates (AUTH, with the user when the URL names one),
 * selects the database and loads the script, waiting up to timeout_ms
 * for all of it: tallyd's start stops on a store it cannot use. NULL
 * with a message naming the URL (without its password) and the reason:
 * the connection refused or timed out, the password refused, the
 * database out of range. prefix: the keys' (copied; at most 64 bytes).
 * wait_replicas: a write is acknowledged once that many of Redis's
 * replicas have it (WAIT; 0: once the primary has it). Keys are at most
 * 4096 bytes. The store is kv.h's: its ops, and open_on()'s connections
 * on a caller's loop; close() stops its thread, every pending callback
 * called (failed: "the store is closing") first. */
kv *redis_store_open(const redis_url *u, const char *prefix,
                     uint64_t timeout_ms, unsigned wait_replicas, char *msg,
                     size_t msglen);

#endif
