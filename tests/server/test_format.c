/*
 * test_format.c - server/format/ on its own: number text, the JSON
 * scanner and tensor arrays, .npy headers, and the fanout helpers that
 * share a large tensor's parse and render. No server; the protocols that
 * use them are test_protocol.c's.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "check.h"
#include "fanout.h"
#include "json.h"
#include "npy.h"
#include "numtext.h"
#include "tx_half.h"

static bool parse1(tx_dtype t, const char *text, void *dst, char *why)
{
    return numtext_parse(t, text, strlen(text), dst, 0, why, 200);
}

static void integers(void)
{
    char why[200];
    union {
        int8_t i8;
        uint8_t u8;
        int16_t i16;
        uint16_t u16;
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
    } v;
    struct {
        tx_dtype t;
        const char *text;
        bool ok;
        int64_t want; /* as signed, for the ok ones */
    } cases[] = {
        {TX_INT8, "127", true, 127},
        {TX_INT8, "-128", true, -128},
        {TX_INT8, "128", false, 0},
        {TX_INT8, "300", false, 0},
        {TX_INT8, "-129", false, 0},
        {TX_UINT8, "255", true, 255},
        {TX_UINT8, "-1", false, 0},
        {TX_UINT8, "-0", true, 0},
        {TX_UINT32, "-1", false, 0},
        {TX_INT32, "2.5", false, 0},
        {TX_INT32, "3.0", true, 3},
        {TX_INT32, "1e2", true, 100},
        {TX_INT32, "1.5e1", true, 15},
        {TX_INT32, "150e-1", true, 15},
        {TX_INT32, "1.55e1", false, 0},
        {TX_INT32, "0.000", true, 0},
        {TX_INT32, "2147483647", true, 2147483647},
        {TX_INT32, "2147483648", false, 0},
        {TX_INT64, "9223372036854775807", true, INT64_MAX},
        {TX_INT64, "-9223372036854775808", true, INT64_MIN},
        {TX_INT64, "9223372036854775808", false, 0},
        {TX_INT64, "1e19", false, 0},
        {TX_INT64, "1e-400", false, 0},
        {TX_INT16, "0e999999999", true, 0},
        {TX_INT16, "123456789012345678901234567890", false, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        memset(&v, 0x5a, sizeof v);
        bool ok = parse1(cases[i].t, cases[i].text, &v, why);
        CHECK(ok == cases[i].ok, "%s as %s: %s (%s)", cases[i].text,
              tx_dtype_name(cases[i].t), ok ? "accepted" : "refused", why);
        if (!ok || !cases[i].ok)
            continue;
        int64_t got;
        switch (cases[i].t) {
        case TX_INT8: got = v.i8; break;
        case TX_UINT8: got = v.u8; break;
        case TX_INT16: got = v.i16; break;
        case TX_INT32: got = v.i32; break;
        default: got = v.i64; break;
        }
        CHECK(got == cases[i].want, "%s: got %lld", cases[i].text,
              (long long)got);
    }
    /* uint64's whole range, exactly */
    CHECK(parse1(TX_UINT64, "18446744073709551615", &v, why)
              && v.u64 == UINT64_MAX,
          "uint64 max");
    CHECK(!parse1(TX_UINT64, "18446744073709551616", &v, why), "2^64");
    CHECK(strstr(why, "does not fit uint64") != NULL, "message: %s", why);
    /* printing is exact and parses back */
    for (int i = 0; i < 2000; i++) {
        uint64_t bits = check_rand();
        static const tx_dtype types[] = {TX_INT8,   TX_INT16, TX_INT32,
                                         TX_INT64,  TX_UINT8, TX_UINT16,
                                         TX_UINT32, TX_UINT64};
        tx_dtype t = types[i % 8];
        uint64_t in = bits, back = 0;
        char text[NUMFMT_MAX + 1];
        size_t n = numtext_print(t, &in, 0, text);
        text[n] = '\0';
        CHECK(numtext_parse(t, text, n, &back, 0, why, sizeof why), "%s: %s",
              text, why);
        size_t size = tx_dtype_size(t);
        CHECK(memcmp(&in, &back, size) == 0, "%s %s did not round-trip",
              tx_dtype_name(t), text);
    }
}

