/*
 * tile_host.c - the host backend's vector walks for float32: register tiles
 * for strided layouts that transpose, and whole contiguous lines (packed
 * rows, and strided layouts whose lines are contiguous on both sides), and
 * blocks of packed columns.
 *
 * Two tiled layouts (strides in elements; see tile_host.h):
 *
 *   "columns in": ci == 1, ro == 1. A tile is 16 rows of 8 adjacent
 *   columns: each row is one 32-byte load, summed into the 8 columns'
 *   carries as it comes; the 8 x 8 sums of each half are transposed and
 *   every column gets 16 contiguous results, one whole 64-byte line, its
 *   two halves stored back to back (stored apart, 8 lines at a time half
 *   written, the walk ran far slower: BENCHMARKS.md, issue 27).
 *
 *   "lines in": ri == 1, co == 1. A tile is 16 columns of 16 rows: each
 *   column's 8 rows are one 32-byte load; transposed, each vector is a row
 *   of 8 columns, summed into the carries in scan order and stored as a
 *   whole 64-byte row segment (two vectors).
 *
 * Measured on float32 4096 x 4096 (BENCHMARKS.md, issue 27): near the
 * plain copy, where PoCL's strided kernels ran several times slower. A
 * standalone program with the same tiles (tests/bench/probe_transpose.c)
 * runs at its transpose copy's speed; whole 64-byte lines stored
 * non-temporally are what it takes (plain stores are far slower).
 *
 * The tiles' carries are float64, as in the rest of the host backend:
 * AVX-512F keeps 8 of them in one register, AVX2 in two. Whole lines carry
 * a float-float pair instead (see eng_line_f32 below). Which copy runs is
 * picked on first use by asking the CPU (as scan_host.c's seg_f32 does).
 */
#include "tile_host.h"

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TILE_X86 1
#include <immintrin.h>
#else
#define TILE_X86 0
#endif

/* Outputs at least this large (elements, in one call) are written with
 * non-temporal stores: they would only push the input out of the cache. */
#define TILE_STREAM_MIN (64 * 1024)

#if TILE_X86

#define AVX2 __attribute__((target("avx2"), always_inline)) static inline

/* r[k] (row k of 8 lanes) becomes column k. */
AVX2 void tr8(__m256 r[8])
{
    __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]),
           t1 = _mm256_unpackhi_ps(r[0], r[1]),
           t2 = _mm256_unpacklo_ps(r[2], r[3]),
           t3 = _mm256_unpackhi_ps(r[2], r[3]),
           t4 = _mm256_unpacklo_ps(r[4], r[5]),
           t5 = _mm256_unpackhi_ps(r[4], r[5]),
           t6 = _mm256_unpacklo_ps(r[6], r[7]),
           t7 = _mm256_unpackhi_ps(r[6], r[7]);
    __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44),
           u1 = _mm256_shuffle_ps(t0, t2, 0xEE),
           u2 = _mm256_shuffle_ps(t1, t3, 0x44),
           u3 = _mm256_shuffle_ps(t1, t3, 0xEE),
           u4 = _mm256_shuffle_ps(t4, t6, 0x44),
           u5 = _mm256_shuffle_ps(t4, t6, 0xEE),
           u6 = _mm256_shuffle_ps(t5, t7, 0x44),
           u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
    r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
    r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
    r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
    r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
    r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
    r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
    r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
    r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

AVX2 void put(float *p, __m256 v, int nt)
{
    if (nt)
        _mm256_stream_ps(p, v);
    else
        _mm256_storeu_ps(p, v);
}

/* 8 float64 carries: two AVX2 registers, or one AVX-512 register. */
typedef struct {
    __m256d lo, hi;
} acc2;

AVX2 acc2 load2(const double *p)
{
    return (acc2){_mm256_loadu_pd(p), _mm256_loadu_pd(p + 4)};
}

AVX2 void store2(double *p, acc2 a)
{
    _mm256_storeu_pd(p, a.lo);
    _mm256_storeu_pd(p + 4, a.hi);
}

