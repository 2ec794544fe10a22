/*
 * test_units.c - the engine's small modules and common/'s: errors, dtypes,
 * float16 and bfloat16 conversions, shape collapsing, the thread pool,
 * buffers, DirectML's strided buffer-tensor arithmetic, and whole files
 * read.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffer.h"
#include "check.h"
#include "dtype.h"
#include "errors.h"
#include "pool.h"
#include "tensor.h"
#include "tx_file.h"
#include "tx_half.h"
#include "tx_strides.h"
#include "tx_utf8.h"

static void error_table(void)
{
    for (int e = ENG_E_OK; e < ENG_NERRORS; e++) {
        const char *name = eng_err_name((eng_err)e);
        const char *text = eng_err_text((eng_err)e);
        CHECK(strcmp(name, "UNKNOWN") != 0 && text[0] != '\0', "code %d", e);
    }
    char buf[32];
    CHECK(eng_fail(buf, sizeof buf, ENG_E_AXIS, "axis %d", 7) == ENG_E_AXIS
              && strcmp(buf, "axis 7") == 0,
          "eng_fail formats: %s", buf);
    CHECK(eng_fail(NULL, 0, ENG_E_RANK, "x") == ENG_E_RANK, "NULL buffer");
}

static void dtype_table(void)
{
    static const char *names[] = {"float16", "bfloat16", "float32", "float64",
                                  "int8",    "int16",    "int32",   "int64",
                                  "uint8",   "uint16",   "uint32",  "uint64"};
    static const char *kserve[] = {"FP16",  "BF16",   "FP32",   "FP64",
                                   "INT8",  "INT16",  "INT32",  "INT64",
                                   "UINT8", "UINT16", "UINT32", "UINT64"};
    static const size_t sizes[] = {2, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8};
    for (int t = 0; t < TX_NDTYPES; t++) {
        CHECK(strcmp(tx_dtype_name((tx_dtype)t), names[t]) == 0, "%d", t);
        CHECK(strcmp(tx_dtype_kserve((tx_dtype)t), kserve[t]) == 0, "%d", t);
        CHECK(tx_dtype_size((tx_dtype)t) == sizes[t], "%s size", names[t]);
        CHECK(tx_dtype_parse(names[t], strlen(names[t])) == t, "parse %s",
              names[t]);
        CHECK(tx_dtype_parse(kserve[t], strlen(kserve[t])) == t, "parse %s",
              kserve[t]);
        CHECK(strstr(tx_dtype_list(), names[t]) != NULL, "list has %s",
              names[t]);
    }
    CHECK(strncmp(tx_dtype_list(), "float16, ", 9) == 0, "list: %s",
          tx_dtype_list());
    CHECK(tx_dtype_parse("float", 5) == -1, "prefix is not a dtype");
    CHECK(tx_dtype_parse("float322", 8) == -1, "longer is not a dtype");
    CHECK(tx_dtype_parse("fp32", 4) == -1, "names are case-sensitive");
    CHECK(tx_dtype_parse("", 0) == -1, "empty");
    CHECK(eng_dtype_storage(TX_INT32) == eng_dtype_storage(TX_UINT32),
          "signed and unsigned share a storage class");
}

/* The nearest float16 to x by search, ties to even: the reference for
 * tx_f32_to_f16 on finite values. */
static uint16_t nearest_f16(float x)
{
    uint16_t best = 0;
    double bestd = INFINITY;
    for (uint32_t h = 0; h < 0x7c00; h++) {
        double v = tx_f16_to_f32((uint16_t)h);
        double d = fabs(fabs((double)x) - v);
        if (d < bestd || (d == bestd && (h & 1) == 0)) {
            bestd = d;
            best = (uint16_t)h;
        }
    }
    /* beyond the largest finite value, halfway to the next power: inf */
    if (fabs((double)x) >= 65520.0)
        best = 0x7c00;
    return (uint16_t)(best | (signbit(x) ? 0x8000 : 0));
}

