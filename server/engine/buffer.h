/*
 * buffer.h - memory for tensors: aligned, huge-paged when large, reused.
 *
 * Request bodies and tensors are allocated here. Every buffer is aligned to
 * 128 bytes, which lets a device that shares memory with the host (PoCL)
 * use it in place. Buffers of 2 MiB and more sit on 2 MiB boundaries with
 * transparent huge pages requested. Buffers of 64 KiB and more are kept
 * when freed, up to a budget, for the next request of a similar size: a
 * fresh 64 MiB buffer costs thousands of page faults and the kernel
 * zeroing it, a reused one nothing. Small buffers are kept too, a few
 * by each thread, for that thread's next ones.
 *
 * Threading: any thread; the large buffers' cache has its own mutex, the
 * small ones belong to the thread that freed them.
 */
#ifndef TALLY_BUFFER_H
#define TALLY_BUFFER_H

#include <stddef.h>

/* At least `bytes` bytes (a zero-byte request gets a small buffer), or NULL
 * when memory runs out. Contents are unspecified. Free with
 * eng_buffer_free(). */
void *eng_buffer_alloc(size_t bytes);

/* Returns a buffer from eng_buffer_alloc(); NULL is a no-op. */
void eng_buffer_free(void *p);

/* How many bytes of freed large buffers may be kept for reuse (default
 * 512 MiB; 0 keeps none). */
void eng_buffer_cache_limit(size_t bytes);

/* Frees every cached large buffer, and the calling thread's small ones. */
void eng_buffer_cache_clear(void);

#endif
