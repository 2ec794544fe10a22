/*
 * loop_owner.h - which thread a loop belongs to, for "am I that thread?"
 *
 * A loop's thread records itself once (loop_owner_set), before or while the
 * loop first runs; any thread may then ask loop_owner_is_me(), and only the
 * recorded thread gets true. Used where a wake through a uv_async would be
 * sent to the caller's own loop: that thread can act on this turn instead.
 *
 * Threading: loop_owner_set on the thread that runs the loop (an HTTP
 * thread, a gRPC loop thread, the loop thread, the store's thread), once;
 * loop_owner_is_me on any thread.
 */
#ifndef TALLY_LOOP_OWNER_H
#define TALLY_LOOP_OWNER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <uv.h>

typedef struct {
    uv_thread_t self; /* written once, before known */
    atomic_bool known;
} loop_owner;

static inline void loop_owner_set(loop_owner *o)
{
    o->self = uv_thread_self();
    atomic_store(&o->known, true);
}

static inline bool loop_owner_is_me(loop_owner *o)
{
    if (!atomic_load(&o->known))
        return false;
    uv_thread_t me = uv_thread_self();
    return uv_thread_equal(&me, &o->self) != 0;
}

#endif
