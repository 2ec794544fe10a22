/*
 * scan_host.h - the cumulative sum in plain C on the host's cores.
 *
 * The host backend is two things: the reference the OpenCL kernels are
 * tested against, and a selectable device (`host`) for machines without an
 * OpenCL platform. It computes the same operator with the same accuracy
 * contract: integers wrap modulo 2^bits; float32, float16 and bfloat16 add
 * in float32 within 8-element vectors and carry running totals in float64;
 * float64 adds in float64.
 *
 * Threading: a eng_host belongs to one thread at a time (a stream's
 * owner); it fans work out over its own pool.
 */
#ifndef TALLY_SCAN_HOST_H
#define TALLY_SCAN_HOST_H

#include "tensor.h"

typedef struct eng_host eng_host;

/* A host scanner on `threads` threads (0 = one per core of
 * eng_host_cores()). Returns NULL when its threads cannot be started.
 * Free with eng_host_free(). */
eng_host *eng_host_new(unsigned threads);

/* The cores this process may run on: how many its CPU affinity allows (a
 * container's cpuset, taskset), else the online ones; at least 1. Any
 * thread. */
unsigned eng_host_cores(void);

/* NULL is a no-op. */
void eng_host_free(eng_host *h);

unsigned eng_host_threads(const eng_host *h);

/* Scans `in` into `out` as `l` describes. out may equal in; otherwise the
 * two must not overlap. Both hold l->bytes bytes. Returns ENG_E_NOMEM
 * (with a message) if scratch memory cannot be had, else ENG_E_OK. */
eng_err eng_host_scan(eng_host *h, const eng_lines *l, const void *in,
                      void *out, char *msg, size_t msglen);

/* The same on the calling thread alone, with no eng_host: for tensors
 * so small that handing them to another thread costs more than the sum.
 * Thread-safe. */
eng_err eng_host_scan_serial(const eng_lines *l, const void *in, void *out,
                             char *msg, size_t msglen);

/* The same for a strided request (tensor.h's eng_strided): reads and
 * writes every element through the view's strides and touches no other
 * byte of out. out may equal in only when both layouts are the same. */
eng_err eng_host_scan_strided(eng_host *h, const eng_strided *v, const void *in,
                              void *out, char *msg, size_t msglen);
eng_err eng_host_scan_strided_serial(const eng_strided *v, const void *in,
                                     void *out, char *msg, size_t msglen);

/* Whether this backend's strided walk, on `threads` threads, is one of its
 * fast ones, measured against PoCL's kernels on the same cores: float32
 * layouts that transpose (register tiles, tile_host.h) and float32 lines
 * contiguous on both sides (padded rows, NHWC lines), when there are
 * lines enough for every thread (fewer go to the column walk, which is
 * not). Thread-safe. */
bool eng_host_strided_fast(const eng_strided *v, unsigned threads);

#endif
