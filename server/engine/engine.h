/*
 * engine.h - the scan engine: the cumulative sum of a tensor along an axis.
 *
 * An engine is one compute device: an OpenCL device, or the host's cores.
 * A stream is a lane of work on it (an OpenCL command queue, or a host
 * thread pool); a daemon gives each of its device workers one stream.
 *
 *   eng_engine_options o;
 *   eng_engine_options_init(&o);           // device "auto", warm-up on
 *   eng_engine *e; eng_stream *s;
 *   eng_engine_open(&o, &e, msg, sizeof msg);
 *   eng_stream_open(e, &s, msg, sizeof msg);
 *   eng_scan_desc d = {.dtype = TX_FLOAT32, .rank = 2,
 *                        .shape = {3, 4}, .axis = -1};
 *   eng_scan(s, &d, in, out, msg, sizeof msg);   // out may be in
 *   eng_stream_close(s); eng_engine_close(e);
 *
 * Semantics are DirectML's DML_CUMULATIVE_SUMMATION_OPERATOR_DESC and
 * OpenVINO's CumSum-3: any axis (negative counts from the back), increasing
 * or decreasing (reverse), inclusive or exclusive, rank 1 and up, every
 * dtype of dtype.h. Integers wrap modulo 2^bits. See README.md for the
 * accuracy of the float types.
 *
 * Threading: an engine may be shared by any number of threads. A stream
 * must be used by one thread at a time. Every function reports failure
 * through its eng_err return and, where it takes one, a message buffer
 * (msg may be NULL); nothing is written to `out` on failure other than
 * possibly partial results of a failed device run.
 */
#ifndef TALLY_ENGINE_H
#define TALLY_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "errors.h"
#include "tensor.h"

typedef struct eng_engine eng_engine;
typedef struct eng_stream eng_stream;

/* Receives one log line (no trailing newline), e.g. to say that no OpenCL
 * platform was found and the host backend is in use. */
typedef void (*eng_log_fn)(void *user, const char *line);

typedef struct {
    /* NULL/"auto", "host", "gpu", "cpu", "P:D" or a name substring; see
     * cl_device.h. "auto" falls back to the host backend, with a log line,
     * when OpenCL has no device at all. */
    const char *device;
    /* Kernel layout: NULL/"auto", "cpu" or "gpu", plus overrides
     * (cl_program.h). Tests use it to run both layouts on one device. */
    const char *layout;
    /* Build every kernel at open so that no request pays for it. */
    bool warmup;
    /* Threads per host stream (host backend only); 0: one per core. */
    unsigned host_threads;
    /* An OpenCL CPU device that shares the host's memory hands the scans
     * the host backend's code does faster (see eng_scan()) to that code,
     * on threads of the stream's own; true keeps every scan in the
     * device's kernels (tests use it to cover them). */
    bool kernels_only;
    /* Where log lines go; NULL: standard error, prefixed "engine: ". */
    eng_log_fn log;
    void *log_user;
    /* Testing (OpenCL devices only): once fault_after_ms has passed since
     * the device's kernels were built (the engine opened with warm-up, or
     * eng_engine_warmup() last returned ENG_E_OK), every fault_every-th
     * launch (1: each one) is refused as a broken device's would be, and
     * fails with ENG_E_LAUNCH;
     * with fault_late it runs and then fails with ENG_E_DEVICE (see
     * scan_cl.h). 0: no faults. Warm-up launches never fail. */
    unsigned fault_every, fault_after_ms;
    bool fault_late;
    /* Testing (OpenCL devices only): eng_engine_warmup() fails as a
     * kernel that does not build would, with ENG_E_DEVICE. */
    bool fault_build;
} eng_engine_options;

/* Defaults: device "auto", layout "auto", warm-up on, host_threads 0. */
void eng_engine_options_init(eng_engine_options *o);

/* Opens the device the options name. The strings in o are copied.
 * Free *out with eng_engine_close(). */
eng_err eng_engine_open(const eng_engine_options *o, eng_engine **out,
                        char *msg, size_t msglen);

/* NULL is a no-op. Every stream must have been closed. */
void eng_engine_close(eng_engine *e);

/* The longest single device spec (cl_device.h's ENG_SPEC_LEN). */
#define ENG_DEVICE_SPEC 64

/* Expands a device option into the specs of single devices, one engine
 * each: a comma-separated list of specs as above, and "all", "gpu:all" or
 * "cpu:all" for every OpenCL device (of that type, as "P:D"; "all" is the
 * host when OpenCL has none). Returns how many (at most max), or -1 with a
 * message. */
int eng_engine_expand(const char *spec, char (*out)[ENG_DEVICE_SPEC], int max,
                      char *msg, size_t msglen);

/* Prints every OpenCL platform and device to f with the "P:D" index that
 * names it for the device option; returns the number of devices. */
int eng_engine_list(FILE *f);

/* "host (2 threads)" or "<platform> / <device> (cpu layout)"; valid until
 * the engine is closed. */
const char *eng_engine_describe(const eng_engine *e);

bool eng_engine_is_host(const eng_engine *e);