AVX2 acc2 add2(acc2 a, __m256 x)
{
    a.lo = _mm256_add_pd(a.lo, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    a.hi = _mm256_add_pd(a.hi, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
    return a;
}

AVX2 __m256 get2(acc2 a)
{
    return _mm256_set_m128(_mm256_cvtpd_ps(a.hi), _mm256_cvtpd_ps(a.lo));
}

#define AVX512 __attribute__((target("avx512f"), always_inline)) static inline

AVX512 __m512d load8(const double *p)
{
    return _mm512_loadu_pd(p);
}

AVX512 void store8(double *p, __m512d a)
{
    _mm512_storeu_pd(p, a);
}

AVX512 __m512d add8(__m512d a, __m256 x)
{
    return _mm512_add_pd(a, _mm512_cvtps_pd(x));
}

AVX512 __m256 get8(__m512d a)
{
    return _mm512_cvtpd_ps(a);
}

/* One step of a column's scan: *o gets the inclusive or exclusive sum. */
#define STEP(ADD, GET, a, x, o, excl)                                          \
    do {                                                                       \
        if (excl) {                                                            \
            (o) = GET(a);                                                      \
            (a) = ADD(a, x);                                                   \
        } else {                                                               \
            (a) = ADD(a, x);                                                   \
            (o) = GET(a);                                                      \
        }                                                                      \
    } while (0)

/*
 * The two tile walks, per carry flavour. r0 is the first row of the tile
 * region (in memory order), nt whether stores stream. Within a tile the
 * rows go in scan order; the tiles go in scan order too.
 */
#define DEFINE_TILES(SUF, TARGET, ACC, LOAD, STORE, ADD, GET)                  \
    TARGET inline __attribute__((always_inline)) void cols_in_b_##SUF(const float *src, float *dst, size_t r0,         \
                              size_t nt16, size_t ri, size_t co, size_t nc8,   \
                              double *acc, int rev, int excl, int nt)          \
    {                                                                          \
        for (size_t t = 0; t < nt16; t++) {                                    \
            size_t r = r0 + 16 * (rev ? nt16 - 1 - t : t);                     \
            for (size_t c = 0; c < 8 * nc8; c += 8) {                          \
                ACC a = LOAD(acc + c);                                         \
                __m256 s[2][8]; /* rows r..r+7, r+8..r+15, transposed */       \
                for (int hh = 0; hh < 2; hh++) {                               \
                    int h = rev ? 1 - hh : hh;                                 \
                    for (int q = 0; q < 8; q++) {                              \
                        int k = rev ? 7 - q : q;                               \
                        __m256 x = _mm256_loadu_ps(                            \
                            src + (r + 8 * (size_t)h + k) * ri + c);           \
                        STEP(ADD, GET, a, x, s[h][k], excl);                   \
                    }                                                          \
                    tr8(s[h]);                                                 \
                }                                                              \
                /* each column's 16 results back to back: one whole line */   \
                for (int k = 0; k < 8; k++) {                                  \
                    put(dst + (c + k) * co + r, s[0][k], nt);                  \
                    put(dst + (c + k) * co + r + 8, s[1][k], nt);              \
                }                                                              \
                STORE(acc + c, a);                                             \
            }                                                                  \
        }                                                                      \
    }                                                                          \
    TARGET inline __attribute__((always_inline)) void lines_in_b_##SUF(const float *src, float *dst, size_t r0,        \
                               size_t nt16, size_t ro, size_t ci, size_t nc16, \
                               double *acc, int rev, int excl, int nt)         \
    {                                                                          \
        for (size_t t = 0; t < nt16; t++) {                                    \
            size_t r = r0 + 16 * (rev ? nt16 - 1 - t : t);                     \
            for (size_t c = 0; c < 16 * nc16; c += 16) {                       \
                ACC a = LOAD(acc + c), b = LOAD(acc + c + 8);                  \
                /* the same 16 lines' data four tiles on, in scan order: a   \
                 * band's lines are more streams than the prefetcher keeps */ \
                if (t + 4 < nt16) {                                            \
                    size_t rp = r0 + 16 * (rev ? nt16 - 5 - t : t + 4);        \
                    for (int k = 0; k < 16; k++)                               \
                        _mm_prefetch((const char *)(src + (c + k) * ci + rp),  \
                                     _MM_HINT_T0);                             \
                }                                                              \
                for (int hh = 0; hh < 2; hh++) {                               \
                    size_t h = (size_t)(rev ? 1 - hh : hh) * 8;                \
                    __m256 x[8], y[8];                                         \
                    for (int k = 0; k < 8; k++) {                              \
                        x[k] = _mm256_loadu_ps(src + (c + k) * ci + r + h);    \
                        y[k] =                                                 \
                            _mm256_loadu_ps(src + (c + 8 + k) * ci + r + h);   \
                    }                                                          \
                    tr8(x);                                                    \
                    tr8(y);                                                    \
                    for (int q = 0; q < 8; q++) {                              \
                        int k = rev ? 7 - q : q;                               \
                        __m256 ox, oy;                                         \
                        STEP(ADD, GET, a, x[k], ox, excl);                     \
                        STEP(ADD, GET, b, y[k], oy, excl);                     \
                        float *o = dst + (r + h + k) * ro + c;                 \
                        put(o, ox, nt);                                        \
                        put(o + 8, oy, nt);                                    \
                    }                                                          \
                }                                                              \
                STORE(acc + c, a);                                             \
                STORE(acc + c + 8, b);                                         \
            }                                                                  \
        }                                                                      \
    }

