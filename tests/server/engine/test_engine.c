/*
 * test_engine.c - the scan engine against the reference, on every backend.
 *
 * Backends: the host backend (1 and 3 threads) and the OpenCL device the
 * environment gives (TALLY_TEST_DEVICE, default "auto": PoCL's CPU device
 * on a machine without GPU) with four kernel layouts: the CPU and GPU
 * layouts, and each with tiny tiles so that small tensors already chain
 * many tiles through the look-back. These four keep every scan in the
 * kernels (kernels_only); a fifth, "cl-side", is the device as tallyd
 * opens it, where a CPU device hands the host backend's code the scans it
 * does faster (float32 up to the cache share, strided layouts that
 * transpose).
 *
 * Every result is compared with ref.c's naive scan: integers exactly,
 * floats within the bound of docs/design.md's accuracy section. Outputs are
 * poisoned first (ref_poison), so an element the engine leaves unwritten
 * fails. Inputs are random, from the printed seed.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "engine.h"
#include "ref.h"
#include "scan_cl.h"
#include "tx_half.h"

typedef struct {
    const char *name;
    const char *device; /* NULL: TALLY_TEST_DEVICE or auto */
    const char *layout;
    unsigned host_threads;
    bool kernels_only;
    eng_engine *e;
    eng_stream *s;
} backend;

static backend backends[] = {
    {"host1", "host", NULL, 1, false, NULL, NULL},
    {"host3", "host", NULL, 3, false, NULL, NULL},
    {"cl-cpu", NULL, "cpu", 0, true, NULL, NULL},
    {"cl-gpu", NULL, "gpu", 0, true, NULL, NULL},
    {"cl-cpu-tiny", NULL, "cpu,row_k=16,col_w=16,blk=2", 0, true, NULL, NULL},
    {"cl-gpu-tiny", NULL, "gpu,wg=8,row_k=8,col_w=8,blk=3", 0, true, NULL,
     NULL},
    {"cl-side", NULL, "cpu", 0, false, NULL, NULL},
};
#define CL_SIDE 6
#define NBACKENDS (sizeof backends / sizeof backends[0])

static void quiet(void *user, const char *line)
{
    (void)user;
    (void)line;
}

static const char *test_device(void)
{
    const char *d = getenv("TALLY_TEST_DEVICE");
    return d != NULL && d[0] != '\0' ? d : "auto";
}

/* Opens a backend on first use; aborts the program if it cannot, since
 * every later case would fail the same way. */
static backend *get_backend(size_t i)
{
    backend *b = &backends[i];
    if (b->s != NULL)
        return b;
    eng_engine_options o;
    eng_engine_options_init(&o);
    o.device = b->device != NULL ? b->device : test_device();
    o.layout = b->layout;
    o.warmup = false;
    o.host_threads = b->host_threads;
    o.kernels_only = b->kernels_only;
    o.log = quiet;
    char msg[512];
    if (eng_engine_open(&o, &b->e, msg, sizeof msg) != ENG_E_OK
        || eng_stream_open(b->e, &b->s, msg, sizeof msg) != ENG_E_OK) {
        fprintf(stderr, "cannot open backend %s: %s\n", b->name, msg);
        exit(2);
    }
    if (b->device == NULL && eng_engine_is_host(b->e)) {
        fprintf(stderr,
                "backend %s: no OpenCL device (%s); these tests "
                "need one (install pocl-opencl-icd)\n",
                b->name, eng_engine_describe(b->e));
        exit(2);
    }
    return b;
}

/* Runs one scan on backend b and checks it; in place when asked. Returns
 * the number of bad elements. */
static size_t run_case(backend *b, const eng_scan_desc *d, const void *in,
                       bool in_place, const char *label)
{
    ref_result r;
    ref_scan(d, in, &r);
    size_t bytes = r.l.bytes;
    void *out = check_alloc(bytes);
    if (in_place)
        memcpy(out, in, bytes);
    else
        ref_poison(&r, out);
    char msg[512] = "";
    size_t bad = 0;
    char what[256];
    snprintf(what, sizeof what, "%s %s %s axis %lld rank %d%s%s%s", b->name,
             label, tx_dtype_name(d->dtype), (long long)d->axis, d->rank,
             d->reverse ? " reverse" : "", d->exclusive ? " exclusive" : "",
             in_place ? " in-place" : "");
    if (getenv("TALLY_TEST_VERBOSE") != NULL) {
        fprintf(stderr, "%s shape", what);
        for (int k = 0; k < d->rank; k++)
            fprintf(stderr, " %llu", (unsigned long long)d->shape[k]);
        fprintf(stderr, "\n");
    }
    eng_err e = eng_scan(b->s, d, in_place ? out : in, out, msg, sizeof msg);
    if (e != ENG_E_OK) {
        CHECK(0, "%s: scan failed: %s: %s", what, eng_err_name(e), msg);
        bad = 1;
    } else {
        bad = ref_compare(&r, out, what);
        if (bad) {
            char shape[128] = "";
            for (int k = 0; k < d->rank; k++)
                snprintf(shape + strlen(shape), sizeof shape - strlen(shape),
                         "%s%llu", k ? "x" : "",
                         (unsigned long long)d->shape[k]);
            CHECK(0, "%s shape %s: %zu of %llu elements wrong", what, shape,
                  bad, (unsigned long long)r.l.elements);
        }
    }
    free(out);
    ref_free(&r);
    return bad;
}

/* ------------------------------------------------------------------------
 * The eight examples of the two operator documents, for every dtype (all
 * of their values fit even int8) on every backend.
 */
typedef struct {
    const char *doc;
    int rank;
    uint64_t shape[4];
    int axis;
    bool reverse, exclusive;
    double in[12], out[12];
} golden;

/* clang-format off */
#define DML_IN {2, 1, 3, 5, 3, 8, 7, 3, 9, 6, 2, 4}
static const golden goldens[] = {
    {"DirectML example 1", 4, {1, 1, 3, 4}, 3, false, false, DML_IN,
     {2, 3, 6, 11, 3, 11, 18, 21, 9, 15, 17, 21}},
    {"DirectML example 2", 4, {1, 1, 3, 4}, 3, false, true, DML_IN,
     {0, 2, 3, 6, 0, 3, 11, 18, 0, 9, 15, 17}},
    {"DirectML example 3", 4, {1, 1, 3, 4}, 3, true, false, DML_IN,
     {11, 9, 8, 5, 21, 18, 10, 3, 21, 12, 6, 4}},
    {"DirectML example 4", 4, {1, 1, 3, 4}, 2, false, false, DML_IN,
     {2, 1, 3, 5, 5, 9, 10, 8, 14, 15, 12, 12}},
    {"OpenVINO example 1", 1, {5}, 0, false, false, {1, 2, 3, 4, 5},
     {1, 3, 6, 10, 15}},
    {"OpenVINO example 2", 1, {5}, 0, false, true, {1, 2, 3, 4, 5},
     {0, 1, 3, 6, 10}},
    {"OpenVINO example 3", 1, {5}, 0, true, false, {1, 2, 3, 4, 5},
     {15, 14, 12, 9, 5}},
    {"OpenVINO example 4", 1, {5}, 0, true, true, {1, 2, 3, 4, 5},
     {14, 12, 9, 5, 0}},
};
/* clang-format on */

