/*
 * zalloc.h - zeroed memory for the small objects a request makes and
 * frees (its work, its handler's context, its reply's source).
 *
 * glibc's calloc() never takes a chunk from the thread's cache (tcache)
 * as malloc() does: it goes to the arena every time, and the chunk freed
 * then fills the cache that calloc cannot use. For an object of a few
 * hundred bytes made once a request, malloc and memset cost a fraction.
 *
 * Threading: any thread.
 */
#ifndef TALLY_ZALLOC_H
#define TALLY_ZALLOC_H

#include <stdlib.h>
#include <string.h>

/* n zeroed bytes, malloc'd (free with free()); NULL when memory runs
 * out. */
static inline void *zalloc(size_t n)
{
    void *p = malloc(n);
    /* opaque to the compiler, which would turn malloc and memset back
     * into calloc */
    __asm__("" : "+r"(p));
    if (p != NULL)
        memset(p, 0, n);
    return p;
}

#endif
