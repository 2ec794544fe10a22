/*
 * bench_engine.c - how fast the scan engine is, relative to a plain copy.
 *
 * For float32 tensors of 1M, 16M and 64M elements, scanned along the last,
 * a middle and the first axis (plus a few lines the engine must also be
 * fast on: one long line, decreasing and exclusive, many short lines), it
 * times eng_scan() and eng_copy() on the same device, alternating the
 * two so that drift in this noisy machine hits both alike, and reports:
 *
 *   engine GB/s   bytes read + written per second, median of the runs
 *   copy GB/s     the same for the device's plain copy kernel
 *   ratio         the median over runs of copy time / scan time
 *   copy-nt GB/s  a copy that writes with non-temporal stores, as the scan
 *                 kernels do for outputs larger than the device's cache
 *   ratio-nt      the median of copy-nt time / scan time
 *   host GB/s     the host backend (engine "host")
 *   numpy GB/s    numpy.cumsum with out=, where python3 and numpy exist
 *
 * A second table times strided layouts (DirectML's buffer tensors:
 * transposed, broadcast and padded, on either side) against the packed
 * scan of the same sizes and the copy; its worst ratio to packed is the
 * line `min ratio of strided to packed`, and the worst ratio to the copy of
 * the rows that transpose `min ratio to copy, rows that transpose`. Its
 * buffers come from tallyd's allocator (2 MiB pages where the kernel gives
 * them); --small-pages gives them 4 KiB pages instead.
 *
 * A third table times dynamic batching: 64 float32 jobs of 1K, 4K, 16K and
 * 64K elements each, run as 64 launches (eng_scan) and as one batched
 * launch (eng_scan_batch, what the scheduler does with compatible small
 * jobs), on the device and on the host backend: jobs per second each way,
 * and their ratio (64 launches' time / the batched launch's, median of
 * back-to-back pairs).
 *
 * The last lines give the minimum of each table that ran: `min ratio to
 * copy (16M and up): X.XX`, the smallest ratio to the plain copy over the
 * 16M and 64M rows, and `min ratio to copy (1M): Y.YY`, the same over the
 * 1M rows, with the streaming copy's before them; `min ratio of strided to
 * packed`; and `min batching speed-up (device, 4K)`. The scan and the
 * copies run out of place on 4 KiB aligned host memory, so on PoCL nothing
 * is copied to or from the device.
 *
 * A last table (alone with --serve) gives the engine's own time for the
 * tensors of bench-serve's shared-memory table: float32 [N], N = 64K, 1M
 * and 16M, out of place on page-aligned memory, as `engine N=... ms=...`
 * lines.
 *
 * usage: bench_engine [--quick] [--strided] [--small-pages] [--batch]
 *                     [--serve] [--packed] [--size LABEL] [--numpy PATH]
 *                     [--device SPEC] [--layout SPEC] [--json PATH]
 * (--strided, --batch, --packed: that table alone; --size 1M: the packed
 * table's rows of that size alone; --json PATH: the packed table's rows
 * also as JSON, one object a line, for make bench-report)
 * (--layout takes what tallyd's --layout does, e.g. "cpu,blk=16")
 */
#define _DEFAULT_SOURCE /* madvise */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sys/mman.h>

#include "buffer.h"
#include "engine.h"
#include "scan_cl.h"

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

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct {
    const char *label;
    int rank;
    uint64_t shape[3];
    int axis;
    bool reverse, exclusive;
} row;

