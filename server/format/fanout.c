/*
 * fanout.c - the fanout helpers, shared, for splitting one piece of work.
 *
 * Each fanout_run() call is a batch on a list under one mutex. Parts are
 * claimed one at a time, by index, under that mutex: by the caller and by
 * the helpers it wakes. The caller runs parts until none is left to claim,
 * then waits on its batch's condition for the ones helpers took, and
 * unlinks the batch.
 *
 * There is one helper per CPU the process may run on, pinned to it, and
 * the caller wakes only helpers on other CPUs than its own. Measured on a
 * 2-vCPU machine (BENCHMARKS.md): a helper woken without a CPU of its own
 * was often placed by the scheduler on the caller's CPU, where it ran its
 * part before or after the caller's, never beside it. A helper that cannot
 * be pinned is woken from any CPU.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>

#include "fanout.h"
#include "list.h"
#include "mutex.h"

typedef struct batch {
    void (*fn)(void *part);
    char *arg;
    size_t stride;
    unsigned n, next, done;
    uv_cond_t finished; /* done == n */
    list_node link;     /* in batches */
} batch;

typedef struct {
    uv_cond_t wake;
    int cpu; /* pinned to; -1 when not pinned */
    bool idle;
} helper_t;

static mutex mu; /* made by start() */
static list_node batches; /* under mu, the newest first */
static helper_t helpers[FANOUT_MAX];
static unsigned nhelpers;
static unsigned width = 1;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* A batch with a part left to claim; NULL when none. Under mu. */
static batch *claimable(void)
{
    LOCK_HELD(&mu);
    for (list_node *n = list_first(&batches); n != NULL;
         n = list_next(&batches, n)) {
        batch *b = container_of(n, batch, link);
        if (b->next < b->n)
            return b;
    }
    return NULL;
}

/* Runs part i of b outside the lock, and counts it done. Under mu, which
 * it releases and takes back. */
static void run_part(batch *b, unsigned i)
{
    LOCK_HELD(&mu);
    mutex_unlock(&mu);
    b->fn(b->arg + (size_t)i * b->stride);
    mutex_lock(&mu);
    if (++b->done == b->n)
        uv_cond_signal(&b->finished);
}

static void *helper(void *arg)
{
    helper_t *h = arg;
    mutex_lock(&mu);
    for (;;) {
        batch *b = claimable();
        if (b == NULL) {
            h->idle = true;
            mutex_wait(&h->wake, &mu);
            h->idle = false;
            continue;
        }
        run_part(b, b->next++);
    }
    return NULL;
}

static void start(void)
{
    if (mutex_init(&mu) != 0)
        return; /* no helpers: every part on the caller's thread */
    list_init(&batches);
    cpu_set_t allowed;
    int cpus[CPU_SETSIZE], ncpus = 0;
    if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &allowed))
                cpus[ncpus++] = c;
    if (ncpus < 2)
        return; /* nothing to share */
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    mutex_lock(&mu);
    for (int k = 0; k < ncpus && nhelpers < FANOUT_MAX; k++) {
        helper_t *h = &helpers[nhelpers];
        if (uv_cond_init(&h->wake) != 0)
            break;
        h->cpu = cpus[k];
        pthread_t t;
        if (pthread_create(&t, &attr, helper, h) != 0) {
            uv_cond_destroy(&h->wake);
            break;
        }
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(cpus[k], &one);
        if (pthread_setaffinity_np(t, sizeof one, &one) != 0)
            h->cpu = -1;
        nhelpers++;
    }
    mutex_unlock(&mu);
    pthread_attr_destroy(&attr);
    width = nhelpers > 1 ? (ncpus < FANOUT_MAX ? (unsigned)ncpus : FANOUT_MAX)
                         : 1;
}

unsigned fanout_width(void)
{
    pthread_once(&once, start);
    return width;
}

void fanout_run(void (*fn)(void *part), void *arg, size_t stride, unsigned n)
{
    if (n <= 1 || fanout_width() == 1) {
        for (unsigned i = 0; i < n; i++)
            fn((char *)arg + (size_t)i * stride);
        return;
    }
    batch b = {.fn = fn, .arg = arg, .stride = stride, .n = n};
    if (uv_cond_init(&b.finished) != 0) {
        for (unsigned i = 0; i < n; i++)
            fn((char *)arg + (size_t)i * stride);
        return;
    }
    int me = sched_getcpu();
    mutex_lock(&mu);
    list_push_front(&batches, &b.link);
    /* wake idle helpers on other CPUs, one per part beyond the caller's */
    unsigned want = n - 1;
    for (unsigned k = 0; k < nhelpers && want > 0; k++)
        if (helpers[k].idle && (helpers[k].cpu != me || helpers[k].cpu < 0)) {
            helpers[k].idle = false; /* not woken twice */
            uv_cond_signal(&helpers[k].wake);
            want--;
        }
    while (b.next < b.n)
        run_part(&b, b.next++);
    while (b.done < b.n)
        mutex_wait(&b.finished, &mu);
    list_remove(&b.link);
    mutex_unlock(&mu);
    uv_cond_destroy(&b.finished);
}
