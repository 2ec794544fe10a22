/*
 * pool.c - fork-join over pthreads.
 *
 * The owner publishes a job (fn, arg, ntasks) and bumps a generation
 * number; helpers wake on the generation change, take task indices from an
 * atomic counter until none are left, and report completion. The owner
 * works on the same job and then waits until every helper has checked out
 * of it, so the job's memory may be released as soon as pool_run returns.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "pool.h"

struct eng_pool {
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    unsigned threads;
    pthread_t *helpers;
    unsigned long generation; /* bumped for each job; 0 = none yet */
    int stopping;
    unsigned busy; /* helpers still inside the current job */

    eng_pool_fn fn;
    void *arg;
    size_t ntasks;
    atomic_size_t next;
    atomic_bool running; /* a job's owner is inside eng_pool_run */
};

/* One thread at a time runs jobs on a pool (pool.h): in the builds with
 * owner asserts (core/loop_owner.h's TALLY_OWNER_ASSERTS), eng_pool_run
 * marks itself in (inside) and out; finding the mark already so, another
 * caller is inside at once, and it aborts, naming the pool. */
static void owner_mark(eng_pool *p, bool inside)
{
#ifdef TALLY_OWNER_ASSERTS
    if (atomic_exchange(&p->running, inside) == inside) {
        fprintf(stderr, "pool.c: eng_pool_run on pool %p from two threads at "
                        "once\n", (void *)p);
        abort();
    }
#else
    (void)p;
    (void)inside;
#endif
}

static void work(eng_pool *p)
{
    for (;;) {
        size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->ntasks)
            return;
        p->fn(p->arg, i);
    }
}

static void *helper_main(void *vp)
{
    eng_pool *p = vp;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stopping && p->generation == seen)
            pthread_cond_wait(&p->start, &p->mu);
        if (p->stopping)
            break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        work(p);
        pthread_mutex_lock(&p->mu);
        if (--p->busy == 0)
            pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

eng_pool *eng_pool_new(unsigned threads)
{
    if (threads == 0)
        threads = 1;
    eng_pool *p = calloc(1, sizeof *p);
    if (p == NULL)
        return NULL;
    p->threads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    atomic_init(&p->next, 0);
    atomic_init(&p->running, false);
    if (threads > 1) {
        p->helpers = calloc(threads - 1, sizeof *p->helpers);
        if (p->helpers == NULL) {
            eng_pool_free(p);
            return NULL;
        }
        for (unsigned i = 0; i < threads - 1; i++) {
            if (pthread_create(&p->helpers[i], NULL, helper_main, p) != 0) {
                p->threads = i + 1; /* join only those started */
                eng_pool_free(p);
                return NULL;
            }
        }
    }
    return p;
}

void eng_pool_free(eng_pool *p)
{
    if (p == NULL)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    if (p->helpers != NULL)
        for (unsigned i = 0; i + 1 < p->threads; i++)
            pthread_join(p->helpers[i], NULL);
    free(p->helpers);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

unsigned eng_pool_threads(const eng_pool *p)
{
    return p->threads;
}

void eng_pool_run(eng_pool *p, size_t ntasks, eng_pool_fn fn, void *arg)
{
    owner_mark(p, true);
    if (p->threads == 1 || ntasks <= 1) {
        for (size_t i = 0; i < ntasks; i++)
            fn(arg, i);
        owner_mark(p, false);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->ntasks = ntasks;
    atomic_store(&p->next, 0);
    p->busy = p->threads - 1;
    p->generation++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);

    work(p);

    pthread_mutex_lock(&p->mu);
    while (p->busy > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    owner_mark(p, false);
}
