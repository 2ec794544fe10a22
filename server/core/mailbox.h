/*
 * mailbox.h - the one way into a libuv loop from other threads: each loop
 * has one mailbox (one wake, one mutex), and each kind of message a
 * receiver of its own on it (mailbox_rx: a list of items, a callback).
 * An HTTP loop's receivers are its door's (sockets to adopt, the flags)
 * and a shared store's connection there; a gRPC loop's, its door's, its
 * transport's (resumed calls) and the store's; the Redis store's own
 * thread, the store's alone. From another thread the wake is a
 * uv_async; from the loop's own thread (mailbox_own) a zero timer, which
 * runs before the loop next waits, without a write to the async's
 * descriptor and a turn to read it back.
 *
 * A receiver's callback gets its items in the order they were posted,
 * all that came since its last call (NULL: a wake alone), and owns them.
 * A receiver that leaves takes no more; a mailbox closed (on the loop's
 * thread, once every receiver has left) takes nothing, and its handles
 * are closed under its mutex, so no thread wakes a loop that has gone.
 *
 * Threading: a mailbox belongs to the thread that runs its loop (the
 * loop thread, a gRPC loop thread, an HTTP thread or the store's
 * thread): mailbox_init() and mailbox_listen() there or before the loop
 * runs, mailbox_own() there once, mailbox_drain(), mailbox_leave() and
 * mailbox_close() there; mailbox_post() from any thread. The mutex
 * guards every receiver's list, count and flags.
 */
#ifndef TALLY_MAILBOX_H
#define TALLY_MAILBOX_H

#include <stdbool.h>
#include <uv.h>

#include "loop_owner.h"

#define MAILBOX_RX_MAX 4 /* receivers on one loop at most */

typedef struct mailbox_item mailbox_item;
struct mailbox_item {
    mailbox_item *next;
};

typedef struct mailbox mailbox;
typedef struct mailbox_rx mailbox_rx;
typedef void (*mailbox_fn)(mailbox_rx *rx, mailbox_item *items);

struct mailbox_rx {
    mailbox *m;
    mailbox_fn fn;
    void *data; /* the receiver's owner's */
    mailbox_item *head, *tail;
    unsigned count, limit;
    bool woken; /* a wake alone came */
    bool gone;  /* left: takes no more */
};

struct mailbox {
    uv_loop_t *loop;
    uv_async_t wake;
    uv_timer_t soon; /* the loop's own thread's wake */
    uv_mutex_t mu;
    mailbox_rx *rx[MAILBOX_RX_MAX]; /* the loop thread's */
    bool closed;
    loop_owner owner;
};

/* A mailbox on loop, with no receiver yet. */
void mailbox_init(mailbox *m, uv_loop_t *loop);

/* The calling thread is the loop's: its posts take the timer. */
void mailbox_own(mailbox *m);

/* Whether the calling thread is the loop's (mailbox_own's). */
static inline bool mailbox_on_loop(mailbox *m)
{
    return loop_owner_is_me(&m->owner);
}

/* rx joins m: fn gets what is posted to it; limit: items waiting at most
 * (0: no bound). False: m has MAILBOX_RX_MAX receivers, or is closed. */
bool mailbox_listen(mailbox *m, mailbox_rx *rx, unsigned limit, mailbox_fn fn,
                    void *data);

/* Posts item (NULL: a wake alone) to rx and wakes its loop. False when rx
 * has left, its mailbox is closed or rx is full: item is still the
 * caller's. */
bool mailbox_post(mailbox_rx *rx, mailbox_item *item);

/* Calls rx's fn now with what has come for it. */
void mailbox_drain(mailbox_rx *rx);

/* rx takes no more and leaves its mailbox. The items still waiting for
 * it: the caller's now (oldest first; NULL: none). */
mailbox_item *mailbox_leave(mailbox_rx *rx);

/* Takes no more; closes the handles. Every receiver has left. */
void mailbox_close(mailbox *m);

#endif
