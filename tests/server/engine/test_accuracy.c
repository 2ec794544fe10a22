/*
 * test_accuracy.c - float32 sums of 64M elements stay accurate.
 *
 * The cumulative sum of 2^26 uniform [0, 1) float32 values, against a
 * float64 reference (whose own relative error is below 2^26 * 2^-53, under
 * 1e-8): the largest relative error must be under 1e-5, on the OpenCL
 * device and on the host backend, for every mode and for a long column.
 * A float32 loop that adds one element at a time is printed for scale: it
 * ends up tens of percent off, because past 2^24 each addition of a value
 * below 1 is mostly rounded away.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine.h"

#define N (1u << 26)

static float *input;
static double *reference;

static void quiet(void *user, const char *line)
{
    (void)user;
    (void)line;
}

/* Reference along lines of n elements, `inner` apart, in the mode's order. */
static void make_reference(const eng_scan_desc *d, uint64_t n, uint64_t inner)
{
    for (uint64_t k = 0; k < inner; k++) {
        double s = 0;
        for (uint64_t j0 = 0; j0 < n; j0++) {
            uint64_t j = d->reverse ? n - 1 - j0 : j0;
            size_t i = (size_t)(j * inner + k);
            if (d->exclusive) {
                reference[i] = s;
                s += input[i];
            } else {
                s += input[i];
                reference[i] = s;
            }
        }
    }
}

static double max_relative_error(const float *y)
{
    double worst = 0;
    for (size_t i = 0; i < N; i++) {
        if (reference[i] == 0) {
            if (y[i] != 0)
                return INFINITY;
            continue;
        }
        double e = fabs((double)y[i] - reference[i]) / reference[i];
        if (!(e <= worst)) /* NaN counts as worst */
            worst = isnan(e) ? INFINITY : e;
    }
    return worst;
}

static void run_on(const char *device)
{
    eng_engine_options o;
    eng_engine_options_init(&o);
    o.device = device;
    o.warmup = false;
    o.log = quiet;
    eng_engine *e;
    eng_stream *s;
    char msg[256];
    if (eng_engine_open(&o, &e, msg, sizeof msg) != ENG_E_OK
        || eng_stream_open(e, &s, msg, sizeof msg) != ENG_E_OK) {
        CHECK(0, "%s: %s", device, msg);
        return;
    }
    float *out = check_alloc((size_t)N * sizeof(float));
    struct {
        const char *what;
        int rank;
        uint64_t shape[2];
        int axis;
        bool reverse, exclusive;
    } cases[] = {
        {"line", 1, {N}, 0, false, false},
        {"line, decreasing", 1, {N}, 0, true, false},
        {"line, exclusive", 1, {N}, 0, false, true},
        {"columns of 2^20", 2, {1u << 20, 64}, 0, false, false},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        eng_scan_desc d = {.dtype = TX_FLOAT32,
                           .rank = cases[c].rank,
                           .axis = cases[c].axis,
                           .reverse = cases[c].reverse,
                           .exclusive = cases[c].exclusive};
        memcpy(d.shape, cases[c].shape, sizeof cases[c].shape);
        uint64_t inner = d.rank == 2 ? d.shape[1] : 1;
        make_reference(&d, d.shape[0], inner);
        for (size_t i = 0; i < N; i++)
            out[i] = NAN;
        if (eng_scan(s, &d, input, out, msg, sizeof msg) != ENG_E_OK) {
            CHECK(0, "%s %s: %s", device, cases[c].what, msg);
            continue;
        }
        double err = max_relative_error(out);
        printf("    %-28s %-14s max relative error %.3g\n",
               eng_engine_describe(e), cases[c].what, err);
        CHECK(err < 1e-5, "%s %s: max relative error %g", device, cases[c].what,
              err);
    }
    free(out);
    eng_stream_close(s);
    eng_engine_close(e);
}

static void setup(void)
{
    if (input != NULL)
        return;
    input = check_alloc((size_t)N * sizeof(float));
    reference = check_alloc((size_t)N * sizeof(double));
    for (size_t i = 0; i < N; i++)
        input[i] = (float)check_unit();
}

static void device(void)
{
    setup();
    const char *d = getenv("TALLY_TEST_DEVICE");
    run_on(d != NULL && d[0] != '\0' ? d : "auto");
}

static void host(void)
{
    setup();
    run_on("host");
}

static void naive_float32_for_scale(void)
{
    setup();
    eng_scan_desc d = {.rank = 1};
    make_reference(&d, N, 1);
    float s = 0, *y = check_alloc((size_t)N * sizeof(float));
    for (size_t i = 0; i < N; i++)
        y[i] = s += input[i];
    double err = max_relative_error(y);
    printf("    a sequential float32 loop: max relative error %.3g\n", err);
    CHECK(err > 0.1, "the naive loop should be far off, got %g", err);
    free(y);
}

static const check_case cases[] = {
    {"device", device},
    {"host", host},
    {"naive_float32_for_scale", naive_float32_for_scale},
};

int main(int argc, char **argv)
{
    int rc = check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
    free(input);
    free(reference);
    return rc;
}
