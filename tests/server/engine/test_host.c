/*
 * test_host.c - the host backend's ways of splitting work.
 *
 * The host backend scans whole lines per task when there are enough of
 * them, and otherwise cuts lines into chunks and scans in two passes. Which
 * happens depends on the thread count, so every shape here runs with 1 to
 * 5 threads, against the reference.
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ref.h"
/* the file itself, as h2o's tests do, for its two float32 loops */
#include "../../../server/engine/scan_host.c"

static void scan_and_check(eng_host *h, const eng_scan_desc *d,
                           const char *what)
{
    eng_lines l;
    CHECK(eng_lines_from_desc(d, &l, NULL, 0) == ENG_E_OK, "%s", what);
    size_t count = (size_t)l.elements;
    void *in = check_alloc(count * 8), *out = check_alloc(count * 8);
    ref_random(d->dtype, in, count, false);
    ref_result r;
    ref_scan(d, in, &r);
    bool in_place = check_below(2);
    if (in_place)
        memcpy(out, in, l.bytes);
    else
        ref_poison(&r, out);
    char msg[256], label[256];
    snprintf(label, sizeof label, "%s %s %u threads%s%s%s", what,
             tx_dtype_name(d->dtype), eng_host_threads(h),
             d->reverse ? " reverse" : "", d->exclusive ? " exclusive" : "",
             in_place ? " in-place" : "");
    eng_err e = eng_host_scan(h, &l, in_place ? out : in, out, msg, sizeof msg);
    CHECK(e == ENG_E_OK, "%s: %s", label, msg);
    CHECK(ref_compare(&r, out, label) == 0, "%s: wrong", label);
    ref_free(&r);
    free(in);
    free(out);
}

static void thread_counts(void)
{
    struct {
        const char *what;
        int rank;
        uint64_t shape[3];
        int axis;
    } shapes[] = {
        {"one long line", 1, {200003}, 0},
        {"two long lines", 2, {2, 70001}, 1},
        {"many short lines", 2, {5000, 13}, 1},
        {"few long columns", 2, {20000, 5}, 0},
        {"wide columns", 3, {2, 1201, 700}, 1},
        {"many column blocks", 3, {40, 50, 1100}, 1},
        {"first axis", 3, {300, 9, 70}, 0},
    };
    for (unsigned threads = 1; threads <= 5; threads++) {
        eng_host *h = eng_host_new(threads);
        CHECK(h != NULL, "host of %u threads", threads);
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            eng_scan_desc d = {.dtype = (tx_dtype)check_below(TX_NDTYPES),
                               .rank = shapes[s].rank,
                               .axis = shapes[s].axis,
                               .reverse = check_below(2),
                               .exclusive = check_below(2)};
            memcpy(d.shape, shapes[s].shape, sizeof shapes[s].shape);
            scan_and_check(h, &d, shapes[s].what);
        }
        eng_host_free(h);
    }
}

/* The float32 loop's two copies (baseline and AVX2) give the same bits,
 * and the one seg_f32 picks is the one this CPU can run. */
static void float32_copies(void)
{
    seg_f32_fn *picked = seg_f32_pick();
#if HOST_AVX2_COPY
    CHECK(picked == (__builtin_cpu_supports("avx2") ? seg_f32_avx2
                                                     : seg_f32_base),
          "seg_f32 picked the wrong copy");
    if (picked != seg_f32_avx2) {
        printf("  (no AVX2 on this CPU: one copy to test)\n");
        return;
    }
    float *src = check_alloc(4096 * sizeof(float));
    float *a = check_alloc(4096 * sizeof(float));
    float *b = check_alloc(4096 * sizeof(float));
    for (int round = 0; round < 200; round++) {
        size_t len = (size_t)check_below(4096);
        int rev = (int)check_below(2), excl = (int)check_below(2);
        for (size_t i = 0; i < len; i++)
            src[i] = (float)(check_unit() * 2 - 0.5);
        memset(a, 0xA5, 4096 * sizeof(float));
        memset(b, 0x5A, 4096 * sizeof(float));
        double ca = check_unit(), cb = ca;
        seg_f32_base(src, a, len, &ca, rev, excl);
        seg_f32_avx2(src, b, len, &cb, rev, excl);
        CHECK(memcmp(a, b, len * sizeof(float)) == 0 && ca == cb,
              "the AVX2 copy differs from the baseline (len %zu rev %d "
              "excl %d)",
              len, rev, excl);
    }
    free(src);
    free(a);
    free(b);
#else
    CHECK(picked == seg_f32_base, "seg_f32 picked the wrong copy");
#endif
}

/* The cores a host backend counts are those the process may run on (a
 * container's cpuset, taskset), not every online one: one thread a core
 * beyond them only takes turns. */
static void cores_follow_affinity(void)
{
    cpu_set_t all, one;
    CHECK(sched_getaffinity(0, sizeof all, &all) == 0, "sched_getaffinity");
    unsigned n = (unsigned)CPU_COUNT(&all);
    CHECK(eng_host_cores() == n, "%u cores, the affinity allows %u",
          eng_host_cores(), n);
    int first = 0;
    while (first < CPU_SETSIZE && !CPU_ISSET(first, &all))
        first++;
    CPU_ZERO(&one);
    CPU_SET(first, &one);
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "pin to cpu %d", first);
    CHECK(eng_host_cores() == 1, "pinned to one core: %u", eng_host_cores());
    eng_host *h = eng_host_new(0);
    CHECK(h != NULL && eng_host_threads(h) == 1,
          "a default host backend pinned to one core: %u threads",
          h != NULL ? eng_host_threads(h) : 0);
    eng_host_free(h);
    CHECK(sched_setaffinity(0, sizeof all, &all) == 0, "unpinned");
    CHECK(eng_host_cores() == n, "unpinned: %u cores", eng_host_cores());
}

static const check_case cases[] = {
    {"thread_counts", thread_counts},
    {"cores_follow_affinity", cores_follow_affinity},
    {"float32_copies", float32_copies},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