static void floats(void)
{
    char why[200], text[NUMFMT_MAX + 1];
    /* every finite float16 and bfloat16 prints to text that parses back */
    for (uint32_t i = 0; i < 65536; i++) {
        for (int b = 0; b < 2; b++) {
            tx_dtype t = b ? TX_BFLOAT16 : TX_FLOAT16;
            uint16_t h = (uint16_t)i, back = 0;
            float f = b ? tx_bf16_to_f32(h) : tx_f16_to_f32(h);
            size_t n = numtext_print(t, &h, 0, text);
            text[n] = '\0';
            if (isnan(f)) {
                CHECK(strcmp(text, "\"NaN\"") == 0, "NaN printed as %s", text);
                continue;
            }
            if (isinf(f)) {
                CHECK(strcmp(text, f > 0 ? "\"Infinity\"" : "\"-Infinity\"")
                          == 0,
                      "inf printed as %s", text);
                continue;
            }
            CHECK(numtext_parse(t, text, n, &back, 0, why, sizeof why), "%s",
                  why);
            /* -0 may come back as +0 only if it printed as "0" */
            CHECK(back == h, "%s 0x%04x printed as %s, read back 0x%04x",
                  tx_dtype_name(t), i, text, back);
        }
    }
    /* random float32 and float64 */
    for (int i = 0; i < 20000; i++) {
        uint64_t bits = check_rand();
        float f;
        double d;
        uint32_t b32 = (uint32_t)bits;
        memcpy(&f, &b32, 4);
        memcpy(&d, &bits, 8);
        if (isfinite(f)) {
            float back = 0;
            size_t n = numtext_print(TX_FLOAT32, &f, 0, text);
            CHECK(numtext_parse(TX_FLOAT32, text, n, &back, 0, why, sizeof why)
                      && memcmp(&back, &f, 4) == 0,
                  "float32 %a printed as %.*s", (double)f, (int)n, text);
        }
        if (isfinite(d)) {
            double back = 0;
            size_t n = numtext_print(TX_FLOAT64, &d, 0, text);
            CHECK(numtext_parse(TX_FLOAT64, text, n, &back, 0, why, sizeof why)
                      && memcmp(&back, &d, 8) == 0,
                  "float64 %a printed as %.*s", d, (int)n, text);
        }
    }
    /* shortest: 0.1 stays 0.1 */
    float tenth = 0.1f;
    size_t n = numtext_print(TX_FLOAT32, &tenth, 0, text);
    CHECK(n == 3 && memcmp(text, "0.1", 3) == 0, "0.1f printed as %.*s", (int)n,
          text);
    /* out of range */
    float f;
    uint16_t h;
    CHECK(!parse1(TX_FLOAT32, "1e39", &f, why) && strstr(why, "float32"),
          "1e39 float32: %s", why);
    CHECK(parse1(TX_FLOAT32, "1e-50", &f, why) && f == 0, "underflow is 0");
    CHECK(!parse1(TX_FLOAT16, "65520", &h, why), "65520 float16");
    CHECK(parse1(TX_FLOAT16, "65504", &h, why) && h == 0x7bff, "65504");
    CHECK(numtext_parse_special(TX_FLOAT32, "-Infinity", 9, &f, 0, why, 200)
              && isinf(f) && f < 0,
          "-Infinity");
    CHECK(!numtext_parse_special(TX_INT32, "NaN", 3, &f, 0, why, 200),
          "NaN int32");
    CHECK(!numtext_parse_special(TX_FLOAT32, "nan", 3, &f, 0, why, 200),
          "lower-case nan");
    /* the JSON number grammar */
    static const char *bad[] = {"01", "-",    "1.",  ".5", "1e",
                                "+1", "0x10", "1e+", "--1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        size_t len = strlen(bad[i]);
        CHECK(numtext_scan(bad[i], bad[i] + len) != len,
              "%s scanned as a number", bad[i]);
    }
    CHECK(numtext_scan("-1.5e+3,", (const char *)"-1.5e+3," + 8) == 7, "scan");
}

/* Correct rounding, once, from the decimal: every case names the exact
 * result (bits), worked out from the decimal and the type's neighbours. */
static void rounding(void)
{
    char why[200];
    struct {
        tx_dtype t;
        const char *text;
        uint64_t bits; /* the expected pattern; ~0: out of range */
    } cases[] = {
        /* float16: the double is a midpoint, the decimal is not */
        {TX_FLOAT16, "32759.999999999999", 0x77ff},      /* 32752 */
        {TX_FLOAT16, "32760.000000000001", 0x7800},      /* 32768 */
        {TX_FLOAT16, "32760", 0x7800},                   /* tie: even */
        {TX_FLOAT16, "32744", 0x77fe},                   /* tie: even */
        {TX_FLOAT16, "65519.99999999999999999", 0x7bff}, /* 65504 */
        {TX_FLOAT16, "65519", 0x7bff},
        {TX_FLOAT16, "65520", ~0ull}, /* tie to infinity */
        {TX_FLOAT16, "2049", 0x6800}, /* 2048 (even) */
        {TX_FLOAT16, "2051", 0x6802}, /* 2052 (even) */
        {TX_FLOAT16, "2049.0000000000000000001", 0x6801},
        {TX_FLOAT16, "-2049.0000000000000000001", 0xe801},
        /* subnormals: 2^-24 is the least, 2^-25 the midpoint below it */
        {TX_FLOAT16, "5.9604644775390625e-8", 0x0001},
        {TX_FLOAT16, "2.98023223876953125e-8", 0x0000},
        {TX_FLOAT16, "2.98023223876953125000001e-8", 0x0001},
        {TX_FLOAT16, "-2.98023223876953124999999e-8", 0x8000},
        {TX_FLOAT16, "8.940696716308594e-8", 0x0002}, /* 1.5 * 2^-24: even */
        {TX_FLOAT16, "-0", 0x8000},
        {TX_FLOAT16, "0e-999999", 0x0000},
        /* bfloat16 */
        {TX_BFLOAT16, "650.0000000000000000000000000000000504",
         0x4423},                     /* 652 */
        {TX_BFLOAT16, "650", 0x4422}, /* tie: 648 (even) */
        {TX_BFLOAT16, "649.99999999999999999999", 0x4422},
        {TX_BFLOAT16, "-0.0", 0x8000},
        {TX_BFLOAT16, "3.3895313892515355e38", 0x7f7f}, /* the largest */
        {TX_BFLOAT16, "3.40e38", ~0ull},
        /* float32 and float64, through fast_float */
        {TX_FLOAT32, "16777217", 0x4b800000}, /* tie: 16777216 */
        {TX_FLOAT32, "16777219", 0x4b800002}, /* tie: 16777220 */
        {TX_FLOAT32, "16777217.000000000000000001", 0x4b800001},
        {TX_FLOAT32, "1.17549435e-38", 0x00800000}, /* the least normal */
        {TX_FLOAT32, "1.4e-45", 0x00000001},
        {TX_FLOAT32, "7e-46", 0x00000000}, /* below the tie */
        {TX_FLOAT32, "3.4028235e38", 0x7f7fffff},
        {TX_FLOAT32, "3.4028236e38", ~0ull},
        {TX_FLOAT64, "9007199254740993", 0x4340000000000000ull}, /* tie */
        {TX_FLOAT64, "9007199254740993.0000000000000001",
         0x4340000000000001ull},
        {TX_FLOAT64,
         "0.1000000000000000055511151231257827021181583404541015625",
         0x3fb999999999999aull},
        {TX_FLOAT64, "4.9406564584124654e-324", 0x0000000000000001ull},
        {TX_FLOAT64, "2.4703282292062327e-324", 0x0000000000000000ull},
        {TX_FLOAT64, "2.4703282292062328e-324", 0x0000000000000001ull},
        {TX_FLOAT64, "1.7976931348623157e308", 0x7fefffffffffffffull},
        {TX_FLOAT64, "1e309", ~0ull},
        {TX_FLOAT64, "1e-400", 0x0000000000000000ull},
        {TX_FLOAT64, "-0e0", 0x8000000000000000ull},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t got = 0;
        bool ok = parse1(cases[i].t, cases[i].text, &got, why);
        size_t size = tx_dtype_size(cases[i].t);
        if (size < 8)
            got &= (1ull << (8 * size)) - 1;
        if (cases[i].bits == ~0ull)
            CHECK(!ok && strstr(why, "out of range") != NULL,
                  "%s %s: got 0x%llx, expected out of range",
                  tx_dtype_name(cases[i].t), cases[i].text,
                  (unsigned long long)got);
        else
            CHECK(ok && got == cases[i].bits,
                  "%s %s: got 0x%llx (%s), want 0x%llx",
                  tx_dtype_name(cases[i].t), cases[i].text,
                  (unsigned long long)got, ok ? "ok" : why,
                  (unsigned long long)cases[i].bits);
    }
}