static const row rows[] = {
    {"1M", 3, {64, 128, 128}, 2, false, false},
    {"1M", 3, {64, 128, 128}, 1, false, false},
    {"1M", 3, {64, 128, 128}, 0, false, false},
    {"16M", 3, {256, 256, 256}, 2, false, false},
    {"16M", 3, {256, 256, 256}, 1, false, false},
    {"16M", 3, {256, 256, 256}, 0, false, false},
    {"64M", 3, {256, 512, 512}, 2, false, false},
    {"64M", 3, {256, 512, 512}, 1, false, false},
    {"64M", 3, {256, 512, 512}, 0, false, false},
    {"64M", 1, {1u << 26}, 0, false, false},
    {"64M", 1, {1u << 26}, 0, true, false},
    {"64M", 1, {1u << 26}, 0, false, true},
    {"64M", 3, {256, 512, 512}, 1, true, true},
    {"16M", 2, {1u << 22, 4}, 1, false, false},
};

static void die(const char *what, const char *msg)
{
    fprintf(stderr, "bench_engine: %s: %s\n", what, msg);
    exit(1);
}

static double numpy_gbs(const char *script, const row *r)
{
    if (script == NULL || r->reverse || r->exclusive)
        return -1;
    char cmd[512], shape[96] = "";
    for (int d = 0; d < r->rank; d++)
        snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%llu",
                 d ? "," : "", (unsigned long long)r->shape[d]);
    snprintf(cmd, sizeof cmd, "python3 %s %s %d 2>/dev/null", script, shape,
             r->axis);
    FILE *p = popen(cmd, "r");
    if (p == NULL)
        return -1;
    double v = -1;
    if (fscanf(p, "%lf", &v) != 1)
        v = -1;
    pclose(p);
    return v;
}

/* Times one row on device buffers: the scan kernel against the copy
 * kernel, alternating; returns the median ratio copy time / scan time. */
static double resident_row(eng_cl_stream *s, const eng_cl_device *dev,
                           const eng_scan_desc *d, const float *in,
                           size_t bytes, bool quick)
{
    char msg[512];
    eng_lines l;
    if (eng_lines_from_desc(d, &l, msg, sizeof msg) != ENG_E_OK)
        die("lines", msg);
    cl_int err;
    cl_mem a =
        clCreateBuffer(dev->context, CL_MEM_READ_WRITE, bytes, NULL, &err);
    cl_mem b =
        err == CL_SUCCESS
            ? clCreateBuffer(dev->context, CL_MEM_READ_WRITE, bytes, NULL, &err)
            : NULL;
    if (err != CL_SUCCESS)
        die("device buffers", "clCreateBuffer failed");
    cl_command_queue q =
        clCreateCommandQueue(dev->context, dev->device, 0, &err);
    if (err != CL_SUCCESS
        || clEnqueueWriteBuffer(q, a, CL_TRUE, 0, bytes, in, 0, NULL, NULL)
               != CL_SUCCESS)
        die("device buffers", "cannot write the input");
    clReleaseCommandQueue(q);
    for (int w = 0; w < 3; w++)
        if (eng_cl_scan_buffers(s, &l, a, b, msg, sizeof msg) != ENG_E_OK
            || eng_cl_copy_buffers(s, a, b, bytes, false, msg, sizeof msg)
                   != ENG_E_OK)
            die("resident", msg);
    int reps = quick ? 5 : 41;
    double ts[64], tc[64], ratio[64];
    for (int k = 0; k < reps; k++) {
        double t0 = now();
        if (eng_cl_scan_buffers(s, &l, a, b, msg, sizeof msg) != ENG_E_OK)
            die("resident scan", msg);
        ts[k] = now() - t0;
        t0 = now();
        if (eng_cl_copy_buffers(s, a, b, bytes, false, msg, sizeof msg)
            != ENG_E_OK)
            die("resident copy", msg);
        tc[k] = now() - t0;
        ratio[k] = tc[k] / ts[k];
    }
    double gb = 2.0 * (double)bytes / 1e9;
    double rr = median(ratio, reps);
    printf("   on the device: scan %8.1f GB/s  copy %8.1f GB/s  ratio %5.2f\n",
           gb / median(ts, reps), gb / median(tc, reps), rr);
    clReleaseMemObject(a);
    clReleaseMemObject(b);
    return rr;
}