static void golden_on(size_t bi)
{
    backend *b = get_backend(bi);
    for (size_t g = 0; g < sizeof goldens / sizeof goldens[0]; g++) {
        const golden *G = &goldens[g];
        size_t n = 1;
        for (int k = 0; k < G->rank; k++)
            n *= G->shape[k];
        for (int t = 0; t < TX_NDTYPES; t++) {
            eng_scan_desc d = {.dtype = (tx_dtype)t,
                               .rank = G->rank,
                               .axis = G->axis,
                               .reverse = G->reverse,
                               .exclusive = G->exclusive};
            memcpy(d.shape, G->shape, sizeof G->shape);
            unsigned char in[96], out[96];
            for (size_t i = 0; i < n; i++) {
                if (ref_is_float(d.dtype))
                    ref_set_f(d.dtype, in, i, G->in[i]);
                else
                    ref_set_u(d.dtype, in, i, (uint64_t)G->in[i]);
            }
            memset(out, 0xa5, sizeof out);
            char msg[256];
            eng_err e = eng_scan(b->s, &d, in, out, msg, sizeof msg);
            CHECK(e == ENG_E_OK, "%s %s %s: %s", b->name, G->doc,
                  tx_dtype_name(d.dtype), msg);
            for (size_t i = 0; i < n && e == ENG_E_OK; i++) {
                long double y = ref_is_float(d.dtype)
                                    ? ref_get_f(d.dtype, out, i)
                                    : (long double)ref_get_u(d.dtype, out, i);
                CHECK(y == G->out[i], "%s %s %s: element %zu is %Lg, want %g",
                      b->name, G->doc, tx_dtype_name(d.dtype), i, y, G->out[i]);
            }
        }
    }
}

/* ------------------------------------------------------------------------
 * Every dtype x rank 1..8 x every axis (as a positive and as a negative
 * number) x direction x exclusive, each on a fresh random shape and fresh
 * random data, half of them in place.
 */
static const uint64_t axis_sizes[] = {1,  2,   3,   4,   5,   7,   8,  9,
                                      15, 16,  17,  31,  32,  33,  63, 64,
                                      65, 100, 127, 128, 129, 255, 257};
static const uint64_t other_sizes[] = {1, 1, 2, 2, 3, 4, 5, 7, 8, 9, 16, 17};

static void random_shape(eng_scan_desc *d, int axis, uint64_t budget)
{
    uint64_t total = 1;
    for (int k = 0; k < d->rank; k++) {
        const uint64_t *set = k == axis ? axis_sizes : other_sizes;
        size_t nset = k == axis ? sizeof axis_sizes / sizeof axis_sizes[0]
                                : sizeof other_sizes / sizeof other_sizes[0];
        uint64_t s = set[check_below(nset)];
        while (s > 1 && total * s > budget)
            s /= 2;
        d->shape[k] = s;
        total *= s;
    }
}

static void every_axis_on(size_t bi)
{
    backend *b = get_backend(bi);
    unsigned long cases = 0;
    for (int t = 0; t < TX_NDTYPES; t++)
        for (int rank = 1; rank <= 8; rank++)
            for (int axis = 0; axis < rank; axis++)
                for (int neg = 0; neg < 2; neg++)
                    for (int mode = 0; mode < 4; mode++) {
                        eng_scan_desc d = {.dtype = (tx_dtype)t,
                                           .rank = rank,
                                           .axis = neg ? axis - rank : axis,
                                           .reverse = mode & 1,
                                           .exclusive = mode >> 1};
                        random_shape(&d, axis, 1500);
                        size_t count = 1;
                        for (int k = 0; k < rank; k++)
                            count *= d.shape[k];
                        void *in = check_alloc(count * 8);
                        ref_random(d.dtype, in, count, check_below(4) == 0);
                        run_case(b, &d, in, check_below(2), "every-axis");
                        free(in);
                        cases++;
                    }
    CHECK(cases == 12ul * 36 * 2 * 4, "ran %lu cases", cases);
}

/* ------------------------------------------------------------------------
 * Strided layouts (DirectML's buffer tensors): random descriptors in every
 * dtype and rank 1 to 8 with permuted, padded and broadcast input strides
 * and output layouts of their own, half of them in place. The reference
 * is the packed scan of the gathered input, and the check gathers the
 * output back; output bytes that no element addresses must keep their
 * 0x5a fill.
 */

/* Random strides: the dimensions in a random order, each with a little
 * padding now and then, and (inputs only) a broadcast dimension. */
static void random_strides(const eng_scan_desc *d, bool input,
                           uint64_t *strides)
{
    int perm[ENG_MAX_RANK];
    for (int k = 0; k < d->rank; k++) {
        int j = (int)check_below((uint64_t)k + 1);
        perm[k] = perm[j];
        perm[j] = k;
    }
    uint64_t step = 1;
    for (int i = 0; i < d->rank; i++) {
        int k = perm[i];
        if (input && check_below(5) == 0) {
            strides[k] = 0;
            continue;
        }
        strides[k] = step;
        step = step * d->shape[k] + (check_below(3) == 0 ? check_below(4) : 0);
    }
}

/* The element offset of packed index i under strides. */
static uint64_t strided_offset(const eng_scan_desc *d, const uint64_t *strides,
                               uint64_t i)
{
    uint64_t off = 0;
    for (int k = d->rank - 1; k >= 0; k--) {
        off += i % d->shape[k] * strides[k];
        i /= d->shape[k];
    }
    return off;
}

static uint64_t span_of(const eng_scan_desc *d, const uint64_t *strides)
{
    uint64_t last = 0, count = 1;
    for (int k = 0; k < d->rank; k++) {
        last += (d->shape[k] - 1) * strides[k];
        count *= d->shape[k];
    }
    return count ? last + 1 : 0;
}

/* One strided case on backend b (NULL: eng_scan_strided_inline), or with a
 * forced plan on stream cl when cl is not NULL. Returns bad elements. */
static size_t run_strided(backend *b, eng_cl_stream *cl, int chained,
                          const eng_scan_desc *d, const uint64_t *is,
                          const uint64_t *os, bool in_place, const char *label)
{
    size_t size = tx_dtype_size(d->dtype);
    uint64_t count = 1;
    for (int k = 0; k < d->rank; k++)
        count *= d->shape[k];
    uint64_t in_span = span_of(d, is), out_span = span_of(d, os);
    size_t in_bytes = (size_t)in_span * size + check_below(9);
    size_t out_bytes = (size_t)out_span * size + check_below(9);
    if (in_place)
        out_bytes = in_bytes = in_bytes > out_bytes ? in_bytes : out_bytes;
    unsigned char *in = check_alloc(in_bytes + 8);
    unsigned char *packed = check_alloc((size_t)count * size + 8);
    ref_random(d->dtype, in, in_bytes / size, check_below(4) == 0);
    for (uint64_t i = 0; i < count; i++)
        memcpy(packed + i * size, in + strided_offset(d, is, i) * size, size);
    ref_result r;
    ref_scan(d, packed, &r);

    unsigned char *out = in;
    unsigned char *before = check_alloc(out_bytes + 8);
    if (!in_place) {
        out = check_alloc(out_bytes + 8);
        memset(out, 0x5a, out_bytes);
        ref_poison(&r, packed);
        for (uint64_t i = 0; i < count; i++)
            memcpy(out + strided_offset(d, os, i) * size, packed + i * size,
                   size);
    }
    memcpy(before, out, out_bytes);

    char what[256], msg[512] = "";
    snprintf(what, sizeof what, "%s %s %s axis %lld rank %d%s%s%s",
             b != NULL ? b->name : "inline", label, tx_dtype_name(d->dtype),
             (long long)d->axis, d->rank, d->reverse ? " reverse" : "",
             d->exclusive ? " exclusive" : "", in_place ? " in-place" : "");
    eng_view iv = {is, in_bytes}, ov = {os, out_bytes};
    eng_err e;
    if (cl != NULL) {
        eng_strided v;
        bool pk;
        e = eng_strided_from_desc(d, &iv, &ov, &v, &pk, msg, sizeof msg);
        if (e == ENG_E_OK && pk)
            e = eng_cl_scan(cl, &v.l, in, out, msg, sizeof msg);
        else if (e == ENG_E_OK) {
            eng_cl_plan p;
            eng_cl_plan_strided_force(&v, eng_cl_stream_layout(cl), chained,
                                      1 + check_below(5), &p);
            e = eng_cl_scan_strided_plan(cl, &v, &p, in, out, msg, sizeof msg);
        }
    } else if (b != NULL) {
        e = eng_scan_strided(b->s, d, &iv, in, &ov, out, msg, sizeof msg);
    } else {
        e = eng_scan_strided_inline(d, &iv, in, &ov, out, msg, sizeof msg);
    }
    size_t bad = 0;
    if (e != ENG_E_OK) {
        CHECK(0, "%s: %s: %s", what, eng_err_name(e), msg);
        bad = 1;
    } else {
        for (uint64_t i = 0; i < count; i++)
            memcpy(packed + i * size, out + strided_offset(d, os, i) * size,
                   size);
        bad = ref_compare(&r, packed, what);
        /* every byte that no element addresses is as it was */
        unsigned char *hit = calloc(out_bytes + 1, 1);
        for (uint64_t i = 0; i < count; i++)
            memset(hit + strided_offset(d, os, i) * size, 1, size);
        size_t moved = 0;
        for (size_t k = 0; k < out_bytes; k++)
            moved += !hit[k] && out[k] != before[k];
        free(hit);
        CHECK(moved == 0, "%s: %zu bytes outside the elements changed", what,
              moved);
        bad += moved;
    }
    if (bad) {
        fprintf(stderr, "  %s: shape/in/out strides:", what);
        for (int k = 0; k < d->rank; k++)
            fprintf(stderr, " %llu/%llu/%llu", (unsigned long long)d->shape[k],
                    (unsigned long long)is[k], (unsigned long long)os[k]);
        fprintf(stderr, "\n");
    }
    ref_free(&r);
    if (out != in)
        free(out);
    free(in);
    free(before);
    free(packed);
    return bad;
}

