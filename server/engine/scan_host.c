/*
 * scan_host.c - the host backend.
 *
 * Lines come in two shapes (see tensor.h). Contiguous lines (inner == 1)
 * are scanned 8 elements at a time: an in-register prefix sum of the
 * vector, plus a running carry. Strided lines (inner > 1) are scanned a row
 * at a time over a block of adjacent columns, which the compiler vectorises
 * across columns.
 *
 * Work is split into tasks for the pool. When there are enough independent
 * lines (or column blocks) each task takes some whole; otherwise the lines
 * are cut into chunks along the axis and scanned in two passes: every chunk
 * is reduced in parallel, the chunk totals are prefix-summed in scan order,
 * and every chunk is scanned in parallel from its carry.
 *
 * Per element type the code is instantiated from macros over a "carry" type:
 * float64 for the float types (float32 sums of at most 8 elements are
 * folded into a float64 carry), and the unsigned type of the element's
 * width for integers (addition modulo 2^bits).
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "pool.h"
#include "scan_host.h"
#include "tile_host.h"
#include "tx_half.h"

/* The float32 segment loop is compiled twice on x86-64 with GCC: for the
 * baseline and for AVX2 (seg_f32 below picks one on first use). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOST_AVX2_COPY 1
#else
#define HOST_AVX2_COPY 0
#endif

/* ------------------------------------------------------------------------
 * Vectors of 8 lanes and in-register scans. __builtin_shufflevector takes
 * lanes 0-7 from its first operand (zeros here) and 8-15 from the second.
 */
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));
typedef float v2f __attribute__((vector_size(8)));
typedef double v8d __attribute__((vector_size(64)));
typedef uint8_t v8u8 __attribute__((vector_size(8)));
typedef uint16_t v8u16 __attribute__((vector_size(16)));
typedef uint32_t v8u32 __attribute__((vector_size(32)));
typedef uint64_t v8u64 __attribute__((vector_size(64)));

#define SHIFT_UP(z, x, d)                                                      \
    ((d) == 1   ? __builtin_shufflevector(z, x, 0, 8, 9, 10, 11, 12, 13, 14)   \
     : (d) == 2 ? __builtin_shufflevector(z, x, 0, 1, 8, 9, 10, 11, 12, 13)    \
                : __builtin_shufflevector(z, x, 0, 1, 2, 3, 8, 9, 10, 11))
#define SHIFT_DOWN(z, x, d)                                                    \
    ((d) == 1   ? __builtin_shufflevector(z, x, 9, 10, 11, 12, 13, 14, 15, 0)  \
     : (d) == 2 ? __builtin_shufflevector(z, x, 10, 11, 12, 13, 14, 15, 0, 1)  \
                : __builtin_shufflevector(z, x, 12, 13, 14, 15, 0, 1, 2, 3))

/* Inclusive scan of a vector towards higher lanes (rev = 0) or lower. */
#define VSCAN(VT, x, rev)                                                      \
    ({                                                                         \
        VT z_ = {0}, v_ = (x);                                                 \
        if (rev) {                                                             \
            v_ += SHIFT_DOWN(z_, v_, 1);                                       \
            v_ += SHIFT_DOWN(z_, v_, 2);                                       \
            v_ += SHIFT_DOWN(z_, v_, 4);                                       \
        } else {                                                               \
            v_ += SHIFT_UP(z_, v_, 1);                                         \
            v_ += SHIFT_UP(z_, v_, 2);                                         \
            v_ += SHIFT_UP(z_, v_, 4);                                         \
        }                                                                      \
        v_;                                                                    \
    })

/* The exclusive form of an inclusive vector scan: shifted by one lane. */
#define VEXCL(VT, s, rev)                                                      \
    ({                                                                         \
        VT z_ = {0};                                                           \
        (rev) ? SHIFT_DOWN(z_, (s), 1) : SHIFT_UP(z_, (s), 1);                 \
    })

/* ------------------------------------------------------------------------
 * Segment scans. Each scans `len` contiguous elements in the direction of
 * `rev`, starting from *carry and leaving the running total in it.
 */

/* Exact accumulation in the element's own (unsigned) type, and float64;
 * the carry in CT (an integer's in uint64, wrapped to T). */
#define DEFINE_SEG_EXACT(NAME, T, VT, CT)                                      \
    static void NAME(const T *src, T *dst, size_t len, CT *carry, int rev,     \
                     int excl)                                                 \
    {                                                                          \
        T c = (T)*carry;                                                       \
        size_t nv = len / 8, tail = len % 8;                                   \
        if (!rev) {                                                            \
            for (size_t k = 0; k < nv; k++) {                                  \
                VT x, s;                                                       \
                memcpy(&x, src + 8 * k, sizeof x);                             \
                s = VSCAN(VT, x, 0);                                           \
                VT o = (excl ? VEXCL(VT, s, 0) : s) + c;                       \
                memcpy(dst + 8 * k, &o, sizeof o);                             \
                c += s[7];                                                     \
            }                                                                  \
            for (size_t i = nv * 8; i < len; i++) {                            \
                T x = src[i];                                                  \
                if (excl) {                                                    \
                    dst[i] = c;                                                \
                    c += x;                                                    \
                } else {                                                       \
                    c += x;                                                    \
                    dst[i] = c;                                                \
                }                                                              \
            }                                                                  \
        } else {                                                               \
            for (size_t k = 0; k < nv; k++) {                                  \
                size_t off = len - 8 * k - 8;                                  \
                VT x, s;                                                       \
                memcpy(&x, src + off, sizeof x);                               \
                s = VSCAN(VT, x, 1);                                           \
                VT o = (excl ? VEXCL(VT, s, 1) : s) + c;                       \
                memcpy(dst + off, &o, sizeof o);                               \
                c += s[0];                                                     \
            }                                                                  \
            for (size_t i = tail; i-- > 0;) {                                  \
                T x = src[i];                                                  \
                if (excl) {                                                    \
                    dst[i] = c;                                                \
                    c += x;                                                    \
                } else {                                                       \
                    c += x;                                                    \
                    dst[i] = c;                                                \
                }                                                              \
            }                                                                  \
        }                                                                      \
        *carry = c;                                                            \
    }

