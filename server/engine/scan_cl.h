/*
 * scan_cl.h - running a scan on an OpenCL device.
 *
 * A tally_cl_stream is one command queue with its own kernel objects and
 * scratch buffers (look-back state, and a staging buffer on devices that
 * do not share memory with the host). tally_cl_scan() plans the launch from
 * the (outer, n, inner) view, moves the data, runs one kernel and waits.
 *
 * Threading: a stream is used by one thread at a time. Streams of the same
 * device may run concurrently; they share only the program cache.
 */
#ifndef TALLY_SCAN_CL_H
#define TALLY_SCAN_CL_H

#include "cl_program.h"
#include "tensor.h"

typedef struct tally_cl_stream tally_cl_stream;

/* Which kernel a plan uses. */
typedef enum {
    TALLY_K_ROWS_DIRECT,
    TALLY_K_ROWS_CHAINED,
    TALLY_K_COLS_DIRECT,
    TALLY_K_COLS_CHAINED,
    TALLY_NKERNELS
} tally_cl_kernel_id;

/* A launch, derived from tally_lines and the layout only (pure, so tests
 * can check the planner without a device). */
typedef struct {
    tally_cl_kernel_id kernel;
    uint64_t ntiles;
    size_t groups;      /* work-groups launched */
    uint64_t rpt;       /* rows_direct: lines per work-item */
    unsigned P;         /* rows_direct: line length when it is 1, 2, 4 or 8 */
    unsigned cw;        /* cols: columns per work-item */
    uint64_t nblk;      /* cols: column blocks per slice */
    uint64_t rows;      /* cols_chained: rows per chunk */
    size_t vals_bytes;  /* look-back values buffer */
    size_t state_bytes; /* counter + statuses */
} tally_cl_plan;

void tally_cl_plan_make(const tally_lines *l, const tally_cl_layout *layout,
                        tally_cl_plan *plan);

/* A plan for kernel k whatever the planner would choose, for tests that
 * must run every kernel on every shape. The kernel must fit the shape: the
 * rows kernels need inner == 1. hint: rows_direct: bit 0 set turns off the
 * short-line path, hint >> 1 lines per work-item (0: 1); cols_chained: rows
 * per chunk (0: 1); otherwise unused. */
void tally_cl_plan_force(const tally_lines *l, const tally_cl_layout *layout,
                         tally_cl_kernel_id k, uint64_t hint,
                         tally_cl_plan *plan);

/* "rows_chained" etc.; static storage. */
const char *tally_cl_kernel_name(tally_cl_kernel_id k);

/* Returns NULL and a message on failure. Free with tally_cl_stream_free(). */
tally_cl_stream *tally_cl_stream_new(tally_cl_programs *progs, char *msg,
                                     size_t msglen);
void tally_cl_stream_free(tally_cl_stream *s);

/* Scans l->bytes bytes at in into out (out may equal in). Blocks until the
 * result is in out. */
tally_err tally_cl_scan(tally_cl_stream *s, const tally_lines *l,
                        const void *in, void *out, char *msg, size_t msglen);

/* tally_cl_scan() with a given plan (from tally_cl_plan_force()). */
tally_err tally_cl_scan_plan(tally_cl_stream *s, const tally_lines *l,
                             const tally_cl_plan *plan, const void *in,
                             void *out, char *msg, size_t msglen);

/* The layout the stream's kernels are built for. */
const tally_cl_layout *tally_cl_stream_layout(const tally_cl_stream *s);

/* Copies bytes from in to out with the device's copy kernel, through the
 * same buffers and transfers a scan uses: the benchmarks' yardstick. With
 * streaming, the kernel writes with non-temporal stores where the device
 * has them (out should then be 16-byte aligned). */
tally_err tally_cl_copy(tally_cl_stream *s, const void *in, void *out,
                        size_t bytes, bool streaming, char *msg, size_t msglen);

/* The scan and the plain or streaming copy on buffers already on the
 * device, waited for before they return: no transfer to or from the host.
 * For measuring the kernels alone (bench_engine on a discrete GPU); the
 * caller owns both buffers, which must hold l->bytes (bytes). */
tally_err tally_cl_scan_buffers(tally_cl_stream *s, const tally_lines *l,
                                cl_mem in, cl_mem out, char *msg,
                                size_t msglen);
tally_err tally_cl_copy_buffers(tally_cl_stream *s, cl_mem in, cl_mem out,
                                size_t bytes, bool streaming, char *msg,
                                size_t msglen);

/* Runs every kernel of every storage class once on a tiny tensor, so that
 * the device compiles them now rather than on a request. */
tally_err tally_cl_warmup(tally_cl_stream *s, char *msg, size_t msglen);

#endif