/* Ten million random float32 and float64 values (random bit patterns,
 * every finite one alike) print and parse back bit-exact; float16 and
 * bfloat16 are checked exhaustively by `floats`. */
/* Random float32 and float64 values round-trip bit-exact through the
 * paths a JSON request takes: 10 million of each printed as an array with
 * numtext_print_list() (the writer's path) and read back with
 * jcur_tensor() (the fast path of the parse), in chunks; and a million
 * more of each one by one through numtext_print() and numtext_parse() (the
 * general path). float16 and bfloat16 are covered whole by floats(). */
static void round_trip(void)
{
    enum { CHUNK = 100000, CHUNKS = 100 };
    char err[300];
    float *f = check_alloc(CHUNK * sizeof *f), *fb = check_alloc(CHUNK * sizeof *fb);
    double *d = check_alloc(CHUNK * sizeof *d), *db = check_alloc(CHUNK * sizeof *db);
    char *text = check_alloc((size_t)CHUNK * 26 + 16);
    size_t bad32 = 0, bad64 = 0;
    for (int k = 0; k < CHUNKS; k++) {
        for (int i = 0; i < CHUNK; i++) {
            do {
                uint32_t b = (uint32_t)check_rand();
                memcpy(&f[i], &b, 4);
            } while (!isfinite(f[i]));
            do {
                uint64_t b = check_rand();
                memcpy(&d[i], &b, 8);
            } while (!isfinite(d[i]));
        }
        for (int t = 0; t < 2; t++) {
            tx_dtype dt = t ? TX_FLOAT64 : TX_FLOAT32;
            size_t n = 0;
            text[n++] = '[';
            n += numtext_print_list(dt, t ? (void *)d : (void *)f, 0, CHUNK,
                                   text + n);
            text[n++] = ']';
            jcur c;
            jcur_init(&c, text, n, err, sizeof err);
            uint64_t shape[1] = {CHUNK};
            memset(t ? (void *)db : (void *)fb, 0xa5, CHUNK * (t ? 8 : 4));
            bool ok = jcur_tensor(&c, "data", dt, shape, 1, CHUNK,
                                  t ? (void *)db : (void *)fb);
            CHECK(ok, "%s chunk %d: %s", tx_dtype_name(dt), k, err);
            for (int i = 0; ok && i < CHUNK; i++) {
                bool same = t ? memcmp(&db[i], &d[i], 8) == 0
                              : memcmp(&fb[i], &f[i], 4) == 0;
                if (!same && (t ? bad64++ : bad32++) < 5)
                    CHECK(0, "%s %a came back as %a", tx_dtype_name(dt),
                          t ? d[i] : (double)f[i], t ? db[i] : (double)fb[i]);
            }
        }
    }
    char why[200], one[NUMFMT_MAX + 1];
    for (long i = 0; i < 1000000; i++) {
        uint64_t bits = check_rand();
        uint32_t b32 = (uint32_t)(bits >> 32);
        float x, xb = 0;
        double y, yb = 0;
        memcpy(&x, &b32, 4);
        memcpy(&y, &bits, 8);
        if (isfinite(x)) {
            size_t n = numtext_print(TX_FLOAT32, &x, 0, one);
            if (!numtext_parse(TX_FLOAT32, one, n, &xb, 0, why, sizeof why)
                || memcmp(&xb, &x, 4) != 0)
                if (bad32++ < 5)
                    CHECK(0, "float32 %a printed as %.*s", (double)x, (int)n,
                          one);
        }
        if (isfinite(y)) {
            size_t n = numtext_print(TX_FLOAT64, &y, 0, one);
            if (!numtext_parse(TX_FLOAT64, one, n, &yb, 0, why, sizeof why)
                || memcmp(&yb, &y, 8) != 0)
                if (bad64++ < 5)
                    CHECK(0, "float64 %a printed as %.*s", y, (int)n, one);
        }
    }
    CHECK(bad32 == 0 && bad64 == 0,
          "%zu float32 and %zu float64 values did not round-trip", bad32,
          bad64);
    free(f);
    free(fb);
    free(d);
    free(db);
    free(text);
}

/* ------------------------------------------------------------------------
 * Lists of numbers in every shape the fast loops meet, against a reference
 * that reads each token alone with numtext_parse(): the same verdict, the
 * same values, and on a refusal a message naming the first bad element.
 */

