/*
 * mutex.h - a mutex that knows which thread holds it, so that a function
 * whose contract is "under the mutex" asserts it (LOCK_HELD) instead of
 * saying it in a comment alone, as libuv and h2o assert the loop a call
 * belongs to.
 *
 * In builds with TALLY_OWNER_ASSERTS (DEBUG=1 and the sanitizer builds,
 * as loop_owner.h's asserts) the lock records its holder, and
 * LOCK_HELD(m) aborts (invariant.h: the file, the line, what broke) when
 * the caller does not hold m; elsewhere the wrapper is a uv_mutex_t and
 * LOCK_HELD nothing.
 *
 * Threading: a mutex; init and destroy on one thread, with no holder.
 */
#ifndef TALLY_MUTEX_H
#define TALLY_MUTEX_H

#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "invariant.h"

typedef struct {
    uv_mutex_t mu;
#ifdef TALLY_OWNER_ASSERTS
    atomic_uintptr_t holder; /* mutex_self() of its holder; 0: none */
#endif
} mutex;

#ifdef TALLY_OWNER_ASSERTS
/* One byte of each thread's own (mutex.c), whose address names it. */
extern _Thread_local char mutex_me;
static inline uintptr_t mutex_self(void)
{
    return (uintptr_t)&mutex_me;
}
#define MUTEX_HOLD(m) atomic_store(&(m)->holder, mutex_self())
#define MUTEX_FREE(m) atomic_store(&(m)->holder, (uintptr_t)0)
/* The caller holds m. */
#define LOCK_HELD(m)                                                           \
    do {                                                                       \
        if (atomic_load(&(m)->holder) != mutex_self())                         \
            invariant_failed(__FILE__, __LINE__,                               \
                             "the caller holds " #m);                          \
    } while (0)
#else
#define MUTEX_HOLD(m) ((void)(m))
#define MUTEX_FREE(m) ((void)(m))
#define LOCK_HELD(m) ((void)(m))
#endif

static inline int mutex_init(mutex *m)
{
#ifdef TALLY_OWNER_ASSERTS
    atomic_init(&m->holder, 0);
#endif
    return uv_mutex_init(&m->mu);
}

static inline void mutex_destroy(mutex *m)
{
    uv_mutex_destroy(&m->mu);
}

static inline void mutex_lock(mutex *m)
{
    uv_mutex_lock(&m->mu);
    MUTEX_HOLD(m);
}

static inline void mutex_unlock(mutex *m)
{
    MUTEX_FREE(m);
    uv_mutex_unlock(&m->mu);
}

/* uv_cond_wait() and uv_cond_timedwait() on m, which the caller holds
 * again when they return. */
static inline void mutex_wait(uv_cond_t *cv, mutex *m)
{
    MUTEX_FREE(m);
    uv_cond_wait(cv, &m->mu);
    MUTEX_HOLD(m);
}

static inline int mutex_timedwait(uv_cond_t *cv, mutex *m, uint64_t ns)
{
    MUTEX_FREE(m);
    int rc = uv_cond_timedwait(cv, &m->mu, ns);
    MUTEX_HOLD(m);
    return rc;
}

#endif