/* A 2-D case where one side runs along the axis (transposed, or lines
 * contiguous in memory): the kernels' 8 x 8 blocked walk, with leftover
 * rows and columns around its blocks. */
static void transposed_case(eng_scan_desc *d, uint64_t *is, uint64_t *os,
                            bool *in_place)
{
    static const uint64_t sizes[] = {8, 9, 15, 16, 17, 24, 33, 70};
    d->dtype = (tx_dtype)check_below(TX_NDTYPES);
    d->rank = 2;
    d->shape[0] = sizes[check_below(8)];
    d->shape[1] = sizes[check_below(8)];
    d->axis = (int64_t)check_below(2);
    d->reverse = check_below(2);
    d->exclusive = check_below(2);
    uint64_t pad = check_below(2) * check_below(5);
    uint64_t col[2] = {1, d->shape[0] + pad}, row[2] = {d->shape[1] + pad, 1};
    bool in_col = check_below(2), out_col = check_below(2);
    memcpy(is, in_col ? col : row, sizeof col);
    memcpy(os, out_col ? col : row, sizeof col);
    if (check_below(4) == 0) /* a broadcast input dimension */
        is[check_below(2)] = 0;
    *in_place = false;
}

/* A random strided case: *in_place tells whether it is one. */
static void random_strided_case(eng_scan_desc *d, uint64_t *is, uint64_t *os,
                                bool *in_place)
{
    if (check_below(3) == 0) {
        transposed_case(d, is, os, in_place);
        return;
    }
    d->dtype = (tx_dtype)check_below(TX_NDTYPES);
    d->rank = 1 + (int)check_below(8);
    int axis = (int)check_below((uint64_t)d->rank);
    d->axis = check_below(2) ? axis : axis - d->rank;
    d->reverse = check_below(2);
    d->exclusive = check_below(2);
    random_shape(d, axis, 600);
    random_strides(d, true, is);
    random_strides(d, false, os);
    *in_place = check_below(4) == 0;
    if (*in_place) /* in place: one layout, which must not overlap */
        memcpy(is, os, sizeof *os * (size_t)d->rank);
}

static void strided_on(size_t bi)
{
    backend *b = bi < NBACKENDS ? get_backend(bi) : NULL;
    size_t bad = 0;
    for (int c = 0; c < 240; c++) {
        eng_scan_desc d;
        memset(&d, 0, sizeof d);
        uint64_t is[ENG_MAX_RANK], os[ENG_MAX_RANK];
        bool in_place;
        random_strided_case(&d, is, os, &in_place);
        bad += run_strided(b, NULL, 0, &d, is, os, in_place, "strided") != 0;
    }
    CHECK(bad == 0, "%zu strided cases wrong", bad);
}

/* float32 layouts that transpose, sized for the host's register tiles
 * (tile_host.c): 16-row and 8- or 16-column tiles with rows and columns
 * left over, blocks of 256 columns and the rows after them, outputs large
 * enough to be streamed, aligned (the buffers are) and not (odd strides),
 * and lines long enough to be cut into chunks, in every mode. */
static void strided_tiles_on(size_t bi)
{
    static const uint64_t shapes[][2] = {
        {16, 8},   {16, 16},  {17, 9},   {33, 40},  {48, 31}, {300, 270},
        {257, 520}, {4099, 24}, {24, 4099}, {1024, 64}, {64, 1024},
    };
    backend *b = bi < NBACKENDS ? get_backend(bi) : NULL;
    size_t bad = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int mode = 0; mode < 4; mode++) {
            eng_scan_desc d = {.dtype = TX_FLOAT32,
                               .rank = 2,
                               .shape = {shapes[si][0], shapes[si][1]},
                               .axis = (int64_t)check_below(2),
                               .reverse = mode & 1,
                               .exclusive = (mode >> 1) & 1};
            uint64_t pad = check_below(3) == 0 ? check_below(9) : 0;
            uint64_t col[2] = {1, d.shape[0] + pad},
                     row[2] = {d.shape[1] + pad, 1};
            uint64_t is[ENG_MAX_RANK], os[ENG_MAX_RANK];
            bool in_col = check_below(2);
            memcpy(is, in_col ? col : row, sizeof col);
            memcpy(os, in_col ? row : col, sizeof col);
            bad += run_strided(b, NULL, 0, &d, is, os, false, "tiles") != 0;
        }
    /* lines contiguous on both sides (padded rows), which the host scans
     * a whole vector at a time; the first is large enough to stream */
    static const uint64_t lines[][2] = {{1100, 1001}, {37, 45}, {5, 13}};
    for (size_t si = 0; si < sizeof lines / sizeof lines[0]; si++)
        for (int mode = 0; mode < 4; mode++) {
            eng_scan_desc d = {.dtype = TX_FLOAT32,
                               .rank = 2,
                               .shape = {lines[si][0], lines[si][1]},
                               .axis = 1,
                               .reverse = mode & 1,
                               .exclusive = (mode >> 1) & 1};
            uint64_t is[ENG_MAX_RANK] = {d.shape[1] + check_below(40), 1},
                     os[ENG_MAX_RANK] = {d.shape[1] + check_below(40), 1};
            bad += run_strided(b, NULL, 0, &d, is, os, false, "lines") != 0;
        }
    CHECK(bad == 0, "%zu transposing float32 cases wrong", bad);
}

static void strided_tiles_host1(void)
{
    strided_tiles_on(0);
}
static void strided_tiles_host3(void)
{
    strided_tiles_on(1);
}
static void strided_tiles_cl_side(void)
{
    strided_tiles_on(CL_SIDE);
}
static void strided_tiles_inline(void)
{
    strided_tiles_on(NBACKENDS);
}

static void strided_inline(void)
{
    strided_on(NBACKENDS);
}