/* What lies between two tokens: json.dumps' ", ", compact ",", and rarer
 * whitespace, weighted towards the common ones; or (bad) none, two commas
 * or a comma out of place. */
static const char *separator(bool bad)
{
    static const char *const common[] = {",", ", "};
    static const char *const rare[] = {" ,", ",\n  ", ",\t", " , ", "\r\n,",
                                       ",  "};
    static const char *const wrong[] = {",,", " ", "", ", ,", ";", ",]"};
    if (bad)
        return wrong[check_below(sizeof wrong / sizeof wrong[0])];
    if (check_below(100) != 0)
        return common[check_below(2)];
    return rare[check_below(sizeof rare / sizeof rare[0])];
}

/* A token for dtype t: values that fit, of every length, and sometimes
 * "odd" ones: some fine ("-0", "2.0"), most not (a fraction, too many
 * digits, not a number at all). */
static int int_token_text(tx_dtype t, bool odd_one, char *out)
{
    static const char *const odd[] = {
        "007", "-0", "0", "1.5", "2.0", "1e3", "3E0", "-", "--1", "+1", "1x",
        "\"1\"", "99999999999999999999", "18446744073709551616", "1.", ".5",
        "-9223372036854775809", "9223372036854775808", "NaN", "[1]", "1e-1",
        "10000000000000000000000000000000000000000e-40"};
    if (odd_one)
        return sprintf(out, "%s", odd[check_below(sizeof odd / sizeof odd[0])]);
    unsigned bits = 8 * (unsigned)tx_dtype_size(t);
    bool sign = tx_dtype_kind(t) == TX_KIND_SIGNED;
    if (check_below(50) == 0) { /* a limit of the dtype, exactly */
        uint64_t max = bits == 64 ? (sign ? (uint64_t)INT64_MAX : UINT64_MAX)
                                  : (sign ? (1ull << (bits - 1)) - 1
                                          : (1ull << bits) - 1);
        if (check_rand() & 1)
            return sprintf(out, "%llu", (unsigned long long)max);
        return sign ? sprintf(out, "-%llu", (unsigned long long)max + 1)
                    : sprintf(out, "0");
    }
    /* a length in digits, then a value of about that size */
    int digits = 1 + (int)check_below(bits == 64 ? 20 : bits == 32 ? 10 : 5);
    uint64_t v = check_rand();
    uint64_t cap = 1;
    for (int k = 1; k < digits && cap <= UINT64_MAX / 10; k++)
        cap *= 10;
    v %= cap * (digits < 20 ? 10 : 1);
    if (true) { /* in range: the odd ones are out of it */
        uint64_t max = bits == 64 ? (sign ? (uint64_t)INT64_MAX : UINT64_MAX)
                                  : (sign ? (1ull << (bits - 1)) - 1
                                          : (1ull << bits) - 1);
        v %= max + (max < UINT64_MAX);
    }
    bool neg = (sign || check_below(300) == 0) && (check_rand() & 1);
    return sprintf(out, "%s%llu", neg ? "-" : "", (unsigned long long)v);
}

static int float_token_text(tx_dtype t, bool odd_one, char *out)
{
    static const char *const odd[] = {
        "-0", "0", "0.0", "1e400", "-1e400", "1e-400", "\"NaN\"",
        "\"Infinity\"", "\"-Infinity\"", "\"inf\"", "1.", ".5", "01.5", "1e",
        "1e+", "--1", "1.5.5", "0x10", "65519.99999999999999999",
        "32759.999999999999", "650.0000000000000000000000000000000504", "[1]",
        "NaN", "-Infinity", "Infinity", "nan", "-Inf"};
    uint64_t r = check_below(1000);
    if (odd_one)
        return sprintf(out, "%s", odd[check_below(sizeof odd / sizeof odd[0])]);
    if (r < 200 && (t == TX_FLOAT16 || t == TX_BFLOAT16)) {
        /* exactly halfway between two neighbours, or just off it */
        bool half = t == TX_FLOAT16;
        uint16_t b = (uint16_t)(check_rand() & 0x7fff);
        if ((b & (half ? 0x7c00 : 0x7f80)) == (half ? 0x7c00 : 0x7f80))
            b = 0x3c00;
        double lo = half ? tx_f16_to_f32(b) : tx_bf16_to_f32(b);
        double hi = half ? tx_f16_to_f32((uint16_t)(b + 1))
                         : tx_bf16_to_f32((uint16_t)(b + 1));
        if (!isfinite(hi))
            hi = half ? 65536.0 : ldexp(1.0, 128);
        int n = sprintf(out, "%s%.60g", check_rand() & 1 ? "-" : "",
                        (lo + hi) / 2);
        if (r < 50 && strchr(out, 'e') == NULL) /* a hair above */
            n += sprintf(out + n, "%s0000000000000000000001",
                         strchr(out, '.') != NULL ? "" : ".");
        return n;
    }
    double d;
    switch (check_below(4)) {
    case 0: { /* any double's bits */
        uint64_t b = check_rand();
        memcpy(&d, &b, 8);
        if (!isfinite(d))
            d = 1.5;
        return sprintf(out, "%.17g", d);
    }
    case 1: return sprintf(out, "%.9g", (check_unit() * 2 - 1) * 1000);
    case 2: return sprintf(out, "%lld", (long long)check_below(100000) - 50000);
    default:
        return sprintf(out, "%.*e", (int)check_below(25),
                       (check_unit() - 0.5) * pow(10, (double)check_below(80) - 40));
    }
}

/* Builds a list of n tokens of dtype t into text (with brackets): clean,
 * or with one odd token, or with one bad separator, at a random place;
 * parses it with jcur_tensor(), and checks it against the reference. */
