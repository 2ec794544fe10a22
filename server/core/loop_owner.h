/*
 * loop_owner.h - which thread owns a thing (a loop, a writer's state),
 * for "am I that thread?" and for asserting it.
 *
 * The owning thread records itself once (loop_owner_set), before or
 * while it first runs; any thread may then ask loop_owner_is_me(), and
 * only the recorded thread gets true. loop_owner_claim() records the
 * first caller, for a thing whose first call comes from its owner (the
 * scheduler's tick). OWNER_ASSERT(o) aborts, naming the function, when
 * a thread other than the recorded one calls it: in builds with
 * TALLY_OWNER_ASSERTS (DEBUG=1 and the sanitizer builds), as libuv and
 * h2o assert the loop a call belongs to; elsewhere it is nothing.
 *
 * Threading: loop_owner_set on the owning thread, once; loop_owner_is_me
 * and OWNER_ASSERT on any thread.
 */
#ifndef TALLY_LOOP_OWNER_H
#define TALLY_LOOP_OWNER_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
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

/* Whether the caller is o's owner, recording it when o has none yet (one
 * thread makes the first call: no race on `self`). */
static inline bool loop_owner_claim(loop_owner *o)
{
    if (!atomic_load(&o->known))
        loop_owner_set(o);
    return loop_owner_is_me(o);
}

static inline void loop_owner_fail(const char *fn, const char *file, int line)
{
    fprintf(stderr, "%s:%d: %s called on a thread that does not own it\n", file,
            line, fn);
    abort();
}

#ifdef TALLY_OWNER_ASSERTS
#define OWNER_ASSERTS 1
/* o's owner, once recorded, is the caller. */
#define OWNER_ASSERT(o)                                                        \
    do {                                                                       \
        if (atomic_load(&(o)->known) && !loop_owner_is_me(o))                  \
            loop_owner_fail(__func__, __FILE__, __LINE__);                     \
    } while (0)
/* The first caller is o's owner, and every later one is the same. */
#define OWNER_CLAIM(o)                                                         \
    do {                                                                       \
        if (!loop_owner_claim(o))                                              \
            loop_owner_fail(__func__, __FILE__, __LINE__);                     \
    } while (0)
#else
#define OWNER_ASSERTS 0
/* not evaluated: an owner found by a call costs nothing here */
#define OWNER_ASSERT(o) ((void)sizeof(o))
#define OWNER_CLAIM(o) ((void)sizeof(o))
#endif

#endif