static void half_conversions(void)
{
    /* every float16 and bfloat16 survives a round trip through float32 */
    for (uint32_t i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = tx_f16_to_f32(h);
        if (isnan(f))
            CHECK(isnan(tx_f16_to_f32(tx_f32_to_f16(f))), "f16 NaN %04x", i);
        else
            CHECK(tx_f32_to_f16(f) == h, "f16 %04x -> %g -> %04x", i, f,
                  tx_f32_to_f16(f));
        float b = tx_bf16_to_f32(h);
        if (isnan(b))
            CHECK(isnan(tx_bf16_to_f32(tx_f32_to_bf16(b))), "bf16 NaN %04x", i);
        else
            CHECK(tx_f32_to_bf16(b) == h, "bf16 %04x", i);
    }
    /* known values */
    CHECK(tx_f16_to_f32(0x3c00) == 1.0f, "1.0");
    CHECK(tx_f16_to_f32(0x7bff) == 65504.0f, "max");
    CHECK(tx_f16_to_f32(0x0001) == 0x1p-24f, "smallest subnormal");
    CHECK(tx_f32_to_f16(65520.0f) == 0x7c00, "65520 rounds to inf");
    CHECK(tx_f32_to_f16(65519.99f) == 0x7bff, "just below rounds down");
    CHECK(tx_f32_to_f16(0x1p-25f) == 0, "2^-25 ties to even zero");
    CHECK(tx_f32_to_f16(0x1.000002p-25f) == 1, "above 2^-25 rounds up");
    CHECK(tx_f32_to_f16(-INFINITY) == 0xfc00, "-inf");
    CHECK(tx_f32_to_bf16(1.00390625f) == 0x3f80, "bf16 tie to even (down)");
    CHECK(tx_f32_to_bf16(1.01171875f) == 0x3f82, "bf16 tie to even (up)");
    /* NaN whose payload sits in the dropped bits stays NaN */
    uint32_t nanbits = 0x7f800001u;
    float snan;
    memcpy(&snan, &nanbits, sizeof snan);
    CHECK(isnan(tx_f16_to_f32(tx_f32_to_f16(snan))), "f16 NaN payload");
    CHECK(isnan(tx_bf16_to_f32(tx_f32_to_bf16(snan))), "bf16 NaN payload");
    /* random floats against a brute-force nearest search */
    for (int i = 0; i < 300; i++) {
        float x = (float)ldexp(check_unit() * 2 - 1, (int)check_below(44) - 26);
        CHECK(tx_f32_to_f16(x) == nearest_f16(x), "f16 of %a: %04x, want %04x",
              (double)x, tx_f32_to_f16(x), nearest_f16(x));
    }
}

static void shapes(void)
{
    eng_lines l;
    eng_scan_desc d = {
        .dtype = TX_FLOAT32, .rank = 4, .shape = {2, 3, 4, 5}, .axis = 1};
    CHECK(eng_lines_from_desc(&d, &l, NULL, 0) == ENG_E_OK, "valid");
    CHECK(l.outer == 2 && l.n == 3 && l.inner == 20 && l.elements == 120
              && l.bytes == 480,
          "collapse: %llu %llu %llu", (unsigned long long)l.outer,
          (unsigned long long)l.n, (unsigned long long)l.inner);
    d.axis = -1;
    eng_lines_from_desc(&d, &l, NULL, 0);
    CHECK(l.outer == 24 && l.n == 5 && l.inner == 1, "axis -1");
    d.axis = -4;
    eng_lines_from_desc(&d, &l, NULL, 0);
    CHECK(l.outer == 1 && l.n == 2 && l.inner == 60, "axis -4");
    char msg[200];
    d.axis = 4;
    CHECK(eng_lines_from_desc(&d, &l, msg, sizeof msg) == ENG_E_AXIS
              && strstr(msg, "rank 4"),
          "axis 4: %s", msg);
    d.axis = -5;
    CHECK(eng_lines_from_desc(&d, &l, msg, sizeof msg) == ENG_E_AXIS, "-5");
    d.axis = 0;
    d.rank = 0;
    CHECK(eng_lines_from_desc(&d, &l, msg, sizeof msg) == ENG_E_RANK, "rank 0");
    d.rank = 2;
    d.shape[0] = 0;
    CHECK(eng_lines_from_desc(&d, &l, msg, sizeof msg) == ENG_E_OK
              && l.elements == 0 && l.bytes == 0,
          "empty");
    d.shape[0] = UINT64_MAX;
    d.shape[1] = 2;
    CHECK(eng_lines_from_desc(&d, &l, msg, sizeof msg) == ENG_E_TOO_LARGE,
          "overflow");
    d.dtype = TX_FLOAT64;
    d.shape[0] = 1ull << 61;
    d.shape[1] = 1;
    CHECK(eng_lines_from_desc(&d, &l, msg, sizeof msg) == ENG_E_TOO_LARGE,
          "bytes overflow: %s", msg);
}

static atomic_uint hits[1000];

static void count_task(void *arg, size_t i)
{
    (void)arg;
    atomic_fetch_add(&hits[i], 1);
}

