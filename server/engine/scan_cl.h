/*
 * scan_cl.h - running a scan on an OpenCL device.
 *
 * A eng_cl_stream is one command queue with its own kernel objects and
 * scratch buffers (look-back state, and a staging buffer on devices that
 * do not share memory with the host). eng_cl_scan() plans the launch from
 * the (outer, n, inner) view, moves the data, runs one kernel and waits.
 *
 * Threading: a stream is used by one thread at a time. Streams of the same
 * device may run concurrently; they share only the program cache.
 */
#ifndef TALLY_SCAN_CL_H
#define TALLY_SCAN_CL_H

#include <stdatomic.h>
#include <stdint.h>

#include "cl_program.h"
#include "tensor.h"

typedef struct eng_cl_stream eng_cl_stream;

/* Which kernel a plan uses. */
typedef enum {
    ENG_K_ROWS_DIRECT,
    ENG_K_ROWS_CHAINED,
    ENG_K_COLS_DIRECT,
    ENG_K_COLS_CHAINED,
    ENG_K_STRIDED_DIRECT,
    ENG_K_STRIDED_CHAINED,
    ENG_NKERNELS
} eng_cl_kernel_id;

/* A launch, derived from eng_lines and the layout only (pure, so tests
 * can check the planner without a device). */
typedef struct {
    eng_cl_kernel_id kernel;
    uint64_t ntiles;
    size_t groups;      /* work-groups launched */
    uint64_t rpt;       /* rows_direct: lines per work-item */
    unsigned P;         /* rows_direct: line length when it is 1, 2, 4 or 8 */
    unsigned cw;        /* cols: columns per work-item */
    uint64_t nblk;      /* cols: column blocks per slice */
    uint64_t rows;      /* cols_chained: rows per chunk */
    size_t vals_bytes;  /* look-back values buffer */
    size_t state_bytes; /* counter + statuses */
} eng_cl_plan;

void eng_cl_plan_make(const eng_lines *l, const eng_cl_layout *layout,
                      eng_cl_plan *plan);

/* A plan for kernel k whatever the planner would choose, for tests that
 * must run every kernel on every shape. The kernel must fit the shape: the
 * rows kernels need inner == 1. hint: rows_direct: bit 0 set turns off the
 * short-line path, hint >> 1 lines per work-item (0: 1); cols_chained: rows
 * per chunk (0: 1); otherwise unused. */
void eng_cl_plan_force(const eng_lines *l, const eng_cl_layout *layout,
                       eng_cl_kernel_id k, uint64_t hint, eng_cl_plan *plan);

/* The same with the kernel forced: chained with `rows` rows per chunk
 * (0: 1), or direct. For tests. */
void eng_cl_plan_strided_force(const eng_strided *v,
                               const eng_cl_layout *layout, bool chained,
                               uint64_t rows, eng_cl_plan *plan);

/* "rows_chained" etc.; static storage. */
const char *eng_cl_kernel_name(eng_cl_kernel_id k);

/* Testing: launches that fail as a broken device's would. Once after_ns
 * has passed since start_ns, every `every`-th launch of the scan kernel
 * (1: each one), counted over every stream that shares the struct, is
 * refused with CL_OUT_OF_RESOURCES (ENG_E_LAUNCH: nothing ran), or with
 * `late`, runs and is then reported failed (ENG_E_DEVICE: out may have
 * been written, as by a kernel that faults half-way). every == 0: no
 * faults. */
typedef struct {
    unsigned every;
    bool late;
    uint64_t start_ns, after_ns; /* CLOCK_MONOTONIC */
    atomic_ullong launches;
} eng_cl_fault;

/* Makes s's launches follow f (borrowed: it must outlive s); NULL: none. */
void eng_cl_stream_set_fault(eng_cl_stream *s, eng_cl_fault *f);

/* Returns NULL and a message on failure. Free with eng_cl_stream_free(). */
eng_cl_stream *eng_cl_stream_new(eng_cl_programs *progs, char *msg,
                                 size_t msglen);
void eng_cl_stream_free(eng_cl_stream *s);

/* Scans l->bytes bytes at in into out (out may equal in). A launch the
 * device refuses fails with ENG_E_LAUNCH: nothing was written to out,
 * which may then be scanned again elsewhere. Blocks until the
 * result is in out. */
eng_err eng_cl_scan(eng_cl_stream *s, const eng_lines *l, const void *in,
                    void *out, char *msg, size_t msglen);

/* eng_cl_scan() with a given plan (from eng_cl_plan_force()). */
eng_err eng_cl_scan_plan(eng_cl_stream *s, const eng_lines *l,
                         const eng_cl_plan *plan, const void *in, void *out,
                         char *msg, size_t msglen);

/* Scans a strided request: reads v->in_span elements at in and writes
 * the addressed elements of the v->out_span at out, leaving the others as
 * they were. out may equal in only when the two layouts are the same. */
eng_err eng_cl_scan_strided(eng_cl_stream *s, const eng_strided *v,
                            const void *in, void *out, char *msg,
                            size_t msglen);

/* eng_cl_scan_strided() with a given plan (eng_cl_plan_strided_force()). */
eng_err eng_cl_scan_strided_plan(eng_cl_stream *s, const eng_strided *v,
                                 const eng_cl_plan *plan, const void *in,
                                 void *out, char *msg, size_t msglen);

/* The layout the stream's kernels are built for. */
const eng_cl_layout *eng_cl_stream_layout(const eng_cl_stream *s);

/* Copies bytes from in to out with the device's copy kernel, through the
 * same buffers and transfers a scan uses: the benchmarks' yardstick. With
 * streaming, the kernel writes with non-temporal stores where the device
 * has them (out should then be 16-byte aligned). */
eng_err eng_cl_copy(eng_cl_stream *s, const void *in, void *out, size_t bytes,
                    bool streaming, char *msg, size_t msglen);

/* The scan and the plain or streaming copy on buffers already on the
 * device, waited for before they return: no transfer to or from the host.
 * For measuring the kernels alone (bench_engine on a discrete GPU); the
 * caller owns both buffers, which must hold l->bytes (bytes). */
eng_err eng_cl_scan_buffers(eng_cl_stream *s, const eng_lines *l, cl_mem in,
                            cl_mem out, char *msg, size_t msglen);
eng_err eng_cl_copy_buffers(eng_cl_stream *s, cl_mem in, cl_mem out,
                            size_t bytes, bool streaming, char *msg,
                            size_t msglen);

/* Runs every kernel of every storage class once on a tiny tensor, so that
 * the device compiles them now rather than on a request. cancel (may be
 * NULL) is read before each kernel: true stops it with ENG_E_DEVICE. */
eng_err eng_cl_warmup(eng_cl_stream *s, const atomic_bool *cancel, char *msg,
                      size_t msglen);

#endif