/* The walks with rev and excl as constants, so that every index into the
 * tiles' registers is known when compiled. */
#define DEFINE_MODES(NAME, SUF, TARGET)                                        \
    TARGET void NAME##_##SUF(const float *src, float *dst, size_t r0,          \
                             size_t nt16, size_t rs, size_t cs, size_t nc,     \
                             double *acc, int rev, int excl, int nt)           \
    {                                                                          \
        if (rev && excl)                                                       \
            NAME##_b_##SUF(src, dst, r0, nt16, rs, cs, nc, acc, 1, 1, nt);     \
        else if (rev)                                                          \
            NAME##_b_##SUF(src, dst, r0, nt16, rs, cs, nc, acc, 1, 0, nt);     \
        else if (excl)                                                         \
            NAME##_b_##SUF(src, dst, r0, nt16, rs, cs, nc, acc, 0, 1, nt);     \
        else                                                                   \
            NAME##_b_##SUF(src, dst, r0, nt16, rs, cs, nc, acc, 0, 0, nt);     \
    }

#define TARGET_AVX2 __attribute__((target("avx2"))) static
#define TARGET_AVX512 __attribute__((target("avx512f"))) static
DEFINE_TILES(avx2, TARGET_AVX2, acc2, load2, store2, add2, get2)
DEFINE_TILES(avx512, TARGET_AVX512, __m512d, load8, store8, add8, get8)
DEFINE_MODES(cols_in, avx2, TARGET_AVX2)
DEFINE_MODES(lines_in, avx2, TARGET_AVX2)
DEFINE_MODES(cols_in, avx512, TARGET_AVX512)
DEFINE_MODES(lines_in, avx512, TARGET_AVX512)

typedef void tiles_fn(const float *src, float *dst, size_t r0, size_t nt16,
                      size_t rs, size_t cs, size_t nc, double *acc, int rev,
                      int excl, int nt);

typedef struct {
    tiles_fn *cols_in, *lines_in;
} tile_set;

static const tile_set sets[2] = {
    {cols_in_avx2, lines_in_avx2},
    {cols_in_avx512, lines_in_avx512},
};

/* 0: not picked yet; 1: none; 2: AVX2; 3: AVX-512F. Racing first calls
 * store the same value. */
static _Atomic int picked;

static const tile_set *pick(void)
{
    int p = atomic_load_explicit(&picked, memory_order_relaxed);
    if (p == 0) {
        __builtin_cpu_init();
        p = __builtin_cpu_supports("avx512f") ? 3
            : __builtin_cpu_supports("avx2")  ? 2
                                              : 1;
        atomic_store_explicit(&picked, p, memory_order_relaxed);
    }
    return p == 1 ? NULL : &sets[p - 2];
}

bool eng_tile_fits(size_t ri, size_t ro, size_t ci, size_t co)
{
    return ((ci == 1 && ro == 1) || (ri == 1 && co == 1)) && pick() != NULL;
}

