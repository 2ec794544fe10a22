/*
 * engine.h - the scan engine: the cumulative sum of a tensor along an axis.
 *
 * An engine is one compute device: an OpenCL device, or the host's cores.
 * A stream is a lane of work on it (an OpenCL command queue, or a host
 * thread pool); a daemon gives each of its device workers one stream.
 *
 *   tally_engine_options o;
 *   tally_engine_options_init(&o);           // device "auto", warm-up on
 *   tally_engine *e; tally_stream *s;
 *   tally_engine_open(&o, &e, msg, sizeof msg);
 *   tally_stream_open(e, &s, msg, sizeof msg);
 *   tally_scan_desc d = {.dtype = TX_FLOAT32, .rank = 2,
 *                        .shape = {3, 4}, .axis = -1};
 *   tally_scan(s, &d, in, out, msg, sizeof msg);   // out may be in
 *   tally_stream_close(s); tally_engine_close(e);
 *
 * Semantics are DirectML's DML_CUMULATIVE_SUMMATION_OPERATOR_DESC and
 * OpenVINO's CumSum-3: any axis (negative counts from the back), increasing
 * or decreasing (reverse), inclusive or exclusive, rank 1 and up, every
 * dtype of dtype.h. Integers wrap modulo 2^bits. See README.md for the
 * accuracy of the float types.
 *
 * Threading: an engine may be shared by any number of threads. A stream
 * must be used by one thread at a time. Every function reports failure
 * through its tally_err return and, where it takes one, a message buffer
 * (msg may be NULL); nothing is written to `out` on failure other than
 * possibly partial results of a failed device run.
 */
#ifndef TALLY_ENGINE_H
#define TALLY_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "error.h"
#include "tensor.h"

typedef struct tally_engine tally_engine;
typedef struct tally_stream tally_stream;

/* Receives one log line (no trailing newline), e.g. to say that no OpenCL
 * platform was found and the host backend is in use. */
typedef void (*tally_log_fn)(void *user, const char *line);

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
    /* Where log lines go; NULL: standard error, prefixed "engine: ". */
    tally_log_fn log;
    void *log_user;
} tally_engine_options;

/* Defaults: device "auto", layout "auto", warm-up on, host threads 0. */
void tally_engine_options_init(tally_engine_options *o);

/* Opens the device the options name. The strings in o are copied.
 * Free *out with tally_engine_close(). */
tally_err tally_engine_open(const tally_engine_options *o, tally_engine **out,
                            char *msg, size_t msglen);

/* NULL is a no-op. Every stream must have been closed. */
void tally_engine_close(tally_engine *e);

/* Prints every OpenCL platform and device to f with the "P:D" index that
 * names it for the device option; returns the number of devices. */
int tally_engine_list(FILE *f);

/* "host (2 threads)" or "<platform> / <device> (cpu layout)"; valid until
 * the engine is closed. */
const char *tally_engine_describe(const tally_engine *e);

bool tally_engine_is_host(const tally_engine *e);

/* Builds and runs every kernel once (done by open when o->warmup). */
tally_err tally_engine_warmup(tally_engine *e, char *msg, size_t msglen);

/* A new stream on the engine. Free with tally_stream_close(). */
tally_err tally_stream_open(tally_engine *e, tally_stream **out, char *msg,
                            size_t msglen);

/* NULL is a no-op. */
void tally_stream_close(tally_stream *s);

/* Computes the cumulative sum of the tensor at `in` (row-major, d->shape,
 * d->dtype) into `out`, which may be `in` itself and must otherwise not
 * overlap it. Blocks until done. Buffers aligned to 128 bytes avoid a copy
 * on devices that share memory with the host. Validates d first: a bad
 * rank, axis or size gives TALLY_E_RANK/AXIS/TOO_LARGE and a message
 * naming the problem, with nothing touched. */
tally_err tally_scan(tally_stream *s, const tally_scan_desc *d, const void *in,
                     void *out, char *msg, size_t msglen);

/* tally_scan() on the host's C backend, on the calling thread, whatever
 * the engine's device: for tensors so small that a device launch (or any
 * hand-off to another thread) costs more than computing them. Same
 * semantics and accuracy contract as tally_scan(); any thread, no stream
 * needed. */
tally_err tally_scan_inline(const tally_scan_desc *d, const void *in, void *out,
                            char *msg, size_t msglen);

/* Copies `bytes` from in to out on the device, through the same buffers a
 * scan uses: the yardstick for benchmarks (memcpy on the host backend).
 * With streaming, the copy writes with non-temporal stores where the
 * device has them, as scans of large tensors do. */
tally_err tally_copy(tally_stream *s, const void *in, void *out, size_t bytes,
                     bool streaming, char *msg, size_t msglen);

#endif