DEFINE_SEG_EXACT(seg_u8, uint8_t, v8u8, uint64_t)
DEFINE_SEG_EXACT(seg_u16, uint16_t, v8u16, uint64_t)
DEFINE_SEG_EXACT(seg_u32, uint32_t, v8u32, uint64_t)
DEFINE_SEG_EXACT(seg_u64, uint64_t, v8u64, uint64_t)
DEFINE_SEG_EXACT(seg_f64, double, v8d, double)

/* float32: sums of 4-lane vectors in float32, the carry in float64. Each
 * 4-lane half is widened separately, which compiles to plain SSE2. */
typedef double v2d __attribute__((vector_size(16)));

static inline v4f scan4f(v4f x, int rev)
{
    v4f z = {0};
    if (rev) {
        x += __builtin_shufflevector(z, x, 5, 6, 7, 0);
        x += __builtin_shufflevector(z, x, 6, 7, 0, 1);
    } else {
        x += __builtin_shufflevector(z, x, 0, 4, 5, 6);
        x += __builtin_shufflevector(z, x, 0, 1, 4, 5);
    }
    return x;
}

/* One 4-lane group: o = the (exclusive or inclusive) scan plus the carry,
 * rounded once to float32; returns the group's total. */
static inline float group4(const float *src, float *dst, double c, int rev,
                           int excl)
{
    v4f x, s, o;
    memcpy(&x, src, sizeof x);
    s = scan4f(x, rev);
    if (excl) {
        v4f z = {0};
        o = rev ? __builtin_shufflevector(z, s, 5, 6, 7, 0)
                : __builtin_shufflevector(z, s, 0, 4, 5, 6);
    } else {
        o = s;
    }
    v2d lo =
        __builtin_convertvector(__builtin_shufflevector(o, o, 0, 1), v2d) + c;
    v2d hi =
        __builtin_convertvector(__builtin_shufflevector(o, o, 2, 3), v2d) + c;
    v4f r =
        __builtin_shufflevector(__builtin_convertvector(lo, v2f),
                                __builtin_convertvector(hi, v2f), 0, 1, 2, 3);
    memcpy(dst, &r, sizeof r);
    return rev ? s[0] : s[3];
}

static inline __attribute__((always_inline)) void
seg_f32_body(const float *src, float *dst, size_t len, double *carry, int rev,
             int excl)
{
    double c = *carry;
    size_t ng = len / 4, tail = len % 4;
    if (!rev) {
        for (size_t k = 0; k < ng; k++)
            c += group4(src + 4 * k, dst + 4 * k, c, 0, excl);
    } else {
        for (size_t k = 0; k < ng; k++) {
            size_t off = len - 4 * k - 4;
            c += group4(src + off, dst + off, c, 1, excl);
        }
    }
    for (size_t t = 0; t < tail; t++) {
        size_t i = rev ? tail - 1 - t : ng * 4 + t;
        float x = src[i];
        if (excl) {
            dst[i] = (float)c;
            c += x;
        } else {
            c += x;
            dst[i] = (float)c;
        }
    }
    *carry = c;
}

typedef void seg_f32_fn(const float *src, float *dst, size_t len, double *carry,
                        int rev, int excl);

static void seg_f32_base(const float *src, float *dst, size_t len,
                         double *carry, int rev, int excl)
{
    seg_f32_body(src, dst, len, carry, rev, excl);
}

#if HOST_AVX2_COPY
__attribute__((target("avx2"))) static void seg_f32_avx2(const float *src,
                                                         float *dst, size_t len,
                                                         double *carry, int rev,
                                                         int excl)
{
    seg_f32_body(src, dst, len, carry, rev, excl);
}
#endif

/* Which copy runs is chosen here, on first use, by asking the CPU: not by
 * an ifunc resolver (GCC's target_clones), which runs while the program is
 * relocated, before any sanitizer's runtime has started, and so crashed
 * every ThreadSanitizer build at load. Racing first calls store the same
 * pointer. */
static _Atomic(seg_f32_fn *) seg_f32_chosen;

static seg_f32_fn *seg_f32_pick(void)
{
#if HOST_AVX2_COPY
    if (__builtin_cpu_supports("avx2"))
        return seg_f32_avx2;
#endif
    return seg_f32_base;
}

