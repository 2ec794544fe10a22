/*
 * job.c - one cumulative sum, as one request or as many.
 *
 * The tensor is viewed as (outer, n, inner), n being the scan axis. Up to
 * TALLYOPT_CHUNK_BYTES it goes whole, with its own shape, in one request
 * (raw bytes to POST /v1/cumsum). A larger one is cut into blocks of at
 * most that size, each sent as a 3-D tensor (outer, n, inner)-slice with
 * axis 1, concurrently, over every server URL in turn:
 *
 *  - when whole lines fit in a block (n elements along the axis), blocks
 *    hold whole lines: several outer slices, or a band of inner columns.
 *    Lines are independent, so the answers are simply put in place.
 *  - when a line is longer than a block, lines are cut along the axis into
 *    bands of rows. Each band is scanned on its own; then, in scan order,
 *    every band gets the running total of the bands before it (its carry)
 *    added to each element: the reduce-then-scan idea, across servers.
 *    A band's total is its last scanned row (plus its last input row when
 *    the scan is exclusive). Carries are kept in double for floats and in
 *    uint64 for integers, which wrap like the server's sums; float16 and
 *    bfloat16 bands travel as float32 so that no partial sum is rounded
 *    to 11 or 8 bits before the carry is added.
 *
 * Blocks that are contiguous in the input (most are) are sent straight from
 * it; the rest are gathered into a buffer that lives only while the block
 * is in flight. Answers are kept until every block has succeeded, and only
 * then is the output written, so a failure leaves it untouched and the
 * output may be the input.
 */
#include <assert.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "tx_fnv.h"
#include "tx_half.h"
#include "tx_utf8.h"

/* A split into more blocks than this is refused: the bookkeeping would
 * outweigh the work. */
#define MAX_BLOCKS (1u << 16)

typedef struct {
    tc_transfer t; /* first: a transfer's address is its block's */
    tc_job *job;
    uint64_t o0, l0, i0; /* where the block starts in (outer, n, inner) */
    uint64_t on, ln, in; /* and its extent */
    void *send;          /* a gathered copy of the input, or NULL */
    void *recv;          /* the answer */
} tc_block;

struct tc_job {
    tally_client *c;
    tally_dt dtype, wire; /* wire: the dtype the blocks travel as */
    int rank, axis;
    int64_t shape[TALLY_MAX_RANK];
    unsigned flags;
    const char *in;
    char *out;
    size_t size, wsize, bytes;
    uint64_t outer, n, inner;
    uint64_t ob, lb, ib;    /* block extents */
    uint64_t nbo, nbl, nbi; /* block counts */
    bool split;             /* false: one request with the real shape */
    bool carries;           /* blocks cut lines */
    size_t nblocks;
    tc_block *blocks;
    tc_transfer **xfers;
    tc_block *failed; /* the first block that failed */
    char *seq_query;  /* a sequence's chunk: "&sequence_id=..."; or NULL */
    size_t seq_url;   /* the URL its id hashes to */
    bool seq_once;    /* an unnumbered chunk: sent again only when nothing
                       * of it reached a server (transfer.c's once) */
};

/* ------------------------------------------------------------------------
 * Describing and planning.
 */