size_t eng_tile_f32(const float *src, float *dst, size_t rows, size_t ri,
                    size_t ro, size_t ci, size_t co, size_t ncols, double *acc,
                    bool rev, bool excl, size_t *rows_done)
{
    const tile_set *ts = pick();
    size_t nt16 = rows / 16;
    *rows_done = 0;
    if (ts == NULL || nt16 == 0)
        return 0;
    size_t r0 = rev ? rows - 16 * nt16 : 0;
    bool big = rows * ncols >= TILE_STREAM_MIN;
    size_t done;
    if (ci == 1 && ro == 1) {
        size_t nc8 = ncols / 8;
        if (nc8 == 0)
            return 0;
        /* each column's 16 results start 32-byte aligned */
        int nt = big && (uintptr_t)(dst + r0) % 32 == 0 && co % 8 == 0;
        ts->cols_in(src, dst, r0, nt16, ri, co, nc8, acc, rev, excl, nt);
        done = 8 * nc8;
        if (nt)
            _mm_sfence();
    } else if (ri == 1 && co == 1) {
        size_t nc16 = ncols / 16;
        if (nc16 == 0)
            return 0;
        int nt = big && (uintptr_t)(dst + r0 * ro) % 32 == 0 && ro % 8 == 0;
        ts->lines_in(src, dst, r0, nt16, ro, ci, nc16, acc, rev, excl, nt);
        done = 16 * nc16;
        if (nt)
            _mm_sfence();
    } else {
        return 0;
    }
    *rows_done = 16 * nt16;
    return done;
}

/* ------------------------------------------------------------------------
 * Whole lines, contiguous, with a float-float carry: 8 elements a step,
 * scanned in float32 within the vector. The carry is a pair hi + lo of
 * float32; a block of 8 vectors (64 elements) sums in float32, starting
 * from lo, and is then folded into the pair with Knuth's two-sum. That is
 * the OpenCL kernels' scheme (kernels/scan.cl, "Accuracy"), and it meets
 * the same bound. A float64 carry, as the tiles keep, costs two widenings
 * and a narrowing a vector: measured apart (tests/bench/probe_lines.c),
 * short lines ran much faster this way. AVX2.
 */
AVX2 __m256 scan8(__m256 x, int rev)
{
    __m256 z = _mm256_setzero_ps();
    __m256i xi = _mm256_castps_si256(x);
    __m256 s;
    if (rev) {
        s = _mm256_add_ps(x, _mm256_castsi256_ps(_mm256_srli_si256(xi, 4)));
        s = _mm256_add_ps(s, _mm256_castsi256_ps(
                                 _mm256_srli_si256(_mm256_castps_si256(s), 8)));
        __m256 b = _mm256_permutevar8x32_ps(s, _mm256_set1_epi32(4));
        s = _mm256_add_ps(s, _mm256_blend_ps(b, z, 0xF0));
    } else {
        s = _mm256_add_ps(x, _mm256_castsi256_ps(_mm256_slli_si256(xi, 4)));
        s = _mm256_add_ps(s, _mm256_castsi256_ps(
                                 _mm256_slli_si256(_mm256_castps_si256(s), 8)));
        __m256 b = _mm256_permutevar8x32_ps(s, _mm256_set1_epi32(3));
        s = _mm256_add_ps(s, _mm256_blend_ps(b, z, 0x0F));
    }
    return s;
}

/* (*h, *l) = h + run, error-free but for the rounding of l. When the sum
 * is not finite the error term would be inf - inf, so it is dropped and
 * IEEE propagation of inf and NaN is kept (as FF_ADD in the kernels). */
static inline void fold(float *h, float *l, float run)
{
    float s = *h + run, v = s - *h;
    float e = (*h - (s - v)) + (run - v);
    *h = s;
    *l = isfinite(s) ? e : 0.0f;
}

/* Element i of a line that may be scanned in place: the block's running
 * sum `run` (which started from lo) goes up by it. */
static inline void one(const float *src, float *dst, size_t i, float h,
                       float *run, int excl)
{
    float x = src[i];
    if (excl) {
        dst[i] = h + *run;
        *run += x;
    } else {
        *run += x;
        dst[i] = h + *run;
    }
}