static void list_case(tx_dtype t, uint64_t n, char *text, uint8_t *got,
                      uint8_t *want)
{
    uint64_t mode = check_below(3), at_fault = check_below(n);
    size_t size = tx_dtype_size(t), at = 0;
    bool is_float = tx_dtype_kind(t) == TX_KIND_FLOAT;
    /* where each token starts, to read them again alone */
    size_t *start = check_alloc((size_t)n * sizeof *start);
    size_t *len = check_alloc((size_t)n * sizeof *len);
    bool sep_fault = false; /* first_bad is a separator's, before it */
    int64_t first_bad = -1;
    text[at++] = '[';
    if (check_below(20) == 0)
        text[at++] = ' ';
    for (uint64_t i = 0; i < n; i++) {
        if (i > 0) {
            const char *sep = separator(mode == 2 && i == at_fault);
            /* exactly one comma, with whitespace around it */
            int commas = 0, other = 0;
            for (const char *q = sep; *q; q++) {
                commas += *q == ',';
                other += *q != ',' && !strchr(" \t\r\n", *q);
            }
            if ((commas != 1 || other != 0) && first_bad < 0)
                first_bad = (int64_t)i, sep_fault = true;
            at += (size_t)sprintf(text + at, "%s", sep);
        }
        start[i] = at;
        bool odd = mode == 1 && i == at_fault;
        int k = is_float ? float_token_text(t, odd, text + at)
                         : int_token_text(t, odd, text + at);
        len[i] = (size_t)k;
        at += (size_t)k;
    }
    text[at++] = ']';
    /* the reference, token by token */
    char why[200];
    for (uint64_t i = 0; i < n && (first_bad < 0 || (uint64_t)first_bad > i);
         i++) {
        const char *s = text + start[i];
        bool ok;
        if (s[0] == '"')
            ok = len[i] >= 2 && s[len[i] - 1] == '"'
                 && numtext_parse_special(t, s + 1, len[i] - 2, want,
                                         (size_t)i, why, sizeof why);
        else if (jcur_bare_special(s, s + len[i]) == len[i]) /* bare NaN */
            ok = numtext_parse_special(t, s, len[i], want, (size_t)i, why,
                                      sizeof why);
        else
            ok = numtext_scan(s, s + len[i]) == len[i]
                 && numtext_parse(t, s, len[i], want, (size_t)i, why,
                                 sizeof why);
        if (!ok)
            first_bad = (int64_t)i;
    }
    char err[300];
    jcur c;
    jcur_init(&c, text, at, err, sizeof err);
    uint64_t shape[1] = {n};
    memset(got, 0xa5, (size_t)n * size);
    bool ok = jcur_tensor(&c, "data", t, shape, 1, n, got);
    if (first_bad < 0) {
        CHECK(ok, "%s x %llu: refused: %s [%.*s]", tx_dtype_name(t),
              (unsigned long long)n, err, (int)(at < 400 ? at : 400), text);
        if (ok)
            for (uint64_t i = 0; i < n; i++)
                if (memcmp(got + i * size, want + i * size, size) != 0) {
                    CHECK(0, "%s x %llu: element %llu (%.*s) differs",
                          tx_dtype_name(t), (unsigned long long)n,
                          (unsigned long long)i, (int)len[i],
                          text + start[i]);
                    break;
                }
    } else {
        /* a bad token names its index; a fault of syntax ("1x", two
         * commas) is worded as invalid JSON at a byte of that token or of
         * the text after it, before the next token. A bad separator must
         * be refused, but what is found first varies. */
        int64_t from = sep_fault ? first_bad - 1 : first_bad;
        char where[40];
        snprintf(where, sizeof where, "data[%lld]", (long long)from);
        const char *b = strstr(err, "at byte ");
        size_t byte = b != NULL ? (size_t)strtoull(b + 8, NULL, 10) : 0;
        int64_t upto = sep_fault ? first_bad : first_bad + 1;
        bool located = b != NULL && byte >= start[from]
                       && ((uint64_t)upto == n || byte <= start[upto]);
        /* two tokens run together may read as one number: then the count
         * is short, or a later fault shows first */
        CHECK(!ok
                  && (strstr(err, where) != NULL || sep_fault || located),
              "%s x %llu: element %lld (%.*s) is bad, but: %s",
              tx_dtype_name(t), (unsigned long long)n, (long long)first_bad,
              (int)len[first_bad], text + start[first_bad],
              ok ? "accepted" : err);
    }
    free(start);
    free(len);
}

static void number_lists(void)
{
    enum { MAXN = 140000 };
    char *text = check_alloc((size_t)MAXN * 96 + 16);
    uint8_t *got = check_alloc((size_t)MAXN * 8), *want = check_alloc((size_t)MAXN * 8);
    static const uint64_t sizes[] = {1, 2, 7, 100, 3000, 20000, 70000, 140000};
    for (int t = 0; t < TX_NDTYPES; t++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            uint64_t n = sizes[k];
            /* the big lists are slow for the floats' exact reference */
            if (n > 20000 && tx_dtype_kind((tx_dtype)t) == TX_KIND_FLOAT
                && t != TX_FLOAT32)
                continue;
            for (int rep = 0; rep < (n < 1000 ? 30 : 6); rep++)
                list_case((tx_dtype)t, n, text, got, want);
        }
    free(text);
    free(got);
    free(want);
}

/* The text of n elements printed one by one with numtext_print(), between
 * the prefix and suffix parallel_render() uses: what the writer must
 * produce however it batches them. */
static size_t reference_text(tx_dtype t, const void *data, uint64_t n,
                             char *out)
{
    size_t at = (size_t)sprintf(out, "{\"x\":[");
    for (uint64_t i = 0; i < n; i++) {
        if (i > 0)
            out[at++] = ',';
        at += numtext_print(t, data, (size_t)i, out + at);
    }
    memcpy(out + at, "]}", 2);
    return at + 2;
}