static tally_code fail(char *msg, size_t len, tally_code code, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

static tally_code fail(char *msg, size_t len, tally_code code, const char *fmt,
                       ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, len, fmt, ap);
    va_end(ap);
    return code;
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

static uint64_t min_u(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void plan(tc_job *j)
{
    uint64_t count = j->outer * j->n * j->inner;
    uint64_t chunk = (uint64_t)j->c->chunk_bytes;
    uint64_t e = chunk / j->size ? chunk / j->size : 1;
    j->wire = j->dtype;
    j->wsize = j->size;
    j->ob = j->outer;
    j->lb = j->n;
    j->ib = j->inner;
    if (chunk == 0 || count <= e || j->seq_query != NULL)
        return;
    j->split = true;
    if (j->n <= e) {
        /* whole lines: inner columns first, then outer slices */
        j->ib = min_u(j->inner, e / j->n);
        j->ob = j->ib == j->inner ? min_u(j->outer, e / (j->n * j->inner)) : 1;
    } else {
        j->carries = true;
        if (j->dtype == TALLY_DT_FLOAT16 || j->dtype == TALLY_DT_BFLOAT16) {
            j->wire = TALLY_DT_FLOAT32;
            j->wsize = 4;
            e = chunk / 4 ? chunk / 4 : 1;
        }
        j->ob = 1;
        j->ib = min_u(j->inner, e);
        j->lb = e / j->ib ? e / j->ib : 1;
    }
    j->nbo = ceil_div(j->outer, j->ob);
    j->nbl = ceil_div(j->n, j->lb);
    j->nbi = ceil_div(j->inner, j->ib);
}

tally_code tc_job_new(tally_client *c, tally_dt dtype, int rank,
                      const int64_t *shape, int axis, unsigned flags,
                      const void *in, void *out, tc_job **job, char *msg,
                      size_t msg_len)
{
    *job = NULL;
    if (tally_dt_size(dtype) == 0)
        return fail(msg, msg_len, TALLYE_ARGUMENT, "dtype %d is not a tally_dt",
                    (int)dtype);
    if (rank < 1 || rank > TALLY_MAX_RANK)
        return fail(msg, msg_len, TALLYE_ARGUMENT,
                    "rank %d is out of range (1 to %d)", rank, TALLY_MAX_RANK);
    if (shape == NULL)
        return fail(msg, msg_len, TALLYE_ARGUMENT, "the shape is NULL");
    if (axis < -rank || axis >= rank)
        return fail(msg, msg_len, TALLYE_ARGUMENT,
                    "axis %d is out of range for rank %d (-%d to %d)", axis,
                    rank, rank, rank - 1);
    if (flags & ~(TALLY_EXCLUSIVE | TALLY_REVERSE))
        return fail(msg, msg_len, TALLYE_ARGUMENT,
                    "unknown flags 0x%x (TALLY_EXCLUSIVE and TALLY_REVERSE "
                    "are the only ones)",
                    flags & ~(TALLY_EXCLUSIVE | TALLY_REVERSE));
    if (axis < 0)
        axis += rank;
    size_t size = tally_dt_size(dtype);
    uint64_t count = 1, outer = 1, inner = 1;
    bool empty = false;
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0)
            return fail(msg, msg_len, TALLYE_ARGUMENT,
                        "shape[%d] is negative (%" PRId64 ")", d, shape[d]);
        uint64_t s = (uint64_t)shape[d];
        empty |= s == 0;
        if (s != 0 && count > (uint64_t)PTRDIFF_MAX / size / s)
            return fail(msg, msg_len, TALLYE_ARGUMENT,
                        "the shape holds more bytes than memory can");
        count *= s ? s : 1;
        if (d < axis)
            outer *= s ? s : 1;
        else if (d > axis)
            inner *= s ? s : 1;
    }
    if (!empty && (in == NULL || out == NULL))
        return fail(msg, msg_len, TALLYE_ARGUMENT, "the %s tensor is NULL",
                    in == NULL ? "input" : "output");
    if (!empty && ((uintptr_t)in % size != 0 || (uintptr_t)out % size != 0))
        return fail(msg, msg_len, TALLYE_ARGUMENT,
                    "the %s tensor is not aligned to its %zu-byte elements",
                    (uintptr_t)in % size != 0 ? "input" : "output", size);
    if (!empty && in != out) {
        const char *a = in, *b = out;
        size_t bytes = (size_t)count * size;
        if ((a < b && b < a + bytes) || (b < a && a < b + bytes))
            return fail(msg, msg_len, TALLYE_ARGUMENT,
                        "the output overlaps the input without being it");
    }
    tc_job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return fail(msg, msg_len, TALLYE_NOMEM, "out of memory");
    j->c = c;
    j->dtype = dtype;
    j->rank = rank;
    j->axis = axis;
    memcpy(j->shape, shape, (size_t)rank * sizeof *shape);
    j->flags = flags;
    j->in = in;
    j->out = out;
    j->size = size;
    j->bytes = empty ? 0 : (size_t)count * size;
    j->outer = outer;
    j->n = (uint64_t)shape[axis];
    j->inner = inner;
    *job = j;
    return TALLYE_OK;
}

/* "&sequence_id=" and the id percent-encoded (all but unreserved
 * characters) into q; returns the length written. */