/* ------------------------------------------------------------------------
 * Strided layouts (DirectML's buffer tensors), float32 [4096, 4096]: each
 * row times eng_scan_strided() against eng_scan() on the packed tensor of
 * the same sizes and against the copy, alternating the three. GB/s counts
 * the elements read and written (4 bytes each way per element), whatever
 * the buffers' sizes.
 */
typedef struct {
    const char *label;
    uint64_t in_strides[2], out_strides[2]; /* 0,0: packed */
    int axis;
} strided_row;

#define SN 4096
static const strided_row srows[] = {
    {"transposed in", {1, SN}, {0, 0}, 0},
    {"transposed in", {1, SN}, {0, 0}, 1},
    {"transposed out", {0, 0}, {1, SN}, 0},
    {"transposed out", {0, 0}, {1, SN}, 1},
    {"broadcast rows", {0, 1}, {0, 0}, 0},
    {"broadcast rows", {0, 1}, {0, 0}, 1},
    {"broadcast cols", {1, 0}, {0, 0}, 0},
    {"broadcast cols", {1, 0}, {0, 0}, 1},
    {"padded rows", {SN + 64, 1}, {0, 0}, 0},
    {"padded rows", {SN + 64, 1}, {0, 0}, 1},
    {"padded both", {SN + 64, 1}, {SN + 32, 1}, 1},
};

static const uint64_t *strides_or_null(const uint64_t *s)
{
    return s[0] == 0 && s[1] == 0 ? NULL : s;
}

static size_t buffer_elems(const uint64_t *s)
{
    if (strides_or_null(s) == NULL)
        return (size_t)SN * SN;
    return (size_t)((SN - 1) * s[0] + (SN - 1) * s[1] + 1);
}

/* The strided table's buffers: tallyd's own allocator (eng_buffer_alloc:
 * 2 MiB aligned, transparent huge pages asked for), or with --small-pages
 * 4 KiB pages only, to show what page walks cost. */
static bool small_pages;

static void *table_alloc(size_t bytes)
{
    if (!small_pages)
        return eng_buffer_alloc(bytes);
    bytes = (bytes + 4095) / 4096 * 4096;
    void *p = aligned_alloc(4096, bytes);
    if (p != NULL)
        madvise(p, bytes, MADV_NOHUGEPAGE);
    return p;
}

static void table_free(void *p)
{
    if (small_pages)
        free(p);
    else
        eng_buffer_free(p);
}