/* json_writer_read() in chunks of any size, and json_writer_render() on 1
 * to 9 threads with its pieces joined, write exactly the elements printed
 * one by one, for every dtype and sizes around the split points (0, 1 and
 * a few elements included); no element's text is longer than
 * numtext_max_len(). */
static void parallel_render(void)
{
    static const uint64_t counts[] = {0, 1, 2, 3, 7, 8, 9, 1000, 65537};
    static const size_t chunks[] = {1, 7, 100, 4096};
    for (int t = 0; t < TX_NDTYPES; t++)
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            uint64_t n = counts[c];
            size_t size = tx_dtype_size((tx_dtype)t);
            uint8_t *data = check_alloc((size_t)n * size + 1);
            for (size_t i = 0; i < (size_t)n * size; i++)
                data[i] = (uint8_t)check_rand();
            eng_scan_desc d = {.dtype = (tx_dtype)t, .rank = 1, .shape = {n}};
            size_t cap = (size_t)n * (NUMFMT_MAX + 1) + 16;
            char *want = check_alloc(cap), *got = check_alloc(cap);
            size_t wlen = reference_text((tx_dtype)t, data, n, want);
            size_t longest = 0;
            for (uint64_t i = 0; i < n; i++) {
                char one[NUMFMT_MAX + 1];
                size_t k = numtext_print((tx_dtype)t, data, (size_t)i, one);
                longest = k > longest ? k : longest;
            }
            CHECK(longest <= numtext_max_len((tx_dtype)t),
                  "%s: an element of %zu bytes, numtext_max_len says %zu",
                  tx_dtype_name((tx_dtype)t), longest,
                  numtext_max_len((tx_dtype)t));
            for (size_t k = 0; k < sizeof chunks / sizeof chunks[0]; k++) {
                json_writer a;
                CHECK(json_writer_init(&a, true, strdup("{\"x\":["), 6,
                                       strdup("]}"), 2, &d, data),
                      "init");
                size_t n_read, at = 0;
                while (at < cap
                       && (n_read = json_writer_read(&a, got + at, chunks[k]))
                              > 0)
                    at += n_read;
                json_writer_free(&a);
                CHECK(at == wlen && memcmp(got, want, wlen) == 0,
                      "%s x %llu streamed in chunks of %zu: %zu bytes, "
                      "want %zu",
                      tx_dtype_name((tx_dtype)t), (unsigned long long)n,
                      chunks[k], at, wlen);
            }
            for (unsigned threads = 1; threads <= 9; threads += 2) {
                json_writer b;
                CHECK(json_writer_init(&b, true, strdup("{\"x\":["), 6,
                                       strdup("]}"), 2, &d, data),
                      "init");
                json_text text;
                CHECK(json_writer_render(&b, threads, &text), "render");
                size_t at = 0;
                for (int i = 0; i < text.n; i++) {
                    CHECK(text.piece[i].len > 0 && at + text.piece[i].len <= cap,
                          "piece %d", i);
                    memcpy(got + at, text.buf + text.piece[i].off,
                           text.piece[i].len);
                    at += text.piece[i].len;
                }
                CHECK(at == wlen && memcmp(got, want, wlen) == 0,
                      "%s x %llu on %u threads: %zu bytes, want %zu",
                      tx_dtype_name((tx_dtype)t), (unsigned long long)n,
                      threads, at, wlen);
                eng_buffer_free(text.buf);
            }
            free(want);
            free(got);
            free(data);
        }
}

static bool tensor(const char *text, tx_dtype t, const uint64_t *shape,
                   int rank, void *dst, char *err)
{
    jcur c;
    jcur_init(&c, text, strlen(text), err, 300);
    uint64_t count = 1;
    for (int d = 0; d < rank; d++)
        count *= shape[d];
    return jcur_tensor(&c, "data", t, shape, rank, count, dst);
}

/* Flat arrays long enough for the two-thread parse: every element lands
 * where the one-thread parse puts it, and every kind of fault in either
 * half is refused with the message the one-thread parse words. */
static void flat_parallel(void)
{
    enum { N = 200003 };
    char err[300];
    static const tx_dtype types[] = {TX_FLOAT32, TX_INT64, TX_FLOAT16,
                                     TX_UINT8};
    char *text = check_alloc((size_t)N * 24 + 64);
    uint64_t *dst = check_alloc((size_t)N * 8);
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        tx_dtype t = types[k];
        size_t n = 0;
        text[n++] = '[';
        for (int i = 0; i < N; i++)
            n += (size_t)sprintf(text + n, "%s%s%d%s", i ? "," : "",
                                 i % 7 == 0 ? " " : "", i % 200,
                                 tx_dtype_kind(t) == TX_KIND_FLOAT ? ".5" : "");
        text[n++] = ']';
        text[n] = '\0';
        uint64_t shape[1] = {N};
        memset(dst, 0xff, (size_t)N * 8);
        unsigned long long before = jcur_parallel_parses();
        CHECK(tensor(text, t, shape, 1, dst, err), "%s: %s", tx_dtype_name(t),
              err);
        CHECK(fanout_width() == 1 || jcur_parallel_parses() == before + 1,
              "%s: parsed in parts", tx_dtype_name(t));
        size_t wrong = 0;
        for (int i = 0; i < N; i++) {
            double want =
                i % 200 + (tx_dtype_kind(t) == TX_KIND_FLOAT ? .5 : 0);
            double got;
            switch (t) {
            case TX_FLOAT32: got = ((float *)dst)[i]; break;
            case TX_INT64: got = (double)((int64_t *)dst)[i]; break;
            case TX_FLOAT16: got = tx_f16_to_f32(((uint16_t *)dst)[i]); break;
            default: got = ((uint8_t *)dst)[i]; break;
            }
            wrong += got != want;
        }
        CHECK(wrong == 0, "%s: %zu elements wrong", tx_dtype_name(t), wrong);
    }
    /* faults: element i replaced by text, and the message wanted */
    struct {
        int index;
        const char *element, *says;
    } faults[] = {
        {5, "x", "data[5] must be a number"},
        {150000, "x", "data[150000] must be a number"},
        {150000, "\"a,b\"", "data[150000]"},
        {100001, "\"]\"", "data[100001]"},
        {150000, "[1]", "data[150000] is an array in a flat data list"},
        {150000, "300", "data[150000]: 300 does not fit uint8"},
        {199999, "1,1", "more than the 200003 elements"},
    };
    for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
        size_t n = 0;
        text[n++] = '[';
        for (int i = 0; i < N; i++)
            n +=
                (size_t)sprintf(text + n, "%s%s", i ? "," : "",
                                i == faults[f].index ? faults[f].element : "1");
        text[n++] = ']';
        text[n] = '\0';
        uint64_t shape[1] = {N};
        CHECK(!tensor(text, TX_UINT8, shape, 1, dst, err)
                  && strstr(err, faults[f].says) != NULL,
              "fault %zu: \"%s\"", f, err);
    }
    /* too few elements */
    size_t n = 0;
    text[n++] = '[';
    for (int i = 0; i < N; i++)
        n += (size_t)sprintf(text + n, "%s1", i ? "," : "");
    text[n++] = ']';
    text[n] = '\0';
    uint64_t more[1] = {N + 1};
    CHECK(!tensor(text, TX_UINT8, more, 1, dst, err),
          "a count short of the shape is refused");
    free(text);
    free(dst);
}

