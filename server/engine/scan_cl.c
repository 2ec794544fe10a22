/*
 * scan_cl.c - planning and launching the scan kernels.
 *
 * The planner picks one of the four kernels of kernels/scan.cl from the
 * collapsed view and the device layout:
 *
 *   contiguous lines (inner == 1)
 *     rows_direct   lines short enough for one work-item each, or so many
 *                   of them that whole lines keep every work-group busy
 *     rows_chained  a few long lines: tiles chained by look-back
 *   strided lines (inner > 1)
 *     cols_direct   enough column blocks (times outer slices) to go round
 *     cols_chained  too few: column blocks are also cut along the axis
 *
 * "Enough" is four tiles per launched work-group, so that the dynamic tile
 * counter evens out a noisy machine.
 *
 * Data movement: on a device that shares memory with the host (PoCL's CPU
 * device) the caller's buffers are wrapped with CL_MEM_USE_HOST_PTR and
 * nothing is copied. Elsewhere the input is written to a per-stream device
 * buffer, scanned in place there (the kernels allow aliasing) and read back,
 * so a request needs one device buffer of its size whether or not it is
 * in-place.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "scan_cl.h"

struct eng_cl_stream {
    eng_cl_programs *progs;
    const eng_cl_device *dev;
    cl_command_queue q;
    cl_kernel k[ENG_NSTORAGE + 1][ENG_NKERNELS];
    cl_kernel copy, copy_stream;
    cl_mem state, vals, stage, stage2, geom;
    size_t state_cap, vals_cap, stage_cap, stage2_cap, geom_cap;
    eng_cl_fault *fault; /* testing; NULL: none */
    /* on devices that share the host's memory: the launch's tile counter
     * and statuses, zeroed by the host, and the buffer wrapping them */
    uint32_t *state_host;
    size_t state_host_cap;
    cl_mem state_wrap;
};

void eng_cl_stream_set_fault(eng_cl_stream *s, eng_cl_fault *f)
{
    s->fault = f;
}

/* Whether this launch is one that f makes fail. */
static bool fault_now(eng_cl_fault *f)
{
    if (f == NULL || f->every == 0)
        return false;
    if (f->after_ns > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
        if (now - f->start_ns < f->after_ns)
            return false;
    }
    return (atomic_fetch_add(&f->launches, 1) + 1) % f->every == 0;
}

static const char *const kernel_names[ENG_NKERNELS] = {
    [ENG_K_ROWS_DIRECT] = "tally_rows_direct",
    [ENG_K_ROWS_CHAINED] = "tally_rows_chained",
    [ENG_K_COLS_DIRECT] = "tally_cols_direct",
    [ENG_K_COLS_CHAINED] = "tally_cols_chained",
    [ENG_K_STRIDED_DIRECT] = "tally_strided_direct",
    [ENG_K_STRIDED_CHAINED] = "tally_strided_chained",
};

/* Each kernel's parameters, in order (kernels/scan*.cl): enqueue() sets
 * them from these names. */
enum {
    A_END,
    A_IN,
    A_OUT,
    A_STATE,
    A_VALS,
    A_GEOM,
    A_OUTER,
    A_N,
    A_INNER,
    A_RPT,
    A_P,
    A_CW,
    A_NBLK,
    A_ROWS,
    A_MODE
};
#define HEAD A_IN, A_OUT, A_STATE
static const unsigned char kernel_args[ENG_NKERNELS][13] = {
    [ENG_K_ROWS_DIRECT] = {HEAD, A_OUTER, A_N, A_RPT, A_P, A_MODE},
    [ENG_K_ROWS_CHAINED] = {HEAD, A_VALS, A_OUTER, A_N, A_MODE},
    [ENG_K_COLS_DIRECT] = {HEAD, A_OUTER, A_N, A_INNER, A_CW, A_NBLK, A_MODE},
    [ENG_K_COLS_CHAINED] = {HEAD, A_VALS, A_OUTER, A_N, A_INNER, A_CW, A_NBLK,
                            A_ROWS, A_MODE},
    [ENG_K_STRIDED_DIRECT] = {HEAD, A_GEOM, A_OUTER, A_N, A_INNER, A_CW, A_NBLK,
                              A_MODE},
    [ENG_K_STRIDED_CHAINED] = {HEAD, A_VALS, A_GEOM, A_OUTER, A_N, A_INNER,
                               A_CW, A_NBLK, A_ROWS, A_MODE},
};
#undef HEAD

const char *eng_cl_kernel_name(eng_cl_kernel_id k)
{
    return kernel_names[k] + strlen("tally_");
}

/* ------------------------------------------------------------------------
 * Planning.
 */