static void pool(void)
{
    for (unsigned threads = 1; threads <= 5; threads++) {
        eng_pool *p = eng_pool_new(threads);
        CHECK(p != NULL && eng_pool_threads(p) == threads, "pool of %u",
              threads);
        for (int round = 0; round < 50; round++) {
            size_t n = check_below(1000);
            for (size_t i = 0; i < 1000; i++)
                atomic_store(&hits[i], 0);
            eng_pool_run(p, n, count_task, NULL);
            for (size_t i = 0; i < 1000; i++)
                CHECK(atomic_load(&hits[i]) == (i < n ? 1u : 0u),
                      "%u threads, %zu tasks: task %zu ran %u times", threads,
                      n, i, atomic_load(&hits[i]));
        }
        eng_pool_free(p);
    }
    eng_pool_free(NULL);
}

static void buffers(void)
{
    /* alignment, small and large */
    size_t sizes[] = {0, 1, 127, 128, 4096, (2 << 20) - 200, 2 << 20, 5 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        unsigned char *p = eng_buffer_alloc(sizes[i]);
        CHECK(p != NULL && (uintptr_t)p % 128 == 0, "size %zu", sizes[i]);
        if (sizes[i])
            p[sizes[i] - 1] = 1; /* usable to the end */
        eng_buffer_free(p);
    }
    eng_buffer_free(NULL);
    /* a freed large buffer comes back for a similar size, not a tiny one */
    eng_buffer_cache_clear();
    void *a = eng_buffer_alloc(8 << 20);
    eng_buffer_free(a);
    void *b = eng_buffer_alloc((8 << 20) - 1000);
    CHECK(a == b, "large buffer reused");
    eng_buffer_free(b);
    void *c = eng_buffer_alloc(3 << 20);
    CHECK(c != a, "a 8 MiB buffer is not spent on 3 MiB");
    eng_buffer_free(c);
    /* medium buffers (64 KiB to 2 MiB) are kept too */
    void *m = eng_buffer_alloc(300000);
    ((unsigned char *)m)[299999] = 1;
    eng_buffer_free(m);
    void *m2 = eng_buffer_alloc(350000);
    CHECK(m2 == m, "a medium buffer is reused for a similar size");
    void *m3 = eng_buffer_alloc(100000);
    CHECK(m3 != m2, "two live buffers are distinct");
    eng_buffer_free(m3);
    eng_buffer_free(m2);
    void *m4 = eng_buffer_alloc(1000);
    CHECK(m4 != m2, "a small buffer does not take a medium one");
    eng_buffer_free(m4);
    /* the budget */
    eng_buffer_cache_limit(0);
    void *d = eng_buffer_alloc(8 << 20);
    eng_buffer_free(d);
    void *e = eng_buffer_alloc(8 << 20);
    eng_buffer_free(e);
    eng_buffer_cache_limit((size_t)512 << 20);
    eng_buffer_cache_clear();
}

/* UTF-8 validation (common/tx_utf8.c): well-formed sequences pass, and
 * every kind of ill-formed one stops the valid prefix and is scrubbed. */
static void utf8(void)
{
    static const struct {
        const char *s;
        size_t valid; /* of strlen(s) */
    } cases[] = {
        {"plain", 5},
        {"caf\xc3\xa9", 5},      /* U+00E9 */
        {"\xe2\x82\xac", 3},     /* U+20AC */
        {"\xf0\x9f\x98\x80", 4}, /* U+1F600 */
        {"\xf4\x8f\xbf\xbf", 4}, /* U+10FFFF, the last */
        {"a\xff", 1},            /* never in UTF-8 */
        {"a\x80", 1},            /* a lone continuation */
        {"\xc0\x80", 0},         /* overlong NUL */
        {"\xc1\xbf", 0},         /* overlong */
        {"\xe0\x80\x80", 0},     /* overlong */
        {"\xed\xa0\x80", 0},     /* a surrogate */
        {"\xf4\x90\x80\x80", 0}, /* above U+10FFFF */
        {"\xf5\x80\x80\x80", 0},
        {"ok\xe2\x82", 2}, /* cut short */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t len = strlen(cases[i].s);
        CHECK(tx_utf8_valid(cases[i].s, len) == cases[i].valid, "case %zu: %zu",
              i, tx_utf8_valid(cases[i].s, len));
        char buf[16];
        memcpy(buf, cases[i].s, len);
        tx_utf8_scrub(buf, len);
        CHECK(tx_utf8_valid(buf, len) == len, "case %zu scrubbed", i);
        CHECK(memcmp(buf, cases[i].s, cases[i].valid) == 0,
              "case %zu: the valid prefix is kept", i);
    }
    char mixed[] = "a\xff"
                   "b\xc3\xa9"
                   "c";
    char named[64];
    size_t n = tx_utf8_escape(mixed, strlen(mixed), named, sizeof named);
    CHECK(n == 9 && strcmp(named, "a\\xFFb\xc3\xa9"
                                   "c")
                         == 0,
          "escape: %s", named);
    /* a full buffer stops at a sequence's edge, NUL-terminated */
    CHECK(tx_utf8_escape("\xc3\xa9\xc3\xa9", 4, named, 4) == 2
              && strcmp(named, "\xc3\xa9") == 0,
          "escape, cut: %s", named);
    CHECK(tx_utf8_escape("\xff\xff", 2, named, 6) == 4
              && strcmp(named, "\\xFF") == 0,
          "escape, cut in a name: %s", named);
    tx_utf8_scrub(mixed, strlen(mixed));
    CHECK(strcmp(mixed, "a?b\xc3\xa9"
                        "c")
              == 0,
          "scrub: %s", mixed);
}

