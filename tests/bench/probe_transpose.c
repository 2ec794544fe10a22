/*
 * probe_transpose.c - what this machine allows for the strided table's
 * transposing rows, measured apart from tally: the smallest program that
 * moves the same memory the same way (issue 27).
 *
 * float32 4096 x 4096 (64 MiB in, 64 MiB out), two OpenMP threads, every
 * figure the median of 11 runs in GB/s (bytes read + written), and its
 * ratio to memcpy in the same run:
 *
 *   memcpy   glibc's, each thread half of the tensor
 *   ntcopy   a loop of 64-byte loads and non-temporal stores
 *   tcopy    a transpose: 8 x 8 register tiles (AVX unpack and shuffle),
 *            16 rows by a band of B columns, whole 64-byte lines stored
 *   lines    transposed in, scan along the contiguous lines (tile_host.c's
 *            "lines in" walk: load, transpose, add to float64 carries)
 *   cols     scan down adjacent columns, then transpose out ("columns in")
 *
 * usage: probe_transpose [pages KiB: 4 or 2048] [band B] [nt: 0 or 1]
 *        probe_transpose --has-avx512f    exit 0 when this CPU has it
 * Built by `make bench-transpose` with -O3 -march=native -mavx512f
 * -fopenmp, so that it builds on any x86-64; it runs on CPUs with
 * AVX-512F only (what the host backend's fast path uses), and says so
 * first thing on others.
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define N 4096
static int band = 256, nt = 1;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static float *alloc(size_t bytes, int huge)
{
    void *p = NULL;
    size_t al = huge ? (2u << 20) : 4096;
    bytes = (bytes + al - 1) / al * al;
    if (posix_memalign(&p, al, bytes) != 0) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    madvise(p, bytes, huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    memset(p, 0, bytes);
    return p;
}

static inline void tr8(__m256 r[8])
{
    __m256 t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
        u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
        u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
        u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
        r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
}

static inline void put(float *p, __m256 v)
{
    if (nt)
        _mm256_stream_ps(p, v);
    else
        _mm256_store_ps(p, v);
}

static void memcpy2(const float *in, float *out)
{
#pragma omp parallel
    {
        size_t per = (size_t)N * N / (size_t)omp_get_num_threads();
        size_t at = per * (size_t)omp_get_thread_num();
        memcpy(out + at, in + at, per * 4);
    }
}

static void ntcopy(const float *in, float *out)
{
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < (size_t)N * N; i += 16)
        _mm512_stream_ps(out + i, _mm512_load_ps(in + i));
    _mm_sfence();
}

static void tcopy(const float *in, float *out)
{
#pragma omp parallel for schedule(static)
    for (int b = 0; b < N / band; b++)
        for (size_t r = 0; r < N; r += 16)
            for (size_t c = (size_t)b * band; c < (size_t)(b + 1) * band;
                 c += 8) {
                __m256 x[8], y[8];
                for (int k = 0; k < 8; k++) {
                    x[k] = _mm256_load_ps(in + (r + k) * N + c);
                    y[k] = _mm256_load_ps(in + (r + 8 + k) * N + c);
                }
                tr8(x);
                tr8(y);
                for (int j = 0; j < 8; j++) {
                    put(out + (c + j) * N + r, x[j]);
                    put(out + (c + j) * N + r + 8, y[j]);
                }
            }
    _mm_sfence();
}

/* out[r][c] = sum of in[c][0..r]: lines contiguous in the input */
static void lines(const float *in, float *out)
{
#pragma omp parallel for schedule(static)
    for (int b = 0; b < N / band; b++) {
        double acc[N] __attribute__((aligned(64)));
        memset(acc, 0, sizeof acc);
        for (size_t r = 0; r < N; r += 16)
            for (size_t c = (size_t)b * band; c < (size_t)(b + 1) * band;
                 c += 16) {
                __m512d a = _mm512_load_pd(acc + c),
                        a2 = _mm512_load_pd(acc + c + 8);
                if (r + 64 < N) /* as tile_host.c: 4 tiles on */
                    for (int j = 0; j < 16; j++)
                        _mm_prefetch((const char *)(in + (c + j) * N + r + 64),
                                     _MM_HINT_T0);
                for (size_t h = 0; h < 16; h += 8) {
                    __m256 x[8], y[8];
                    for (int j = 0; j < 8; j++) {
                        x[j] = _mm256_load_ps(in + (c + j) * N + r + h);
                        y[j] = _mm256_load_ps(in + (c + 8 + j) * N + r + h);
                    }
                    tr8(x);
                    tr8(y);
                    for (int k = 0; k < 8; k++) {
                        a = _mm512_add_pd(a, _mm512_cvtps_pd(x[k]));
                        a2 = _mm512_add_pd(a2, _mm512_cvtps_pd(y[k]));
                        float *o = out + (r + h + k) * N + c;
                        put(o, _mm512_cvtpd_ps(a));
                        put(o + 8, _mm512_cvtpd_ps(a2));
                    }
                }
                _mm512_store_pd(acc + c, a);
                _mm512_store_pd(acc + c + 8, a2);
            }
    }
    _mm_sfence();
}