static void seg_f32(const float *src, float *dst, size_t len, double *carry,
                    int rev, int excl)
{
    seg_f32_fn *f = atomic_load_explicit(&seg_f32_chosen, memory_order_relaxed);
    if (f == NULL) {
        f = seg_f32_pick();
        atomic_store_explicit(&seg_f32_chosen, f, memory_order_relaxed);
    }
    f(src, dst, len, carry, rev, excl);
}

/* float16 and bfloat16: through float32 in blocks of 64 elements, taken
 * in scan order so that the carry runs the right way. */
typedef float (*widen_fn)(uint16_t);
typedef uint16_t (*narrow_fn)(float);

static void seg_half(const uint16_t *src, uint16_t *dst, size_t len,
                     double *carry, int rev, int excl, widen_fn widen,
                     narrow_fn narrow)
{
    float buf[64];
    for (size_t done = 0; done < len;) {
        size_t m = len - done < 64 ? len - done : 64;
        size_t off = rev ? len - done - m : done;
        for (size_t i = 0; i < m; i++)
            buf[i] = widen(src[off + i]);
        seg_f32(buf, buf, m, carry, rev, excl);
        for (size_t i = 0; i < m; i++)
            dst[off + i] = narrow(buf[i]);
        done += m;
    }
}

/* ------------------------------------------------------------------------
 * Per storage class: a segment scan and a segment sum over a common carry
 * representation (a union, so that tasks can be written once).
 */
typedef union {
    double f;
    uint64_t u;
} carry;

static void seg_scan(eng_storage st, const void *src, void *dst, size_t len,
                     carry *c, int rev, int excl)
{
    switch (st) {
    case ENG_STORAGE_F16:
        seg_half(src, dst, len, &c->f, rev, excl, tx_f16_to_f32, tx_f32_to_f16);
        break;
    case ENG_STORAGE_BF16:
        seg_half(src, dst, len, &c->f, rev, excl, tx_bf16_to_f32,
                 tx_f32_to_bf16);
        break;
    case ENG_STORAGE_F32:
        if (!eng_line_f32(src, dst, len, &c->f, rev, excl, false))
            seg_f32(src, dst, len, &c->f, rev, excl);
        break;
    case ENG_STORAGE_F64: seg_f64(src, dst, len, &c->f, rev, excl); break;
    case ENG_STORAGE_B8: seg_u8(src, dst, len, &c->u, rev, excl); break;
    case ENG_STORAGE_B16: seg_u16(src, dst, len, &c->u, rev, excl); break;
    case ENG_STORAGE_B32: seg_u32(src, dst, len, &c->u, rev, excl); break;
    case ENG_STORAGE_B64: seg_u64(src, dst, len, &c->u, rev, excl); break;
    }
}

/* Sums, for the first pass of a two-pass scan. Floats sum in float64. */
#define DEFINE_SUM(NAME, T, ACC, WIDEN)                                        \
    static ACC NAME(const T *p, size_t len, size_t stride)                     \
    {                                                                          \
        ACC a[4] = {0, 0, 0, 0};                                               \
        size_t i = 0;                                                          \
        for (; i + 4 <= len; i += 4)                                           \
            for (int j = 0; j < 4; j++)                                        \
                a[j] += (ACC)WIDEN(p[(i + j) * stride]);                       \
        for (; i < len; i++)                                                   \
            a[0] += (ACC)WIDEN(p[i * stride]);                                 \
        return (a[0] + a[1]) + (a[2] + a[3]);                                  \
    }
#define IDENT(x) (x)
DEFINE_SUM(sum_f16, uint16_t, double, tx_f16_to_f32)
DEFINE_SUM(sum_bf16, uint16_t, double, tx_bf16_to_f32)
DEFINE_SUM(sum_f32, float, double, IDENT)
DEFINE_SUM(sum_f64, double, double, IDENT)
DEFINE_SUM(sum_u8, uint8_t, uint64_t, IDENT)
DEFINE_SUM(sum_u16, uint16_t, uint64_t, IDENT)
DEFINE_SUM(sum_u32, uint32_t, uint64_t, IDENT)
DEFINE_SUM(sum_u64, uint64_t, uint64_t, IDENT)

/* Sum of `len` elements `stride` apart, as a carry. */
static carry seg_sum(eng_storage st, const void *p, size_t len, size_t stride)
{
    carry c = {0};
    switch (st) {
    case ENG_STORAGE_F16: c.f = sum_f16(p, len, stride); break;
    case ENG_STORAGE_BF16: c.f = sum_bf16(p, len, stride); break;
    case ENG_STORAGE_F32: c.f = sum_f32(p, len, stride); break;
    case ENG_STORAGE_F64: c.f = sum_f64(p, len, stride); break;
    case ENG_STORAGE_B8: c.u = sum_u8(p, len, stride); break;
    case ENG_STORAGE_B16: c.u = sum_u16(p, len, stride); break;
    case ENG_STORAGE_B32: c.u = sum_u32(p, len, stride); break;
    case ENG_STORAGE_B64: c.u = sum_u64(p, len, stride); break;
    }
    return c;
}

static int is_float_storage(eng_storage st)
{
    return st <= ENG_STORAGE_F64;
}

