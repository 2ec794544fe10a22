/*
 * fake_kv.h - a store of versioned records (server/core/kv.h) in the
 * test's memory, for the sequences' shared-store backend
 * (server/seq/sequence.h) without a Redis: the engine's contract suite
 * (tests/server/test_seq.c), the simulation (tests/sim/) and the model's
 * replicas (tests/model/fake_replicas.c).
 *
 * Every request waits in the store's queue until the test delivers it
 * (fake_kv_deliver): only then is it applied to the records and its
 * callback called, on the test's thread, as Redis would apply it when it
 * arrives and answer it then. So the test chooses the order in which
 * requests from many connections (replicas, loops) reach the store, and
 * can make any of them fail: before it is applied (the connection went
 * on the way there) or after (the reply was lost). Records expire at
 * their time to live, on the store's clock.
 *
 * Every connection (fake_kv_connect, and open_on's) shares one store.
 * Threading: one thread at a time (the test's), with its own lock for
 * the rare test that calls from two.
 */
#ifndef TALLY_FAKE_KV_H
#define TALLY_FAKE_KV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kv.h"

typedef struct fake_kv fake_kv;

/* A store whose versions are drawn from seed, whose clock is clock
 * (ms; NULL: the monotonic clock). */
fake_kv *fake_kv_new(uint64_t seed, uint64_t (*clock_ms)(void *user),
                     void *user);
void fake_kv_free(fake_kv *f);

/* A connection to f (one replica's). Close it with its ops' close. */
kv *fake_kv_connect(fake_kv *f);

/* Requests that may be delivered now: of each connection, the oldest
 * whose delay (a read asked for later) has passed on the store's clock,
 * as Redis answers one connection's commands in order. */
size_t fake_kv_pending(fake_kv *f);

/* Requests queued from connection c (NULL: any), due or not. */
size_t fake_kv_queued(fake_kv *f, const kv *c);

/* How a delivery goes. */
typedef enum {
    FAKE_APPLY,       /* applied, and answered */
    FAKE_LOST_BEFORE, /* failed before it was applied */
    FAKE_LOST_AFTER   /* applied, and its answer lost (failed) */
} fake_fate;

/* Delivers the i-th of those (0: the oldest; i past the end: none):
 * applied to the records as its fate says, its callback called. False
 * when there was none. */
bool fake_kv_deliver(fake_kv *f, size_t i, fake_fate fate);

/* Delivers the oldest due request of connection c; false: none. */
bool fake_kv_deliver_from(fake_kv *f, const kv *c, fake_fate fate);

/* Delivers every due request in order, applied, until none is left (the
 * callbacks' own requests too). How many. */
size_t fake_kv_settle(fake_kv *f);

/* A key's record now (NULL: none, or expired), and its version. */
const uint8_t *fake_kv_peek(fake_kv *f, const uint8_t *key, size_t keylen,
                            size_t *len, kv_version *v);

/* Drops a key now, as its time to live would. */
void fake_kv_expire(fake_kv *f, const uint8_t *key, size_t keylen);

/* Keeps a copy of every record now (one snapshot: a new one replaces
 * it), and puts it back: the records written since are lost, as when
 * Redis restarts from an older snapshot, or fails over to a replica
 * that had not taken them. Requests in the queue stay. */
void fake_kv_snapshot(fake_kv *f);
void fake_kv_rollback(fake_kv *f);

/* Counts: requests delivered, writes refused for their version. */
void fake_kv_counts(fake_kv *f, uint64_t *delivered, uint64_t *conflicts);

#endif