static int sprintf_id(char *q, const char *id, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    static const char prefix[] = "&sequence_id=";
    memcpy(q, prefix, sizeof prefix - 1);
    int o = (int)sizeof prefix - 1;
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)id[i];
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')
            || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.'
            || ch == '~') {
            q[o++] = (char)ch;
        } else {
            q[o++] = '%';
            q[o++] = hex[ch >> 4];
            q[o++] = hex[ch & 15];
        }
    }
    q[o] = '\0';
    return o;
}

void tc_job_free(tc_job *j)
{
    if (j == NULL)
        return;
    for (size_t i = 0; i < j->nblocks; i++) {
        tc_transfer_clear(&j->blocks[i].t);
        free(j->blocks[i].send);
        free(j->blocks[i].recv);
    }
    free(j->blocks);
    free(j->xfers);
    free(j->seq_query);
    free(j);
}

tally_code tc_job_sequence(tc_job *j, const char *id, unsigned flags,
                           uint64_t chunk, char *msg, size_t msg_len)
{
    size_t n = id != NULL ? strlen(id) : 0;
    if (n == 0 || n > 128)
        return fail(msg, msg_len, TALLYE_ARGUMENT,
                    "a sequence id is 1 to 128 bytes, not %zu", n);
    if (tx_utf8_valid(id, n) != n)
        return fail(msg, msg_len, TALLYE_ARGUMENT,
                    "the sequence id is not valid UTF-8");
    /* percent-encoded: at most 3 bytes a byte */
    char *q = malloc(3 * n + 96);
    if (q == NULL)
        return fail(msg, msg_len, TALLYE_NOMEM, "out of memory");
    size_t o = (size_t)sprintf_id(q, id, n);
    char num[48] = "";
    if (chunk != 0)
        snprintf(num, sizeof num, "&sequence_chunk=%" PRIu64, chunk);
    snprintf(q + o, 96, "%s%s%s",
             flags & TALLY_SEQUENCE_START ? "&sequence_start=true" : "",
             flags & TALLY_SEQUENCE_END ? "&sequence_end=true" : "", num);
    j->seq_query = q;
    j->seq_once = chunk == 0;
    uint64_t h = tx_fnv1a64(id, n); /* the Python package's too */
    j->seq_url = (size_t)(h % (j->c->nurls ? j->c->nurls : 1));
    return TALLYE_OK;
}

/* ------------------------------------------------------------------------
 * Transfers.
 */
static char *request_path(const tc_job *j, const tc_block *b)
{
    char shape[TALLY_MAX_RANK * 21 + 1];
    size_t o = 0;
    int axis;
    if (j->split) {
        tc_fmt(shape, sizeof shape, "%" PRIu64 ",%" PRIu64 ",%" PRIu64, b->on,
               b->ln, b->in);
        axis = 1;
    } else {
        for (int d = 0; d < j->rank; d++)
            o += (size_t)snprintf(shape + o, sizeof shape - o, "%s%" PRId64,
                                  d ? "," : "", j->shape[d]);
        axis = j->axis;
    }
    char path[sizeof shape + 128 + 3 * 128 + 64];
    tc_fmt(path, sizeof path,
           "/v1/cumsum?dtype=%s&shape=%s&axis=%d&exclusive=%s&reverse=%s%s",
           tally_dt_name(j->wire), shape, axis,
           j->flags & TALLY_EXCLUSIVE ? "true" : "false",
           j->flags & TALLY_REVERSE ? "true" : "false",
           j->seq_query != NULL ? j->seq_query : "");
    return strdup(path);
}

static size_t block_count(const tc_block *b)
{
    return (size_t)(b->on * b->ln * b->in);
}

/* Whether the block is one run of the input. */
static bool contiguous(const tc_job *j, const tc_block *b)
{
    return b->in == j->inner && (b->ln == j->n || b->on == 1);
}

static size_t offset_of(const tc_job *j, uint64_t o, uint64_t l, uint64_t i)
{
    return (size_t)((o * j->n + l) * j->inner + i);
}

