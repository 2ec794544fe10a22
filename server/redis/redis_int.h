/*
 * redis_int.h - what the Redis client's two files share (redis_store.c:
 * the ops, their replies and the queues; redis_conn.c: the connection and
 * the store's life): the store's and an op's insides, and the functions
 * each calls in the other. Nothing outside server/redis/ includes it.
 *
 * Threading: redis_store.c's header says who owns what.
 */
#ifndef TALLY_REDIS_INT_H
#define TALLY_REDIS_INT_H

#include <hiredis/async.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

#include "kv.h"
#include "list.h"
#include "mailbox.h"
#include "redis_store.h"

#define MAX_ID 4096
#define MAX_PREFIX 64
#define BACKOFF_MIN_MS 100
#define BACKOFF_MAX_MS 5000
#define SWEEP_MS 10

/* A key holds a string: its version, VERSION_LEN bytes (32 hex digits:
 * a 128-bit value drawn for the write that made it), then the record. The
 * write: compare the version, then replace, delete or renew the time to live.
 * KEYS[1] the key; ARGV: the version read
 * ("" for none: GETRANGE's answer for a missing key), the time to live
 * in ms (0: none; "keep": the key's own), "put", "del" or "ttl", the new
 * value (the next version, then the record). Answers 1 (done), 0
 * (another version is there: none), or the value there. Two commands a
 * write, where a hash took three (HGET, HSET, PEXPIRE): the script's
 * cost is most of the store's time per write (BENCHMARKS.md, "Sequences
 * in Redis: two commands a write"). GETRANGE's bounds
 * are Lua strings, not numbers: Redis turns a number argument into text with
 * sprintf("%.17g") on every call. The '31' is VERSION_LEN - 1
 * (a _Static_assert below ties them). */
#define VERSION_LEN 32
#define SCRIPT_LAST "31"
_Static_assert(VERSION_LEN - 1 == 31, "SCRIPT_LAST is VERSION_LEN - 1");
/* The write script's text (redis_store.c). */
extern const char redis_script[];
extern const size_t redis_script_len;

typedef struct op op;
struct op {
    mailbox_item in;   /* first: in the store's mailbox */
    list_node queued;  /* in waiting, or in delayed */
    list_node in_sent; /* in sent: its reply will come */
    redis_store *s;
    int kind;
    bool del, touch, finished;
    bool eval; /* the script by its text: Redis had forgotten its SHA-1 */
    bool waiting_replicas; /* written; waiting for a WAIT to cover it */
    op *wnext;             /* in wait_queue, or in a WAIT's batch */
    uint8_t *key;          /* prefix + id, in the op's own allocation */
    size_t keylen;
    kv_version expect, to; /* a write's: the version read, and its own */
    uint64_t ttl_ms, deadline_ns, sent_ns;
    uint64_t not_before_ns; /* a read asked for later: sent from then on */
    uint8_t *rec; /* a write's value, after the key; NULL for a read or a
                   * delete */
    size_t len;
    kv_done done;
    void *ctx;
};

struct redis_store {
    kv base; /* its ops: redis_store.c's */
    redis_url url;
    char prefix[MAX_PREFIX + 1];
    char sha[41]; /* the script's SHA-1, for EVALSHA */
    size_t prefix_len;
    uv_thread_t thread;
    uv_loop_t own;          /* the loop of the store's own thread */
    uv_loop_t *loop;        /* &own, or the caller's (redis_store_open_on) */
    bool attached;          /* on the caller's loop: no thread of its own */
    uint64_t timeout_ms;    /* the open's, for stores opened like this one */
    unsigned wait_replicas; /* WAIT after each write; 0: none */
    mailbox own_mb;         /* own's */
    mailbox *mb;            /* &own_mb, or the caller's loop's */
    mailbox_rx in;          /* the ops asked for, and the close's wake */
    uv_timer_t retry, sweep, open_timer, connect_timer, later;
    uv_prepare_t flush;  /* the connection's writes, once a turn */
    uint64_t connect_ms; /* a connect's (and its handshake's) time */

    uv_mutex_t mu; /* guards the opening handshake */
    uv_cond_t opened_cv;
    atomic_bool closing;
    int opened; /* 0 while opening, 1 open, -1 failed */
    char open_msg[512];

    /* the loop thread's */
    bool stopping; /* it has seen closing */
    bool dropping; /* freeing a connection that took too long */
    redisAsyncContext *ac;
    bool up, handshake_failed;
    char handshake_err[256];
    list_node waiting; /* ops for the connection, oldest first */
    list_node delayed; /* asked for later: by not_before_ns, the soonest first */
    list_node sent;    /* ops sent, their replies to come */
    /* --state-store-wait: written ops waiting for the next WAIT, and
     * whether one is on its way (a WAIT covers every write sent before
     * it on the connection, so one WAIT serves every op written
     * meanwhile: replication's group commit) */
    op *wait_queue, *wait_tail;
    bool wait_inflight;
    unsigned backoff_ms;
    bool ever_up;

    atomic_bool stat_up;
    atomic_ullong answered, rtt_ns, failures, reconnects;
    atomic_int durability; /* kv_durability */
    atomic_bool durability_asked;
};

/* redis_store.c: an op's end (failed, with why); the ops waiting for the
 * connection, sent now that it is up; the ops written and waiting for
 * replicas, failed (the connection went); the loop's wake and prepare
 * step. The loop's thread. */
void redis_fail(op *o, const char *why);
void redis_send_waiting(redis_store *s);
void redis_fail_wait_queue(redis_store *s, const char *why);
void redis_on_mail(mailbox_rx *rx, mailbox_item *items);
void redis_on_flush(uv_prepare_t *h);

/* redis_conn.c: closing (s->closing set): every op fails, the connection
 * goes, the handles close. The loop's thread. */
void redis_shut(redis_store *s);

/* redis_conn.c: another connection like `like`, on the loop of mb (a
 * receiver on it); stopping one opened so; freeing any (kv.h's open_on,
 * stop and close). */
kv *redis_open_on(kv *like, mailbox *mb, char *msg, size_t msglen);
void redis_stop(kv *k);
void redis_close(kv *k);

/* redis_store.c: the ops every store has (kv.h). */
extern const kv_ops redis_ops;

#endif
