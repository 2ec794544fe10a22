/*
 * probe_lines.c - what this machine allows for bench-engine's 1M rows,
 * measured apart from tally: the smallest program that moves the same
 * memory the same way (issue 27, item 2).
 *
 * float32 [64, 128, 128] (4 MiB in, 4 MiB out: both stay in the last-level
 * cache from run to run, as in bench-engine's loop), two OpenMP threads,
 * each thread half of the tensor; every figure the median of 201 runs in
 * GB/s (bytes read + written) and its ratio to memcpy in the same run:
 *
 *   memcpy     glibc's
 *   rows f64   axis 2, 8192 lines of 128: AVX2 8-lane scans in float32,
 *              added to a float64 carry (two widenings and a narrowing a
 *              vector: how the host backend's line scan works)
 *   rows ff    the same lines with a float-float carry in float32 (the
 *              OpenCL kernels' scheme: a block of 8 vectors sums in
 *              float32 and is folded into hi + lo with Knuth's two-sum)
 *   cols f64   axis 0, 64 rows of 16384 columns in blocks of 512: one
 *              float64 accumulator per column (the host backend's walk)
 *   cols ff    the same with float32 sums folded into hi + lo every 8 rows
 *
 * Every output of every variant is checked against a long double
 * reference with docs/design.md's float32 bound, 2^-19 * sum |x| + 2^-24 *
 * |exact|; the inputs are uniform in [0, 1) from a printed seed.
 *
 * usage: probe_lines [seed]
 * Built by `make bench-lines` with -O3 -march=native -fopenmp; x86-64 with
 * AVX2 only.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OUTER 64
#define MID 128
#define LEN 128
#define N ((size_t)OUTER * MID * LEN)
#define COLS ((size_t)MID * LEN) /* axis 0: rows of this many columns */
#define CBLK 512
#define RUNS 201

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* inclusive scan of 8 lanes */
static inline __m256 scan8(__m256 x)
{
    __m256i xi = _mm256_castps_si256(x);
    __m256 s = _mm256_add_ps(x, _mm256_castsi256_ps(_mm256_slli_si256(xi, 4)));
    s = _mm256_add_ps(
        s, _mm256_castsi256_ps(_mm256_slli_si256(_mm256_castps_si256(s), 8)));
    __m256 b = _mm256_permutevar8x32_ps(s, _mm256_set1_epi32(3));
    return _mm256_add_ps(s, _mm256_blend_ps(b, _mm256_setzero_ps(), 0x0F));
}

static void rows_f64(const float *src, float *dst, size_t lines)
{
    const __m256i last = _mm256_set1_epi32(7);
    for (size_t q = 0; q < lines; q++, src += LEN, dst += LEN) {
        __m256d c = _mm256_setzero_pd();
        for (size_t k = 0; k < LEN / 8; k++) {
            __m256 s = scan8(_mm256_loadu_ps(src + 8 * k));
            __m256d lo = _mm256_add_pd(_mm256_cvtps_pd(_mm256_castps256_ps128(s)), c);
            __m256d hi = _mm256_add_pd(_mm256_cvtps_pd(_mm256_extractf128_ps(s, 1)), c);
            _mm256_storeu_ps(dst + 8 * k, _mm256_set_m128(_mm256_cvtpd_ps(hi),
                                                          _mm256_cvtpd_ps(lo)));
            c = _mm256_add_pd(c, _mm256_cvtps_pd(_mm256_castps256_ps128(
                                     _mm256_permutevar8x32_ps(s, last))));
            c = _mm256_permute4x64_pd(c, 0);
        }
    }
}

/* (h, l) += b, error-free but for the final rounding of l */
static inline void two_sum(float *h, float *l, float b)
{
    float s = *h + b, v = s - *h;
    *l = (*h - (s - v)) + (b - v);
    *h = s;
}

static void rows_ff(const float *src, float *dst, size_t lines)
{
    const __m256i last = _mm256_set1_epi32(7);
    for (size_t q = 0; q < lines; q++, src += LEN, dst += LEN) {
        __m256 h = _mm256_setzero_ps(), run = _mm256_setzero_ps();
        float hs = 0, ls = 0;
        for (size_t k = 0; k < LEN / 8; k++) {
            __m256 s = scan8(_mm256_loadu_ps(src + 8 * k));
            _mm256_storeu_ps(dst + 8 * k, _mm256_add_ps(h, _mm256_add_ps(run, s)));
            run = _mm256_add_ps(run, _mm256_permutevar8x32_ps(s, last));
            if (k % 8 == 7) { /* the block's sum (it started at lo) */
                two_sum(&hs, &ls, _mm256_cvtss_f32(run));
                h = _mm256_set1_ps(hs);
                run = _mm256_set1_ps(ls);
            }
        }
    }
}

static void cols_f64(const float *src, float *dst, size_t c0, size_t c1)
{
    static _Thread_local double acc[CBLK];
    for (size_t c = c0; c < c1; c += CBLK) {
        memset(acc, 0, sizeof acc);
        for (size_t r = 0; r < OUTER; r++) {
            const float *x = src + r * COLS + c;
            float *y = dst + r * COLS + c;
            for (size_t k = 0; k < CBLK; k++) {
                acc[k] += x[k];
                y[k] = (float)acc[k];
            }
        }
    }
}