static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static uint64_t clamp_u64(uint64_t v, uint64_t lo, uint64_t hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

/* Bytes of one carry_t of kernels/scan.cl: two values of the compute type. */
static size_t carry_size(eng_storage st)
{
    switch (st) {
    case ENG_STORAGE_F16:
    case ENG_STORAGE_BF16:
    case ENG_STORAGE_F32: return 8;
    case ENG_STORAGE_F64: return 16;
    case ENG_STORAGE_B8: return 2;
    case ENG_STORAGE_B16: return 4;
    case ENG_STORAGE_B32: return 8;
    case ENG_STORAGE_B64: return 16;
    }
    return 16;
}

static void plan_finish(const eng_lines *l, const eng_cl_layout *L,
                        eng_cl_plan *p)
{
    /* persistent work-groups (one work-item each) on CPU layouts; one
     * work-group per tile on wider layouts (see kernels/scan.cl) */
    uint64_t g = L->wg == 1 ? (L->groups ? L->groups : 1) : p->ntiles;
    p->groups = (size_t)(p->ntiles < g ? (p->ntiles ? p->ntiles : 1) : g);
    p->state_bytes = (size_t)(4 * (1 + p->ntiles));
    if (p->kernel == ENG_K_ROWS_CHAINED)
        p->vals_bytes =
            (size_t)(2 * p->ntiles * carry_size(eng_dtype_storage(l->dtype)));
    else if (p->kernel == ENG_K_COLS_CHAINED
             || p->kernel == ENG_K_STRIDED_CHAINED)
        p->vals_bytes = (size_t)(2 * p->ntiles * L->wg * p->cw
                                 * carry_size(eng_dtype_storage(l->dtype)));
    else
        p->vals_bytes = 0;
}

/* Column blocking: cw columns per work-item, nblk blocks per slice, aiming
 * at `want` tiles over the outer slices without going below 8 columns. */
static void plan_columns(const eng_lines *l, const eng_cl_layout *L,
                         unsigned col_w, uint64_t want, eng_cl_plan *p)
{
    uint64_t wg = L->wg, inner = l->inner;
    if (inner < 8) {
        p->cw = (unsigned)inner;
        p->nblk = 1;
        return;
    }
    uint64_t nblk_min = ceil_div(inner, wg * col_w);
    uint64_t nblk_max = ceil_div(inner, wg * 8);
    uint64_t nblk = clamp_u64(ceil_div(want, l->outer), nblk_min, nblk_max);
    uint64_t cw = ceil_div(ceil_div(inner, wg * nblk), 8) * 8;
    p->cw = (unsigned)(cw < col_w ? cw : col_w);
    p->nblk = ceil_div(inner, wg * p->cw);
}

/* After plan_columns(): whole columns per tile (`direct`) when there are
 * enough column blocks to go round, or when the lines are short; else
 * columns cut into chunks of rows chained by look-back (`chained`). */
static void plan_direct_or_chained(const eng_lines *l, const eng_cl_layout *L,
                                   eng_cl_kernel_id direct,
                                   eng_cl_kernel_id chained, eng_cl_plan *p)
{
    uint64_t g = L->groups ? L->groups : 1, want = 4 * g;
    uint64_t tiles = l->outer * p->nblk;
    if (tiles == 0 || tiles >= want || l->n <= 8 * (uint64_t)L->blk
        || (tiles >= g && tiles % g == 0)) {
        p->kernel = direct;
        p->ntiles = tiles;
    } else {
        p->kernel = chained;
        uint64_t nchunks = ceil_div(want, tiles);
        p->rows = ceil_div(ceil_div(l->n, nchunks), L->blk) * L->blk;
        p->ntiles = tiles * ceil_div(l->n, p->rows);
    }
}

void eng_cl_plan_make(const eng_lines *l, const eng_cl_layout *L,
                      eng_cl_plan *p)
{
    memset(p, 0, sizeof *p);
    uint64_t g = L->groups ? L->groups : 1, wg = L->wg;
    uint64_t want = 4 * g;

    if (l->inner == 1) {
        uint64_t lines = l->outer, n = l->n;
        bool small = n == 1 || n == 2 || n == 4 || n == 8;
        if (small || n <= L->row_k || lines >= want * wg) {
            p->kernel = ENG_K_ROWS_DIRECT;
            p->P = small ? (unsigned)n : 0;
            uint64_t cap = L->row_k / n > 1 ? L->row_k / n : 1;
            p->rpt = clamp_u64(ceil_div(lines, want * wg), 1, cap);
            p->ntiles = ceil_div(lines, wg * p->rpt);
        } else {
            p->kernel = ENG_K_ROWS_CHAINED;
            p->ntiles = lines * ceil_div(n, wg * L->row_k);
        }
    } else {
        plan_columns(l, L, L->col_w, want, p);
        plan_direct_or_chained(l, L, ENG_K_COLS_DIRECT, ENG_K_COLS_CHAINED, p);
    }
    plan_finish(l, L, p);
}

void eng_cl_plan_force(const eng_lines *l, const eng_cl_layout *L,
                       eng_cl_kernel_id k, uint64_t hint, eng_cl_plan *p)
{
    eng_cl_plan_make(l, L, p);
    uint64_t wg = L->wg;
    switch (k) {
    case ENG_K_ROWS_DIRECT: {
        bool small = l->n == 1 || l->n == 2 || l->n == 4 || l->n == 8;
        p->P = small && hint % 2 == 0 ? (unsigned)l->n : 0;
        p->rpt = hint >> 1 ? hint >> 1 : 1;
        p->ntiles = ceil_div(l->outer, wg * p->rpt);
        break;
    }
    case ENG_K_ROWS_CHAINED:
        p->ntiles = l->outer * ceil_div(l->n ? l->n : 1, wg * L->row_k);
        break;
    case ENG_K_COLS_DIRECT:
    case ENG_K_COLS_CHAINED:
        if (p->kernel != ENG_K_COLS_DIRECT && p->kernel != ENG_K_COLS_CHAINED)
            plan_columns(l, L, L->col_w, 4 * (L->groups ? L->groups : 1), p);
        if (k == ENG_K_COLS_DIRECT) {
            p->ntiles = l->outer * p->nblk;
        } else {
            p->rows = hint ? hint : 1;
            p->ntiles = l->outer * p->nblk * ceil_div(l->n, p->rows);
        }
        break;
    case ENG_K_STRIDED_DIRECT:
    case ENG_K_STRIDED_CHAINED:
    case ENG_NKERNELS: break; /* eng_cl_plan_strided_force() */
    }
    p->kernel = k;
    plan_finish(l, L, p);
}

/* Columns far apart in memory each cost a cache line per row: a work-item
 * takes at most GATHER_COLS of them, so that their lines stay in the cache
 * until every element of them has been used (64 measured best on the CPU
 * device among 8, 16, 32 and 64: BENCHMARKS.md). Outputs that run along
 * the rows (ro == 1) take kernels/scan.cl's 64 x 16 tiles, TILE_COLS
 * columns (a multiple of 16) per work-item. */
#define GATHER_COLS 64
#define TILE_COLS 64

/* The plan for a strided request (tensor.h's eng_strided): always one
 * of the two strided column kernels. */
static void eng_cl_plan_strided(const eng_strided *v, const eng_cl_layout *L,
                                eng_cl_plan *p)
{
    const eng_lines *l = &v->l;
    memset(p, 0, sizeof *p);
    uint64_t g = L->groups ? L->groups : 1, want = 4 * g;
    unsigned col_w = L->col_w;
    bool tiled = v->ro == 1; /* kernels/scan.cl: 64 x 16 tiles */
    unsigned cap = tiled ? TILE_COLS : GATHER_COLS;
    if ((v->ci != 1 || v->co != 1 || tiled) && col_w > cap)
        col_w = cap;
    plan_columns(l, L, col_w, want, p);
    if (tiled && p->cw % 16 != 0 && p->cw + 8 <= col_w) {
        p->cw += 8;
        p->nblk = ceil_div(l->inner, (uint64_t)L->wg * p->cw);
    }
    plan_direct_or_chained(l, L, ENG_K_STRIDED_DIRECT, ENG_K_STRIDED_CHAINED,
                           p);
    plan_finish(l, L, p);
}

void eng_cl_plan_strided_force(const eng_strided *v, const eng_cl_layout *L,
                               bool chained, uint64_t rows, eng_cl_plan *p)
{
    eng_cl_plan_strided(v, L, p);
    uint64_t tiles = v->l.outer * p->nblk;
    if (chained) {
        p->kernel = ENG_K_STRIDED_CHAINED;
        p->rows = rows ? rows : 1;
        p->ntiles = tiles * ceil_div(v->l.n, p->rows);
    } else {
        p->kernel = ENG_K_STRIDED_DIRECT;
        p->rows = 0;
        p->ntiles = tiles;
    }
    plan_finish(&v->l, L, p);
}

/* ------------------------------------------------------------------------
 * Streams.
 */
eng_cl_stream *eng_cl_stream_new(eng_cl_programs *progs, char *msg,
                                 size_t msglen)
{
    eng_cl_stream *s = calloc(1, sizeof *s);
    if (s == NULL) {
        eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
        return NULL;
    }
    s->progs = progs;
    s->dev = progs->dev;
    cl_int err;
    s->q = clCreateCommandQueue(s->dev->context, s->dev->device, 0, &err);
    if (err != CL_SUCCESS) {
        eng_fail(msg, msglen, ENG_E_DEVICE,
                 "cannot create a command queue on %s: %s", s->dev->name,
                 eng_cl_strerror(err));
        free(s);
        return NULL;
    }
    return s;
}

void eng_cl_stream_free(eng_cl_stream *s)
{
    if (s == NULL)
        return;
    clFinish(s->q);
    for (int st = 0; st <= ENG_NSTORAGE; st++)
        for (int k = 0; k < ENG_NKERNELS; k++)
            if (s->k[st][k] != NULL)
                clReleaseKernel(s->k[st][k]);
    if (s->copy != NULL)
        clReleaseKernel(s->copy);
    if (s->copy_stream != NULL)
        clReleaseKernel(s->copy_stream);
    if (s->state != NULL)
        clReleaseMemObject(s->state);
    if (s->state_wrap != NULL)
        clReleaseMemObject(s->state_wrap);
    free(s->state_host);
    if (s->vals != NULL)
        clReleaseMemObject(s->vals);
    if (s->stage != NULL)
        clReleaseMemObject(s->stage);
    if (s->stage2 != NULL)
        clReleaseMemObject(s->stage2);
    if (s->geom != NULL)
        clReleaseMemObject(s->geom);
    clReleaseCommandQueue(s->q);
    free(s);
}

static eng_err cl_fail(char *msg, size_t msglen, const char *what, cl_int err)
{
    eng_err e = ENG_E_DEVICE;
    if (err == CL_MEM_OBJECT_ALLOCATION_FAILURE || err == CL_OUT_OF_HOST_MEMORY)
        e = ENG_E_NOMEM;
    return eng_fail(msg, msglen, e, "OpenCL %s failed: %s", what,
                    eng_cl_strerror(err));
}

/* Grows a scratch buffer to at least `bytes`. */
static eng_err reserve(eng_cl_stream *s, cl_mem *buf, size_t *cap, size_t bytes,
                       char *msg, size_t msglen)
{
    if (*cap >= bytes && *buf != NULL)
        return ENG_E_OK;
    if (*buf != NULL)
        clReleaseMemObject(*buf);
    *buf = NULL;
    *cap = 0;
    size_t want = bytes < 4096 ? 4096 : bytes;
    cl_int err;
    *buf = clCreateBuffer(s->dev->context, CL_MEM_READ_WRITE, want, NULL, &err);
    if (err != CL_SUCCESS) {
        *buf = NULL;
        return cl_fail(msg, msglen, "buffer allocation", err);
    }
    *cap = want;
    return ENG_E_OK;
}

static eng_err kernel_for(eng_cl_stream *s, eng_storage st, eng_cl_kernel_id k,
                          cl_kernel *out, char *msg, size_t msglen)
{
    if (s->k[st][k] == NULL) {
        cl_program prog;
        eng_err e = eng_cl_program_scan(s->progs, st, &prog, msg, msglen);
        if (e != ENG_E_OK)
            return e;
        cl_int err;
        s->k[st][k] = clCreateKernel(prog, kernel_names[k], &err);
        if (err != CL_SUCCESS) {
            s->k[st][k] = NULL;
            return cl_fail(msg, msglen, "clCreateKernel", err);
        }
    }
    *out = s->k[st][k];
    return ENG_E_OK;
}

/* The buffers a launch reads and writes, and how to finish with them. */
typedef struct {
    cl_mem in, out;
    bool wrapped; /* USE_HOST_PTR buffers to release; else the stage */
} io;

/* Wraps (unified memory) or stages the buffers of a launch. The input is
 * in_bytes at in, the output out_bytes at out. Staged launches scan in
 * place in one device buffer unless `separate` (strided layouts that
 * differ) asks for two; `keep_out` uploads out too, for outputs with bytes
 * that no element addresses and that must come back unchanged. */
static eng_err io_begin(eng_cl_stream *s, const void *in, size_t in_bytes,
                        void *out, size_t out_bytes, bool separate,
                        bool keep_out, io *b, char *msg, size_t msglen)
{
    cl_int err;
    memset(b, 0, sizeof *b);
    size_t most = in_bytes > out_bytes ? in_bytes : out_bytes;
    if (most > s->dev->max_alloc)
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "tensor of %zu bytes is larger than the largest "
                        "buffer %s allows (%llu bytes)",
                        most, s->dev->name,
                        (unsigned long long)s->dev->max_alloc);
    if (s->dev->unified) {
        b->wrapped = true;
        if (in == out) {
            b->in = b->out = clCreateBuffer(
                s->dev->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR, most,
                out, &err);
            if (err != CL_SUCCESS)
                return cl_fail(msg, msglen, "clCreateBuffer", err);
            return ENG_E_OK;
        }
        b->in = clCreateBuffer(s->dev->context,
                               CL_MEM_READ_ONLY | CL_MEM_USE_HOST_PTR, in_bytes,
                               (void *)in, &err);
        if (err != CL_SUCCESS)
            return cl_fail(msg, msglen, "clCreateBuffer", err);
        b->out =
            clCreateBuffer(s->dev->context,
                           (keep_out ? CL_MEM_READ_WRITE : CL_MEM_WRITE_ONLY)
                               | CL_MEM_USE_HOST_PTR,
                           out_bytes, out, &err);
        if (err != CL_SUCCESS) {
            clReleaseMemObject(b->in);
            return cl_fail(msg, msglen, "clCreateBuffer", err);
        }
        return ENG_E_OK;
    }
    separate = separate && in != out;
    eng_err e = reserve(s, &s->stage, &s->stage_cap, separate ? in_bytes : most,
                        msg, msglen);
    if (e == ENG_E_OK && separate)
        e = reserve(s, &s->stage2, &s->stage2_cap, out_bytes, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    b->in = s->stage;
    b->out = separate ? s->stage2 : s->stage;
    err = clEnqueueWriteBuffer(s->q, s->stage, CL_FALSE, 0, in_bytes, in, 0,
                               NULL, NULL);
    if (err == CL_SUCCESS && separate && keep_out)
        err = clEnqueueWriteBuffer(s->q, s->stage2, CL_FALSE, 0, out_bytes, out,
                                   0, NULL, NULL);
    if (err != CL_SUCCESS)
        return cl_fail(msg, msglen, "clEnqueueWriteBuffer", err);
    return ENG_E_OK;
}

/* Waits for everything queued on the stream; returns e, or the wait's
 * failure when e is still ENG_E_OK. */
static eng_err finish(eng_cl_stream *s, eng_err e, char *msg, size_t msglen)
{
    cl_int err = clFinish(s->q);
    if (e == ENG_E_OK && err != CL_SUCCESS)
        e = cl_fail(msg, msglen, "clFinish", err);
    return e;
}

/* Waits for the launch and makes the result visible in `out`. Always
 * releases what io_begin created, also when `e` is already an error. */
static eng_err io_end(eng_cl_stream *s, void *out, size_t bytes, io *b,
                      eng_err e, char *msg, size_t msglen)
{
    cl_int err;
    if (e == ENG_E_OK) {
        if (b->wrapped) {
            void *p = clEnqueueMapBuffer(s->q, b->out, CL_TRUE, CL_MAP_READ, 0,
                                         bytes, 0, NULL, NULL, &err);
            if (err != CL_SUCCESS) {
                e = cl_fail(msg, msglen, "clEnqueueMapBuffer", err);
            } else {
                if (p != out) /* the runtime kept its own copy */
                    memcpy(out, p, bytes);
                clEnqueueUnmapMemObject(s->q, b->out, p, 0, NULL, NULL);
            }
        } else {
            err = clEnqueueReadBuffer(s->q, b->out, CL_TRUE, 0, bytes, out, 0,
                                      NULL, NULL);
            if (err != CL_SUCCESS)
                e = cl_fail(msg, msglen, "clEnqueueReadBuffer", err);
        }
    }
    e = finish(s, e, msg, msglen);
    if (b->wrapped) {
        if (b->in != NULL)
            clReleaseMemObject(b->in);
        if (b->out != NULL && b->out != b->in)
            clReleaseMemObject(b->out);
    }
    return e;
}

/* Whether a launch writes with non-temporal stores: when the output is
 * larger than the device's cache (it would be evicted before anyone read
 * it) and every vector store of the kernel is 32-byte aligned, which holds
 * when the buffer is and lines (or rows) start at multiples of 32 bytes.
 * outptr is the host memory the output buffer wraps, NULL for a device
 * buffer (always aligned). */
static bool streams(const eng_cl_stream *s, const eng_lines *l,
                    const eng_cl_plan *p, const void *outptr)
{
    const eng_cl_layout *L = &s->progs->layout;
    size_t size = tx_dtype_size(l->dtype);
    /* The column kernels and the chained rows count on the cache share
     * of the device's own cores (eng_cl_cache_share(): on a CPU at most
     * 16 MiB a compute unit): measured, they ran faster streaming above
     * that (BENCHMARKS.md, issue #11). rows_direct keeps the device's
     * whole cache: there streaming a large tensor ran slower than through
     * the cache. */
    uint64_t cache = p->kernel == ENG_K_ROWS_DIRECT ? s->dev->cache_bytes
                                                    : eng_cl_cache_share(s->dev);
    if (!L->nt || (size != 4 && size != 8) || l->bytes < cache
        || l->bytes < ((size_t)8 << 20))
        return false;
    if (outptr != NULL && (uintptr_t)outptr % 32 != 0)
        return false;
    switch (p->kernel) {
    case ENG_K_ROWS_DIRECT: return p->P == 0 && (l->n * size) % 32 == 0;
    case ENG_K_ROWS_CHAINED: return (l->n * size) % 32 == 0;
    case ENG_K_COLS_DIRECT:
    case ENG_K_COLS_CHAINED:
        return (l->inner * size) % 32 == 0 && p->cw % 8 == 0;
    case ENG_K_STRIDED_DIRECT:
    case ENG_K_STRIDED_CHAINED: /* strided stores are scalar */
    case ENG_NKERNELS: break;
    }
    return false;
}

/* The launch's tile counter and tile statuses, all zero, in *out. A device
 * that shares the host's memory gets them zeroed by the host in memory the
 * stream keeps, wrapped in a new buffer (whose contents are the host's at
 * creation): no command. Elsewhere the device fills its own buffer, one
 * more command in the queue; on PoCL every command costs tens of
 * microseconds, which a 4 MiB scan notices (BENCHMARKS.md, issue #11).
 * The previous launch has finished (every scan waits for its own). */
static eng_err zero_state(eng_cl_stream *s, size_t bytes, cl_mem *out,
                          char *msg, size_t msglen)
{
    cl_int err;
    if (!s->dev->unified) {
        eng_err e = reserve(s, &s->state, &s->state_cap, bytes, msg, msglen);
        if (e != ENG_E_OK)
            return e;
        cl_uint zero = 0;
        err = clEnqueueFillBuffer(s->q, s->state, &zero, sizeof zero, 0, bytes,
                                  0, NULL, NULL);
        if (err != CL_SUCCESS)
            return cl_fail(msg, msglen, "clEnqueueFillBuffer", err);
        *out = s->state;
        return ENG_E_OK;
    }
    if (s->state_wrap != NULL)
        clReleaseMemObject(s->state_wrap);
    s->state_wrap = NULL;
    if (bytes > s->state_host_cap) {
        size_t cap = (bytes + 4095) / 4096 * 4096;
        uint32_t *h = aligned_alloc(4096, cap);
        if (h == NULL)
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "out of memory for the tile states");
        free(s->state_host);
        s->state_host = h;
        s->state_host_cap = cap;
    }
    memset(s->state_host, 0, bytes);
    s->state_wrap =
        clCreateBuffer(s->dev->context, CL_MEM_READ_WRITE | CL_MEM_USE_HOST_PTR,
                       bytes, s->state_host, &err);
    if (err != CL_SUCCESS) {
        s->state_wrap = NULL;
        return cl_fail(msg, msglen, "clCreateBuffer", err);
    }
    *out = s->state_wrap;
    return ENG_E_OK;
}