/* The two strided kernels forced on every shape, on the tiny layouts. */
static void strided_kernels(void)
{
    /* the tiny layouts the backends use (their programs are built by
     * now), and one whose look-backs walk back to each line's start */
    static const char *layouts[] = {"cpu,row_k=16,col_w=16,blk=2",
                                    "gpu,wg=8,row_k=8,col_w=8,blk=3",
                                    "cpu,row_k=8,col_w=8,blk=2,lazy=1"};
    char msg[512];
    eng_cl_device dev;
    bool none;
    if (eng_cl_device_open(test_device(), &dev, &none, msg, sizeof msg)
        != ENG_E_OK) {
        CHECK(0, "no OpenCL device: %s", msg);
        return;
    }
    for (size_t li = 0; li < sizeof layouts / sizeof layouts[0]; li++) {
        eng_cl_layout L;
        CHECK(eng_cl_layout_for(&dev, layouts[li], &L), "layout %s",
              layouts[li]);
        eng_cl_programs progs;
        eng_cl_programs_init(&progs, &dev, &L);
        eng_cl_stream *s = eng_cl_stream_new(&progs, msg, sizeof msg);
        CHECK(s != NULL, "stream: %s", msg);
        for (int c = 0; c < 80 && s != NULL; c++) {
            eng_scan_desc d;
            memset(&d, 0, sizeof d);
            uint64_t is[ENG_MAX_RANK], os[ENG_MAX_RANK];
            bool in_place;
            random_strided_case(&d, is, os, &in_place);
            char label[96];
            int chained = (int)check_below(2);
            snprintf(label, sizeof label, "%s strided_%s", layouts[li],
                     chained ? "chained" : "direct");
            run_strided(NULL, s, chained, &d, is, os, in_place, label);
        }
        eng_cl_stream_free(s);
        eng_cl_programs_free(&progs);
    }
    eng_cl_device_close(&dev);
}

/* The rules of eng_scan_strided: each refused with ENG_E_SHAPE and a
 * message, and nothing written. */