#define LINE_BLOCK 8 /* vectors a block sums in float32 before a fold */

AVX2 void line_ff(const float *src, float *dst, size_t len, double *carry,
                  int rev, int excl, int nt)
{
    size_t ng = len / 8;
    float h = (float)*carry, l = 0.0f;
    if (isfinite(h))
        l = (float)(*carry - (double)h);
    float run = l;
    __m256 z = _mm256_setzero_ps();
    const __m256i up = _mm256_setr_epi32(0, 0, 1, 2, 3, 4, 5, 6),
                  down = _mm256_setr_epi32(1, 2, 3, 4, 5, 6, 7, 7),
                  last = _mm256_set1_epi32(rev ? 0 : 7);
    if (rev) /* the tail is the start of a reversed scan */
        for (size_t i = len; i-- > 8 * ng;)
            one(src, dst, i, h, &run, excl);
    __m256 hv = _mm256_set1_ps(h), rv = _mm256_set1_ps(run);
    for (size_t t = 0; t < ng; t++) {
        size_t at = 8 * (rev ? ng - 1 - t : t);
        __m256 s = scan8(_mm256_loadu_ps(src + at), rev);
        __m256 o = s;
        if (excl)
            o = rev ? _mm256_blend_ps(_mm256_permutevar8x32_ps(s, down), z,
                                      0x80)
                    : _mm256_blend_ps(_mm256_permutevar8x32_ps(s, up), z, 0x01);
        put(dst + at, _mm256_add_ps(hv, _mm256_add_ps(rv, o)), nt);
        /* every lane of rv holds the block's running sum */
        rv = _mm256_add_ps(rv, _mm256_permutevar8x32_ps(s, last));
        if (t % LINE_BLOCK == LINE_BLOCK - 1) {
            fold(&h, &l, _mm256_cvtss_f32(rv));
            hv = _mm256_set1_ps(h);
            rv = _mm256_set1_ps(l);
        }
    }
    run = _mm256_cvtss_f32(rv);
    if (!rev)
        for (size_t i = 8 * ng; i < len; i++)
            one(src, dst, i, h, &run, excl);
    *carry = (double)h + (double)run;
}

/* One instance per direction, mode and store kind, so that each loop is
 * compiled with them as constants (as the tiles are). */
#define DEFINE_LINES(NAME, REV, EXCL, NT)                                      \
    __attribute__((target("avx2"))) static void NAME(                          \
        const float *src, float *dst, size_t lines, size_t len, double *carry) \
    {                                                                          \
        for (size_t q = 0; q < lines; q++) {                                   \
            double c = carry != NULL ? *carry : 0.0;                           \
            line_ff(src + q * len, dst + q * len, len, &c, REV, EXCL, NT);     \
            if (carry != NULL)                                                 \
                *carry = c;                                                    \
        }                                                                      \
    }
DEFINE_LINES(lines_fi, 0, 0, 0)
DEFINE_LINES(lines_fx, 0, 1, 0)
DEFINE_LINES(lines_ri, 1, 0, 0)
DEFINE_LINES(lines_rx, 1, 1, 0)
DEFINE_LINES(lines_fi_nt, 0, 0, 1)
DEFINE_LINES(lines_fx_nt, 0, 1, 1)
DEFINE_LINES(lines_ri_nt, 1, 0, 1)
DEFINE_LINES(lines_rx_nt, 1, 1, 1)

typedef void lines_fn(const float *src, float *dst, size_t lines, size_t len,
                      double *carry);
static lines_fn *const lines_by_mode[8] = {
    lines_fi,    lines_fx,    lines_ri,    lines_rx,
    lines_fi_nt, lines_fx_nt, lines_ri_nt, lines_rx_nt,
};

static void lines_avx2(const float *src, float *dst, size_t lines,
                       size_t len, double *carry, int rev, int excl, int nt)
{
    lines_by_mode[(nt ? 4 : 0) + (rev ? 2 : 0) + (excl ? 1 : 0)](
        src, dst, lines, len, carry);
}