/* Builds and runs every kernel once (done by open when o->warmup; a
 * server that opened its devices without it calls this on a thread of
 * its own). cancel, when not NULL, is read between kernels: once it is
 * true the warm-up stops and returns ENG_E_DEVICE ("stopped before ...")
 * with the kernels built so far kept. On a host engine: ENG_E_OK at once.
 * Threading: any thread; other streams may scan meanwhile (the program
 * cache serialises builds, cl_program.h). */
eng_err eng_engine_warmup(eng_engine *e, const atomic_bool *cancel, char *msg,
                          size_t msglen);

/* A new stream on the engine. Free with eng_stream_close(). */
eng_err eng_stream_open(eng_engine *e, eng_stream **out, char *msg,
                        size_t msglen);

/* NULL is a no-op. */
void eng_stream_close(eng_stream *s);

/* Computes the cumulative sum of the tensor at `in` (row-major, d->shape,
 * d->dtype) into `out`, which may be `in` itself and must otherwise not
 * overlap it. Blocks until done. Buffers aligned to 128 bytes avoid a copy
 * on devices that share memory with the host. Validates d first: a bad
 * rank, axis or size gives ENG_E_RANK/AXIS/TOO_LARGE and a message
 * naming the problem, with nothing touched. On an OpenCL CPU device that
 * shares the host's memory, float32 tensors whose input and output fit in
 * the cache its cores count on (eng_cl_cache_share()) run in the host
 * backend's code on the stream's own threads, where a launch would cost
 * more than the scan (unless the engine was opened kernels_only). */
eng_err eng_scan(eng_stream *s, const eng_scan_desc *d, const void *in,
                 void *out, char *msg, size_t msglen);

/* One tensor of a batch: its lines (outer of them, each of the batch's
 * shape) at in, scanned into out (which may be in). */
typedef struct {
    const void *in;
    void *out;
    uint64_t outer;
} eng_part;

/* Where a batch's time went. */
typedef struct {
    uint64_t gather_ns, scan_ns, scatter_ns;
} eng_batch_times;

/* Scans several tensors whose lines share one shape (shape's dtype, n,
 * inner and mode; its outer, elements and bytes are ignored) in a single
 * launch: their lines are stacked in a buffer of the stream's, scanned
 * together, and copied back to each part's out. One launch costs a device
 * a fixed overhead (BENCHMARKS.md measures PoCL's), so small tensors are served
 * far faster together; large ones gain nothing over their own launch and
 * lose the two copies, so callers batch small ones only. On failure no
 * out is written. The stream's buffer stays for the next batch.
 * A batch that eng_scan() would hand to the host backend's code as one
 * tensor (on a CPU device, float32 within its cache share) has no launch
 * to share: its parts are scanned one by one where they lie, with no
 * stage; there a failure (out of memory for a part's carries) leaves the
 * parts before it written. */
eng_err eng_scan_batch(eng_stream *s, const eng_lines *shape,
                       const eng_part *parts, size_t count, eng_batch_times *t,
                       char *msg, size_t msglen);

/* eng_scan() on the host's C backend, on the calling thread, whatever
 * the engine's device: for tensors so small that a device launch (or any
 * hand-off to another thread) costs more than computing them. Same
 * semantics and accuracy contract as eng_scan(); any thread, no stream
 * needed. */
eng_err eng_scan_inline(const eng_scan_desc *d, const void *in, void *out,
                        char *msg, size_t msglen);

/* eng_scan() for tensors that lie in their buffers as DirectML's buffer
 * tensor descriptors say (tensor.h's eng_view: strides in elements, 0 to
 * broadcast an input dimension, and the buffer's size). The scan reads
 * and writes every element through the strides itself, on the host
 * backend and in the OpenCL kernels; bytes of out that no element
 * addresses are left as they were. Layouts that are packed after all (no
 * strides, or an NHWC tensor described as NCHW on both sides) take
 * eng_scan()'s path. Besides eng_scan()'s errors: ENG_E_SHAPE when a
 * buffer is smaller than what its strides address, when the output strides
 * could make two elements share an address, or when in == out with two
 * different layouts (in place needs the same layout on both sides).
 * Other overlaps of in and out are the caller's to avoid. */
eng_err eng_scan_strided(eng_stream *s, const eng_scan_desc *d,
                         const eng_view *iv, const void *in, const eng_view *ov,
                         void *out, char *msg, size_t msglen);

/* eng_scan_strided() on the calling thread, as eng_scan_inline(). */
eng_err eng_scan_strided_inline(const eng_scan_desc *d, const eng_view *iv,
                                const void *in, const eng_view *ov, void *out,
                                char *msg, size_t msglen);

/* Copies `bytes` from in to out on the device, through the same buffers a
 * scan uses: the yardstick for benchmarks (memcpy on the host backend).
 * With streaming, the copy writes with non-temporal stores where the
 * device has them, as scans of large tensors do. */
eng_err eng_copy(eng_stream *s, const void *in, void *out, size_t bytes,
                 bool streaming, char *msg, size_t msglen);

#endif
