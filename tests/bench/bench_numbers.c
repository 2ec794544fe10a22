/*
 * bench_numbers.c - how fast tensor elements become JSON text and back.
 *
 * For float32, float64, float16, bfloat16 and int64, a million random
 * values (random bit patterns for the floats, every finite one alike;
 * uniform over the whole range for int64) are printed with numtext_print()
 * into one buffer, then parsed back with numtext_parse(); each pass is timed
 * five times and the best is kept. It prints values per second and MB/s of
 * text for both directions, and checks that every value came back
 * bit-exact (the program fails otherwise). The last two columns are the
 * paths a JSON request takes: the values printed as JSON arrays with
 * numtext_print_list() and parsed back with jcur_tensor(), in arrays of
 * 60000 elements (below the size that is parsed in parts on several
 * cores: these are one core's figures), also checked bit-exact.
 *
 * usage: bench_numbers [COUNT]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "json.h"
#include "numtext.h"
#include "tx_half.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random finite value of t at element i of buf. */
static void fill(tx_dtype t, void *buf, size_t i)
{
    for (;;) {
        uint64_t b = next();
        switch (t) {
        case TX_FLOAT16:
            if ((b & 0x7c00) == 0x7c00)
                continue;
            ((uint16_t *)buf)[i] = (uint16_t)b;
            return;
        case TX_BFLOAT16:
            if ((b & 0x7f80) == 0x7f80)
                continue;
            ((uint16_t *)buf)[i] = (uint16_t)b;
            return;
        case TX_FLOAT32: {
            uint32_t u = (uint32_t)b;
            if ((u & 0x7f800000u) == 0x7f800000u)
                continue;
            memcpy((float *)buf + i, &u, 4);
            return;
        }
        case TX_FLOAT64:
            if ((b & 0x7ff0000000000000ull) == 0x7ff0000000000000ull)
                continue;
            memcpy((double *)buf + i, &b, 8);
            return;
        default: memcpy((int64_t *)buf + i, &b, 8); return;
        }
    }
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? (size_t)strtoull(argv[1], NULL, 10) : 1000000;
    static const tx_dtype types[] = {TX_FLOAT32, TX_FLOAT64, TX_FLOAT16,
                                     TX_BFLOAT16, TX_INT64};
    printf("%-9s %10s %8s %10s %8s %7s %11s %11s\n", "dtype", "print/s",
           "MB/s", "parse/s", "MB/s", "bytes", "list prt/s", "array prs/s");
    int bad = 0;
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        tx_dtype t = types[k];
        size_t size = tx_dtype_size(t);
        char *src = malloc(n * size), *back = malloc(n * size);
        char *text = malloc(n * NUMFMT_MAX);
        size_t *len = malloc(n * sizeof *len);
        for (size_t i = 0; i < n; i++)
            fill(t, src, i);
        double best_p = 1e9, best_r = 1e9;
        size_t total = 0;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now();
            total = 0;
            for (size_t i = 0; i < n; i++) {
                len[i] = numtext_print(t, src, i, text + total);
                total += len[i];
            }
            double tp = now() - t0;
            char why[128];
            t0 = now();
            size_t at = 0;
            for (size_t i = 0; i < n; i++) {
                if (!numtext_parse(t, text + at, len[i], back, i, why,
                                  sizeof why)) {
                    fprintf(stderr, "%s: %.*s: %s\n", tx_dtype_name(t),
                            (int)len[i], text + at, why);
                    return 1;
                }
                at += len[i];
            }
            double tr = now() - t0;
            best_p = tp < best_p ? tp : best_p;
            best_r = tr < best_r ? tr : best_r;
        }
        /* -0 and +0 are one value to JSON's readers but not to memcmp */
        size_t wrong = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(src + i * size, back + i * size, size) != 0)
                wrong++;
        /* the JSON paths, in arrays of up to ARRAY elements */
        enum { ARRAY = 60000 };
        char *atext = malloc(n * (numtext_max_len(t) + 1) + 2 * (n / ARRAY + 1));
        size_t *aoff = malloc((n / ARRAY + 2) * sizeof *aoff);
        double best_lp = 1e9, best_ap = 1e9;
        for (int rep = 0; rep < 5; rep++) {
            double t0 = now();
            size_t at = 0, a = 0;
            for (size_t i = 0; i < n; i += ARRAY, a++) {
                size_t e = i + ARRAY < n ? i + ARRAY : n;
                aoff[a] = at;
                atext[at++] = '[';
                /* a chunk's first element, as its array's first */
                at += numtext_print_list(t, src + i * size, 0, e - i, atext + at);
                atext[at++] = ']';
            }
            aoff[a] = at;
            double tp = now() - t0;
            memset(back, 0, n * size);
            t0 = now();
            a = 0;
            for (size_t i = 0; i < n; i += ARRAY, a++) {
                size_t e = i + ARRAY < n ? i + ARRAY : n;
                char err[300];
                jcur c;
                jcur_init(&c, atext + aoff[a], aoff[a + 1] - aoff[a], err,
                          sizeof err);
                uint64_t shape[1] = {e - i};
                if (!jcur_tensor(&c, "data", t, shape, 1, e - i,
                                 back + i * size)) {
                    fprintf(stderr, "%s: %s\n", tx_dtype_name(t), err);
                    return 1;
                }
            }
            double tr = now() - t0;
            best_lp = tp < best_lp ? tp : best_lp;
            best_ap = tr < best_ap ? tr : best_ap;
        }
        free(atext);
        free(aoff);
        for (size_t i = 0; i < n; i++)
            if (memcmp(src + i * size, back + i * size, size) != 0)
                wrong++;
        if (wrong) {
            fprintf(stderr,
                    "%s: %zu values (of %zu, both ways) did not round-trip\n",
                    tx_dtype_name(t), wrong, 2 * n);
            bad = 1;
        }
        printf("%-9s %10.3g %8.1f %10.3g %8.1f %7.2f %11.3g %11.3g\n",
               tx_dtype_name(t), (double)n / best_p,
               (double)total / best_p / 1e6, (double)n / best_r,
               (double)total / best_r / 1e6, (double)total / (double)n,
               (double)n / best_lp, (double)n / best_ap);
        free(src);
        free(back);
        free(text);
        free(len);
    }
    return bad;
}
