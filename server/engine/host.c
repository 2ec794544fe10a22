/*
 * host.c - the host backend's object: a thread pool (host.h,
 * scan_host.h). The scans themselves are scan_host.c's.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include "host.h"

struct eng_host {
    eng_pool *pool;
};

unsigned eng_host_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        int n = CPU_COUNT(&set);
        if (n > 0)
            return (unsigned)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

eng_host *eng_host_new(unsigned threads)
{
    if (threads == 0)
        threads = eng_host_cores();
    eng_host *h = calloc(1, sizeof *h);
    if (h == NULL)
        return NULL;
    h->pool = eng_pool_new(threads);
    if (h->pool == NULL) {
        free(h);
        return NULL;
    }
    return h;
}

void eng_host_free(eng_host *h)
{
    if (h == NULL)
        return;
    eng_pool_free(h->pool);
    free(h);
}

unsigned eng_host_threads(const eng_host *h)
{
    return eng_pool_threads(h->pool);
}

eng_pool *eng_host_pool(const eng_host *h)
{
    return h->pool;
}
