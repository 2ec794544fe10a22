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
 */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "buffer.h"

#define HEADER 128u
#define MEDIUM ((size_t)64 << 10)
#define LARGE ((size_t)2 << 20)
#define SLOTS 32
#define MAGIC 0x74616c6c79627566ull /* "tallybuf" */

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
    size_t total = (bytes + HEADER + 127) / 128 * 128;
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
    pthread_mutex_lock(&mu);
    for (size_t i = 0; i < ncached; i++)
        free(cache[i].h);
    ncached = 0;
    cached_bytes = 0;
    pthread_mutex_unlock(&mu);
}