/* Before a block's first attempt: the answer's buffer, and the body. */
static bool block_prepare(tc_transfer *t)
{
    tc_block *b = (tc_block *)t;
    tc_job *j = b->job;
    size_t count = block_count(b);
    b->recv = malloc(count ? count * j->wsize : 1); /* an empty chunk */
    if (b->recv == NULL)
        goto nomem;
    t->recv = b->recv;
    t->recv_cap = t->expect_bytes = count * j->wsize;
    if (j->wire == j->dtype && contiguous(j, b)) {
        t->body = j->in + offset_of(j, b->o0, b->l0, b->i0) * j->size;
        t->body_len = count * j->size;
        return true;
    }
    b->send = malloc(count * j->wsize);
    if (b->send == NULL)
        goto nomem;
    char *dst = b->send;
    for (uint64_t o = 0; o < b->on; o++)
        for (uint64_t l = 0; l < b->ln; l++) {
            size_t src = offset_of(j, b->o0 + o, b->l0 + l, b->i0);
            if (j->wire == j->dtype) {
                memcpy(dst, j->in + src * j->size, (size_t)b->in * j->size);
            } else { /* float16 or bfloat16 as float32: exact */
                const uint16_t *from = (const uint16_t *)j->in + src;
                float *to = (float *)dst;
                if (j->dtype == TALLY_DT_FLOAT16)
                    for (uint64_t i = 0; i < b->in; i++)
                        to[i] = tx_f16_to_f32(from[i]);
                else
                    for (uint64_t i = 0; i < b->in; i++)
                        to[i] = tx_bf16_to_f32(from[i]);
            }
            dst += (size_t)b->in * j->wsize;
        }
    t->body = b->send;
    t->body_len = count * j->wsize;
    return true;
nomem:
    t->code = TALLYE_NOMEM;
    tc_fmt(t->msg, sizeof t->msg,
           "out of memory for a %zu-element chunk of the tensor", count);
    return false;
}

static void block_done(tc_transfer *t)
{
    tc_block *b = (tc_block *)t;
    tc_job *j = b->job;
    free(b->send);
    b->send = NULL;
    t->body = NULL;
    if (t->code == TALLYE_OK || j->failed != NULL)
        return;
    /* the job has failed: the blocks not yet sent need not be */
    j->failed = b;
    for (size_t i = 0; i < j->nblocks; i++)
        j->blocks[i].t.skip = true;
}

tally_code tc_job_transfers(tc_job *j, tc_transfer ***xfers, size_t *n,
                            char *msg, size_t msg_len)
{
    *xfers = NULL;
    *n = 0;
    if (j->bytes == 0 && j->seq_query == NULL) /* a chunk goes, to end */
        return TALLYE_OK;
    if (j->blocks == NULL) {
        plan(j);
        uint64_t nb = j->split ? j->nbo * j->nbl * j->nbi : 1;
        if (nb > MAX_BLOCKS)
            return fail(msg, msg_len, TALLYE_ARGUMENT,
                        "TALLYOPT_CHUNK_BYTES=%ld would cut this %zu-byte "
                        "tensor into %" PRIu64 " chunks, more than %u; "
                        "raise it",
                        j->c->chunk_bytes, j->bytes, nb, MAX_BLOCKS);
        j->blocks = calloc((size_t)nb, sizeof *j->blocks);
        j->xfers = calloc((size_t)nb, sizeof *j->xfers);
        if (j->blocks == NULL || j->xfers == NULL)
            return fail(msg, msg_len, TALLYE_NOMEM, "out of memory");
        j->nblocks = (size_t)nb;
        if (!j->split) {
            j->nbo = j->nbl = j->nbi = 1;
        }
        /* blocks of one band of lines are consecutive, in axis order */
        size_t k = 0;
        for (uint64_t bo = 0; bo < j->nbo; bo++)
            for (uint64_t bi = 0; bi < j->nbi; bi++)
                for (uint64_t bl = 0; bl < j->nbl; bl++, k++) {
                    tc_block *b = &j->blocks[k];
                    b->job = j;
                    b->o0 = bo * j->ob;
                    b->l0 = bl * j->lb;
                    b->i0 = bi * j->ib;
                    b->on = min_u(j->ob, j->outer - b->o0);
                    b->ln = min_u(j->lb, j->n - b->l0);
                    b->in = min_u(j->ib, j->inner - b->i0);
                    tc_transfer *t = &b->t;
                    t->method = "POST";
                    t->content_type = "application/octet-stream";
                    t->path = request_path(j, b);
                    if (t->path == NULL)
                        return fail(msg, msg_len, TALLYE_NOMEM,
                                    "out of memory");
                    t->url =
                        j->seq_query != NULL ? j->seq_url : tc_next_url(j->c);
                    t->pinned = j->seq_query != NULL && !j->c->shared_state;
                    t->once = j->seq_query != NULL && j->seq_once;
                    t->expect_dtype = j->wire;
                    t->check_tensor = true;
                    t->prepare = block_prepare;
                    t->done = block_done;
                    j->xfers[k] = t;
                }
    }
    *xfers = j->xfers;
    *n = j->nblocks;
    return TALLYE_OK;
}