/* DirectML buffer-tensor arithmetic (common/tx_strides.c). */
static void strides(void)
{
    uint64_t st[4], last, bytes;
    uint64_t s234[] = {2, 3, 4};
    CHECK(tx_strides_packed(3, s234, st) && st[0] == 12 && st[1] == 4
              && st[2] == 1,
          "packed [2,3,4]");
    uint64_t s0[] = {2, 0};
    CHECK(!tx_strides_packed(2, s0, st)
              && !tx_strides_last_index(2, s0, NULL, &last),
          "a size of 0 is invalid");
    /* the example: NHWC data described with NCHW sizes */
    uint64_t nchw[] = {1, 1, 3, 4}, nhwc[] = {12, 12, 1, 3};
    CHECK(tx_strides_last_index(4, nchw, nhwc, &last) && last == 11,
          "last index %llu", (unsigned long long)last);
    CHECK(tx_strides_buffer_bytes(4, 4, nchw, nhwc, &bytes) && bytes == 48,
          "float32 bytes %llu", (unsigned long long)bytes);
    CHECK(tx_strides_disjoint(4, nchw, nhwc), "a permutation is disjoint");
    /* rounded up to 4 bytes, packed or not */
    uint64_t three[] = {3}, one[] = {1}, two[] = {2};
    CHECK(tx_strides_buffer_bytes(1, 1, three, NULL, &bytes) && bytes == 4,
          "int8 [3]: %llu", (unsigned long long)bytes);
    CHECK(tx_strides_buffer_bytes(2, 1, three, one, &bytes) && bytes == 8,
          "float16 [3]: %llu", (unsigned long long)bytes);
    CHECK(tx_strides_buffer_bytes(8, 1, three, two, &bytes) && bytes == 40,
          "float64 [3] stride 2: %llu", (unsigned long long)bytes);
    /* broadcast: stride 0 addresses one element, and overlaps */
    uint64_t b[] = {5, 3}, bst[] = {0, 1};
    CHECK(tx_strides_last_index(2, b, bst, &last) && last == 2, "broadcast");
    CHECK(!tx_strides_disjoint(2, b, bst), "broadcast output overlaps");
    uint64_t b1[] = {1, 3}, b1st[] = {0, 1};
    CHECK(tx_strides_disjoint(2, b1, b1st), "stride 0 on a size-1 dim is fine");
    /* overflow is reported, never wrapped */
    uint64_t big[] = {1ull << 33, 1ull << 33}, bigst[] = {1ull << 40, 1};
    CHECK(!tx_strides_packed(2, big, st), "packed overflow");
    CHECK(!tx_strides_last_index(2, big, bigst, &last), "index overflow");
    uint64_t fit[] = {2}, fitst[] = {UINT64_MAX / 8};
    CHECK(!tx_strides_buffer_bytes(8, 1, fit, fitst, &bytes), "byte overflow");
    CHECK(!tx_strides_disjoint(2, big, bigst), "disjoint overflow");

    /* brute force on small layouts: the last index is the largest offset,
     * and a layout the test calls disjoint has no two indices at one
     * offset; permuted and padded packed layouts always pass */
    for (int trial = 0; trial < 3000; trial++) {
        int rank = 1 + (int)check_below(4);
        uint64_t sz[4], sd[4];
        size_t count = 1;
        for (int d = 0; d < rank; d++) {
            sz[d] = 1 + check_below(4);
            count *= (size_t)sz[d];
        }
        bool family = trial % 2 == 0;
        if (family) { /* a permutation of packed, with padding */
            int perm[4] = {0, 1, 2, 3};
            for (int d = rank - 1; d > 0; d--) {
                int k = (int)check_below((uint64_t)d + 1), t = perm[d];
                perm[d] = perm[k];
                perm[k] = t;
            }
            uint64_t step = 1;
            for (int i = 0; i < rank; i++) {
                sd[perm[i]] = step;
                step = step * sz[perm[i]] + check_below(3);
            }
        } else {
            for (int d = 0; d < rank; d++)
                sd[d] = check_below(13);
        }
        uint64_t max = 0, seen_last = 0;
        static unsigned char hit[4096];
        memset(hit, 0, sizeof hit);
        bool distinct = true;
        for (size_t i = 0; i < count; i++) {
            size_t rest = i;
            uint64_t off = 0;
            for (int d = rank - 1; d >= 0; d--) {
                off += (rest % sz[d]) * sd[d];
                rest /= sz[d];
            }
            if (off > max)
                max = off;
            distinct = distinct && !hit[off];
            hit[off] = 1;
        }
        bool ok = tx_strides_last_index(rank, sz, sd, &seen_last);
        CHECK(ok && seen_last == max, "trial %d: last %llu, max %llu", trial,
              (unsigned long long)seen_last, (unsigned long long)max);
        bool disjoint = tx_strides_disjoint(rank, sz, sd);
        CHECK(!disjoint || distinct, "trial %d: called disjoint, overlaps",
              trial);
        CHECK(!family || disjoint, "trial %d: packed permutation refused",
              trial);
    }
}