static void strided_errors(void)
{
    backend *b = get_backend(0);
    eng_scan_desc d = {.dtype = TX_FLOAT32, .rank = 2, .shape = {3, 4}};
    float in[32] = {0}, out[32];
    char msg[256];
    static const uint64_t packed[2] = {4, 1}, overlap[2] = {1, 1},
                          broadcast[2] = {0, 1}, transposed[2] = {1, 3};
    struct {
        const char *what;
        const uint64_t *is, *os;
        size_t in_bytes, out_bytes;
        bool in_place;
        const char *says;
    } cases[] = {
        {"input buffer too small", packed, packed, 11 * 4, 128, false,
         "input strides address 48 bytes"},
        {"output buffer too small", packed, transposed, 128, 47, false,
         "output strides address 48 bytes"},
        {"output overlaps", packed, overlap, 128, 128, false, "share"},
        {"output broadcasts", packed, broadcast, 128, 128, false, "share"},
        {"in place, two layouts", packed, transposed, 128, 128, true,
         "the same"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        for (int k = 0; k < 32; k++)
            out[k] = (float)k;
        float *o = cases[c].in_place ? in : out;
        eng_view iv = {cases[c].is, cases[c].in_bytes},
                 ov = {cases[c].os, cases[c].out_bytes};
        msg[0] = '\0';
        eng_err e =
            eng_scan_strided(b->s, &d, &iv, in, &ov, o, msg, sizeof msg);
        CHECK(e == ENG_E_SHAPE, "%s: got %s", cases[c].what, eng_err_name(e));
        CHECK(strstr(msg, cases[c].says) != NULL, "%s: message \"%s\"",
              cases[c].what, msg);
        bool same = true;
        for (int k = 0; k < 32; k++)
            same = same && out[k] == (float)k && in[k] == 0;
        CHECK(same, "%s: a buffer was written", cases[c].what);
    }
    /* a broadcast input is fine, and packed-equivalent layouts (NHWC
     * described as NCHW on both sides) take the packed path */
    eng_view iv = {broadcast, 16}, ov = {NULL, 48};
    for (int k = 0; k < 4; k++)
        in[k] = (float)(k + 1);
    CHECK(eng_scan_strided(b->s, &d, &iv, in, &ov, out, msg, sizeof msg)
              == ENG_E_OK,
          "broadcast input: %s", msg);
    CHECK(out[0] == 1 && out[4] == 2 && out[8] == 3 && out[11] == 12,
          "broadcast input scanned along axis 0: %g %g %g %g", out[0], out[4],
          out[8], out[11]);
    eng_scan_desc nchw = {
        .dtype = TX_FLOAT32, .rank = 4, .shape = {2, 3, 4, 5}, .axis = 1};
    static const uint64_t nhwc[4] = {60, 1, 15, 3};
    eng_view a = {nhwc, 480}, bview = {nhwc, 480};
    eng_strided v;
    bool pk = false;
    CHECK(eng_strided_from_desc(&nchw, &a, &bview, &v, &pk, msg, sizeof msg)
                  == ENG_E_OK
              && pk && v.l.outer == 40 && v.l.n == 3 && v.l.inner == 1
              && v.l.elements == 120,
          "NHWC as NCHW, axis C: packed %d (%llu, %llu, %llu)", pk,
          (unsigned long long)v.l.outer, (unsigned long long)v.l.n,
          (unsigned long long)v.l.inner);
}

/* ------------------------------------------------------------------------
 * Sizes around vector, block, tile and work-group boundaries, and sizes
 * that need many tiles, for a few dtypes in every mode.
 */
static const uint64_t line_lengths[] = {1,
                                        2,
                                        3,
                                        4,
                                        5,
                                        7,
                                        8,
                                        9,
                                        15,
                                        16,
                                        17,
                                        63,
                                        64,
                                        65,
                                        127,
                                        128,
                                        129,
                                        1023,
                                        1024,
                                        1025,
                                        4095,
                                        4096,
                                        4097,
                                        8191,
                                        8193,
                                        16383,
                                        16384,
                                        16385,
                                        32767,
                                        32769,
                                        3 * 16384 + 5,
                                        100003,
                                        131071,
                                        131072,
                                        131073,
                                        2 * 131072 + 9};
static const uint64_t inners[] = {1,   2,    3,    7,    8,    9,   15,  16,
                                  17,  63,   64,   65,   127,  129, 511, 512,
                                  513, 1023, 1025, 4095, 4096, 4097};

static void boundaries_on(size_t bi)
{
    backend *b = get_backend(bi);
    static const tx_dtype types[] = {TX_FLOAT32, TX_INT32,   TX_UINT8,
                                     TX_FLOAT64, TX_FLOAT16, TX_INT64};
    size_t ntypes = sizeof types / sizeof types[0];
    /* lines of every length, one to a few of them */
    for (size_t i = 0; i < sizeof line_lengths / sizeof line_lengths[0]; i++) {
        uint64_t n = line_lengths[i];
        uint64_t lines = n > 20000 ? 1 + check_below(3) : 1 + check_below(7);
        eng_scan_desc d = {.dtype = types[check_below(ntypes)],
                           .rank = 2,
                           .shape = {lines, n},
                           .axis = 1};
        int mode = (int)check_below(4);
        d.reverse = mode & 1;
        d.exclusive = mode >> 1;
        void *in = check_alloc((size_t)(lines * n) * 8);
        ref_random(d.dtype, in, (size_t)(lines * n), false);
        run_case(b, &d, in, check_below(2), "line-length");
        free(in);
    }
    /* columns of every width, short and long */
    for (size_t i = 0; i < sizeof inners / sizeof inners[0]; i++) {
        uint64_t inner = inners[i];
        uint64_t n = 1 + check_below(inner > 1000 ? 40 : 300);
        uint64_t outer = 1 + check_below(3);
        if (check_below(3) == 0)
            n = 3000 + check_below(3000); /* long columns: chained */
        while (outer * n * inner > 600000)
            n = n / 2 + 1;
        eng_scan_desc d = {.dtype = types[check_below(ntypes)],
                           .rank = 3,
                           .shape = {outer, n, inner},
                           .axis = 1};
        int mode = (int)check_below(4);
        d.reverse = mode & 1;
        d.exclusive = mode >> 1;
        size_t count = (size_t)(outer * n * inner);
        void *in = check_alloc(count * 8);
        ref_random(d.dtype, in, count, false);
        run_case(b, &d, in, check_below(2), "column-width");
        free(in);
    }
}

/* ------------------------------------------------------------------------
 * NaN and infinities propagate as IEEE arithmetic says.
 */
static void special_values_on(size_t bi)
{
    backend *b = get_backend(bi);
    static const struct {
        double in[6];
        double incl[6];
    } cases[] = {
        {{1, INFINITY, 2, 3, 4, 5},
         {1, INFINITY, INFINITY, INFINITY, INFINITY, INFINITY}},
        {{1, INFINITY, -INFINITY, 3, 4, 5}, {1, INFINITY, NAN, NAN, NAN, NAN}},
        {{NAN, 1, 2, 3, 4, 5}, {NAN, NAN, NAN, NAN, NAN, NAN}},
        {{1, 2, -INFINITY, 3, 4, 5},
         {1, 3, -INFINITY, -INFINITY, -INFINITY, -INFINITY}},
    };
    static const tx_dtype types[] = {TX_FLOAT16, TX_BFLOAT16, TX_FLOAT32,
                                     TX_FLOAT64};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (size_t t = 0; t < 4; t++)
            for (int layout = 0; layout < 2; layout++) {
                /* as one line (rows kernels) and as a column (cols kernels) */
                eng_scan_desc d = {.dtype = types[t],
                                   .rank = 2,
                                   .shape = {layout ? 6 : 1, layout ? 1 : 6},
                                   .axis = layout ? 0 : 1};
                unsigned char in[48], out[48];
                for (int i = 0; i < 6; i++)
                    ref_set_f(d.dtype, in, (size_t)i, cases[c].in[i]);
                char msg[256];
                eng_err e = eng_scan(b->s, &d, in, out, msg, sizeof msg);
                CHECK(e == ENG_E_OK, "%s: %s", b->name, msg);
                for (int i = 0; i < 6; i++) {
                    long double y = ref_get_f(d.dtype, out, (size_t)i);
                    double want = cases[c].incl[i];
                    bool ok = isnan(want) ? isnan(y) : y == want;
                    CHECK(ok, "%s %s case %zu element %d: got %Lg, want %g",
                          b->name, tx_dtype_name(d.dtype), c, i, y, want);
                }
            }
}

/* ------------------------------------------------------------------------
 * Zero-size dimensions give an empty result without touching anything.
 */
static void empty_on(size_t bi)
{
    backend *b = get_backend(bi);
    eng_scan_desc d = {
        .dtype = TX_FLOAT32, .rank = 3, .shape = {4, 0, 5}, .axis = 1};
    float guard = 42;
    char msg[128];
    for (int axis = -3; axis < 3; axis++) {
        d.axis = axis;
        eng_err e = eng_scan(b->s, &d, &guard, &guard, msg, sizeof msg);
        CHECK(e == ENG_E_OK && guard == 42, "%s: empty tensor, axis %d: %d",
              b->name, axis, e);
    }
}

/* ------------------------------------------------------------------------
 * Every float16 and bfloat16 bit pattern survives a scan of length 1 (an
 * identity) through the engine's conversions, in lines and in columns.
 */
static void half_patterns_on(size_t bi)
{
    backend *b = get_backend(bi);
    uint16_t *in = check_alloc(65536 * 2), *out = check_alloc(65536 * 2);
    for (uint32_t i = 0; i < 65536; i++)
        in[i] = (uint16_t)i;
    for (int t = 0; t < 2; t++)
        for (int cols = 0; cols < 2; cols++) {
            tx_dtype dt = t ? TX_BFLOAT16 : TX_FLOAT16;
            eng_scan_desc d = {.dtype = dt,
                               .rank = 2,
                               .shape = {cols ? 1 : 65536, cols ? 65536 : 1},
                               .axis = cols ? 0 : 1};
            memset(out, 0, 65536 * 2);
            char msg[256];
            eng_err e = eng_scan(b->s, &d, in, out, msg, sizeof msg);
            CHECK(e == ENG_E_OK, "%s: %s", b->name, msg);
            unsigned long bad = 0;
            for (uint32_t i = 0; i < 65536; i++) {
                float x = t ? tx_bf16_to_f32(in[i]) : tx_f16_to_f32(in[i]);
                float y = t ? tx_bf16_to_f32(out[i]) : tx_f16_to_f32(out[i]);
                /* -0 + nothing may come back as +0; NaN as any NaN */
                bool ok = isnan(x) ? isnan(y) : x == y;
                if (!ok && bad++ < 3)
                    CHECK(0, "%s %s%s: pattern 0x%04x came back as 0x%04x",
                          b->name, tx_dtype_name(dt), cols ? " columns" : "", i,
                          out[i]);
            }
            CHECK(bad == 0, "%s %s: %lu patterns changed", b->name,
                  tx_dtype_name(dt), bad);
        }
    free(in);
    free(out);
}

/* ------------------------------------------------------------------------
 * Batches (eng_scan_batch): 1 to 12 tensors whose lines share a shape,
 * of random outer sizes (0 included), some in place, scanned in one launch
 * on every backend; each part must equal its own reference, and a part
 * that the batch does not own (out of another part) is untouched.
 */
static void batches_on(size_t bi)
{
    backend *b = get_backend(bi);
    {
        /* empty parts may come with NULL buffers (an empty body): a batch
         * of them alone, and one beside a real part, touch no memory
         * through them (UBSan reports a memcpy from NULL, even of 0 bytes) */
        int32_t x[4] = {1, 2, 3, 4}, y[4] = {-1, -1, -1, -1};
        eng_part parts[3] = {{.in = NULL, .out = NULL, .outer = 0},
                             {.in = NULL, .out = NULL, .outer = 0},
                             {.in = x, .out = y, .outer = 1}};
        eng_lines shape = {.dtype = TX_INT32, .n = 4, .inner = 1};
        eng_batch_times times;
        char msg[512] = "";
        eng_err e = eng_scan_batch(b->s, &shape, parts, 2, &times, msg,
                                   sizeof msg);
        CHECK(e == ENG_E_OK, "%s: a batch of empty parts: %s: %s", b->name,
              eng_err_name(e), msg);
        e = eng_scan_batch(b->s, &shape, parts, 3, &times, msg, sizeof msg);
        CHECK(e == ENG_E_OK && y[0] == 1 && y[1] == 3 && y[2] == 6
                  && y[3] == 10,
              "%s: empty parts beside a real one: %s: %s; %d %d %d %d",
              b->name, eng_err_name(e), msg, y[0], y[1], y[2], y[3]);
    }
    for (int round = 0; round < 60; round++) {
        tx_dtype t = (tx_dtype)check_below(TX_NDTYPES);
        uint64_t n = 1 + check_below(round % 3 == 0 ? 3000 : 40);
        uint64_t inner = check_below(3) == 0 ? 1 + check_below(5) : 1;
        bool reverse = check_below(2), exclusive = check_below(2);
        size_t count = 1 + check_below(12);
        eng_part parts[12];
        ref_result refs[12];
        void *ins[12];
        bool in_place[12];
        for (size_t k = 0; k < count; k++) {
            uint64_t outer = check_below(6);
            eng_scan_desc d = {.dtype = t,
                               .rank = 3,
                               .shape = {outer, n, inner},
                               .axis = 1,
                               .reverse = reverse,
                               .exclusive = exclusive};
            size_t elems = (size_t)(outer * n * inner);
            ins[k] = check_alloc(elems * 8 + 8);
            ref_random(t, ins[k], elems, check_below(4) == 0);
            ref_scan(&d, ins[k], &refs[k]);
            in_place[k] = check_below(2);
            void *out = in_place[k] ? ins[k] : check_alloc(elems * 8 + 8);
            if (!in_place[k])
                ref_poison(&refs[k], out);
            parts[k].in = ins[k];
            parts[k].out = out;
            parts[k].outer = outer;
        }
        eng_lines shape = {.dtype = t,
                           .n = n,
                           .inner = inner,
                           .reverse = reverse,
                           .exclusive = exclusive};
        eng_batch_times times;
        char msg[512] = "";
        eng_err e =
            eng_scan_batch(b->s, &shape, parts, count, &times, msg, sizeof msg);
        CHECK(e == ENG_E_OK, "%s batch of %zu: %s: %s", b->name, count,
              eng_err_name(e), msg);
        for (size_t k = 0; k < count; k++) {
            if (e == ENG_E_OK) {
                char what[160];
                snprintf(what, sizeof what,
                         "%s batch part %zu of %zu, %s n %llu inner %llu "
                         "outer %llu%s%s%s",
                         b->name, k, count, tx_dtype_name(t),
                         (unsigned long long)n, (unsigned long long)inner,
                         (unsigned long long)parts[k].outer,
                         reverse ? " reverse" : "",
                         exclusive ? " exclusive" : "",
                         in_place[k] ? " in place" : "");
                size_t bad = ref_compare(&refs[k], parts[k].out, what);
                CHECK(bad == 0, "%s: %zu elements wrong", what, bad);
            }
            if (!in_place[k])
                free(parts[k].out);
            free(ins[k]);
            ref_free(&refs[k]);
        }
    }
}

#define BACKEND_CASES(i)                                                       \
    static void golden_##i(void)                                               \
    {                                                                          \
        golden_on(i);                                                          \
    }                                                                          \
    static void every_axis_##i(void)                                           \
    {                                                                          \
        every_axis_on(i);                                                      \
    }                                                                          \
    static void boundaries_##i(void)                                           \
    {                                                                          \
        boundaries_on(i);                                                      \
    }                                                                          \
    static void special_##i(void)                                              \
    {                                                                          \
        special_values_on(i);                                                  \
    }                                                                          \
    static void empty_##i(void)                                                \
    {                                                                          \
        empty_on(i);                                                           \
    }                                                                          \
    static void half_patterns_##i(void)                                        \
    {                                                                          \
        half_patterns_on(i);                                                   \
    }                                                                          \
    static void batches_##i(void)                                              \
    {                                                                          \
        batches_on(i);                                                         \
    }
BACKEND_CASES(0)
BACKEND_CASES(1)
BACKEND_CASES(2)
BACKEND_CASES(3)
BACKEND_CASES(4)
BACKEND_CASES(5)
BACKEND_CASES(6)

/* The packed float32 scans a CPU device hands to the host backend's code
 * (in and out within the device's cache share), in every mode, in place
 * and not: rows of 128, columns that stream (4 MiB and more, 32-byte rows)
 * and columns that cannot (161 wide), and lines either side of the largest
 * size handed over on a 2-core machine (16 MiB). */
static void side_packed(void)
{
    static const struct {
        int rank;
        uint64_t shape[3];
        int axis;
    } shapes[] = {
        {3, {64, 128, 128}, 2},  {3, {64, 128, 128}, 1}, {3, {64, 128, 128}, 0},
        {3, {64, 100, 161}, 1},  {3, {63, 3, 16384}, 0}, {1, {1u << 22}, 0},
        {1, {(1u << 22) + 9}, 0},
    };
    backend *b = get_backend(CL_SIDE);
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        size_t count = 1;
        for (int k = 0; k < shapes[si].rank; k++)
            count *= shapes[si].shape[k];
        void *in = check_alloc(count * 4);
        ref_random(TX_FLOAT32, in, count, false);
        /* the two long lines (slow to check) in one random mode each */
        bool one = shapes[si].rank == 1;
        int first = one ? (int)check_below(4) : 0;
        for (int mode = first; mode < (one ? first + 1 : 4); mode++) {
            eng_scan_desc d = {.dtype = TX_FLOAT32,
                               .rank = shapes[si].rank,
                               .axis = shapes[si].axis,
                               .reverse = mode & 1,
                               .exclusive = mode >> 1};
            memcpy(d.shape, shapes[si].shape, sizeof shapes[si].shape);
            run_case(b, &d, in, check_below(2), "side");
        }
        free(in);
    }
}