/* Sets the arguments of plan's kernel and enqueues it. */
static eng_err enqueue(eng_cl_stream *s, const eng_lines *l,
                       const eng_cl_plan *p, cl_mem in, cl_mem out, cl_mem geom,
                       const void *outptr, char *msg, size_t msglen)
{
    eng_storage st = eng_dtype_storage(l->dtype);
    cl_kernel k = NULL;
    eng_err e = kernel_for(s, st, p->kernel, &k, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    if (p->ntiles >= (1ull << 31))
        return eng_fail(msg, msglen, ENG_E_TOO_LARGE,
                        "tensor needs %llu tiles, more than the kernels count",
                        (unsigned long long)p->ntiles);
    cl_mem state;
    e = zero_state(s, p->state_bytes, &state, msg, msglen);
    if (e == ENG_E_OK && p->vals_bytes)
        e = reserve(s, &s->vals, &s->vals_cap, p->vals_bytes, msg, msglen);
    if (e != ENG_E_OK)
        return e;

    cl_uint mode = (l->reverse ? ENG_CL_MODE_REVERSE : 0u)
                   | (l->exclusive ? ENG_CL_MODE_EXCLUSIVE : 0u)
                   | (geom == NULL && streams(s, l, p, outptr)
                          ? ENG_CL_MODE_STREAM
                          : 0u);
    cl_ulong outer = l->outer, n = l->n, inner = l->inner;
    cl_ulong rpt = p->rpt, nblk = p->nblk, rows = p->rows;
    cl_uint P = p->P, cw = p->cw;
    const struct {
        size_t size;
        const void *v;
    } arg[] = {
        [A_IN] = {sizeof in, &in},
        [A_OUT] = {sizeof out, &out},
        [A_STATE] = {sizeof state, &state},
        [A_VALS] = {sizeof s->vals, &s->vals},
        [A_GEOM] = {sizeof geom, &geom},
        [A_OUTER] = {sizeof outer, &outer},
        [A_N] = {sizeof n, &n},
        [A_INNER] = {sizeof inner, &inner},
        [A_RPT] = {sizeof rpt, &rpt},
        [A_P] = {sizeof P, &P},
        [A_CW] = {sizeof cw, &cw},
        [A_NBLK] = {sizeof nblk, &nblk},
        [A_ROWS] = {sizeof rows, &rows},
        [A_MODE] = {sizeof mode, &mode},
    };
    const unsigned char *list = kernel_args[p->kernel];
    for (cl_uint i = 0; list[i] != A_END; i++) {
        cl_int err = clSetKernelArg(k, i, arg[list[i]].size, arg[list[i]].v);
        if (err != CL_SUCCESS)
            return cl_fail(msg, msglen, "clSetKernelArg", err);
    }

    cl_int err;
    size_t local = s->progs->layout.wg, global = p->groups * local;
    bool fault = fault_now(s->fault);
    if (fault && !s->fault->late) {
        cl_fail(msg, msglen,
                "clEnqueueNDRangeKernel (a fault injected for testing)",
                CL_OUT_OF_RESOURCES);
        return ENG_E_LAUNCH;
    }
    err = clEnqueueNDRangeKernel(s->q, k, 1, NULL, &global, &local, 0, NULL,
                                 NULL);
    /* a refused launch ran nothing: the caller may scan the tensor again */
    if (err != CL_SUCCESS) {
        cl_fail(msg, msglen, "clEnqueueNDRangeKernel", err);
        return ENG_E_LAUNCH;
    }
    if (fault) { /* late: the kernel ran; nothing is left running */
        clFinish(s->q);
        return cl_fail(msg, msglen,
                       "the scan kernel (a fault injected for testing)",
                       CL_OUT_OF_RESOURCES);
    }
#ifdef TALLY_DEBUG
    err = clFinish(s->q);
    if (err != CL_SUCCESS)
        return cl_fail(msg, msglen, "the scan kernel", err);
#endif
    return ENG_E_OK;
}

eng_err eng_cl_scan_plan(eng_cl_stream *s, const eng_lines *l,
                         const eng_cl_plan *p, const void *in, void *out,
                         char *msg, size_t msglen)
{
    if (l->elements == 0)
        return ENG_E_OK;
    io b;
    eng_err e =
        io_begin(s, in, l->bytes, out, l->bytes, false, false, &b, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    e = enqueue(s, l, p, b.in, b.out, NULL, b.wrapped ? out : NULL, msg,
                msglen);
    return io_end(s, out, l->bytes, &b, e, msg, msglen);
}

const eng_cl_layout *eng_cl_stream_layout(const eng_cl_stream *s)
{
    return &s->progs->layout;
}

eng_err eng_cl_scan(eng_cl_stream *s, const eng_lines *l, const void *in,
                    void *out, char *msg, size_t msglen)
{
    if (l->elements == 0) /* an empty batch: nothing to plan */
        return ENG_E_OK;
    eng_cl_plan p;
    eng_cl_plan_make(l, &s->progs->layout, &p);
    return eng_cl_scan_plan(s, l, &p, in, out, msg, msglen);
}

eng_err eng_cl_scan_strided_plan(eng_cl_stream *s, const eng_strided *v,
                                 const eng_cl_plan *p, const void *in,
                                 void *out, char *msg, size_t msglen)
{
    const eng_lines *l = &v->l;
    if (l->elements == 0)
        return ENG_E_OK;
    /* the geometry of kernels/scan.cl's tile_columns() */
    cl_ulong geom[5 + 3 * ENG_MAX_RANK];
    int nd = v->nouter;
    geom[0] = v->ri;
    geom[1] = v->ro;
    geom[2] = v->ci;
    geom[3] = v->co;
    geom[4] = (cl_ulong)nd;
    for (int k = 0; k < nd; k++) {
        geom[5 + k] = v->osize[k];
        geom[5 + nd + k] = v->oi[k];
        geom[5 + 2 * nd + k] = v->oo[k];
    }
    size_t gbytes = (size_t)(5 + 3 * nd) * sizeof geom[0];
    eng_err e = reserve(s, &s->geom, &s->geom_cap, gbytes, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    /* blocking: the array is on this stack frame */
    cl_int err = clEnqueueWriteBuffer(s->q, s->geom, CL_TRUE, 0, gbytes, geom,
                                      0, NULL, NULL);
    if (err != CL_SUCCESS)
        return cl_fail(msg, msglen, "clEnqueueWriteBuffer", err);

    size_t size = tx_dtype_size(l->dtype);
    size_t in_bytes = (size_t)v->in_span * size;
    size_t out_bytes = (size_t)v->out_span * size;
    io b;
    e = io_begin(s, in, in_bytes, out, out_bytes, true,
                 v->out_span != l->elements, &b, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    e = enqueue(s, l, p, b.in, b.out, s->geom, NULL, msg, msglen);
    return io_end(s, out, out_bytes, &b, e, msg, msglen);
}

eng_err eng_cl_scan_strided(eng_cl_stream *s, const eng_strided *v,
                            const void *in, void *out, char *msg, size_t msglen)
{
    eng_cl_plan p;
    eng_cl_plan_strided(v, &s->progs->layout, &p);
    return eng_cl_scan_strided_plan(s, v, &p, in, out, msg, msglen);
}

eng_err eng_cl_scan_buffers(eng_cl_stream *s, const eng_lines *l, cl_mem in,
                            cl_mem out, char *msg, size_t msglen)
{
    if (l->elements == 0)
        return ENG_E_OK;
    eng_cl_plan p;
    eng_cl_plan_make(l, &s->progs->layout, &p);
    return finish(s, enqueue(s, l, &p, in, out, NULL, NULL, msg, msglen), msg,
                  msglen);
}

/* Enqueues the plain or streaming copy kernel from in to out. */
static eng_err enqueue_copy(eng_cl_stream *s, cl_mem in, cl_mem out,
                            size_t bytes, bool streaming, char *msg,
                            size_t msglen)
{
    cl_kernel *kp = streaming ? &s->copy_stream : &s->copy;
    if (*kp == NULL) {
        cl_program prog;
        eng_err e = eng_cl_program_copy(s->progs, &prog, msg, msglen);
        if (e != ENG_E_OK)
            return e;
        cl_int err;
        *kp = clCreateKernel(
            prog, streaming ? "tally_copy_stream" : "tally_copy", &err);
        if (err != CL_SUCCESS) {
            *kp = NULL;
            return cl_fail(msg, msglen, "clCreateKernel", err);
        }
    }
    cl_kernel k = *kp;
    cl_ulong n16 = bytes / 16;
    cl_uint tail = (cl_uint)(bytes % 16);
    cl_int err = CL_SUCCESS;
    err |= clSetKernelArg(k, 0, sizeof in, &in);
    err |= clSetKernelArg(k, 1, sizeof out, &out);
    err |= clSetKernelArg(k, 2, sizeof n16, &n16);
    err |= clSetKernelArg(k, 3, sizeof tail, &tail);
    size_t local = 256;
    size_t global = ((n16 ? n16 : 1) + local - 1) / local * local;
    if (err == CL_SUCCESS)
        err = clEnqueueNDRangeKernel(s->q, k, 1, NULL, &global, &local, 0, NULL,
                                     NULL);
    if (err != CL_SUCCESS)
        return cl_fail(msg, msglen, "the copy kernel", err);
    return ENG_E_OK;
}

eng_err eng_cl_copy(eng_cl_stream *s, const void *in, void *out, size_t bytes,
                    bool streaming, char *msg, size_t msglen)
{
    if (bytes == 0)
        return ENG_E_OK;
    io b;
    eng_err e =
        io_begin(s, in, bytes, out, bytes, false, false, &b, msg, msglen);
    if (e != ENG_E_OK)
        return e;
    if (in == out) /* nothing to move */
        return io_end(s, out, bytes, &b, e, msg, msglen);
    if (b.in == b.out) {
        /* staged: copy into a second device buffer and read that back */
        e = reserve(s, &s->stage2, &s->stage2_cap, bytes, msg, msglen);
        if (e != ENG_E_OK)
            return io_end(s, out, bytes, &b, e, msg, msglen);
        b.out = s->stage2;
    }
    e = enqueue_copy(s, b.in, b.out, bytes, streaming, msg, msglen);
    return io_end(s, out, bytes, &b, e, msg, msglen);
}

eng_err eng_cl_copy_buffers(eng_cl_stream *s, cl_mem in, cl_mem out,
                            size_t bytes, bool streaming, char *msg,
                            size_t msglen)
{
    if (bytes == 0)
        return ENG_E_OK;
    return finish(s, enqueue_copy(s, in, out, bytes, streaming, msg, msglen),
                  msg, msglen);
}

static bool cancelled(const atomic_bool *cancel, eng_err *e, char *msg,
                      size_t msglen)
{
    if (*e != ENG_E_OK || cancel == NULL || !atomic_load(cancel))
        return false;
    *e = eng_fail(msg, msglen, ENG_E_DEVICE,
                  "stopped before every kernel was built");
    return true;
}

eng_err eng_cl_warmup(eng_cl_stream *s, const atomic_bool *cancel, char *msg,
                      size_t msglen)
{
    const eng_cl_layout *L = &s->progs->layout;
    /* one shape per kernel, small but large enough for its kernel */
    uint64_t chained_n = (uint64_t)L->wg * L->row_k + 1;
    struct {
        eng_cl_kernel_id k;
        uint64_t outer, n, inner, hint;
    } cases[] = {
        {ENG_K_ROWS_DIRECT, 3, 5, 1, 2},
        {ENG_K_ROWS_CHAINED, 1, chained_n, 1, 0},
        {ENG_K_COLS_DIRECT, 1, 3, 9, 0},
        {ENG_K_COLS_CHAINED, 1, 16, 2, 8},
    };
    size_t most = 0;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        size_t b = (size_t)(cases[c].outer * cases[c].n * cases[c].inner) * 8;
        most = b > most ? b : most;
    }
    void *buf = calloc(1, most);
    if (buf == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM, "out of memory");
    eng_err e = ENG_E_OK;
    for (int t = 0; t < TX_NDTYPES && e == ENG_E_OK; t++) {
        tx_dtype dt = (tx_dtype)t;
        /* one dtype per storage class is enough */
        if (tx_dtype_kind(dt) == TX_KIND_UNSIGNED)
            continue;
        if (eng_dtype_storage(dt) == ENG_STORAGE_F64 && !s->dev->fp64)
            continue;
        for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
            if (cancelled(cancel, &e, msg, msglen))
                break;
            eng_lines l = {
                .dtype = dt,
                .outer = cases[c].outer,
                .n = cases[c].n,
                .inner = cases[c].inner,
            };
            l.elements = l.outer * l.n * l.inner;
            l.bytes = (size_t)l.elements * tx_dtype_size(dt);
            eng_cl_plan p;
            eng_cl_plan_force(&l, L, cases[c].k, cases[c].hint, &p);
            e = eng_cl_scan_plan(s, &l, &p, buf, buf, msg, msglen);
            if (e != ENG_E_OK)
                break;
        }
    }
    /* the strided kernels, on a transposed 4 x 3 tensor */
    static const uint64_t transposed[2] = {1, 4};
    for (int t = 0; t < TX_NDTYPES && e == ENG_E_OK; t++) {
        tx_dtype dt = (tx_dtype)t;
        if (tx_dtype_kind(dt) == TX_KIND_UNSIGNED
            || (eng_dtype_storage(dt) == ENG_STORAGE_F64 && !s->dev->fp64))
            continue;
        eng_scan_desc d = {.dtype = dt, .rank = 2, .shape = {4, 3}};
        eng_view iv = {transposed, most}, ov = {NULL, most};
        eng_strided v;
        bool packed;
        char out[12 * 8];
        e = eng_strided_from_desc(&d, &iv, &ov, &v, &packed, msg, msglen);
        for (int chained = 0; chained < 2 && e == ENG_E_OK; chained++) {
            if (cancelled(cancel, &e, msg, msglen))
                break;
            eng_cl_plan p;
            eng_cl_plan_strided_force(&v, L, chained, 2, &p);
            e = eng_cl_scan_strided_plan(s, &v, &p, buf, out, msg, msglen);
        }
    }
    if (e == ENG_E_OK && !cancelled(cancel, &e, msg, msglen)) {
        char tmp[64];
        e = eng_cl_copy(s, buf, tmp, sizeof tmp, false, msg, msglen);
        if (e == ENG_E_OK)
            e = eng_cl_copy(s, buf, tmp, sizeof tmp, true, msg, msglen);
    }
    free(buf);
    return e;
}