static void carry_add(eng_storage st, carry *a, carry b)
{
    if (is_float_storage(st))
        a->f += b.f;
    else
        a->u += b.u;
}

/* ------------------------------------------------------------------------
 * Column blocks: rows of `ncols` adjacent columns, `inner` elements apart,
 * with one carry per column. The accumulators live in `acc` (float64 for
 * float types, uint64 for integers; integers wrap on store).
 */
#define COL_BLOCK 512

/* float32 outputs at least this large are written with non-temporal
 * stores by the vector walks of tile_host.c that take a stream flag (lines
 * and packed columns). Lines: they would only push the input out of the
 * cache. Columns: a walk writes each row's part of a block, 2 KiB, before
 * it jumps to the next row, too short for the prefetcher to fetch the
 * lines it is about to write, so an output that is not in the cache
 * took far longer on the 1M rows' first axis than streamed (BENCHMARKS.md,
 * issue 27, has the figures). */
#define STREAM_MIN_BYTES (4u << 20)

#define DEFINE_COL_SCAN(NAME, T, ACC, WIDEN, NARROW)                           \
    static inline __attribute__((always_inline)) void NAME##_any(              \
        const T *src, T *dst, size_t rows, size_t ri, size_t ro, size_t ci,    \
        size_t co, size_t ncols, ACC *acc, int rev, int excl)                  \
    {                                                                          \
        for (size_t r = 0; r < rows; r++) {                                    \
            size_t row = rev ? rows - 1 - r : r;                               \
            const T *x = src + row * ri;                                       \
            T *y = dst + row * ro;                                             \
            if (excl) {                                                        \
                for (size_t k = 0; k < ncols; k++) {                           \
                    ACC v = (ACC)WIDEN(x[k * ci]);                             \
                    y[k * co] = NARROW(acc[k]);                                \
                    acc[k] += v;                                               \
                }                                                              \
            } else {                                                           \
                for (size_t k = 0; k < ncols; k++) {                           \
                    acc[k] += (ACC)WIDEN(x[k * ci]);                           \
                    y[k * co] = NARROW(acc[k]);                                \
                }                                                              \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    /* packed: rows `inner` apart in both buffers, columns adjacent */         \
    static void NAME(const T *src, T *dst, size_t rows, size_t inner,          \
                     size_t ncols, ACC *acc, int rev, int excl)                \
    {                                                                          \
        NAME##_any(src, dst, rows, inner, inner, 1, 1, ncols, acc, rev, excl); \
    }                                                                          \
    /* strided: any strides, in elements */                                    \
    static void NAME##_s(const T *src, T *dst, size_t rows, size_t ri,         \
                         size_t ro, size_t ci, size_t co, size_t ncols,        \
                         ACC *acc, int rev, int excl)                          \
    {                                                                          \
        NAME##_any(src, dst, rows, ri, ro, ci, co, ncols, acc, rev, excl);     \
    }
#define TO_F32(a) ((float)(a))
#define TO_F16(a) tx_f32_to_f16((float)(a))
#define TO_BF16(a) tx_f32_to_bf16((float)(a))
#define TO_U8(a) ((uint8_t)(a))
#define TO_U16(a) ((uint16_t)(a))
#define TO_U32(a) ((uint32_t)(a))
DEFINE_COL_SCAN(col_f16, uint16_t, double, tx_f16_to_f32, TO_F16)
DEFINE_COL_SCAN(col_bf16, uint16_t, double, tx_bf16_to_f32, TO_BF16)
DEFINE_COL_SCAN(col_f32, float, double, IDENT, TO_F32)
DEFINE_COL_SCAN(col_f64, double, double, IDENT, IDENT)
DEFINE_COL_SCAN(col_u8, uint8_t, uint64_t, IDENT, TO_U8)
DEFINE_COL_SCAN(col_u16, uint16_t, uint64_t, IDENT, TO_U16)
DEFINE_COL_SCAN(col_u32, uint32_t, uint64_t, IDENT, TO_U32)
DEFINE_COL_SCAN(col_u64, uint64_t, uint64_t, IDENT, IDENT)

/* acc holds ncols carries (the union's member for the storage class). */
static void col_scan(eng_storage st, const void *src, void *dst, size_t rows,
                     size_t inner, size_t ncols, carry *acc, int rev, int excl,
                     bool stream)
{
    /* carry is a union of two 8-byte members, so an array of carries is an
     * array of doubles or of uint64s with the same layout. */
    double *af = &acc[0].f;
    uint64_t *au = &acc[0].u;
    switch (st) {
    case ENG_STORAGE_F16:
        col_f16(src, dst, rows, inner, ncols, af, rev, excl);
        break;
    case ENG_STORAGE_BF16:
        col_bf16(src, dst, rows, inner, ncols, af, rev, excl);
        break;
    case ENG_STORAGE_F32: {
        /* whole vectors of 8 columns in tile_host.c's walk, the rest here */
        size_t done = eng_cols_f32(src, dst, rows, inner, ncols, af, rev, excl,
                                   stream);
        col_f32((const float *)src + done, (float *)dst + done, rows, inner,
                ncols - done, af + done, rev, excl);
        break;
    }
        break;
    case ENG_STORAGE_F64:
        col_f64(src, dst, rows, inner, ncols, af, rev, excl);
        break;
    case ENG_STORAGE_B8:
        col_u8(src, dst, rows, inner, ncols, au, rev, excl);
        break;
    case ENG_STORAGE_B16:
        col_u16(src, dst, rows, inner, ncols, au, rev, excl);
        break;
    case ENG_STORAGE_B32:
        col_u32(src, dst, rows, inner, ncols, au, rev, excl);
        break;
    case ENG_STORAGE_B64:
        col_u64(src, dst, rows, inner, ncols, au, rev, excl);
        break;
    }
}

/* col_scan() through any strides: rows ri/ro apart, columns ci/co. */
static void col_scan_s(eng_storage st, const void *src, void *dst, size_t rows,
                       const size_t str[4], size_t ncols, carry *acc, int rev,
                       int excl)
{
    double *af = &acc[0].f;
    uint64_t *au = &acc[0].u;
#define COL_S(fn, a)                                                           \
    fn(src, dst, rows, str[0], str[1], str[2], str[3], ncols, a, rev, excl)
    switch (st) {
    case ENG_STORAGE_F16: COL_S(col_f16_s, af); break;
    case ENG_STORAGE_BF16: COL_S(col_bf16_s, af); break;
    case ENG_STORAGE_F32: COL_S(col_f32_s, af); break;
    case ENG_STORAGE_F64: COL_S(col_f64_s, af); break;
    case ENG_STORAGE_B8: COL_S(col_u8_s, au); break;
    case ENG_STORAGE_B16: COL_S(col_u16_s, au); break;
    case ENG_STORAGE_B32: COL_S(col_u32_s, au); break;
    case ENG_STORAGE_B64: COL_S(col_u64_s, au); break;
    }
#undef COL_S
}

/* ------------------------------------------------------------------------
 * Tasks.
 */
typedef struct {
    const eng_lines *l;
    eng_storage st;
    size_t size;
    const char *in;
    char *out;
    int rev, excl;

    /* strided requests: the view, its strides as col_scan_s wants, the
     * columns in a block, and whether float32 tiles transpose them */
    const eng_strided *sv;
    size_t str[4];
    size_t sblk;
    bool tiles;
    bool stream; /* outputs of STREAM_MIN_BYTES and more */

    /* direct rows: lines per task */
    size_t lines_per_task;

    /* column blocks */
    size_t ncblk; /* column blocks per slice */
    size_t nblocks, blocks_per_task; /* direct: adjacent blocks a task */
    eng_pool_fn block_fn;

    /* two-pass: chunks per line (rows) or per column block (cols), and the
     * carries of every chunk (rows: one each; cols: COL_BLOCK each) */
    size_t nchunks, chunk_len;
    carry *carries;
} job;

static void task_rows_direct(void *arg, size_t t)
{
    job *j = arg;
    size_t n = j->l->n, bytes = n * j->size;
    size_t first = t * j->lines_per_task;
    size_t last = first + j->lines_per_task;
    if (last > j->l->outer)
        last = j->l->outer;
    if (j->st == ENG_STORAGE_F32 && first < last
        && eng_lines_f32((const float *)(j->in + first * bytes),
                         (float *)(j->out + first * bytes), last - first, n,
                         j->rev, j->excl, false))
        return;
    for (size_t line = first; line < last; line++) {
        carry c = {0};
        seg_scan(j->st, j->in + line * bytes, j->out + line * bytes, n, &c,
                 j->rev, j->excl);
    }
}

/* The physical element range of chunk `chunk` (in scan order) of a line of
 * n elements cut into chunks of chunk_len. */
static void chunk_range(const job *j, size_t chunk, size_t n, size_t *off,
                        size_t *len)
{
    size_t a = chunk * j->chunk_len;
    size_t b = a + j->chunk_len < n ? a + j->chunk_len : n;
    if (a > n)
        a = n;
    *len = b - a;
    *off = j->rev ? n - b : a;
}

static void task_rows_reduce(void *arg, size_t t)
{
    job *j = arg;
    size_t line = t / j->nchunks, chunk = t % j->nchunks, off, len;
    chunk_range(j, chunk, j->l->n, &off, &len);
    j->carries[t] =
        seg_sum(j->st, j->in + (line * j->l->n + off) * j->size, len, 1);
}

static void task_rows_scan(void *arg, size_t t)
{
    job *j = arg;
    size_t line = t / j->nchunks, chunk = t % j->nchunks, off, len;
    chunk_range(j, chunk, j->l->n, &off, &len);
    size_t at = (line * j->l->n + off) * j->size;
    carry c = j->carries[t];
    seg_scan(j->st, j->in + at, j->out + at, len, &c, j->rev, j->excl);
}

/* Column block `b` of a slice: first column and count. */
static size_t cblk_cols(const job *j, size_t b, size_t *c0)
{
    *c0 = b * COL_BLOCK;
    size_t left = j->l->inner - *c0;
    return left < COL_BLOCK ? left : COL_BLOCK;
}

static void task_cols_direct(void *arg, size_t t)
{
    job *j = arg;
    size_t o = t / j->ncblk, c0;
    size_t ncols = cblk_cols(j, t % j->ncblk, &c0);
    size_t at = (o * j->l->n * j->l->inner + c0) * j->size;
    carry acc[COL_BLOCK];
    memset(acc, 0, sizeof acc);
    col_scan(j->st, j->in + at, j->out + at, j->l->n, j->l->inner, ncols, acc,
             j->rev, j->excl, j->stream);
}

/* Two-pass columns: task t is chunk t % nchunks of column block
 * (t / nchunks) % ncblk of slice t / nchunks / ncblk. */
static void cols_chunk(const job *j, size_t t, size_t *at, size_t *rows,
                       size_t *ncols)
{
    size_t chunk = t % j->nchunks, blk = t / j->nchunks;
    size_t o = blk / j->ncblk, c0, off;
    *ncols = cblk_cols(j, blk % j->ncblk, &c0);
    chunk_range(j, chunk, j->l->n, &off, rows);
    *at = (o * j->l->n * j->l->inner + off * j->l->inner + c0) * j->size;
}

static void task_cols_reduce(void *arg, size_t t)
{
    job *j = arg;
    size_t at, rows, ncols;
    cols_chunk(j, t, &at, &rows, &ncols);
    carry *c = j->carries + t * COL_BLOCK;
    for (size_t k = 0; k < ncols; k++)
        c[k] = seg_sum(j->st, j->in + at + k * j->size, rows, j->l->inner);
}

static void task_cols_scan(void *arg, size_t t)
{
    job *j = arg;
    size_t at, rows, ncols;
    cols_chunk(j, t, &at, &rows, &ncols);
    col_scan(j->st, j->in + at, j->out + at, rows, j->l->inner, ncols,
             j->carries + t * COL_BLOCK, j->rev, j->excl, j->stream);
}

/* Turns per-chunk totals into per-chunk carries: an exclusive prefix over
 * the chunks of each line, `width` carries per chunk. */
static void carries_exclusive(job *j, size_t groups, size_t width)
{
    for (size_t g = 0; g < groups; g++)
        for (size_t k = 0; k < width; k++) {
            carry run = {0};
            for (size_t c = 0; c < j->nchunks; c++) {
                carry *p = &j->carries[(g * j->nchunks + c) * width + k];
                carry v = *p;
                *p = run;
                carry_add(j->st, &run, v);
            }
        }
}

/* Runs tasks on the pool, or one after another without one. */
static void run_tasks(eng_pool *pool, size_t n, eng_pool_fn fn, void *arg)
{
    if (pool != NULL) {
        eng_pool_run(pool, n, fn, arg);
        return;
    }
    for (size_t i = 0; i < n; i++)
        fn(arg, i);
}

/* Direct column tasks take adjacent blocks: two threads that took single
 * blocks in turn (each sharing its edges' cache lines with the other's)
 * ran slower than on ranges of four blocks (BENCHMARKS.md, issue 27, the
 * 1M rows). */
static void task_block_range(void *arg, size_t t)
{
    job *j = arg;
    size_t b0 = t * j->blocks_per_task;
    size_t b1 = b0 + j->blocks_per_task < j->nblocks ? b0 + j->blocks_per_task
                                                      : j->nblocks;
    for (size_t b = b0; b < b1; b++)
        j->block_fn(j, b);
}

/* Column blocks of `width` columns (j->l's inner), packed or strided:
 * each task takes whole columns when there are blocks enough for every
 * thread (or the lines are short); otherwise the columns are cut into
 * chunks along the axis, reduced, their carries prefix-summed, and
 * scanned. */
static eng_err run_columns(eng_pool *pool, job *j, unsigned threads,
                           size_t width, eng_pool_fn direct, eng_pool_fn reduce,
                           eng_pool_fn scan_fn, char *msg, size_t msglen)
{
    const eng_lines *l = j->l;
    size_t want = 4 * (size_t)threads;
    j->ncblk = (l->inner + width - 1) / width;
    size_t blocks = l->outer * j->ncblk;
    if (blocks >= want || l->n < 64 || threads == 1
        || (j->tiles && blocks % threads == 0)) {
        j->nblocks = blocks;
        j->blocks_per_task = blocks / want > 1 ? blocks / want : 1;
        j->block_fn = direct;
        run_tasks(pool, (blocks + j->blocks_per_task - 1) / j->blocks_per_task,
                  task_block_range, j);
        return ENG_E_OK;
    }
    j->nchunks = (want + blocks - 1) / blocks;
    j->chunk_len = (l->n + j->nchunks - 1) / j->nchunks;
    size_t ntasks = blocks * j->nchunks;
    j->carries = calloc(ntasks * width, sizeof *j->carries);
    if (j->carries == NULL)
        return eng_fail(msg, msglen, ENG_E_NOMEM,
                        "host backend: out of memory for %zu carries",
                        ntasks * width);
    run_tasks(pool, ntasks, reduce, j);
    carries_exclusive(j, blocks, width);
    run_tasks(pool, ntasks, scan_fn, j);
    free(j->carries);
    return ENG_E_OK;
}

static eng_err scan(eng_pool *pool, const eng_lines *l, const void *in,
                    void *out, char *msg, size_t msglen)
{
    if (l->elements == 0)
        return ENG_E_OK;
    unsigned threads = pool != NULL ? eng_pool_threads(pool) : 1;
    job j = {
        .l = l,
        .st = eng_dtype_storage(l->dtype),
        .size = tx_dtype_size(l->dtype),
        .in = in,
        .out = out,
        .rev = l->reverse,
        .excl = l->exclusive,
        .stream = l->bytes >= STREAM_MIN_BYTES,
    };
    /* Enough independent work for every thread, in tasks of at least
     * ~64K elements where possible so that the pool's overhead vanishes. */
    size_t want = 4 * (size_t)threads;
    size_t grain = 1 << 16;

    if (l->inner == 1) {
        if (l->outer >= want || l->n < grain || threads == 1) {
            size_t per = grain / l->n + 1;
            if (per > (l->outer + want - 1) / want)
                per = (l->outer + want - 1) / want;
            j.lines_per_task = per ? per : 1;
            run_tasks(pool,
                      (l->outer + j.lines_per_task - 1) / j.lines_per_task,
                      task_rows_direct, &j);
            return ENG_E_OK;
        }
        j.nchunks = (want + l->outer - 1) / l->outer;
        j.chunk_len = (l->n + j.nchunks - 1) / j.nchunks;
        size_t ntasks = l->outer * j.nchunks;
        j.carries = calloc(ntasks, sizeof *j.carries);
        if (j.carries == NULL)
            return eng_fail(msg, msglen, ENG_E_NOMEM,
                            "host backend: out of memory for %zu carries",
                            ntasks);
        run_tasks(pool, ntasks, task_rows_reduce, &j);
        carries_exclusive(&j, l->outer, 1);
        run_tasks(pool, ntasks, task_rows_scan, &j);
        free(j.carries);
        return ENG_E_OK;
    }

    return run_columns(pool, &j, threads, COL_BLOCK, task_cols_direct,
                       task_cols_reduce, task_cols_scan, msg, msglen);
}

/* ------------------------------------------------------------------------
 * Strided requests: the column tasks above, with every offset taken
 * through the view's strides. Blocks are narrower than packed ones:
 * columns that are far apart in memory each cost a cache line, and
 * SCOL_BLOCK of them stay in the first-level cache between rows.
 *
 * float32 blocks that transpose (lines contiguous on one side, columns on
 * the other) go through tile_host.c's register tiles instead. When the
 * columns are contiguous in the input, TILE_BLOCK columns a block (4 KiB
 * of each of 16 input rows a step, so that a step's pages stay in the
 * TLB; measured best of 64-1024). When the lines are, LINES_IN_BLOCK: one
 * tile wide, so that a block reads 16 lines from start to end, streams
 * the prefetcher follows; 256 (16 tiles a step, 256 streams) ran slower,
 * on 4 KiB pages as on 2 MiB ones (BENCHMARKS.md, issue 27).
 */
#define SCOL_BLOCK 64
#define TILE_BLOCK 1024
#define LINES_IN_BLOCK 16

/* The byte offsets of column block b (first column c0) of outer slice o. */
static void scol_at(const job *j, size_t t, size_t *ai, size_t *ao,
                    size_t *ncols)
{
    const eng_strided *v = j->sv;
    size_t o = t / j->ncblk, c0 = t % j->ncblk * j->sblk;
    uint64_t bi, bo;
    eng_strided_outer(v, o, &bi, &bo);
    size_t left = v->l.inner - c0;
    *ncols = left < j->sblk ? left : j->sblk;
    *ai = (bi + c0 * v->ci) * j->size;
    *ao = (bo + c0 * v->co) * j->size;
}

/* Scans `rows` rows of a block from its carries: the tiles first, when
 * they serve, then what they leave. */
static void scol_run(const job *j, const char *in, char *out, size_t rows,
                     size_t ncols, carry *acc)
{
    if (j->tiles) {
        size_t done_rows;
        size_t dc = eng_tile_f32((const float *)in, (float *)out, rows,
                                 j->str[0], j->str[1], j->str[2], j->str[3],
                                 ncols, &acc[0].f, j->rev, j->excl, &done_rows);
        if (dc > 0 && done_rows < rows) {
            size_t first = j->rev ? 0 : done_rows;
            col_scan_s(j->st, in + first * j->str[0] * j->size,
                       out + first * j->str[1] * j->size, rows - done_rows,
                       j->str, dc, acc, j->rev, j->excl);
        }
        in += dc * j->str[2] * j->size;
        out += dc * j->str[3] * j->size;
        acc += dc;
        ncols -= dc;
    }
    if (ncols > 0)
        col_scan_s(j->st, in, out, rows, j->str, ncols, acc, j->rev, j->excl);
}

static void task_scols_direct(void *arg, size_t t)
{
    job *j = arg;
    size_t ai, ao, ncols;
    scol_at(j, t, &ai, &ao, &ncols);
    carry acc[TILE_BLOCK];
    memset(acc, 0, ncols * sizeof acc[0]);
    scol_run(j, j->in + ai, j->out + ao, j->sv->l.n, ncols, acc);
}

/* Two passes: task t is chunk t % nchunks of block t / nchunks. */
static void scols_chunk(const job *j, size_t t, size_t *ai, size_t *ao,
                        size_t *rows, size_t *ncols)
{
    size_t off;
    scol_at(j, t / j->nchunks, ai, ao, ncols);
    chunk_range(j, t % j->nchunks, j->sv->l.n, &off, rows);
    *ai += off * j->sv->ri * j->size;
    *ao += off * j->sv->ro * j->size;
}

static void task_scols_reduce(void *arg, size_t t)
{
    job *j = arg;
    size_t ai, ao, rows, ncols;
    scols_chunk(j, t, &ai, &ao, &rows, &ncols);
    carry *c = j->carries + t * j->sblk;
    for (size_t k = 0; k < ncols; k++)
        c[k] = seg_sum(j->st, j->in + ai + k * j->sv->ci * j->size, rows,
                       j->sv->ri);
}

static void task_scols_scan(void *arg, size_t t)
{
    job *j = arg;
    size_t ai, ao, rows, ncols;
    scols_chunk(j, t, &ai, &ao, &rows, &ncols);
    scol_run(j, j->in + ai, j->out + ao, rows, ncols,
             j->carries + t * j->sblk);
}

/* Lines contiguous on both sides (ri == ro == 1: padded rows, a
 * broadcast row, NHWC lines): each task scans whole lines with the
 * vectorised segment scan, lines_per_task of them. */
static void task_slines(void *arg, size_t t)
{
    job *j = arg;
    const eng_strided *v = j->sv;
    size_t first = t * j->lines_per_task, lines = v->l.outer * v->l.inner;
    size_t last =
        first + j->lines_per_task < lines ? first + j->lines_per_task : lines;
    for (size_t line = first; line < last; line++) {
        uint64_t bi, bo, c = line % v->l.inner;
        eng_strided_outer(v, line / v->l.inner, &bi, &bo);
        carry acc = {0};
        const char *x = j->in + (bi + c * v->ci) * j->size;
        char *y = j->out + (bo + c * v->co) * j->size;
        if (j->st == ENG_STORAGE_F32
            && eng_line_f32((const float *)x, (float *)y, v->l.n, &acc.f,
                            j->rev, j->excl, j->stream))
            continue;
        seg_scan(j->st, x, y, v->l.n, &acc, j->rev, j->excl);
    }
}

static bool tiles_serve(const eng_strided *v)
{
    return eng_dtype_storage(v->l.dtype) == ENG_STORAGE_F32 && v->l.n >= 16
           && v->l.inner >= 8 && eng_tile_fits(v->ri, v->ro, v->ci, v->co);
}

/* Lines contiguous on both sides, scanned whole by task_slines. */
static bool lines_serve(const eng_strided *v, unsigned threads)
{
    size_t lines = v->l.outer * v->l.inner;
    return v->ri == 1 && v->ro == 1 && v->l.n > 1
           && (lines >= 4 * (size_t)threads || threads == 1);
}

bool eng_host_strided_fast(const eng_strided *v, unsigned threads)
{
    return eng_dtype_storage(v->l.dtype) == ENG_STORAGE_F32
           && (tiles_serve(v) || lines_serve(v, threads));
}

static eng_err scan_strided(eng_pool *pool, const eng_strided *v,
                            const void *in, void *out, char *msg, size_t msglen)
{
    const eng_lines *l = &v->l;
    if (l->elements == 0)
        return ENG_E_OK;
    unsigned threads = pool != NULL ? eng_pool_threads(pool) : 1;
    job j = {
        .l = l,
        .st = eng_dtype_storage(l->dtype),
        .size = tx_dtype_size(l->dtype),
        .in = in,
        .out = out,
        .rev = l->reverse,
        .excl = l->exclusive,
        .sv = v,
        .str = {v->ri, v->ro, v->ci, v->co},
    };
    size_t want = 4 * (size_t)threads;
    size_t lines = l->outer * l->inner;
    j.stream = l->bytes >= STREAM_MIN_BYTES;
    if (lines_serve(v, threads)) {
        j.lines_per_task = (1 << 16) / l->n + 1;
        if (j.lines_per_task > (lines + want - 1) / want)
            j.lines_per_task = (lines + want - 1) / want;
        run_tasks(pool, (lines + j.lines_per_task - 1) / j.lines_per_task,
                  task_slines, &j);
        return ENG_E_OK;
    }
    j.tiles = tiles_serve(v);
    j.sblk = !j.tiles ? SCOL_BLOCK : v->ci == 1 ? TILE_BLOCK : LINES_IN_BLOCK;
    return run_columns(pool, &j, threads, j.sblk, task_scols_direct,
                       task_scols_reduce, task_scols_scan, msg, msglen);
}

eng_err eng_host_scan_strided(eng_host *h, const eng_strided *v, const void *in,
                              void *out, char *msg, size_t msglen)
{
    return scan_strided(eng_host_pool(h), v, in, out, msg, msglen);
}

eng_err eng_host_scan_strided_serial(const eng_strided *v, const void *in,
                                     void *out, char *msg, size_t msglen)
{
    return scan_strided(NULL, v, in, out, msg, msglen);
}

eng_err eng_host_scan(eng_host *h, const eng_lines *l, const void *in,
                      void *out, char *msg, size_t msglen)
{
    return scan(eng_host_pool(h), l, in, out, msg, msglen);
}

eng_err eng_host_scan_serial(const eng_lines *l, const void *in, void *out,
                             char *msg, size_t msglen)
{
    return scan(NULL, l, in, out, msg, msglen);
}