static double strided_rows(eng_stream *ds, eng_stream *hs, bool quick,
                           double *min_copy)
{
    char msg[512];
    printf("\nstrided layouts, float32 %dx%d (DirectML buffer tensors, "
           "%s); vs packed = packed scan time / strided scan time\n",
           SN, SN,
           small_pages ? "4 KiB pages" : "tallyd's buffers, 2 MiB pages");
    printf("%-15s %-12s %-12s %-4s %8s %8s %8s %9s %8s %8s\n", "layout",
           "in strides", "out strides", "axis", "strided", "packed", "copy",
           "vs packed", "vs copy", "host");
    double min_ratio = 1e9;
    size_t n = (size_t)SN * SN, bytes = n * sizeof(float);
    for (size_t ri = 0; ri < sizeof srows / sizeof srows[0]; ri++) {
        const strided_row *r = &srows[ri];
        size_t ni = buffer_elems(r->in_strides),
               no = buffer_elems(r->out_strides);
        size_t big = ni > n ? ni : n;
        float *in = table_alloc(big * 4);
        float *out = table_alloc((no > n ? no : n) * 4);
        if (in == NULL || out == NULL)
            die("alloc", "out of memory");
        srand(1);
        for (size_t i = 0; i < big; i++)
            in[i] = (float)rand() / (float)RAND_MAX;
        memset(out, 0, no * 4);
        eng_scan_desc d = {
            .dtype = TX_FLOAT32, .rank = 2, .shape = {SN, SN}, .axis = r->axis};
        eng_view iv = {strides_or_null(r->in_strides), ni * 4},
                 ov = {strides_or_null(r->out_strides), no * 4};
        for (int w = 0; w < 2; w++)
            if (eng_scan_strided(ds, &d, &iv, in, &ov, out, msg, sizeof msg)
                    != ENG_E_OK
                || eng_scan(ds, &d, in, out, msg, sizeof msg) != ENG_E_OK
                || eng_copy(ds, in, out, bytes, false, msg, sizeof msg)
                       != ENG_E_OK)
                die("strided", msg);
        int reps = quick ? 3 : 15;
        double ts[64], tp[64], tc[64], th[16], rp[64], rc[64];
        for (int k = 0; k < reps; k++) {
            double t0 = now();
            eng_scan_strided(ds, &d, &iv, in, &ov, out, msg, sizeof msg);
            ts[k] = now() - t0;
            t0 = now();
            eng_scan(ds, &d, in, out, msg, sizeof msg);
            tp[k] = now() - t0;
            t0 = now();
            eng_copy(ds, in, out, bytes, false, msg, sizeof msg);
            tc[k] = now() - t0;
            rp[k] = tp[k] / ts[k];
            rc[k] = tc[k] / ts[k];
        }
        int hreps = quick ? 1 : 5;
        for (int k = 0; k < hreps; k++) {
            double t0 = now();
            if (eng_scan_strided(hs, &d, &iv, in, &ov, out, msg, sizeof msg)
                != ENG_E_OK)
                die("host strided", msg);
            th[k] = now() - t0;
        }
        double gb = 2.0 * (double)bytes / 1e9;
        double vp = median(rp, reps);
        char is[24], os[24];
        snprintf(is, sizeof is, "%s", "packed");
        snprintf(os, sizeof os, "%s", "packed");
        if (strides_or_null(r->in_strides) != NULL)
            snprintf(is, sizeof is, "%llu,%llu",
                     (unsigned long long)r->in_strides[0],
                     (unsigned long long)r->in_strides[1]);
        if (strides_or_null(r->out_strides) != NULL)
            snprintf(os, sizeof os, "%llu,%llu",
                     (unsigned long long)r->out_strides[0],
                     (unsigned long long)r->out_strides[1]);
        printf("%-15s %-12s %-12s %-4d %8.2f %8.2f %8.2f %9.2f %8.2f %8.2f\n",
               r->label, is, os, r->axis, gb / median(ts, reps),
               gb / median(tp, reps), gb / median(tc, reps), vp,
               median(rc, reps), gb / median(th, hreps));
        fflush(stdout);
        if (vp < min_ratio)
            min_ratio = vp;
        if (strncmp(r->label, "transposed", 10) == 0
            && median(rc, reps) < *min_copy)
            *min_copy = median(rc, reps);
        table_free(in);
        table_free(out);
    }
    return min_ratio;
}

/* ------------------------------------------------------------------------
 * Dynamic batching: 64 small jobs, one launch each or one for all.
 */
#define BATCH_JOBS 64

/* Times BATCH_JOBS jobs of n float32 elements on stream st, each way;
 * returns the median ratio and sets the jobs per second of each. */