/* Whole files read (common/tx_file.c): a regular file of random bytes
 * and length, exact at its limit and refused one byte past it; a pipe,
 * whose size nobody knows, grown past the first guess; an empty file; a
 * missing one. */
static void files(void)
{
    char path[] = "/tmp/tally-test-read-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "mkstemp: %s", strerror(errno));
    if (fd < 0)
        return;
    /* within a pipe's 64 KiB, past the first guess of a stream's size */
    size_t n = 4097 + (size_t)(check_rand() % 60000);
    char *want = malloc(n);
    for (size_t i = 0; i < n; i++)
        want[i] = (char)check_rand();
    CHECK(write(fd, want, n) == (ssize_t)n, "write");
    close(fd);
    char *got;
    size_t len;
    int e = tx_read_file(path, n, &got, &len);
    CHECK(e == 0 && len == n && memcmp(got, want, n) == 0 && got[n] == '\0',
          "a file of %zu bytes, its limit: %d, %zu", n, e, len);
    free(got);
    e = tx_read_file(path, n - 1, &got, &len);
    CHECK(e == EFBIG && got == NULL, "one byte past the limit: %d", e);
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    size_t m = n; /* a pipe holds 64 KiB without a reader */
    CHECK(write(p[1], want, m) == (ssize_t)m, "write to the pipe");
    close(p[1]);
    e = tx_read_fd(p[0], m, &got, &len);
    CHECK(e == 0 && len == m && memcmp(got, want, m) == 0,
          "a pipe of %zu bytes: %d, %zu", m, e, len);
    free(got);
    close(p[0]);
    CHECK(pipe(p) == 0, "pipe");
    CHECK(write(p[1], want, m) == (ssize_t)m, "write to the pipe");
    close(p[1]);
    e = tx_read_fd(p[0], m - 1, &got, &len);
    CHECK(e == EFBIG && got == NULL, "a pipe one byte past the limit: %d", e);
    close(p[0]);
    FILE *f = fopen(path, "wb"); /* emptied */
    CHECK(f != NULL && fclose(f) == 0, "truncate");
    e = tx_read_file(path, 0, &got, &len);
    CHECK(e == 0 && len == 0 && got != NULL && got[0] == '\0',
          "an empty file: %d", e);
    free(got);
    unlink(path);
    e = tx_read_file(path, 100, &got, &len);
    CHECK(e == ENOENT && got == NULL, "a missing file: %d", e);
    free(want);
}

static const check_case cases[] = {
    {"error_table", error_table},
    {"dtype_table", dtype_table},
    {"half_conversions", half_conversions},
    {"shapes", shapes},
    {"pool", pool},
    {"buffers", buffers},
    {"strides", strides},
    {"utf8", utf8},
    {"files", files},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
