/*
 * buffer.c - the tensor buffer allocator and its cache.
 *
 * Each buffer is preceded by a 128-byte header recording its capacity, so
 * that eng_buffer_free() knows what it is given. The cache is a small
 * array of free buffers of 64 KiB and more; an allocation takes the
 * smallest one that fits without wasting more than half of it. Buffers
 * from 64 KiB to 2 MiB are rounded up to a power of two, so that one
 * freed serves the next request of about that size: without the cache,
 * glibc gives them back and maps them again, and a 64K-element JSON
 * request paid for about 300 page faults (BENCHMARKS.md).
 *
 * Small buffers (SMALL bytes with their header, all of that one size)
 * are kept too, a few by each thread, with no lock: a small request's
 * body, tensor and answer then cost no aligned_alloc and no free, which
 * in glibc take the slow memalign path. A buffer freed on another thread
 * joins that thread's few; a thread's are freed as it exits. The address
 * sanitizer's builds keep none, so that it sees every use after a free.
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "buffer.h"

#define HEADER 128u
#define MEDIUM ((size_t)64 << 10)
#define LARGE ((size_t)2 << 20)
#define SLOTS 32
#define MAGIC 0x74616c6c79627566ull /* "tallybuf" */
#define SMALL 1024u
#if defined(__SANITIZE_ADDRESS__)
#define SMALL_KEPT 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SMALL_KEPT 0
#endif
#endif
#ifndef SMALL_KEPT
#define SMALL_KEPT 8
#endif

typedef struct {
    uint64_t magic;
    size_t cap; /* usable bytes after the header */
} header;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    header *h;
    size_t cap;
} cache[SLOTS];
static size_t ncached, cached_bytes, budget = (size_t)512 << 20;

/* This thread's small buffers. */
typedef struct {
    header *h[SMALL_KEPT + 1];
    unsigned n;
    bool keyed; /* small_key holds it: the thread's exit frees them */
} small_kept;
static _Thread_local small_kept small;
static const unsigned small_max = SMALL_KEPT; /* 0 under ASan */
static pthread_key_t small_key; /* its value: &small, once it keeps one */
static pthread_once_t small_once = PTHREAD_ONCE_INIT;

static void small_clear(void *kept)
{
    small_kept *k = kept;
    k->keyed = false;
    while (k->n > 0)
        free(k->h[--k->n]);
}

static void small_key_make(void)
{
    if (pthread_key_create(&small_key, small_clear) != 0)
        abort(); /* at the first small free: no thread could go on */
}

static void *data_of(header *h)
{
    return (char *)h + HEADER;
}

static header *header_of(void *p)
{
    return (header *)((char *)p - HEADER);
}

void *eng_buffer_alloc(size_t bytes)
{
    if (bytes > SIZE_MAX - LARGE - HEADER)
        return NULL;
    if (bytes + HEADER >= MEDIUM) {
        pthread_mutex_lock(&mu);
        size_t best = SLOTS;
        for (size_t i = 0; i < ncached; i++)
            if (cache[i].cap >= bytes && cache[i].cap / 2 <= bytes
                && (best == SLOTS || cache[i].cap < cache[best].cap))
                best = i;
        if (best != SLOTS) {
            header *h = cache[best].h;
            cached_bytes -= cache[best].cap;
            cache[best] = cache[--ncached];
            pthread_mutex_unlock(&mu);
            return data_of(h);
        }
        pthread_mutex_unlock(&mu);
        size_t total;
        header *h;
        if (bytes + HEADER >= LARGE) {
            total = (bytes + HEADER + LARGE - 1) / LARGE * LARGE;
            h = aligned_alloc(LARGE, total);
            if (h != NULL)
                madvise(h, total, MADV_HUGEPAGE);
        } else {
            for (total = MEDIUM; total < bytes + HEADER; total *= 2)
                ;
            h = aligned_alloc(128, total);
        }
        if (h == NULL)
            return NULL;
        h->magic = MAGIC;
        h->cap = total - HEADER;
        return data_of(h);
    }
    size_t total = bytes + HEADER <= SMALL ? SMALL
                                           : (bytes + HEADER + 127) / 128 * 128;
    if (total == SMALL && small.n > 0)
        return data_of(small.h[--small.n]);
    header *h = aligned_alloc(128, total);
    if (h == NULL)
        return NULL;
    h->magic = MAGIC;
    h->cap = total - HEADER;
    return data_of(h);
}

void eng_buffer_free(void *p)
{
    if (p == NULL)
        return;
    header *h = header_of(p);
    if (h->magic != MAGIC)
        abort(); /* not ours: a programming error */
    if (h->cap + HEADER == SMALL && small.n < small_max) {
        if (!small.keyed) {
            pthread_once(&small_once, small_key_make);
            small.keyed = pthread_setspecific(small_key, &small) == 0;
        }
        small.h[small.n++] = h;
        return;
    }
    if (h->cap + HEADER >= MEDIUM) {
        pthread_mutex_lock(&mu);
        if (ncached < SLOTS && cached_bytes + h->cap <= budget) {
            cache[ncached].h = h;
            cache[ncached].cap = h->cap;
            ncached++;
            cached_bytes += h->cap;
            h = NULL;
        }
        pthread_mutex_unlock(&mu);
    }
    free(h);
}

void eng_buffer_cache_limit(size_t bytes)
{
    pthread_mutex_lock(&mu);
    budget = bytes;
    pthread_mutex_unlock(&mu);
    if (cached_bytes > bytes)
        eng_buffer_cache_clear();
}

void eng_buffer_cache_clear(void)
{
    small_clear(&small);
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < ncached; i++)
        free(cache[i].h);
    ncached = 0;
    cached_bytes = 0;
    pthread_mutex_unlock(&mu);
}