static double batch_pair(eng_stream *st, uint64_t n, float **in, float **out,
                         bool quick, double *single_jps, double *batch_jps)
{
    char msg[512];
    eng_scan_desc d = {.dtype = TX_FLOAT32, .rank = 1, .shape = {n}};
    eng_lines lines;
    if (eng_lines_from_desc(&d, &lines, msg, sizeof msg) != ENG_E_OK)
        die("lines", msg);
    eng_part parts[BATCH_JOBS];
    for (int j = 0; j < BATCH_JOBS; j++)
        parts[j] = (eng_part){in[j], out[j], lines.outer};
    int reps = quick ? 3 : 15;
    double t1[32], tb[32], ratio[32];
    for (int k = -1; k < reps; k++) { /* k = -1: warm-up */
        double t0 = now();
        for (int j = 0; j < BATCH_JOBS; j++)
            if (eng_scan(st, &d, in[j], out[j], msg, sizeof msg) != ENG_E_OK)
                die("scan", msg);
        double a = now() - t0;
        eng_batch_times bt;
        t0 = now();
        if (eng_scan_batch(st, &lines, parts, BATCH_JOBS, &bt, msg, sizeof msg)
            != ENG_E_OK)
            die("batch", msg);
        double b = now() - t0;
        if (k >= 0) {
            t1[k] = a;
            tb[k] = b;
            ratio[k] = a / b;
        }
    }
    /* the batched answers are the sums (small integers: exact in any
     * order) */
    for (int j = 0; j < BATCH_JOBS; j++) {
        float sum = 0;
        for (uint64_t i = 0; i < n; i++) {
            sum += in[j][i];
            if (out[j][i] != sum)
                die("batch", "a batched answer differs from the sum");
        }
    }
    *single_jps = BATCH_JOBS / median(t1, reps);
    *batch_jps = BATCH_JOBS / median(tb, reps);
    return median(ratio, reps);
}

static double batch_rows(eng_stream *ds, eng_stream *hs, bool quick)
{
    static const uint64_t sizes[] = {1024, 4096, 16384, 65536};
    printf("\ndynamic batching: %d float32 jobs of n elements, as %d launches "
           "and as one batched launch;\njobs/s, and speed-up = %d launches' "
           "time / the batched one's (median of pairs)\n",
           BATCH_JOBS, BATCH_JOBS, BATCH_JOBS);
    printf("%-6s %12s %12s %8s %12s %12s %8s\n", "n", "device 1by1",
           "device batch", "speed-up", "host 1by1", "host batch", "speed-up");
    double min4k = -1;
    float *in[BATCH_JOBS], *out[BATCH_JOBS];
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint64_t n = sizes[si];
        size_t bytes = n * sizeof(float);
        srand(2);
        for (int j = 0; j < BATCH_JOBS; j++) {
            in[j] = aligned_alloc(4096, bytes);
            out[j] = aligned_alloc(4096, bytes);
            if (in[j] == NULL || out[j] == NULL)
                die("alloc", "out of memory");
            for (uint64_t i = 0; i < n; i++)
                in[j][i] = (float)(rand() % 16);
            memset(out[j], 0xff, bytes); /* poisoned */
        }
        double d1, db, h1, hb;
        double dr = batch_pair(ds, n, in, out, quick, &d1, &db);
        double hr = batch_pair(hs, n, in, out, quick, &h1, &hb);
        printf("%-6llu %12.0f %12.0f %8.2f %12.0f %12.0f %8.2f\n",
               (unsigned long long)n, d1, db, dr, h1, hb, hr);
        fflush(stdout);
        if (n == 4096)
            min4k = dr;
        for (int j = 0; j < BATCH_JOBS; j++) {
            free(in[j]);
            free(out[j]);
        }
    }
    return min4k;
}

/* The engine's own time for the tensors bench-serve's shared-memory
 * table sends (float32 [N], the default axis, out of place on page-aligned
 * memory, as a scan from one region into another runs): the median of
 * runs, in ms. Printed as `engine N=... ms=...` lines, which bench_serve.py
 * reads. */
