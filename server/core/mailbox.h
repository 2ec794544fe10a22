/*
 * mailbox.h - the one way into a libuv loop from other threads: items in
 * a list under a mutex, and a wake. From another thread the wake is a
 * uv_async; from the loop's own thread (mailbox_own) it is a zero timer,
 * which runs before the loop next waits, without a write to the async's
 * descriptor and a turn to read it back. Every door's loop (HTTP, gRPC)
 * and the Redis store's take their work in through one.
 *
 * The loop's callback gets the items in the order they were posted, all
 * that came since its last call (NULL: a wake alone), and owns them. A
 * mailbox closed (on the loop's thread) takes no more; its handles are
 * closed under its mutex, so no thread wakes a loop that has gone.
 *
 * Threading: a mailbox belongs to the thread that runs its loop (the
 * loop thread, a gRPC loop thread, an HTTP thread or the store's
 * thread): mailbox_init() there or before the loop runs, mailbox_own()
 * there once, mailbox_drain() and mailbox_close() there; mailbox_post()
 * from any thread.
 */
#ifndef TALLY_MAILBOX_H
#define TALLY_MAILBOX_H

#include <stdbool.h>
#include <uv.h>

#include "loop_owner.h"

typedef struct mailbox_item mailbox_item;
struct mailbox_item {
    mailbox_item *next;
};

typedef struct mailbox mailbox;
typedef void (*mailbox_fn)(mailbox *m, mailbox_item *items);

struct mailbox {
    mailbox_fn fn;
    void *data; /* the owner's */
    uv_async_t wake;
    uv_timer_t soon; /* the loop's own thread's wake */
    uv_mutex_t mu;   /* guards the list and closed */
    mailbox_item *head, *tail;
    unsigned count, limit;
    bool closed;
    loop_owner owner;
};

/* A mailbox on loop, calling fn with what comes; limit: items waiting
 * at most (0: no bound). */
void mailbox_init(mailbox *m, uv_loop_t *loop, unsigned limit, mailbox_fn fn,
                  void *data);

/* The calling thread is the loop's: its posts take the timer. */
void mailbox_own(mailbox *m);

/* Whether the calling thread is the loop's (mailbox_own's). */
static inline bool mailbox_on_loop(mailbox *m)
{
    return loop_owner_is_me(&m->owner);
}

/* Posts item (NULL: a wake alone) and wakes the loop. False when the
 * mailbox is closed or full: item is still the caller's. */
bool mailbox_post(mailbox *m, mailbox_item *item);

/* Calls fn now with what has come. */
void mailbox_drain(mailbox *m);

/* Takes no more; closes the handles. The items still waiting: the
 * caller's now (oldest first; NULL: none). */
mailbox_item *mailbox_close(mailbox *m);

#endif