/* ------------------------------------------------------------------------
 * Errors: rank, axis and size problems are reported with a message that
 * names them, and nothing is written.
 */
static void strided_host1(void)
{
    strided_on(0);
}
static void strided_host3(void)
{
    strided_on(1);
}
static void strided_cl_cpu(void)
{
    strided_on(2);
}
static void strided_cl_gpu(void)
{
    strided_on(3);
}

static void errors(void)
{
    backend *b = get_backend(0);
    char msg[256];
    float buf[4] = {1, 2, 3, 4};
    eng_scan_desc d = {.dtype = TX_FLOAT32, .rank = 0};
    eng_err e = eng_scan(b->s, &d, buf, buf, msg, sizeof msg);
    CHECK(e == ENG_E_RANK && strstr(msg, "rank 0"), "rank 0: %d %s", e, msg);

    d = (eng_scan_desc){
        .dtype = TX_FLOAT32, .rank = 3, .shape = {1, 2, 2}, .axis = 3};
    e = eng_scan(b->s, &d, buf, buf, msg, sizeof msg);
    CHECK(e == ENG_E_AXIS && strstr(msg, "rank 3") && strstr(msg, "axis 3"),
          "axis 3 of rank 3: %d %s", e, msg);
    d.axis = -4;
    e = eng_scan(b->s, &d, buf, buf, msg, sizeof msg);
    CHECK(e == ENG_E_AXIS && strstr(msg, "-3 to 2"), "axis -4: %d %s", e, msg);

    d = (eng_scan_desc){.dtype = TX_FLOAT32,
                        .rank = 3,
                        .shape = {1ull << 32, 1ull << 32, 2},
                        .axis = 0};
    e = eng_scan(b->s, &d, buf, buf, msg, sizeof msg);
    CHECK(e == ENG_E_TOO_LARGE, "overflowing shape: %d %s", e, msg);
    d.shape[2] = 0; /* an empty dimension must not hide the overflow */
    d.shape[0] = 1ull << 40;
    d.shape[1] = 1ull << 40;
    e = eng_scan(b->s, &d, buf, buf, msg, sizeof msg);
    CHECK(e == ENG_E_TOO_LARGE, "overflow behind a zero: %d %s", e, msg);

    d = (eng_scan_desc){.dtype = (tx_dtype)99, .rank = 1, .shape = {4}};
    e = eng_scan(b->s, &d, buf, buf, msg, sizeof msg);
    CHECK(e == ENG_E_DTYPE, "bad dtype: %d %s", e, msg);

    d = (eng_scan_desc){.dtype = TX_FLOAT32, .rank = ENG_MAX_RANK + 1};
    e = eng_scan(b->s, &d, buf, buf, msg, sizeof msg);
    CHECK(e == ENG_E_RANK, "rank too large: %d %s", e, msg);
    CHECK(buf[0] == 1 && buf[3] == 4, "a failed scan wrote its output");

    /* beyond 8 dimensions */
    backend *cl = get_backend(2);
    d = (eng_scan_desc){.dtype = TX_INT32,
                        .rank = 12,
                        .shape = {2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 3}};
    for (int axis = -12; axis < 12; axis += 5) {
        d.axis = axis;
        int32_t in[192];
        ref_random(TX_INT32, in, 192, true);
        run_case(cl, &d, in, false, "rank-12");
        run_case(get_backend(0), &d, in, false, "rank-12");
    }
}

/* ------------------------------------------------------------------------
 * Every kernel on shapes the planner would not give it, through the
 * OpenCL layer directly: each kernel that fits the shape, with random
 * tile parameters, on the tiny-tile layouts. One case a layout, so that
 * bench-node can give each its own process: a GPU's compiler takes about
 * a minute for a layout's programs.
 */