static void cols_ff(const float *src, float *dst, size_t c0, size_t c1)
{
    __m256 h[CBLK / 8], l[CBLK / 8], run[CBLK / 8];
    for (size_t c = c0; c < c1; c += CBLK) {
        for (size_t v = 0; v < CBLK / 8; v++)
            h[v] = l[v] = _mm256_setzero_ps();
        for (size_t r0 = 0; r0 < OUTER; r0 += 8) {
            for (size_t v = 0; v < CBLK / 8; v++)
                run[v] = l[v];
            for (size_t r = r0; r < r0 + 8; r++) {
                const float *x = src + r * COLS + c;
                float *y = dst + r * COLS + c;
                for (size_t v = 0; v < CBLK / 8; v++) {
                    run[v] = _mm256_add_ps(run[v], _mm256_loadu_ps(x + 8 * v));
                    _mm256_storeu_ps(y + 8 * v, _mm256_add_ps(h[v], run[v]));
                }
            }
            for (size_t v = 0; v < CBLK / 8; v++) {
                __m256 b = run[v], s = _mm256_add_ps(h[v], b);
                __m256 w = _mm256_sub_ps(s, h[v]);
                l[v] = _mm256_add_ps(_mm256_sub_ps(h[v], _mm256_sub_ps(s, w)),
                                     _mm256_sub_ps(b, w));
                h[v] = s;
            }
        }
    }
}

/* The worst error over the bound: > 1 fails. axis 2 or 0. */
static double check(const float *in, const float *out, int axis)
{
    double worst = 0;
    size_t lines = axis == 2 ? N / LEN : COLS, n = axis == 2 ? LEN : OUTER;
    size_t step = axis == 2 ? 1 : COLS;
    for (size_t q = 0; q < lines; q++) {
        size_t base = axis == 2 ? q * LEN : q;
        long double exact = 0, abs = 0;
        for (size_t i = 0; i < n; i++) {
            size_t at = base + i * step;
            exact += in[at];
            abs += fabsl((long double)in[at]);
            long double bound = 0x1p-19L * abs + 0x1p-24L * fabsl(exact) + 0x1p-149L;
            double e = (double)(fabsl((long double)out[at] - exact) / bound);
            if (!(e <= worst))
                worst = e; /* NaN stays the worst */
        }
    }
    return worst;
}

enum { MEMCPY, ROWS_F64, ROWS_FF, COLS_F64, COLS_FF, NV };
static const char *names[NV] = {"memcpy", "rows f64", "rows ff", "cols f64",
                                "cols ff"};

static void run(int v, const float *in, float *out)
{
#pragma omp parallel num_threads(2)
    {
        size_t id = (size_t)omp_get_thread_num(), half = N / 2;
        switch (v) {
        case MEMCPY: memcpy(out + id * half, in + id * half, half * 4); break;
        case ROWS_F64: rows_f64(in + id * half, out + id * half, half / LEN); break;
        case ROWS_FF: rows_ff(in + id * half, out + id * half, half / LEN); break;
        case COLS_F64: cols_f64(in, out, id * COLS / 2, (id + 1) * COLS / 2); break;
        default: cols_ff(in, out, id * COLS / 2, (id + 1) * COLS / 2); break;
        }
    }
}

int main(int argc, char **argv)
{
    unsigned seed = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10)
                             : (unsigned)time(NULL);
    printf("seed %u\n", seed);
    srand(seed);
    float *in = aligned_alloc(4096, N * 4), *out = aligned_alloc(4096, N * 4);
    if (in == NULL || out == NULL) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    for (size_t i = 0; i < N; i++)
        in[i] = (float)rand() / ((float)RAND_MAX + 1.0f);
    int bad = 0;
    for (int v = ROWS_F64; v < NV; v++) {
        memset(out, 0xff, N * 4); /* NaN: a missed output fails */
        run(v, in, out);
        double w = check(in, out, v <= ROWS_FF ? 2 : 0);
        if (!(w <= 1)) {
            fprintf(stderr, "%s: error %.2f times the bound\n", names[v], w);
            bad = 1;
        }
    }
    if (bad)
        return 1;
    static double t[NV][RUNS];
    for (int r = -5; r < RUNS; r++) /* alternated, so drift hits all alike */
        for (int v = 0; v < NV; v++) {
            double t0 = now();
            run(v, in, out);
            if (r >= 0)
                t[v][r] = now() - t0;
        }
    double gb = 8.0 * (double)N / 1e9, base = 0;
    for (int v = 0; v < NV; v++) {
        qsort(t[v], RUNS, sizeof t[v][0], cmp_double);
        double us = t[v][RUNS / 2] * 1e6, gbs = gb / t[v][RUNS / 2];
        if (v == MEMCPY)
            base = gbs;
        printf("%-9s %7.1f us %6.1f GB/s (%.2f)\n", names[v], us, gbs,
               gbs / base);
    }
    free(in);
    free(out);
    return 0;
}