static void serve_rows(eng_stream *ds, bool quick)
{
    static const uint64_t sizes[] = {65536, 1u << 20, 16u << 20};
    char msg[512];
    printf("\nthe engine's own time for bench-serve's shared-memory tensors "
           "(float32 [N], out of place, median)\n");
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        uint64_t n = sizes[si];
        size_t bytes = (size_t)n * sizeof(float);
        float *in = aligned_alloc(4096, bytes), *out = aligned_alloc(4096, bytes);
        if (in == NULL || out == NULL)
            die("alloc", "out of memory");
        for (uint64_t i = 0; i < n; i++)
            in[i] = (float)(i % 7);
        memset(out, 0, bytes);
        eng_scan_desc d = {.dtype = TX_FLOAT32, .rank = 1, .shape = {n}};
        double ts[41];
        int reps = quick ? 5 : n >= (16u << 20) ? 21 : 41;
        for (int k = -2; k < reps; k++) {
            double t0 = now();
            if (eng_scan(ds, &d, in, out, msg, sizeof msg) != ENG_E_OK)
                die("scan", msg);
            if (k >= 0)
                ts[k] = now() - t0;
        }
        printf("engine N=%" PRIu64 " ms=%.3f\n", n, median(ts, reps) * 1e3);
        free(in);
        free(out);
    }
}

static void quiet(void *user, const char *line)
{
    (void)user;
    (void)line;
}