bool eng_line_f32(const float *src, float *dst, size_t len, double *carry,
                  bool rev, bool excl, bool stream)
{
    if (pick() == NULL)
        return false;
    int nt = stream && (uintptr_t)dst % 32 == 0;
    lines_avx2(src, dst, 1, len, carry, rev, excl, nt);
    if (nt)
        _mm_sfence();
    return true;
}

bool eng_lines_f32(const float *src, float *dst, size_t lines, size_t len,
                   bool rev, bool excl, bool stream)
{
    if (pick() == NULL)
        return false;
    int nt = stream && (uintptr_t)dst % 32 == 0 && len % 8 == 0;
    lines_avx2(src, dst, lines, len, NULL, rev, excl, nt);
    if (nt)
        _mm_sfence();
    return true;
}

/* ------------------------------------------------------------------------
 * Packed columns: each row's 8 adjacent columns are one load, widened and
 * added to their float64 carries in acc, and narrowed again for the
 * output (the rounding of scan_host.c's col_f32, 8 columns a step).
 */
__attribute__((target("avx2"))) static void
cols_avx2(const float *src, float *dst, size_t rows, size_t inner,
          size_t nc8, double *acc, int rev, int excl, int nt)
{
    for (size_t r = 0; r < rows; r++) {
        size_t row = rev ? rows - 1 - r : r;
        const float *x = src + row * inner;
        float *y = dst + row * inner;
        for (size_t k = 0; k < 8 * nc8; k += 8) {
            __m256 v = _mm256_loadu_ps(x + k);
            __m256d a0 = _mm256_loadu_pd(acc + k),
                    a1 = _mm256_loadu_pd(acc + k + 4);
            __m256d b0 =
                _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
            __m256d b1 =
                _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
            _mm256_storeu_pd(acc + k, b0);
            _mm256_storeu_pd(acc + k + 4, b1);
            if (excl)
                put(y + k, _mm256_set_m128(_mm256_cvtpd_ps(a1), _mm256_cvtpd_ps(a0)),
                    nt);
            else
                put(y + k, _mm256_set_m128(_mm256_cvtpd_ps(b1), _mm256_cvtpd_ps(b0)),
                    nt);
        }
    }
}

size_t eng_cols_f32(const float *src, float *dst, size_t rows, size_t inner,
                    size_t ncols, double *acc, bool rev, bool excl,
                    bool stream)
{
    size_t nc8 = ncols / 8;
    if (pick() == NULL || nc8 == 0)
        return 0;
    int nt = stream && (uintptr_t)dst % 32 == 0 && inner % 8 == 0;
    cols_avx2(src, dst, rows, inner, nc8, acc, rev, excl, nt);
    if (nt)
        _mm_sfence();
    return 8 * nc8;
}

#else /* no x86-64: the host backend's column walk does it all */

bool eng_tile_fits(size_t ri, size_t ro, size_t ci, size_t co)
{
    (void)ri, (void)ro, (void)ci, (void)co;
    return false;
}

size_t eng_tile_f32(const float *src, float *dst, size_t rows, size_t ri,
                    size_t ro, size_t ci, size_t co, size_t ncols, double *acc,
                    bool rev, bool excl, size_t *rows_done)
{
    (void)src, (void)dst, (void)rows, (void)ri, (void)ro, (void)ci, (void)co;
    (void)ncols, (void)acc, (void)rev, (void)excl;
    *rows_done = 0;
    return 0;
}

bool eng_line_f32(const float *src, float *dst, size_t len, double *carry,
                  bool rev, bool excl, bool stream)
{
    (void)src, (void)dst, (void)len, (void)carry, (void)rev, (void)excl;
    (void)stream;
    return false;
}

bool eng_lines_f32(const float *src, float *dst, size_t lines, size_t len,
                   bool rev, bool excl, bool stream)
{
    (void)src, (void)dst, (void)lines, (void)len, (void)rev, (void)excl;
    (void)stream;
    return false;
}

size_t eng_cols_f32(const float *src, float *dst, size_t rows, size_t inner,
                    size_t ncols, double *acc, bool rev, bool excl,
                    bool stream)
{
    (void)src, (void)dst, (void)rows, (void)inner, (void)ncols, (void)acc;
    (void)rev, (void)excl, (void)stream;
    return 0;
}

#endif