/* out[c][r] = sum of in[0..r][c]: columns adjacent in the input */
static void cols(const float *in, float *out)
{
#pragma omp parallel for schedule(static)
    for (int b = 0; b < N / band; b++) {
        double acc[N] __attribute__((aligned(64)));
        memset(acc, 0, sizeof acc);
        for (size_t r = 0; r < N; r += 16)
            for (size_t c = (size_t)b * band; c < (size_t)(b + 1) * band;
                 c += 8) {
                __m512d a = _mm512_load_pd(acc + c);
                __m256 x[2][8];
                for (size_t h = 0; h < 16; h += 8) {
                    for (int k = 0; k < 8; k++) {
                        a = _mm512_add_pd(a, _mm512_cvtps_pd(_mm256_load_ps(
                                                 in + (r + h + k) * N + c)));
                        x[h / 8][k] = _mm512_cvtpd_ps(a);
                    }
                    tr8(x[h / 8]);
                }
                /* each column's 16 results back to back: a whole line */
                for (int j = 0; j < 8; j++) {
                    put(out + (c + j) * N + r, x[0][j]);
                    put(out + (c + j) * N + r + 8, x[1][j]);
                }
                _mm512_store_pd(acc + c, a);
            }
    }
    _mm_sfence();
}

/* one column of each scan against a float64 sum */
static int check(const float *in, float *out)
{
    int c = 77;
    double s = 0;
    lines(in, out);
    for (size_t r = 0; r < N; r++) {
        s += in[(size_t)c * N + r];
        if (out[r * N + c] != (float)s)
            return fprintf(stderr, "lines: row %zu wrong\n", r), 1;
    }
    s = 0;
    cols(in, out);
    for (size_t r = 0; r < N; r++) {
        s += in[r * N + c];
        if (out[(size_t)c * N + r] != (float)s)
            return fprintf(stderr, "cols: row %zu wrong\n", r), 1;
    }
    tcopy(in, out);
    if (out[(size_t)c * N + 5] != in[5 * N + c])
        return fprintf(stderr, "tcopy wrong\n"), 1;
    return 0;
}

static double median(double *a, int n)
{
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            if (a[j] < a[i]) {
                double t = a[i];
                a[i] = a[j];
                a[j] = t;
            }
    return a[n / 2];
}

int main(int argc, char **argv)
{
    __builtin_cpu_init();
    if (argc > 1 && strcmp(argv[1], "--has-avx512f") == 0)
        return __builtin_cpu_supports("avx512f") ? 0 : 1;
    if (!__builtin_cpu_supports("avx512f")) {
        fprintf(stderr, "probe_transpose: this CPU has no AVX-512F\n");
        return 2;
    }
    int huge = argc > 1 ? atoi(argv[1]) == 2048 : 1;
    if (argc > 2)
        band = atoi(argv[2]);
    if (argc > 3)
        nt = atoi(argv[3]);
    if (band < 16 || band > N || N % band != 0 || band % 16 != 0) {
        fprintf(stderr, "band: a multiple of 16 that divides %d\n", N);
        return 2;
    }
    float *in = alloc((size_t)N * N * 4, huge),
          *out = alloc((size_t)N * N * 4, huge);
    unsigned seed = (unsigned)time(NULL);
    printf("seed %u\n", seed);
    srand(seed);
    for (size_t i = 0; i < (size_t)N * N; i++)
        in[i] = (float)rand() / (float)RAND_MAX;
    if (check(in, out) != 0)
        return 1;
    void (*fn[])(const float *, float *) = {memcpy2, ntcopy, tcopy, lines,
                                            cols};
    const char *name[] = {"memcpy", "ntcopy", "tcopy", "lines", "cols"};
    enum { K = 5, REPS = 11 };
    double t[K][REPS];
    for (int r = 0; r < REPS; r++)
        for (int k = 0; k < K; k++) {
            double t0 = now();
            fn[k](in, out);
            t[k][r] = now() - t0;
        }
    double gb = 2.0 * N * N * 4 / 1e9, base = gb / median(t[0], REPS);
    printf("%s pages, band %d, %s stores:", huge ? "2 MiB" : "4 KiB", band,
           nt ? "non-temporal" : "plain");
    for (int k = 0; k < K; k++) {
        double g = gb / median(t[k], REPS);
        printf("  %s %.1f (%.2f)", name[k], g, g / base);
    }
    printf("\n");
    free(in);
    free(out);
    return 0;
}