int main(int argc, char **argv)
{
    const char *numpy_script = NULL, *device = NULL, *layout = NULL,
               *only_size = NULL;
    const char *json_path = NULL;
    bool quick = false, strided_only = false, batch_only = false,
         serve_only = false, packed_only = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--strided") == 0)
            strided_only = true;
        else if (strcmp(argv[i], "--small-pages") == 0)
            small_pages = true;
        else if (strcmp(argv[i], "--batch") == 0)
            batch_only = true;
        else if (strcmp(argv[i], "--serve") == 0)
            serve_only = true;
        else if (strcmp(argv[i], "--packed") == 0)
            packed_only = true;
        else if (strcmp(argv[i], "--json") == 0 && i + 1 < argc)
            json_path = argv[++i];
        else if (strcmp(argv[i], "--numpy") == 0 && i + 1 < argc)
            numpy_script = argv[++i];
        else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
            only_size = argv[++i];
        else if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device = argv[++i];
        else if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc)
            layout = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--quick] [--strided] [--small-pages] "
                    "[--batch] [--serve] [--packed] [--size LABEL] "
                    "[--numpy PATH] [--device SPEC] [--layout SPEC] "
                    "[--json PATH]\n",
                    argv[0]);
            return 2;
        }
    }

    char msg[512];
    eng_engine_options o;
    eng_engine_options_init(&o);
    o.device = device;
    o.layout = layout;
    o.log = quiet;
    eng_engine *dev, *host;
    eng_stream *ds, *hs;
    if (eng_engine_open(&o, &dev, msg, sizeof msg) != ENG_E_OK)
        die("device", msg);
    o.device = "host";
    o.layout = NULL;
    if (eng_engine_open(&o, &host, msg, sizeof msg) != ENG_E_OK)
        die("host", msg);
    if (eng_stream_open(dev, &ds, msg, sizeof msg) != ENG_E_OK
        || eng_stream_open(host, &hs, msg, sizeof msg) != ENG_E_OK)
        die("stream", msg);

    /* the OpenCL layer itself, for the kernels-only rows on a device with
     * memory of its own */
    eng_cl_device cl;
    eng_cl_programs progs;
    eng_cl_stream *kcs = NULL;
    bool none;
    if (eng_cl_device_open(device != NULL ? device : "auto", &cl, &none, msg,
                           sizeof msg)
        == ENG_E_OK) {
        eng_cl_layout L;
        if (!cl.unified && eng_cl_layout_for(&cl, layout, &L)) {
            eng_cl_programs_init(&progs, &cl, &L);
            kcs = eng_cl_stream_new(&progs, msg, sizeof msg);
            if (kcs == NULL)
                die("device stream", msg);
        }
        if (kcs == NULL)
            eng_cl_device_close(&cl);
    }

    bool packed = !strided_only && !batch_only && !serve_only;
    bool strided =
             !batch_only && !serve_only && !packed_only && only_size == NULL,
         batched =
             !strided_only && !serve_only && !packed_only && only_size == NULL;
    /* --json: the packed rows again, one JSON object a line, for
     * tools/perf_page.py's picture */
    FILE *json = NULL;
    if (json_path != NULL && (json = fopen(json_path, "w")) == NULL)
        die(json_path, strerror(errno));
    printf("device: %s\n", eng_engine_describe(dev));
    printf("host:   %s\n", eng_engine_describe(host));
    if (serve_only) {
        serve_rows(ds, quick);
        eng_stream_close(ds);
        eng_stream_close(hs);
        eng_engine_close(dev);
        eng_engine_close(host);
        return 0;
    }
    if (packed) {
        printf("float32, out of place; GB/s = (bytes read + bytes written) / "
               "s, median of runs;\nratio = copy time / scan time, median of "
               "back-to-back pairs\n\n");
        printf("%-5s %-20s %-4s %-9s %8s %8s %6s %8s %8s %8s %8s\n", "size",
               "shape", "axis", "mode", "engine", "copy", "ratio", "copy-nt",
               "ratio-nt", "host", "numpy");
    }

    double min_ratio = 1e9, min_ratio_nt = 1e9, min_resident = 1e9;
    double min_ratio_1m = 1e9;
    for (size_t ri = 0; ri < (packed ? sizeof rows / sizeof rows[0] : 0);
         ri++) {
        const row *r = &rows[ri];
        if (only_size != NULL && strcmp(r->label, only_size) != 0)
            continue;
        size_t n = 1;
        for (int d = 0; d < r->rank; d++)
            n *= r->shape[d];
        size_t bytes = n * sizeof(float);
        float *in = aligned_alloc(4096, bytes),
              *out = aligned_alloc(4096, bytes);
        if (in == NULL || out == NULL)
            die("alloc", "out of memory");
        srand(1);
        for (size_t i = 0; i < n; i++)
            in[i] = (float)rand() / (float)RAND_MAX;
        memset(out, 0, bytes);

        eng_scan_desc d = {.dtype = TX_FLOAT32,
                           .rank = r->rank,
                           .axis = r->axis,
                           .reverse = r->reverse,
                           .exclusive = r->exclusive};
        memcpy(d.shape, r->shape, sizeof r->shape);

        /* warm up, and size the run count to about two seconds per row */
        double t0 = now();
        for (int w = 0; w < 2; w++) {
            if (eng_scan(ds, &d, in, out, msg, sizeof msg) != ENG_E_OK)
                die("scan", msg);
            if (eng_copy(ds, in, out, bytes, false, msg, sizeof msg) != ENG_E_OK
                || eng_copy(ds, in, out, bytes, true, msg, sizeof msg)
                       != ENG_E_OK)
                die("copy", msg);
        }
        double per = (now() - t0) / 2;
        int reps = (int)(1.0 / per);
        reps = reps < 7 ? 7 : reps > 61 ? 61 : reps;
        if (quick)
            reps = 3;

        double ts[64], tc[64], tn[64], th[64], ratio[64], ratio_nt[64];
        for (int k = 0; k < reps; k++) {
            t0 = now();
            eng_scan(ds, &d, in, out, msg, sizeof msg);
            ts[k] = now() - t0;
            t0 = now();
            eng_copy(ds, in, out, bytes, false, msg, sizeof msg);
            tc[k] = now() - t0;
            t0 = now();
            eng_copy(ds, in, out, bytes, true, msg, sizeof msg);
            tn[k] = now() - t0;
            ratio[k] = tc[k] / ts[k];
            ratio_nt[k] = tn[k] / ts[k];
        }
        int hreps = reps < 9 ? reps : 9;
        for (int k = 0; k < hreps; k++) {
            t0 = now();
            if (eng_scan(hs, &d, in, out, msg, sizeof msg) != ENG_E_OK)
                die("host scan", msg);
            th[k] = now() - t0;
        }
        double gb = 2.0 * (double)bytes / 1e9;
        double es = gb / median(ts, reps), cs = gb / median(tc, reps);
        double rr = median(ratio, reps), hs_ = gb / median(th, hreps);
        double ns = gb / median(tn, reps), rn = median(ratio_nt, reps);
        double np = quick ? -1 : numpy_gbs(numpy_script, r);

        char shape[64] = "", mode[16];
        for (int k = 0; k < r->rank; k++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape),
                     "%s%llu", k ? "x" : "", (unsigned long long)r->shape[k]);
        snprintf(mode, sizeof mode, "%s%s",
                 r->reverse ? "rev" : (r->exclusive ? "" : "incl"),
                 r->exclusive ? (r->reverse ? "+excl" : "excl") : "");
        char npbuf[16];
        if (np < 0)
            snprintf(npbuf, sizeof npbuf, "-");
        else
            snprintf(npbuf, sizeof npbuf, "%.2f", np);
        printf("%-5s %-20s %-4d %-9s %8.2f %8.2f %6.2f %8.2f %8.2f %8.2f %8s\n",
               r->label, shape, r->axis, mode, es, cs, rr, ns, rn, hs_, npbuf);
        if (json != NULL)
            fprintf(json,
                    "{\"size\": \"%s\", \"shape\": \"%s\", \"axis\": %d, "
                    "\"mode\": \"%s\", \"engine_gbs\": %.3f, \"copy_gbs\": "
                    "%.3f, \"ratio\": %.3f, \"copy_nt_gbs\": %.3f, "
                    "\"ratio_nt\": %.3f, \"host_gbs\": %.3f, \"numpy_gbs\": "
                    "%.3f}\n",
                    r->label, shape, r->axis, mode, es, cs, rr, ns, rn, hs_, np);
        if (kcs != NULL) {
            double rd = resident_row(kcs, &cl, &d, in, bytes, quick);
            if (n >= (1u << 24) && rd < min_resident)
                min_resident = rd;
        }
        fflush(stdout);
        if (n >= (1u << 24) && rr < min_ratio)
            min_ratio = rr;
        if (n == (1u << 20) && rr < min_ratio_1m)
            min_ratio_1m = rr;
        if (n >= (1u << 24) && rn < min_ratio_nt)
            min_ratio_nt = rn;
        free(in);
        free(out);
    }
    double min_copy_t = 1e9;
    double min_strided =
        strided ? strided_rows(ds, hs, quick, &min_copy_t) : -1;
    double min_batch = batched ? batch_rows(ds, hs, quick) : -1;
    if (json != NULL)
        fclose(json);
    if (packed && !packed_only && only_size == NULL)
        serve_rows(ds, quick);
    eng_stream_close(ds);
    eng_stream_close(hs);
    eng_engine_close(dev);
    eng_engine_close(host);
    if (kcs != NULL) {
        eng_cl_stream_free(kcs);
        eng_cl_programs_free(&progs);
        eng_cl_device_close(&cl);
        if (packed)
            printf("min ratio to copy, on the device: %.2f\n", min_resident);
    }
    /* only the tables that ran */
    if (strided) {
        printf("min ratio of strided to packed: %.2f\n", min_strided);
        printf("min ratio to copy, rows that transpose: %.2f\n", min_copy_t);
    }
    if (batched)
        printf("min batching speed-up (device, 4K): %.2f\n", min_batch);
    if (packed) {
        /* with --size, only the classes of rows that ran */
        if (min_ratio_nt < 1e9)
            printf("min ratio to streaming copy: %.2f\n", min_ratio_nt);
        if (min_ratio < 1e9)
            printf("min ratio to copy (16M and up): %.2f\n", min_ratio);
        if (min_ratio_1m < 1e9)
            printf("min ratio to copy (1M): %.2f\n", min_ratio_1m);
    }
    return 0;
}