static void forced_kernels(const char *layout)
{
    char msg[512];
    eng_cl_device dev;
    bool none;
    if (eng_cl_device_open(test_device(), &dev, &none, msg, sizeof msg)
        != ENG_E_OK) {
        CHECK(0, "no OpenCL device: %s", msg);
        return;
    }
    eng_cl_layout L;
    CHECK(eng_cl_layout_for(&dev, layout, &L), "layout %s", layout);
    eng_cl_programs progs;
    eng_cl_programs_init(&progs, &dev, &L);
    eng_cl_stream *s = eng_cl_stream_new(&progs, msg, sizeof msg);
    CHECK(s != NULL, "stream: %s", msg);
    for (int c = 0; c < 150 && s != NULL; c++) {
        eng_scan_desc d = {.dtype = (tx_dtype)check_below(TX_NDTYPES),
                           .rank = 3};
        bool rows = check_below(2);
        d.shape[0] = 1 + check_below(4);
        d.shape[1] = 1 + check_below(check_below(3) ? 40 : 400);
        d.shape[2] = rows ? 1 : 1 + check_below(check_below(2) ? 9 : 70);
        d.axis = 1;
        d.reverse = check_below(2);
        d.exclusive = check_below(2);
        eng_lines l;
        eng_lines_from_desc(&d, &l, NULL, 0);
        eng_cl_kernel_id k = rows ? (eng_cl_kernel_id)check_below(4)
                                  : (eng_cl_kernel_id)(2 + check_below(2));
        uint64_t hint = check_below(2 * d.shape[1] + 2);
        eng_cl_plan p;
        eng_cl_plan_force(&l, &L, k, hint, &p);

        size_t count = (size_t)l.elements;
        void *in = check_alloc(count * 8), *out = check_alloc(count * 8);
        ref_random(d.dtype, in, count, false);
        ref_result r;
        ref_scan(&d, in, &r);
        ref_poison(&r, out);
        eng_err e = eng_cl_scan_plan(s, &l, &p, in, out, msg, sizeof msg);
        char what[200];
        snprintf(what, sizeof what,
                 "%s %s %s %llux%llux%llu%s%s (hint %llu, %llu tiles)",
                 layout, eng_cl_kernel_name(k), tx_dtype_name(d.dtype),
                 (unsigned long long)d.shape[0],
                 (unsigned long long)d.shape[1],
                 (unsigned long long)d.shape[2], d.reverse ? " rev" : "",
                 d.exclusive ? " excl" : "", (unsigned long long)hint,
                 (unsigned long long)p.ntiles);
        if (e != ENG_E_OK)
            CHECK(0, "%s: %s", what, msg);
        else
            CHECK(ref_compare(&r, out, what) == 0, "%s: wrong result",
                  what);
        ref_free(&r);
        free(in);
        free(out);
    }
    eng_cl_stream_free(s);
    eng_cl_programs_free(&progs);
    eng_cl_device_close(&dev);
}

/* the backends' layouts (whose programs PoCL has cached by now), one with
 * an odd number of persistent work-groups, and tiny tiles */
static void forced_kernels_cpu_tiles(void)
{
    forced_kernels("cpu,row_k=16,col_w=16,blk=2");
}
static void forced_kernels_gpu_tiles(void)
{
    forced_kernels("gpu,wg=8,row_k=8,col_w=8,blk=3");
}
static void forced_kernels_cpu_groups(void) { forced_kernels("cpu,groups=5"); }
static void forced_kernels_gpu(void) { forced_kernels("gpu"); }
static void forced_kernels_cpu_lazy(void)
{
    forced_kernels("cpu,row_k=8,col_w=8,blk=2,lazy=1");
}
static void forced_kernels_gpu_lazy(void)
{
    forced_kernels("gpu,wg=4,row_k=8,col_w=8,blk=2,lazy=1");
}

/* ------------------------------------------------------------------------
 * One engine, several threads with a stream each, scanning at once.
 */
typedef struct {
    eng_engine *e;
    int seed;
    size_t bad;
} worker_arg;

static void *worker(void *vp)
{
    worker_arg *w = vp;
    eng_stream *s;
    char msg[256];
    if (eng_stream_open(w->e, &s, msg, sizeof msg) != ENG_E_OK) {
        w->bad = 1;
        return NULL;
    }
    for (int i = 0; i < 40; i++) {
        /* deterministic per worker: check_rand() is not thread-safe */
        uint64_t n = 1000 + (uint64_t)((w->seed * 7919 + i * 104729) % 40000);
        eng_scan_desc d = {.dtype = TX_INT32,
                           .rank = 1,
                           .shape = {n},
                           .reverse = i % 2,
                           .exclusive = (i / 2) % 2};
        int32_t *in = check_alloc(n * 4), *out = check_alloc(n * 4);
        for (uint64_t j = 0; j < n; j++)
            in[j] = (int32_t)((j * 2654435761u) ^ (uint32_t)w->seed);
        if (eng_scan(s, &d, in, out, msg, sizeof msg) != ENG_E_OK)
            w->bad++;
        uint32_t acc = 0;
        for (uint64_t j0 = 0; j0 < n; j0++) {
            uint64_t j = d.reverse ? n - 1 - j0 : j0;
            if (d.exclusive && (uint32_t)out[j] != acc)
                w->bad++;
            acc += (uint32_t)in[j];
            if (!d.exclusive && (uint32_t)out[j] != acc)
                w->bad++;
        }
        free(in);
        free(out);
    }
    eng_stream_close(s);
    return NULL;
}

static void concurrent_streams(void)
{
    for (size_t bi = 1; bi <= 2; bi++) {
        backend *b = get_backend(bi);
        pthread_t th[4];
        worker_arg args[4];
        for (int i = 0; i < 4; i++) {
            args[i] = (worker_arg){b->e, i + 1, 0};
            pthread_create(&th[i], NULL, worker, &args[i]);
        }
        for (int i = 0; i < 4; i++) {
            pthread_join(th[i], NULL);
            CHECK(args[i].bad == 0, "%s: worker %d: %zu bad elements", b->name,
                  i, args[i].bad);
        }
    }
}

/* ------------------------------------------------------------------------
 * The benchmarks' copies (plain and streaming), and scans large enough to
 * write with non-temporal stores (outputs beyond the device's cache).
 */