/* ------------------------------------------------------------------------
 * Stitching.
 */

/* out[r][c] = local[r][c] + carry[c], rounded into the dtype, for `rows`
 * contiguous rows of `cols` elements; local is in the wire dtype. A single
 * column (a 1-D tensor, or the last axis) keeps its carry in a register. */
static void add_rows(const tc_job *j, void *out, const void *local,
                     const double *cf, const uint64_t *cu, size_t cols,
                     size_t rows)
{
#define ADD_ROWS(T, W, CARRY, SUM)                                             \
    do {                                                                       \
        T *o = out;                                                            \
        const W *x = local;                                                    \
        if (cols == 1) {                                                       \
            const CARRY k = CARRY##_AT(0);                                     \
            for (size_t i = 0; i < rows; i++)                                  \
                o[i] = SUM(x[i], k);                                           \
        } else {                                                               \
            for (size_t r = 0; r < rows; r++, o += cols, x += cols)            \
                for (size_t c = 0; c < cols; c++)                              \
                    o[c] = SUM(x[c], CARRY##_AT(c));                           \
        }                                                                      \
    } while (0)
#define double_AT(c) cf[c]
#define uint64_t_AT(c) cu[c]
#define SUM_F32(x, k) ((float)((double)(x) + (k)))
#define SUM_F64(x, k) ((x) + (k))
#define SUM_F16(x, k) tx_f64_to_f16((double)(x) + (k))
#define SUM_BF16(x, k) tx_f64_to_bf16((double)(x) + (k))
#define SUM_U8(x, k) ((uint8_t)((x) + (uint8_t)(k)))
#define SUM_U16(x, k) ((uint16_t)((x) + (uint16_t)(k)))
#define SUM_U32(x, k) ((uint32_t)((x) + (uint32_t)(k)))
#define SUM_U64(x, k) ((x) + (k))
    switch (j->dtype) {
    case TALLY_DT_FLOAT32: ADD_ROWS(float, float, double, SUM_F32); break;
    case TALLY_DT_FLOAT64: ADD_ROWS(double, double, double, SUM_F64); break;
    /* float16 and bfloat16 bands travel as float32 */
    case TALLY_DT_FLOAT16: ADD_ROWS(uint16_t, float, double, SUM_F16); break;
    case TALLY_DT_BFLOAT16: ADD_ROWS(uint16_t, float, double, SUM_BF16); break;
    case TALLY_DT_INT8:
    case TALLY_DT_UINT8: ADD_ROWS(uint8_t, uint8_t, uint64_t, SUM_U8); break;
    case TALLY_DT_INT16:
    case TALLY_DT_UINT16:
        ADD_ROWS(uint16_t, uint16_t, uint64_t, SUM_U16);
        break;
    case TALLY_DT_INT32:
    case TALLY_DT_UINT32:
        ADD_ROWS(uint32_t, uint32_t, uint64_t, SUM_U32);
        break;
    case TALLY_DT_INT64:
    case TALLY_DT_UINT64:
        ADD_ROWS(uint64_t, uint64_t, uint64_t, SUM_U64);
        break;
    }
#undef ADD_ROWS
#undef double_AT
#undef uint64_t_AT
#undef SUM_F32
#undef SUM_F64
#undef SUM_F16
#undef SUM_BF16
#undef SUM_U8
#undef SUM_U16
#undef SUM_U32
#undef SUM_U64
}

/* Puts a block's answer in place, adding a carry per column when given. */
static void place(const tc_job *j, const tc_block *b, const double *cf,
                  const uint64_t *cu)
{
    const char *src = b->recv;
    size_t run = (size_t)b->in;
    char *dst = j->out + offset_of(j, b->o0, b->l0, b->i0) * j->size;
    if (cf != NULL) {
        /* plan() cuts lines into blocks that are one run of whole rows,
         * or a piece of one row: contiguous in the output */
        assert(b->on == 1 && (b->in == j->inner || b->ln == 1));
        add_rows(j, dst, src, cf, cu, run, (size_t)b->ln);
        return;
    }
    if (contiguous(j, b)) {
        memcpy(dst, src, block_count(b) * j->size);
        return;
    }
    for (uint64_t o = 0; o < b->on; o++)
        for (uint64_t l = 0; l < b->ln; l++) {
            dst = j->out + offset_of(j, b->o0 + o, b->l0 + l, b->i0) * j->size;
            memcpy(dst, src, run * j->size);
            src += run * j->wsize;
        }
}

/* Bands of one (outer, inner-columns) group, in scan order, each getting
 * the totals of those before it. cf and cu have room for two rows. */
static void stitch_group(const tc_job *j, const tc_block *band, double *cf,
                         uint64_t *cu)
{
    size_t cols = (size_t)band[0].in;
    bool is_float = tc_dt_kind(j->dtype) == TC_FLOAT;
    bool rev = j->flags & TALLY_REVERSE, excl = j->flags & TALLY_EXCLUSIVE;
    double *tf = cf + cols;
    uint64_t *tu = cu + cols;
    memset(cf, 0, cols * sizeof *cf);
    memset(cu, 0, cols * sizeof *cu);
    for (uint64_t s = 0; s < j->nbl; s++) {
        const tc_block *b = &band[rev ? j->nbl - 1 - s : s];
        /* the band's totals, read before its output (which may be its
         * input) is written: the last row in scan order, and the last
         * input row too when the scan is exclusive */
        uint64_t last = rev ? 0 : b->ln - 1;
        size_t at = (size_t)last * cols;
        size_t src = offset_of(j, b->o0, b->l0 + last, b->i0);
        for (size_t i = 0; i < cols; i++) {
            if (is_float) {
                tf[i] = tc_get_f(j->wire, b->recv, at + i);
                if (excl)
                    tf[i] += tc_get_f(j->dtype, j->in, src + i);
                tu[i] = 0;
            } else {
                tu[i] = tc_get_u(j->wire, b->recv, at + i);
                if (excl)
                    tu[i] += tc_get_u(j->dtype, j->in, src + i);
                tf[i] = 0;
            }
        }
        place(j, b, cf, cu);
        for (size_t i = 0; i < cols; i++) {
            cf[i] += tf[i];
            cu[i] += tu[i];
        }
    }
}

tally_code tc_job_finish(tc_job *j, long *status, char *msg, size_t msg_len)
{
    *status = 0;
    msg[0] = '\0';
    if (j->bytes == 0)
        return TALLYE_OK;
    if (j->failed != NULL) {
        tc_transfer *t = &j->failed->t;
        *status = t->status;
        if (j->nblocks > 1)
            tc_fmt(msg, msg_len, "%s [chunk %zu of %zu]", t->msg,
                   (size_t)(j->failed - j->blocks) + 1, j->nblocks);
        else
            tc_copy(msg, msg_len, t->msg);
        return t->code;
    }
    if (!j->carries) {
        for (size_t k = 0; k < j->nblocks; k++)
            place(j, &j->blocks[k], NULL, NULL);
    } else {
        /* two rows of carries, allocated before any output is written */
        size_t cols = (size_t)j->ib;
        double *cf = malloc(2 * cols * sizeof *cf);
        uint64_t *cu = malloc(2 * cols * sizeof *cu);
        if (cf == NULL || cu == NULL) {
            free(cf);
            free(cu);
            tc_copy(msg, msg_len, "out of memory stitching the chunks");
            return TALLYE_NOMEM;
        }
        for (size_t k = 0; k < j->nblocks; k += (size_t)j->nbl)
            stitch_group(j, &j->blocks[k], cf, cu);
        free(cf);
        free(cu);
    }
    *status = 200;
    for (size_t k = 0; k < j->nblocks; k++) {
        free(j->blocks[k].recv);
        j->blocks[k].recv = NULL;
    }
    return TALLYE_OK;
}