static void json_tensors(void)
{
    char err[300];
    int32_t v[16];
    uint64_t s23[] = {2, 3}, s3[] = {3}, s20[] = {2, 0};
    CHECK(tensor("[[1,2,3],[4,5,6]]", TX_INT32, s23, 2, v, err) && v[5] == 6,
          "nested: %s", err);
    CHECK(tensor(" [1, 2, 3, 4, 5, 6] ", TX_INT32, s23, 2, v, err) && v[3] == 4,
          "flat: %s", err);
    CHECK(!tensor("[[1,2,3],[4,5]]", TX_INT32, s23, 2, v, err)
              && strstr(err, "data[1] has 2 elements"),
          "ragged: %s", err);
    CHECK(!tensor("[[1,2,3],[4,5,6],[7,8,9]]", TX_INT32, s23, 2, v, err)
              && strstr(err, "more than 2"),
          "too many rows: %s", err);
    CHECK(!tensor("[1,2,3,4,5]", TX_INT32, s23, 2, v, err)
              && strstr(err, "5 elements"),
          "flat short: %s", err);
    CHECK(!tensor("[[1,2,300],[4,5,6]]", TX_INT8, s23, 2, v, err)
              && strstr(err, "data[0][2]") && strstr(err, "300"),
          "value: %s", err);
    CHECK(!tensor("[1,\"2\",3]", TX_INT32, s3, 1, v, err)
              && strstr(err, "data[1]"),
          "string: %s", err);
    CHECK(!tensor("[1,true,3]", TX_INT32, s3, 1, v, err)
              && strstr(err, "data[1] must be a number"),
          "bool: %s", err);
    CHECK(!tensor("[1,01,3]", TX_INT32, s3, 1, v, err)
              && strstr(err, "data[1]: 01 is not a number in JSON's grammar"),
          "leading zero: %s", err);
    CHECK(tensor("[1,\"NaN\",\"-Infinity\"]", TX_FLOAT32, s3, 1, v, err),
          "specials: %s", err);
    CHECK(!tensor("[1,[2],3]", TX_INT32, s3, 1, v, err), "mixed: %s", err);
    CHECK(tensor("[[],[]]", TX_INT32, s20, 2, v, err), "empty rows: %s", err);
    CHECK(tensor("[]", TX_INT32, s20, 2, v, err), "empty flat: %s", err);
    CHECK(!tensor("[1,2,3", TX_INT32, s3, 1, v, err), "unterminated: %s", err);
    CHECK(!tensor("{\"a\":1}", TX_INT32, s3, 1, v, err), "object: %s", err);
    /* deep nesting is refused, not recursed into without end */
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    jcur c;
    jcur_init(&c, deep, 400, err, sizeof err);
    CHECK(!jcur_skip(&c) && strstr(err, "nested"), "deep: %s", err);
}

