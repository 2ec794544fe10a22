/*
 * kv_mem.h - a store of versioned records (core/kv.h) in this tallyd's
 * memory: the sequences' states without --state-dir or --state-store,
 * and, with a journal (the log, kv_log.h), with them.
 *
 * Records live in a map from key, with their version, their value (an
 * immutable buffer, shared by reference with the journal and the log's
 * rewrite), their deadline (monotonic), whether they count against
 * max_records, and their weight, which max_bytes counts (the writer's
 * word: the sequences' carries, not their record's bytes). A record whose time to live ran out is gone at once: a
 * read or a write finds none, and the sweep frees it.
 *
 * Without a journal a write is applied, and answered, before put()
 * returns. With one, the store checks the write (the version expected,
 * the bounds) and hands it to the journal in the order it took it, under
 * its lock, so that the log's order is the store's; the write is applied,
 * and answered, when the journal says it is durable (kv_mem_commit), or
 * dropped, and answered KV_FAILED, when it could not be written: the
 * store never holds what the log has not. A key takes one write at a time
 * (the sequences' engine asks no more); an expiry is written to the
 * journal too, and applied at once.
 *
 * Ownership: the store owns its records and the writes it gives the
 * journal until it commits them. Threading: kv.h's; the mutex guards the
 * map, the expiry lists and the counts; kv_mem_commit() on the journal's
 * thread (the log writer), with no lock held.
 */
#ifndef TALLY_KV_MEM_H
#define TALLY_KV_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "keymap.h"
#include "kv.h"

typedef struct {
    size_t max_records; /* counted records (KV_COUNTED) at most; 0: none */
    size_t max_bytes;   /* the records' weights at most; 0: no bound */
    /* The clocks: monotonic (ns) for the times to live, wall (ms) for the
     * journal's deadlines; NULL: now_ns() and wall_ms(). */
    uint64_t (*mono_ns)(void *user);
    int64_t (*wall_ms)(void *user);
    void *clock_user;
    uint64_t seed; /* the versions' stream; 0: kv_seed() */
} kv_mem_options;

/* A store with o's bounds; NULL when memory runs out. */
kv *kv_mem_new(const kv_mem_options *o);

/* ------------------------------------------------------------ journals */

/* A record's value: immutable once made, shared by reference. */
typedef struct kv_val kv_val;
kv_val *kv_val_new(const uint8_t *b, size_t len); /* NULL: out of memory */
void kv_val_unref(kv_val *v); /* NULL: a no-op */
const uint8_t *kv_val_bytes(const kv_val *v, size_t *len);

enum { KV_W_PUT = 1, KV_W_DEL = 2, KV_W_TOUCH = 3 };

/* A write as the journal sees it, and as the log replays it. */
typedef struct kv_write kv_write;
struct kv_write {
    kv_write *next;  /* the journal's, for its queue */
    uint8_t op;      /* KV_W_* */
    uint8_t flags;   /* KV_COUNTED */
    kv_version expect, version; /* a touch keeps its version */
    int64_t deadline_ms;        /* wall; 0: none */
    int64_t at_ms;              /* wall: when the store took it */
    size_t weight;              /* KV_W_PUT's, as the bound of bytes counts */
    kv_val *val;                /* KV_W_PUT's record (a reference) */
    size_t keylen;
    uint8_t key[KEYMAP_KEY_MAX];
    void *priv; /* the store's */
};

/* A write made from its fields (the log's replay; key copied, val taken):
 * NULL when out of memory. Free with kv_write_free(). */
kv_write *kv_write_new(uint8_t op, const uint8_t *key, size_t keylen);
void kv_write_free(kv_write *w);

typedef struct {
    /* Takes w, under the store's lock: the next record of the journal.
     * The journal calls kv_mem_commit(w) once it is written or failed. */
    void (*append)(void *self, kv_write *w);
    void *self;
} kv_journal;

/* Gives the store a journal (borrowed: it outlives the store's last
 * write), before any request. */
void kv_mem_set_journal(kv *k, const kv_journal *j);

/* The journal's word on w: durable (ok), or not written (why): the
 * write is applied, or dropped, and its requester answered; w is freed. */
void kv_mem_commit(kv *k, kv_write *w, bool ok, const char *why);

/* A logged write, replayed at the start (before any request): applied
 * when it finds the key at the version it expects, after the key's own
 * deadline, if it had passed by the time the write was made, has dropped
 * it; with force (a record of an older log, which names no version), at
 * whatever version, a new one drawn. *applied says whether it was. False
 * when memory runs out or the record passes the store's bounds. */
bool kv_mem_replay(kv *k, const kv_write *w, bool force, bool *applied);

/* Drops the records whose deadline has passed (after a replay): how
 * many of them were counted ones. */
size_t kv_mem_expire_now(kv *k);

/* Every record now, as writes that make it anew (expect none), its value
 * by reference, in a list through next; NULL with *n 0 when there is
 * none or memory ran out (*oom then). *bytes: their values' bytes. */
kv_write *kv_mem_snapshot(kv *k, size_t *n, size_t *bytes, bool *oom);

#endif
