/*
 * pool.h - a small fork-join thread pool for the host backend.
 *
 * pool_run() runs fn(arg, i) for every i in [0, ntasks) on the calling
 * thread and the pool's helpers, and returns when all have finished. Tasks
 * are handed out one at a time from a shared counter, so uneven tasks
 * balance themselves.
 *
 * Threading: a pool is used by one thread at a time (its owner, a
 * eng_stream's; the test builds assert it); its helpers touch only the
 * job the owner publishes under the pool's mutex.
 */
#ifndef TALLY_POOL_H
#define TALLY_POOL_H

#include <stddef.h>

typedef struct eng_pool eng_pool;

typedef void (*eng_pool_fn)(void *arg, size_t task);

/* A pool that runs jobs on `threads` threads in all, the caller's
 * included (threads - 1 helpers). Returns NULL when threads cannot be
 * started. Free with eng_pool_free(). */
eng_pool *eng_pool_new(unsigned threads);

/* Joins the helpers. NULL is a no-op. */
void eng_pool_free(eng_pool *p);

/* The number of threads a job runs on. */
unsigned eng_pool_threads(const eng_pool *p);

void eng_pool_run(eng_pool *p, size_t ntasks, eng_pool_fn fn, void *arg);

#endif