static void copies_and_streaming(void)
{
    backend *b = get_backend(2);
    char msg[256];
    size_t sizes[] = {1, 15, 16, 17, 4099, (1 << 20) + 5, 48u << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        for (int streaming = 0; streaming < 2; streaming++) {
            uint8_t *in = check_alloc(sizes[i]),
                    *out = check_alloc(sizes[i] + 1);
            for (size_t k = 0; k < sizes[i]; k++)
                in[k] = (uint8_t)check_rand();
            out[sizes[i]] = 0xee;
            eng_err e =
                eng_copy(b->s, in, out, sizes[i], streaming, msg, sizeof msg);
            CHECK(e == ENG_E_OK && memcmp(in, out, sizes[i]) == 0
                      && out[sizes[i]] == 0xee,
                  "%s copy of %zu bytes: %s", streaming ? "streaming" : "plain",
                  sizes[i], msg);
            free(in);
            free(out);
        }
    /* 40 MiB and more: past PoCL's 32 MiB cache, aligned, so they stream */
    struct {
        tx_dtype t;
        int rank;
        uint64_t shape[2];
        int axis;
    } big[] = {
        {TX_INT32, 1, {9u << 20}, 0},   {TX_INT64, 2, {2, 9u << 18}, 1},
        {TX_INT32, 2, {1152, 8192}, 0}, {TX_UINT64, 2, {768, 6144}, 0},
        {TX_INT32, 2, {59000, 160}, 1},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        for (int pick = 0; pick < 2; pick++) {
            /* two of the four modes each: large references are slow */
            int mode = (int)((i + (size_t)pick * 2 + check_below(2)) % 4);
            eng_scan_desc d = {.dtype = big[i].t,
                               .rank = big[i].rank,
                               .axis = big[i].axis,
                               .reverse = mode & 1,
                               .exclusive = mode >> 1};
            memcpy(d.shape, big[i].shape, sizeof big[i].shape);
            size_t count = (size_t)(big[i].shape[0]
                                    * (big[i].rank == 2 ? big[i].shape[1] : 1));
            void *in = check_alloc(count * 8);
            ref_random(d.dtype, in, count, false);
            run_case(b, &d, in, mode == 3, "streaming");
            free(in);
        }
}

/* ------------------------------------------------------------------------
 * Layouts respect the device: work-groups no larger than it allows, and
 * on a GPU no more columns per work-item than private memory holds (the
 * CPU layout's 4096 failed to launch on an H100). */
static void layout_limits(void)
{
    eng_cl_device cpu = {
        .type = CL_DEVICE_TYPE_CPU, .compute_units = 2, .max_wg = 4096};
    eng_cl_device gpu = {
        .type = CL_DEVICE_TYPE_GPU, .compute_units = 132, .max_wg = 64};
    eng_cl_layout L;
    CHECK(eng_cl_layout_for(&cpu, "cpu", &L) && L.col_w == 4096 && L.wg == 1,
          "cpu layout on a CPU: col_w %u wg %u", L.col_w, L.wg);
    CHECK(eng_cl_layout_for(&gpu, "cpu", &L) && L.col_w == TALLY_CL_GPU_COL_W
              && L.wg == 1,
          "cpu layout on a GPU: col_w %u wg %u", L.col_w, L.wg);
    CHECK(eng_cl_layout_for(&gpu, "gpu,col_w=1024", &L)
              && L.col_w == TALLY_CL_GPU_COL_W && L.wg == 64,
          "gpu,col_w=1024 on a GPU: col_w %u wg %u", L.col_w, L.wg);
    CHECK(eng_cl_layout_for(&gpu, "gpu,col_w=16", &L) && L.col_w == 16,
          "gpu,col_w=16 on a GPU: col_w %u", L.col_w);
    CHECK(eng_cl_layout_for(&cpu, "gpu,col_w=1024", &L) && L.col_w == 1024,
          "gpu,col_w=1024 on a CPU: col_w %u", L.col_w);
    CHECK(!eng_cl_layout_for(&gpu, "cpu,col_w=12", &L), "col_w=12 taken");
}

/* ------------------------------------------------------------------------
 * The planner: every choice fits its shape and stays within its limits.
 */
static void planner(void)
{
    eng_cl_device dev = {
        .type = CL_DEVICE_TYPE_CPU, .compute_units = 2, .max_wg = 4096};
    const char *layouts[] = {"cpu", "gpu", "cpu,row_k=16,col_w=16"};
    for (size_t li = 0; li < 3; li++) {
        eng_cl_layout L;
        CHECK(eng_cl_layout_for(&dev, layouts[li], &L), "layout");
        /* an empty batch (every part of outer 0) plans no tile, and no
         * division by its zero tiles (UBSan, CI with some seeds) */
        eng_lines empty = {
            .dtype = TX_FLOAT32, .outer = 0, .n = 300, .inner = 7};
        eng_cl_plan ep;
        eng_cl_plan_make(&empty, &L, &ep);
        CHECK(ep.ntiles == 0, "an empty tensor plans %llu tiles",
              (unsigned long long)ep.ntiles);
        for (int c = 0; c < 20000; c++) {
            eng_lines l = {.dtype = TX_FLOAT32};
            l.outer = 1 + check_below(check_below(2) ? 10 : 100000);
            l.n = 1 + check_below(check_below(2) ? 20 : 1000000);
            l.inner = check_below(2)
                          ? 1
                          : 1 + check_below(check_below(2) ? 9 : 70000);
            eng_cl_plan p;
            eng_cl_plan_make(&l, &L, &p);
            bool rows =
                p.kernel == ENG_K_ROWS_DIRECT || p.kernel == ENG_K_ROWS_CHAINED;
            CHECK(!rows || l.inner == 1, "rows kernel for inner %llu",
                  (unsigned long long)l.inner);
            CHECK(p.ntiles >= 1 && p.groups >= 1
                      && p.groups <= (L.wg == 1 ? L.groups : p.ntiles),
                  "tiles %llu groups %zu", (unsigned long long)p.ntiles,
                  p.groups);
            if (!rows) {
                CHECK(p.cw >= 1 && p.cw <= L.col_w, "cw %u", p.cw);
                CHECK(p.nblk * L.wg * p.cw >= l.inner, "columns not covered");
                CHECK((p.nblk - 1) * L.wg * p.cw < l.inner, "empty block");
            }
            if (p.kernel == ENG_K_ROWS_DIRECT)
                CHECK(p.ntiles * L.wg * p.rpt >= l.outer, "lines not covered");
            if (p.kernel == ENG_K_COLS_CHAINED)
                CHECK(p.rows >= 1 && p.rows % L.blk == 0, "rows %llu",
                      (unsigned long long)p.rows);
        }
    }
}

static const check_case cases[] = {
    {"golden_host1", golden_0},
    {"golden_host3", golden_1},
    {"golden_cl_cpu", golden_2},
    {"golden_cl_gpu", golden_3},
    {"golden_cl_cpu_tiny", golden_4},
    {"golden_cl_gpu_tiny", golden_5},
    {"special_values_host1", special_0},
    {"special_values_host3", special_1},
    {"special_values_cl_cpu", special_2},
    {"special_values_cl_gpu", special_3},
    {"special_values_cl_cpu_tiny", special_4},
    {"special_values_cl_gpu_tiny", special_5},
    {"empty_host1", empty_0},
    {"empty_host3", empty_1},
    {"empty_cl_cpu", empty_2},
    {"empty_cl_gpu", empty_3},
    {"empty_cl_cpu_tiny", empty_4},
    {"empty_cl_gpu_tiny", empty_5},
    {"half_patterns_host1", half_patterns_0},
    {"half_patterns_host3", half_patterns_1},
    {"half_patterns_cl_cpu", half_patterns_2},
    {"half_patterns_cl_gpu", half_patterns_3},
    {"half_patterns_cl_cpu_tiny", half_patterns_4},
    {"half_patterns_cl_gpu_tiny", half_patterns_5},
    {"batches_host1", batches_0},
    {"batches_host3", batches_1},
    {"batches_cl_cpu", batches_2},
    {"batches_cl_gpu", batches_3},
    {"batches_cl_cpu_tiny", batches_4},
    {"batches_cl_gpu_tiny", batches_5},
    {"every_axis_host1", every_axis_0},
    {"every_axis_host3", every_axis_1},
    {"every_axis_cl_cpu", every_axis_2},
    {"every_axis_cl_gpu", every_axis_3},
    {"every_axis_cl_cpu_tiny", every_axis_4},
    {"every_axis_cl_gpu_tiny", every_axis_5},
    {"boundaries_host1", boundaries_0},
    {"boundaries_host3", boundaries_1},
    {"boundaries_cl_cpu", boundaries_2},
    {"boundaries_cl_gpu", boundaries_3},
    {"boundaries_cl_cpu_tiny", boundaries_4},
    {"boundaries_cl_gpu_tiny", boundaries_5},
    {"golden_cl_side", golden_6},
    {"every_axis_cl_side", every_axis_6},
    {"boundaries_cl_side", boundaries_6},
    {"special_cl_side", special_6},
    {"empty_cl_side", empty_6},
    {"half_patterns_cl_side", half_patterns_6},
    {"batches_cl_side", batches_6},
    {"side_packed", side_packed},
    {"strided_host1", strided_host1},
    {"strided_host3", strided_host3},
    {"strided_cl_cpu", strided_cl_cpu},
    {"strided_cl_gpu", strided_cl_gpu},
    {"strided_inline", strided_inline},
    {"strided_tiles_host1", strided_tiles_host1},
    {"strided_tiles_host3", strided_tiles_host3},
    {"strided_tiles_cl_side", strided_tiles_cl_side},
    {"strided_tiles_inline", strided_tiles_inline},
    {"strided_kernels", strided_kernels},
    {"strided_errors", strided_errors},
    {"errors", errors},
    {"forced_kernels_cpu_tiles", forced_kernels_cpu_tiles},
    {"forced_kernels_gpu_tiles", forced_kernels_gpu_tiles},
    {"forced_kernels_cpu_groups", forced_kernels_cpu_groups},
    {"forced_kernels_gpu", forced_kernels_gpu},
    {"forced_kernels_cpu_lazy", forced_kernels_cpu_lazy},
    {"forced_kernels_gpu_lazy", forced_kernels_gpu_lazy},
    {"concurrent_streams", concurrent_streams},
    {"copies_and_streaming", copies_and_streaming},
    {"layout_limits", layout_limits},
    {"planner", planner},
};

int main(int argc, char **argv)
{
    int rc = check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
    for (size_t i = 0; i < NBACKENDS; i++) {
        eng_stream_close(backends[i].s);
        eng_engine_close(backends[i].e);
    }
    return rc;
}