static void npy(void)
{
    char err[300];
    uint8_t file[TX_NPY_MAX_HEADER + 64];
    uint64_t shape[] = {3, 4};
    size_t hlen = tx_npy_write_header(TX_FLOAT32, shape, 2, file);
    CHECK(hlen % 64 == 0 && file[hlen - 1] == '\n', "header padding: %zu",
          hlen);
    memset(file + hlen, 0, 48);
    tx_npy_header h;
    eng_err e = npy_parse(file, hlen + 48, false, &h, err, sizeof err);
    CHECK(e == ENG_E_OK && h.dtype == TX_FLOAT32 && h.rank == 2
              && h.shape[1] == 4 && !h.fortran_order && h.data_offset == hlen,
          "round trip: %s", err);
    CHECK(npy_parse(file, hlen + 47, false, &h, err, sizeof err)
                  == ENG_E_INVALID
              && strstr(err, "48 bytes"),
          "short data: %s", err);

    /* rank 1 writes a one-tuple */
    uint64_t five = 5;
    hlen = tx_npy_write_header(TX_INT64, &five, 1, file);
    CHECK(strstr((char *)file + 10, "(5,)") != NULL, "one-tuple");

    struct {
        const char *dict;
        int version;
        eng_err want;
        const char *says;
    } cases[] = {
        {"{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }", 1,
         ENG_E_OK, ""},
        {"{\"descr\":\"<u8\",\"fortran_order\":False,\"shape\":(6,)}", 2,
         ENG_E_OK, ""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6L,), }", 3,
         ENG_E_OK, ""},
        {"{'descr': '<c8', 'fortran_order': False, 'shape': (6,), }", 1,
         ENG_E_DTYPE, "c8"},
        {"{'descr': '|b1', 'fortran_order': False, 'shape': (6,), }", 1,
         ENG_E_DTYPE, "b1"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 1,
         ENG_E_RANK, "rank 0"},
        {"{'descr': '<f4', 'fortran_order': False}", 1, ENG_E_INVALID,
         "required"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'x': 1}", 1,
         ENG_E_INVALID, "unknown"},
        {"{'descr': '<f4', 'fortran_order': 0, 'shape': (6,)}", 1,
         ENG_E_INVALID, "fortran_order"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-6,)}", 1,
         ENG_E_INVALID, "shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", 1,
         ENG_E_INVALID, "','"},
        {"['<f4']", 1, ENG_E_INVALID, "dict"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': "
         "(99999999999999999999,)}",
         1, ENG_E_INVALID, "shape"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
         "4294967296)}",
         1, ENG_E_TOO_LARGE, "overflow"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t dl = strlen(cases[i].dict);
        size_t pre = cases[i].version == 1 ? 10 : 12;
        memcpy(file, "\x93NUMPY", 6);
        file[6] = (uint8_t)cases[i].version;
        file[7] = 0;
        file[8] = (uint8_t)dl;
        file[9] = (uint8_t)(dl >> 8);
        if (pre == 12)
            file[10] = file[11] = 0;
        memcpy(file + pre, cases[i].dict, dl);
        size_t data = cases[i].want == ENG_E_OK
                          ? (strstr(cases[i].dict, "i2")   ? 12
                             : strstr(cases[i].dict, "u8") ? 48
                                                           : 24)
                          : 0;
        memset(file + pre + dl, 0, data);
        memset(err, 0, sizeof err);
        e = npy_parse(file, pre + dl + data, false, &h, err, sizeof err);
        CHECK(e == cases[i].want && strstr(err, cases[i].says) != NULL,
              "%s: got %s \"%s\"", cases[i].dict, eng_err_name(e), err);
    }
    CHECK(h.big_endian == false, "last parse");
    /* the preamble itself */
    CHECK(npy_parse((const uint8_t *)"\x93NUMPX\x01\x00\x00\x00", 10, false, &h,
                    err, sizeof err)
                  == ENG_E_INVALID
              && strstr(err, "not a .npy"),
          "magic: %s", err);
    CHECK(npy_parse((const uint8_t *)"\x93NUMPY\x01\x00\xff\xff{", 11, false,
                    &h, err, sizeof err)
                  == ENG_E_INVALID
              && strstr(err, "claims"),
          "lying header length: %s", err);
    CHECK(npy_parse((const uint8_t *)"\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12,
                    false, &h, err, sizeof err)
                  == ENG_E_INVALID
              && strstr(err, "more than"),
          "huge header: %s", err);
    CHECK(npy_parse((const uint8_t *)"\x93NUMPY\x04\x00\x00\x00", 10, false, &h,
                    err, sizeof err)
                  == ENG_E_INVALID
              && strstr(err, "version"),
          "version 4: %s", err);

    /* Fortran order: a 2x3 array stored column by column */
    int32_t fsrc[6] = {0, 3, 1, 4, 2, 5}, cdst[6];
    uint64_t s23[] = {2, 3};
    tx_npy_fortran_to_c(fsrc, cdst, 4, s23, 2);
    for (int i = 0; i < 6; i++)
        CHECK(cdst[i] == i, "fortran element %d is %d", i, cdst[i]);
    uint16_t sw[2] = {0x0102, 0x0304};
    tx_npy_byteswap(sw, 2, 2);
    CHECK(sw[0] == 0x0201 && sw[1] == 0x0403, "byteswap");
}

/* fanout_run(): every part runs once, whoever runs it, with several
 * callers at once; the caller's stack holds the parts. */
typedef struct {
    atomic_int runs;
    int payload;
} fan_part;

static void fan_part_run(void *arg)
{
    fan_part *p = arg;
    atomic_fetch_add(&p->runs, 1);
    volatile int x = 0;
    for (int i = 0; i < p->payload; i++)
        x += i;
}

static void *fan_caller(void *arg)
{
    int *bad = arg;
    for (int round = 0; round < 300; round++) {
        unsigned n = 1 + (unsigned)(round % FANOUT_MAX);
        fan_part parts[FANOUT_MAX];
        for (unsigned k = 0; k < n; k++) {
            atomic_init(&parts[k].runs, 0);
            parts[k].payload = (int)(round * 37 % 5000);
        }
        fanout_run(fan_part_run, parts, sizeof parts[0], n);
        for (unsigned k = 0; k < n; k++)
            *bad += atomic_load(&parts[k].runs) != 1;
    }
    return NULL;
}

static void fanout(void)
{
    unsigned w = fanout_width();
    CHECK(w >= 1 && w <= FANOUT_MAX, "width %u", w);
    pthread_t t[3];
    int bad[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        CHECK(pthread_create(&t[k], NULL, fan_caller, &bad[k]) == 0, "thread");
    for (int k = 0; k < 3; k++)
        pthread_join(t[k], NULL);
    CHECK(bad[0] + bad[1] + bad[2] == 0, "%d parts did not run exactly once",
          bad[0] + bad[1] + bad[2]);
    fanout_run(fan_part_run, NULL, 0, 0); /* nothing to do */
}

static const check_case cases[] = {
    {"integers", integers},
    {"floats", floats},
    {"rounding", rounding},
    {"round_trip", round_trip},
    {"parallel_render", parallel_render},
    {"flat_parallel", flat_parallel},
    {"number_lists", number_lists},
    {"fanout", fanout},
    {"json_tensors", json_tensors},
    {"npy", npy},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
