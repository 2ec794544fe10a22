/*
 * test_client.c - libtally against real tallyd servers.
 *
 * tests/integration/test_client.py starts the daemons and runs each case
 * of this program with their URLs in the environment:
 *   TALLY_URL         a plain tallyd
 *   TALLY_URL2        a second one (the split-tensor cases use both)
 *   TALLY_BUSY_URL    one with --workers 1 --queue-depth 1 --fault-delay-ms
 *   TALLY_SMALL_URL   one with a small --max-body-bytes (1 MiB)
 *   TALLY_DEAD_URL    a loopback port where nothing listens
 *   TALLY_FAKE_URL    an HTTP server that is not tally
 * Cases that need none of them (arguments, .npy files) run anywhere.
 *
 * Results are compared with the engine's host reference (tests/ref.c):
 * integers exactly, floats within docs/design.md's bound (its first term
 * doubled for split tensors). Outputs are poisoned first, so an element
 * left unwritten fails, and a failed call must leave its output as it was.
 */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "ref.h"
#include "tally.h"

static const char *need_env(const char *name)
{
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        fprintf(stderr,
                "      %s is not set: run this case through "
                "tests/integration/test_client.py, which starts the "
                "servers\n",
                name);
        return NULL;
    }
    return v;
}

static tally_client *client_for(const char *url)
{
    tally_client *c = tally_client_new();
    CHECK(c != NULL, "tally_client_new failed");
    tally_code code = tally_add_url(c, url);
    CHECK(code == TALLY_OK, "tally_add_url(%s): %s", url,
          tally_last_message(c));
    tally_setopt_long(c, TALLYOPT_TIMEOUT_MS, 120000);
    return c;
}

/* The engine's dtype of the same name. */
static tx_dtype engine_dtype(tally_dt t)
{
    const char *name = tally_dt_name(t);
    return (tx_dtype)tx_dtype_parse(name, strlen(name));
}

/* A random tensor: its description for both APIs, input, reference. */
typedef struct {
    tally_dt dt;
    int rank, axis;
    int64_t shape[TALLY_MAX_RANK];
    unsigned flags;
    size_t count, bytes;
    void *in, *out;
    ref_result ref;
} tensor;

static void tensor_make(tensor *t, tally_dt dt, int rank, const int64_t *shape,
                        int axis, unsigned flags)
{
    memset(t, 0, sizeof *t);
    t->dt = dt;
    t->rank = rank;
    t->axis = axis;
    t->flags = flags;
    memcpy(t->shape, shape, (size_t)rank * sizeof *shape);
    eng_scan_desc d = {.dtype = engine_dtype(dt),
                       .rank = rank,
                       .axis = axis,
                       .exclusive = flags & TALLY_EXCLUSIVE,
                       .reverse = flags & TALLY_REVERSE};
    t->count = 1;
    for (int i = 0; i < rank; i++) {
        d.shape[i] = (uint64_t)shape[i];
        t->count *= (size_t)shape[i];
    }
    t->bytes = t->count * tally_dt_size(dt);
    t->in = check_alloc(t->bytes + 1);
    t->out = check_alloc(t->bytes + 1);
    ref_random(d.dtype, t->in, t->count, check_below(2));
    ref_scan(&d, t->in, &t->ref);
    ref_poison(&t->ref, t->out);
}

static void tensor_free(tensor *t)
{
    free(t->in);
    free(t->out);
    ref_free(&t->ref);
}

/* Whether t's output still holds the poison tensor_make put there. */
static bool untouched(const tensor *t)
{
    void *p = check_alloc(t->bytes + 1);
    ref_poison(&t->ref, p);
    bool same = memcmp(p, t->out, t->bytes) == 0;
    free(p);
    return same;
}

static void describe(const tensor *t, char *buf, size_t len)
{
    size_t o = (size_t)snprintf(buf, len, "%s [", tally_dt_name(t->dt));
    for (int i = 0; i < t->rank && o < len; i++)
        o += (size_t)snprintf(buf + o, len - o, "%s%lld", i ? "," : "",
                              (long long)t->shape[i]);
    if (o < len)
        snprintf(buf + o, len - o, "] axis %d%s%s", t->axis,
                 t->flags & TALLY_EXCLUSIVE ? " exclusive" : "",
                 t->flags & TALLY_REVERSE ? " reverse" : "");
}

static void random_shape(int rank, size_t max_count, int64_t *shape)
{
    size_t count = 1;
    for (int i = 0; i < rank; i++) {
        uint64_t cap = max_count / count;
        uint64_t hi = cap < 2 ? 1 : (cap > 40 ? 40 : cap);
        shape[i] = (int64_t)(1 + check_below(hi));
        count *= (size_t)shape[i];
    }
}

/* ------------------------------------------------------------------------
 * Cases with no server.
 */
static void case_codes_and_dtypes(void)
{
    for (int code = 0; code <= TALLYE_FORMAT; code++) {
        const char *s = tally_strerror((tally_code)code);
        CHECK(s != NULL && s[0] != '\0', "no text for code %d", code);
        CHECK(strncmp(tally_code_name((tally_code)code), "TALLYE_", 7) == 0,
              "bad name for code %d", code);
    }
    CHECK(strcmp(tally_strerror((tally_code)999), "unknown error") == 0,
          "unknown code text");
    CHECK(strcmp(tally_code_name(TALLYE_BUSY), "TALLYE_BUSY") == 0,
          "TALLYE_BUSY's name");
    for (int t = 0; t < TALLY_NDT; t++) {
        const char *name = tally_dt_name((tally_dt)t);
        CHECK(name != NULL && tally_dt_parse(name) == t, "dtype %d", t);
        CHECK(tally_dt_size((tally_dt)t)
                  == tx_dtype_size(engine_dtype((tally_dt)t)),
              "size of %s", name);
    }
    CHECK(strcmp(tally_dt_kserve(TALLY_DT_FLOAT32), "FP32") == 0
              && strcmp(tally_dt_kserve(TALLY_DT_BFLOAT16), "BF16") == 0
              && strcmp(tally_dt_kserve(TALLY_DT_UINT64), "UINT64") == 0
              && tally_dt_kserve((tally_dt)99) == NULL,
          "KServe's names");
    for (int t = 0; t < TALLY_NDT; t++)
        CHECK(tally_dt_parse(tally_dt_kserve((tally_dt)t)) == t,
              "KServe's name of dtype %d", t);
    CHECK(tally_dt_parse("FP16") == TALLY_DT_FLOAT16, "KServe names");
    CHECK(tally_dt_parse("BF16") == TALLY_DT_BFLOAT16, "KServe names");
    CHECK(tally_dt_parse("float128") == -1 && tally_dt_parse(NULL) == -1,
          "unknown dtypes");
    CHECK(tally_dt_name((tally_dt)99) == NULL
              && tally_dt_size((tally_dt)99) == 0,
          "dtype out of range");
    CHECK(strcmp(tally_version(), TALLY_VERSION) == 0, "version");
    CHECK(TALLY_VERSION_NUM
              == ((TALLY_VERSION_MAJOR << 16) | (TALLY_VERSION_MINOR << 8)
                  | TALLY_VERSION_PATCH),
          "version number");
}

static void case_bad_arguments(void)
{
    /* nothing listens here, and nothing must be sent: argument errors
     * come back before any connection */
    tally_client *c = client_for("http://127.0.0.1:9");
    int64_t shape[3] = {2, 3, 4}, neg[2] = {2, -1};
    float in[24] = {0}, out[24];
    memset(out, 0x7f, sizeof out);
    struct {
        const char *what;
        tally_dt dt;
        int rank;
        const int64_t *shape;
        int axis;
        unsigned flags;
        const void *in;
        void *out;
    } bad[] = {
        {"rank 0", TALLY_DT_FLOAT32, 0, shape, 0, 0, in, out},
        {"rank 65", TALLY_DT_FLOAT32, 65, shape, 0, 0, in, out},
        {"axis 3", TALLY_DT_FLOAT32, 3, shape, 3, 0, in, out},
        {"axis -4", TALLY_DT_FLOAT32, 3, shape, -4, 0, in, out},
        {"NULL shape", TALLY_DT_FLOAT32, 3, NULL, 0, 0, in, out},
        {"negative size", TALLY_DT_FLOAT32, 2, neg, 0, 0, in, out},
        {"bad dtype", (tally_dt)42, 3, shape, 0, 0, in, out},
        {"bad flags", TALLY_DT_FLOAT32, 3, shape, 0, 8, in, out},
        {"NULL input", TALLY_DT_FLOAT32, 3, shape, 0, 0, NULL, out},
        {"NULL output", TALLY_DT_FLOAT32, 3, shape, 0, 0, in, NULL},
        {"overlap", TALLY_DT_FLOAT32, 2, shape, 0, 0, out, out + 1},
        {"misaligned", TALLY_DT_FLOAT32, 3, shape, 0, 0, (char *)in + 2, out},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        tally_code code =
            tally_cumsum(c, bad[i].dt, bad[i].rank, bad[i].shape, bad[i].axis,
                         bad[i].flags, bad[i].in, bad[i].out);
        CHECK(code == TALLYE_ARGUMENT, "%s: got %s", bad[i].what,
              tally_code_name(code));
        CHECK(tally_last_message(c)[0] != '\0', "%s: no message", bad[i].what);
        CHECK(tally_last_status(c) == 0, "%s: a status", bad[i].what);
    }
    for (size_t i = 0; i < 24; i++)
        CHECK(((unsigned char *)out)[4 * i] == 0x7f, "output written");
    CHECK(strstr(tally_last_message(c), "aligned") != NULL, "message: %s",
          tally_last_message(c));

    /* a sequence's id is checked before anything is sent */
    char longid[130];
    memset(longid, 'q', 129);
    longid[129] = '\0';
    const char *bad_ids[] = {NULL, "", longid, "\xff\xfe"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof *bad_ids; i++) {
        tally_code code =
            tally_cumsum_chunk(c, bad_ids[i], 1, TALLY_DT_FLOAT32, 3, shape,
                               0, TALLY_SEQUENCE_START, in, out);
        CHECK(code == TALLYE_ARGUMENT, "sequence id %zu: got %s", i,
              tally_code_name(code));
        CHECK(strstr(tally_last_message(c), "sequence id") != NULL,
              "sequence id %zu: %s", i, tally_last_message(c));
    }
    CHECK(((unsigned char *)out)[0] == 0x7f, "output written");

    /* an empty tensor succeeds at once, even with no server */
    int64_t empty[2] = {3, 0};
    CHECK(tally_cumsum(c, TALLY_DT_INT8, 2, empty, 1, 0, NULL, NULL)
              == TALLY_OK,
          "empty tensor: %s", tally_last_message(c));

    /* options */
    CHECK(tally_setopt_long(c, TALLYOPT_RETRIES, -1) == TALLYE_ARGUMENT,
          "negative retries");
    CHECK(strstr(tally_last_message(c), "TALLYOPT_RETRIES") != NULL,
          "message names the option: %s", tally_last_message(c));
    CHECK(tally_setopt_long(c, TALLYOPT_MAX_CONNECTIONS, 0) == TALLYE_ARGUMENT,
          "zero connections");
    CHECK(tally_setopt_long(c, TALLYOPT_TOKEN, 1) == TALLYE_ARGUMENT,
          "string option as long");
    CHECK(tally_setopt_str(c, TALLYOPT_TIMEOUT_MS, "1") == TALLYE_ARGUMENT,
          "long option as string");
    CHECK(tally_setopt_str(c, TALLYOPT_TOKEN, "a\r\nb") == TALLYE_ARGUMENT,
          "header injection");
    CHECK(tally_setopt_long(c, (tally_option)77, 1) == TALLYE_ARGUMENT,
          "unknown option");
    CHECK(tally_setopt_str(c, TALLYOPT_TOKEN, "secret") == TALLY_OK, "token");
    CHECK(tally_setopt_str(c, TALLYOPT_TOKEN, NULL) == TALLY_OK, "no token");

    /* URLs */
    const char *bad_urls[] = {"ftp://h/",         "localhost:8080", "http://",
                              "http://h:1/?q=1",  "http://h/#x",    "",
                              "http://h:99999999"};
    for (size_t i = 0; i < sizeof bad_urls / sizeof *bad_urls; i++)
        CHECK(tally_add_url(c, bad_urls[i]) == TALLYE_URL, "URL \"%s\" taken",
              bad_urls[i]);
    CHECK(tally_add_url(c, NULL) == TALLYE_ARGUMENT, "NULL URL");
    tally_client_free(c);

    /* no URL at all */
    c = tally_client_new();
    int64_t one = 1;
    CHECK(tally_cumsum(c, TALLY_DT_FLOAT32, 1, &one, 0, 0, in, out)
              == TALLYE_ARGUMENT,
          "no URL");
    CHECK(strstr(tally_last_message(c), "tally_add_url") != NULL, "message: %s",
          tally_last_message(c));
    tally_client_free(c);
    tally_client_free(NULL);
    tally_batch_free(NULL);
    tally_free(NULL);
    CHECK(tally_cumsum(NULL, TALLY_DT_FLOAT32, 1, &one, 0, 0, in, out)
              == TALLYE_ARGUMENT,
          "NULL client");
}

static void case_npy_files(void)
{
    char dir[] = "/tmp/tally-npy-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[256], msg[512];
    snprintf(path, sizeof path, "%s/x.npy", dir);
    for (int t = 0; t < TALLY_NDT; t++) {
        int rank = 1 + (int)check_below(8);
        int64_t shape[TALLY_MAX_RANK], got_shape[TALLY_MAX_RANK];
        random_shape(rank, 500, shape);
        if (check_below(4) == 0)
            shape[check_below((uint64_t)rank)] = 0;
        size_t count = 1;
        for (int i = 0; i < rank; i++)
            count *= (size_t)shape[i];
        size_t bytes = count * tally_dt_size((tally_dt)t);
        void *data = check_alloc(bytes + 1);
        ref_random(engine_dtype((tally_dt)t), data, count, false);
        tally_code code = tally_npy_write(path, (tally_dt)t, rank, shape, data,
                                          msg, sizeof msg);
        CHECK(code == TALLY_OK, "write %s: %s", tally_dt_name((tally_dt)t),
              msg);
        tally_dt dt;
        int r;
        void *back;
        size_t n;
        code = tally_npy_read(path,
                              t == TALLY_DT_BFLOAT16 ? TALLY_NPY_BFLOAT16 : 0,
                              &dt, &r, got_shape, &back, &n, msg, sizeof msg);
        CHECK(code == TALLY_OK, "read %s: %s", tally_dt_name((tally_dt)t), msg);
        if (code == TALLY_OK) {
            CHECK(dt == (tally_dt)t && r == rank && n == bytes,
                  "%s: dtype %d rank %d bytes %zu", tally_dt_name((tally_dt)t),
                  dt, r, n);
            CHECK(memcmp(shape, got_shape, (size_t)rank * sizeof *shape) == 0,
                  "shape of %s", tally_dt_name((tally_dt)t));
            CHECK(bytes == 0 || memcmp(data, back, bytes) == 0, "data of %s",
                  tally_dt_name((tally_dt)t));
            tally_free(back);
        }
        free(data);
    }

    /* files that are not .npy, or not usable: raw bytes, or a version 1
     * header made from `dict` followed by `data` */
    struct {
        const char *what, *raw, *dict, *data;
        size_t data_len;
    } bad[] = {
        {"empty", "", NULL, NULL, 0},
        {"no magic", "hello world, not numpy", NULL, NULL, 0},
        {"version 9", "\x93NUMPY\x09\x00\x02\x00{}", NULL, NULL, 12},
        {"scalar", NULL,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (), }",
         "\x00\x00\x80\x3f", 4},
        {"bool", NULL,
         "{'descr': '|b1', 'fortran_order': False, 'shape': (1,), }", "\x01",
         1},
        {"structured", NULL,
         "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
         "\x00\x00\x00\x00", 4},
        {"truncated data", NULL,
         "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
         "\x00\x00", 2},
        {"trailing bytes", NULL,
         "{'descr': '|u1', 'fortran_order': False, 'shape': (1,), }",
         "\x01\x02", 2},
        {"huge shape", NULL,
         "{'descr': '<f8', 'fortran_order': False, 'shape': "
         "(99999999999999999,), }",
         "", 0},
        {"no shape", NULL, "{'descr': '<f8', 'fortran_order': False, }", "", 0},
        {"unknown key", NULL,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), 'x': 1, }",
         "\x00\x00\x00\x00\x00\x00\x00\x00", 8},
        {"ragged dict", NULL, "{'descr' '<f8'", "", 0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        FILE *f = fopen(path, "wb");
        if (bad[i].raw != NULL) {
            /* data_len, when given, counts the raw bytes (NULs and all) */
            fwrite(bad[i].raw, 1,
                   bad[i].data_len ? bad[i].data_len : strlen(bad[i].raw), f);
        } else {
            size_t hlen = strlen(bad[i].dict) + 1;
            unsigned char pre[10] = {0x93,
                                     'N',
                                     'U',
                                     'M',
                                     'P',
                                     'Y',
                                     1,
                                     0,
                                     (unsigned char)(hlen & 0xff),
                                     (unsigned char)(hlen >> 8)};
            fwrite(pre, 1, sizeof pre, f);
            fwrite(bad[i].dict, 1, hlen - 1, f);
            fputc('\n', f);
            fwrite(bad[i].data, 1, bad[i].data_len, f);
        }
        fclose(f);
        tally_dt dt;
        int r;
        int64_t shape[TALLY_MAX_RANK];
        void *data = (void *)1;
        size_t n;
        msg[0] = '\0';
        tally_code code =
            tally_npy_read(path, 0, &dt, &r, shape, &data, &n, msg, sizeof msg);
        CHECK(code == TALLYE_FORMAT, "%s: got %s (%s)", bad[i].what,
              tally_code_name(code), msg);
        CHECK(msg[0] != '\0' && data == NULL, "%s: message or data",
              bad[i].what);
    }
    snprintf(path, sizeof path, "%s/missing.npy", dir);
    tally_dt dt;
    int r;
    int64_t shape[TALLY_MAX_RANK];
    void *data;
    size_t n;
    CHECK(tally_npy_read(path, 0, &dt, &r, shape, &data, &n, msg, sizeof msg)
              == TALLYE_IO,
          "missing file");
    CHECK(strstr(msg, "missing.npy") != NULL, "message names the file: %s",
          msg);
    snprintf(path, sizeof path, "%s/no/such/dir/x.npy", dir);
    int64_t one = 1;
    float v = 1;
    CHECK(tally_npy_write(path, TALLY_DT_FLOAT32, 1, &one, &v, msg, sizeof msg)
              == TALLYE_IO,
          "unwritable path");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
}

/* ------------------------------------------------------------------------
 * One server.
 */

/* Runs t through c and checks it; in place when asked. */
static void check_one(tally_client *c, tensor *t, bool in_place, bool split)
{
    char what[256];
    describe(t, what, sizeof what);
    void *out = t->out;
    void *keep = NULL;
    if (in_place) {
        keep = check_alloc(t->bytes + 1);
        memcpy(keep, t->in, t->bytes);
        out = t->in;
    }
    tally_code code = tally_cumsum(c, t->dt, t->rank, t->shape, t->axis,
                                   t->flags, t->in, out);
    CHECK(code == TALLY_OK, "%s: %s: %s", what, tally_code_name(code),
          tally_last_message(c));
    if (code == TALLY_OK) {
        CHECK(tally_last_status(c) == 200 || t->count == 0, "%s: status %ld",
              what, tally_last_status(c));
        size_t bad = split ? ref_compare_split(&t->ref, out, what)
                           : ref_compare(&t->ref, out, what);
        CHECK(bad == 0, "%s%s: %zu wrong elements", what,
              in_place ? " in place" : "", bad);
    }
    if (in_place) {
        memcpy(t->in, keep, t->bytes);
        free(keep);
    }
}

static void case_every_dtype(void)
{
    const char *url = need_env("TALLY_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    tally_client *c = client_for(url);
    for (int dt = 0; dt < TALLY_NDT; dt++)
        for (int rank = 1; rank <= 8; rank++) {
            int64_t shape[TALLY_MAX_RANK];
            random_shape(rank, 3000, shape);
            int axis = (int)check_below((uint64_t)rank);
            if (check_below(2))
                axis -= rank;
            tensor t;
            tensor_make(&t, (tally_dt)dt, rank, shape, axis,
                        (unsigned)check_below(4));
            check_one(c, &t, rank % 2 == 0, false);
            tensor_free(&t);
        }
    tally_client_free(c);
}

/* ------------------------------------------------------------------------
 * Shared memory (tally_shm_new, tally_cumsum_shm) on TALLY_SHM_URL, a
 * tallyd with --allow-shared-memory; and its refusal on TALLY_URL.
 */
static void case_shm(void)
{
    const char *url = need_env("TALLY_SHM_URL"), *off = need_env("TALLY_URL");
    CHECK(url != NULL && off != NULL, "no server");
    if (url == NULL || off == NULL)
        return;
    tally_client *c = client_for(url);
    for (int dt = 0; dt < TALLY_NDT; dt++) {
        int rank = 1 + (int)check_below(4);
        int64_t shape[TALLY_MAX_RANK];
        random_shape(rank, 5000, shape);
        int axis = (int)check_below((uint64_t)rank);
        tensor t;
        tensor_make(&t, (tally_dt)dt, rank, shape, axis,
                    (unsigned)check_below(4));
        char what[256];
        describe(&t, what, sizeof what);
        /* x at the start of one region, y at an offset in another, or in
         * place */
        bool in_place = dt % 2 == 1;
        size_t pad = 64;
        tally_shm *rx, *ry = NULL;
        void *mx, *my = NULL;
        const char *nx, *ny = NULL;
        tally_code code = tally_shm_new(c, t.bytes + 1, &rx, &mx, &nx);
        CHECK(code == TALLY_OK, "%s: tally_shm_new: %s", what,
              tally_last_message(c));
        if (code != TALLY_OK) {
            tensor_free(&t);
            continue;
        }
        if (!in_place) {
            code = tally_shm_new(c, t.bytes + pad, &ry, &my, &ny);
            CHECK(code == TALLY_OK, "%s: tally_shm_new: %s", what,
                  tally_last_message(c));
        }
        if (code == TALLY_OK) {
            memcpy(mx, t.in, t.bytes);
            if (!in_place)
                memset(my, 0xA5, t.bytes + pad);
            tally_shm_place px = {nx, 0, t.bytes};
            tally_shm_place py =
                in_place ? px : (tally_shm_place){ny, pad, t.bytes};
            code = tally_cumsum_shm(c, t.dt, t.rank, t.shape, t.axis, t.flags,
                                    &px, &py);
            CHECK(code == TALLY_OK || t.count == 0, "%s: %s: %s", what,
                  tally_code_name(code), tally_last_message(c));
            const uint8_t *got =
                in_place ? (const uint8_t *)mx : (const uint8_t *)my + pad;
            if (code == TALLY_OK && t.count != 0) {
                size_t bad = ref_compare(&t.ref, got, what);
                CHECK(bad == 0, "%s%s: %zu wrong elements", what,
                      in_place ? " in place" : "", bad);
                if (!in_place)
                    for (size_t i = 0; i < pad; i++)
                        CHECK(((uint8_t *)my)[i] == 0xA5,
                              "%s: byte %zu before y was written", what, i);
            }
        }
        tally_shm_free(c, ry);
        tally_shm_free(c, rx);
        tensor_free(&t);
    }
    /* a region that is not registered */
    tally_shm_place nowhere = {"nowhere", 0, 4};
    int64_t one = 1;
    CHECK(tally_cumsum_shm(c, TALLY_DT_INT32, 1, &one, 0, 0, &nowhere, &nowhere)
              == TALLYE_NOT_FOUND,
          "an unknown region: %s", tally_last_message(c));
    CHECK(tally_shm_unregister(c, "nowhere") == TALLYE_NOT_FOUND,
          "unregistering an unknown region");
    CHECK(tally_shm_unregister(c, NULL) == TALLY_OK, "unregistering all");
    CHECK(tally_cumsum_shm(c, TALLY_DT_INT32, 0, &one, 0, 0, &nowhere, &nowhere)
              == TALLYE_ARGUMENT,
          "rank 0");
    tally_client_free(c);
    /* a server without --allow-shared-memory refuses, and nothing is left
     * in /dev/shm */
    c = client_for(off);
    tally_shm *s;
    void *m;
    const char *n;
    CHECK(tally_shm_new(c, 64, &s, &m, &n) == TALLYE_UNAUTHORIZED
              && tally_last_status(c) == 403,
          "shared memory refused: %s", tally_last_message(c));
    CHECK(strstr(tally_last_message(c), "--allow-shared-memory") != NULL,
          "the refusal says why: %s", tally_last_message(c));
    tally_client_free(c);
}

static void case_in_place(void)
{
    const char *url = need_env("TALLY_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    tally_client *c = client_for(url);
    int64_t shape[3] = {5, 33, 7};
    for (unsigned flags = 0; flags < 4; flags++)
        for (int axis = -3; axis < 3; axis++) {
            tensor t;
            tensor_make(&t, TALLY_DT_INT32, 3, shape, axis, flags);
            check_one(c, &t, true, false);
            tensor_free(&t);
        }
    tally_client_free(c);
}

/* ------------------------------------------------------------------------
 * Strided buffers (tally_cumsum_strided): random permuted and padded
 * layouts on both sides, every dtype, rank 1 to 8, some in place. The
 * input is the packed tensor scattered through its strides; the output is
 * gathered back and compared with the packed reference, and every byte
 * of the output buffer that no element addresses must keep its fill.
 */
static void random_layout(int rank, const uint64_t *sizes, uint64_t *strides)
{
    int perm[TALLY_MAX_RANK];
    for (int k = 0; k < rank; k++) {
        int j = (int)check_below((uint64_t)k + 1);
        perm[k] = perm[j];
        perm[j] = k;
    }
    uint64_t step = 1;
    for (int i = 0; i < rank; i++) {
        strides[perm[i]] = step;
        step =
            step * sizes[perm[i]] + (check_below(3) == 0 ? check_below(4) : 0);
    }
}

static uint64_t offset_of(int rank, const uint64_t *sizes,
                          const uint64_t *strides, size_t i)
{
    uint64_t off = 0;
    for (int k = rank - 1; k >= 0; k--) {
        off += i % sizes[k] * strides[k];
        i /= sizes[k];
    }
    return off;
}

static void case_strided(void)
{
    const char *url = need_env("TALLY_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    tally_client *c = client_for(url);
    for (int dt = 0; dt < TALLY_NDT; dt++)
        for (int rank = 1; rank <= 8; rank++) {
            int64_t shape[TALLY_MAX_RANK];
            random_shape(rank, 400, shape);
            for (int k = 0; k < rank; k++)
                shape[k] = shape[k] ? shape[k] : 1; /* DirectML: >= 1 */
            tensor t;
            int axis =
                (int)check_below((uint64_t)rank) - (check_below(2) ? rank : 0);
            tensor_make(&t, (tally_dt)dt, rank, shape, axis,
                        (unsigned)check_below(4));
            uint64_t sizes[TALLY_MAX_RANK], is[TALLY_MAX_RANK],
                os[TALLY_MAX_RANK];
            for (int k = 0; k < rank; k++)
                sizes[k] = (uint64_t)shape[k];
            bool in_place = check_below(4) == 0;
            random_layout(rank, sizes, is);
            if (in_place)
                memcpy(os, is, sizeof is);
            else
                random_layout(rank, sizes, os);
            tally_tensor_desc id = {(tally_dt)dt, rank, sizes, is, 0};
            tally_tensor_desc od = {(tally_dt)dt, rank, sizes, os, 0};
            uint64_t ib, ob;
            CHECK(tally_buffer_bytes(&id, &ib) == TALLY_OK
                      && tally_buffer_bytes(&od, &ob) == TALLY_OK,
                  "buffer bytes");
            size_t size = tally_dt_size((tally_dt)dt);
            unsigned char *in = check_alloc((size_t)ib);
            unsigned char *out = in_place ? in : check_alloc((size_t)ob);
            memset(in, 0x5a, (size_t)ib);
            if (!in_place)
                memset(out, 0x5a, (size_t)ob);
            for (size_t i = 0; i < t.count; i++)
                memcpy(in + offset_of(rank, sizes, is, i) * size,
                       (char *)t.in + i * size, size);
            if (check_below(2)) /* the whole buffer, with its size */
                id.total_bytes = ib;
            char what[256];
            describe(&t, what, sizeof what);
            tally_code code =
                tally_cumsum_strided(c, &id, in, &od, out, t.axis, t.flags);
            CHECK(code == TALLY_OK, "%s strided: %s: %s", what,
                  tally_code_name(code), tally_last_message(c));
            if (code == TALLY_OK) {
                for (size_t i = 0; i < t.count; i++)
                    memcpy((char *)t.out + i * size,
                           out + offset_of(rank, sizes, os, i) * size, size);
                CHECK(ref_compare(&t.ref, t.out, what) == 0,
                      "%s strided%s: wrong elements", what,
                      in_place ? " in place" : "");
                unsigned char *hit = calloc((size_t)ob, 1);
                for (size_t i = 0; i < t.count; i++)
                    memset(hit + offset_of(rank, sizes, os, i) * size, 1, size);
                size_t moved = 0;
                for (size_t k = 0; k < ob; k++)
                    moved += !hit[k] && out[k] != 0x5a;
                free(hit);
                CHECK(moved == 0,
                      "%s strided: %zu bytes outside the "
                      "elements written",
                      what, moved);
            }
            if (!in_place)
                free(out);
            free(in);
            tensor_free(&t);
        }

    /* refused arguments leave out alone */
    uint64_t sizes[2] = {2, 3}, other[2] = {3, 2}, overlap[2] = {1, 1},
             col[2] = {1, 2};
    float in[8] = {1, 2, 3, 4, 5, 6}, out[8];
    struct {
        const char *what;
        tally_tensor_desc id, od;
        const void *in;
        void *out;
        int axis;
    } bad[] = {
        {"sizes differ",
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 0},
         {TALLY_DT_FLOAT32, 2, other, NULL, 0},
         in,
         out,
         0},
        {"dtypes differ",
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 0},
         {TALLY_DT_INT32, 2, sizes, NULL, 0},
         in,
         out,
         0},
        {"output overlaps",
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 0},
         {TALLY_DT_FLOAT32, 2, sizes, overlap, 0},
         in,
         out,
         0},
        {"in place, two layouts",
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 0},
         {TALLY_DT_FLOAT32, 2, sizes, col, 0},
         in,
         in,
         0},
        {"total too small",
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 20},
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 0},
         in,
         out,
         0},
        {"axis",
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 0},
         {TALLY_DT_FLOAT32, 2, sizes, NULL, 0},
         in,
         out,
         2},
        {"rank 0",
         {TALLY_DT_FLOAT32, 0, sizes, NULL, 0},
         {TALLY_DT_FLOAT32, 0, sizes, NULL, 0},
         in,
         out,
         0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        for (int k = 0; k < 8; k++)
            out[k] = -1;
        tally_code code = tally_cumsum_strided(
            c, &bad[i].id, bad[i].in, &bad[i].od, bad[i].out, bad[i].axis, 0);
        CHECK(code == TALLYE_ARGUMENT, "%s: %s", bad[i].what,
              tally_code_name(code));
        CHECK(out[0] == -1 && out[5] == -1 && in[0] == 1, "%s: written",
              bad[i].what);
    }
    tally_client_free(c);
}

/* A batch of many small tensors of every kind, over four connections. */
static void case_batch(void)
{
    const char *url = need_env("TALLY_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    tally_client *c = client_for(url);
    tally_setopt_long(c, TALLYOPT_MAX_CONNECTIONS, 4);
    enum { N = 60 };
    tensor *ts = calloc(N, sizeof *ts);
    tally_batch *b = tally_batch_new(c);
    CHECK(b != NULL, "batch");
    for (int i = 0; i < N; i++) {
        int rank = 1 + (int)check_below(4);
        int64_t shape[TALLY_MAX_RANK];
        random_shape(rank, 2000, shape);
        tensor_make(&ts[i], (tally_dt)(i % TALLY_NDT), rank, shape,
                    (int)check_below((uint64_t)rank), (unsigned)check_below(4));
        CHECK(tally_batch_add(b, ts[i].dt, rank, shape, ts[i].axis, ts[i].flags,
                              ts[i].in, ts[i].out)
                  == TALLY_OK,
              "add %d: %s", i, tally_last_message(c));
    }
    int64_t one = 1;
    CHECK(
        tally_batch_add(b, TALLY_DT_FLOAT32, 1, &one, 5, 0, ts[0].in, ts[0].out)
            == TALLYE_ARGUMENT,
        "a bad item is refused");
    CHECK(tally_batch_count(b) == N, "count %zu", tally_batch_count(b));
    tally_code code = tally_batch_run(b);
    CHECK(code == TALLY_OK, "run: %s", tally_last_message(c));
    for (int i = 0; i < N; i++) {
        char what[256];
        describe(&ts[i], what, sizeof what);
        CHECK(tally_batch_code(b, (size_t)i) == TALLY_OK
                  && tally_batch_status(b, (size_t)i) == 200,
              "item %d: %s", i, tally_batch_message(b, (size_t)i));
        CHECK(ref_compare(&ts[i].ref, ts[i].out, what) == 0, "item %d: %s", i,
              what);
    }
    CHECK(tally_batch_code(b, N) == TALLYE_ARGUMENT, "index out of range");
    CHECK(tally_batch_message(b, N)[0] == '\0', "message out of range");

    /* items added after a run run next time; earlier ones are not rerun */
    tensor extra;
    int64_t shape[2] = {30, 40};
    tensor_make(&extra, TALLY_DT_UINT16, 2, shape, 1, TALLY_EXCLUSIVE);
    ref_poison(&ts[0].ref, ts[0].out);
    CHECK(tally_batch_add(b, extra.dt, 2, shape, 1, extra.flags, extra.in,
                          extra.out)
              == TALLY_OK,
          "add after run");
    CHECK(tally_batch_run(b) == TALLY_OK, "second run: %s",
          tally_last_message(c));
    CHECK(ref_compare(&extra.ref, extra.out, "extra item") == 0, "extra item");
    CHECK(untouched(&ts[0]), "an item that already ran ran again");
    tensor_free(&extra);
    tally_batch_free(b);
    for (int i = 0; i < N; i++)
        tensor_free(&ts[i]);
    free(ts);
    tally_client_free(c);
}

/* One client per thread, all at once. The tensors are made beforehand:
 * the random source is not shared across threads. */
typedef struct {
    const char *url;
    tensor t[15];
} thread_work;

static void *thread_body(void *arg)
{
    thread_work *w = arg;
    tally_client *c = client_for(w->url);
    for (int i = 0; i < 15; i++)
        check_one(c, &w->t[i], false, false);
    tally_client_free(c);
    return NULL;
}

static void case_threads(void)
{
    const char *url = need_env("TALLY_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    static thread_work work[4];
    for (int k = 0; k < 4; k++) {
        work[k].url = url;
        for (int i = 0; i < 15; i++) {
            int64_t shape[2] = {1 + (int64_t)check_below(50),
                                1 + (int64_t)check_below(50)};
            tensor_make(&work[k].t[i], TALLY_DT_FLOAT64, 2, shape, i % 2, 0);
        }
    }
    pthread_t th[4];
    for (int k = 0; k < 4; k++)
        CHECK(pthread_create(&th[k], NULL, thread_body, &work[k]) == 0,
              "thread");
    for (int k = 0; k < 4; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 15; i++)
            tensor_free(&work[k].t[i]);
}

static void case_http(void)
{
    const char *url = need_env("TALLY_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    tally_client *c = client_for(url);
    char *body;
    size_t len;
    tally_code code =
        tally_http(c, "GET", "/v2/health/ready", NULL, NULL, 0, &body, &len);
    CHECK(code == TALLY_OK && tally_last_status(c) == 200, "ready: %s",
          tally_last_message(c));
    CHECK(body != NULL && body[len] == '\0', "body is a string");
    tally_free(body);
    code =
        tally_http(c, "GET", "/v2/models/cumsum", NULL, NULL, 0, &body, &len);
    CHECK(code == TALLY_OK && strstr(body, "\"cumsum\"") != NULL,
          "model metadata: %s", body ? body : tally_last_message(c));
    tally_free(body);
    const char json[] = "{\"dtype\": \"int8\", \"shape\": [4], \"data\": [1, "
                        "2, 3, 127], \"exclusive\": true}";
    code = tally_http(c, "POST", "/v1/cumsum", "application/json", json,
                      strlen(json), &body, &len);
    CHECK(code == TALLY_OK && strstr(body, "[0,1,3,6]") != NULL,
          "JSON cumsum: %s", body ? body : tally_last_message(c));
    tally_free(body);

    code = tally_http(c, "GET", "/v2/models/nope", NULL, NULL, 0, &body, &len);
    CHECK(code == TALLYE_NOT_FOUND && tally_last_status(c) == 404,
          "unknown model: %s %ld", tally_code_name(code), tally_last_status(c));
    CHECK(body == NULL, "body on failure");
    CHECK(strstr(tally_last_message(c), "nope") != NULL,
          "the server's message: %s", tally_last_message(c));

    const char broken[] =
        "{\"dtype\": \"int8\", \"shape\": [2], \"data\": [1]}";
    code = tally_http(c, "POST", "/v1/cumsum", "application/json", broken,
                      strlen(broken), &body, &len);
    CHECK(code == TALLYE_REJECTED && tally_last_status(c) == 400,
          "a bad request: %s", tally_code_name(code));
    CHECK(strstr(tally_last_message(c), "HTTP 400") != NULL, "message: %s",
          tally_last_message(c));

    tally_setopt_long(c, TALLYOPT_MAX_RESPONSE_BYTES, 10);
    code =
        tally_http(c, "GET", "/v2/models/cumsum", NULL, NULL, 0, &body, &len);
    CHECK(code == TALLYE_TOO_LARGE, "response limit: %s",
          tally_code_name(code));
    CHECK(tally_http(c, "BREW", "/", NULL, NULL, 0, &body, &len)
              == TALLYE_ARGUMENT,
          "bad method");
    CHECK(tally_http(c, "GET", "v2", NULL, NULL, 0, &body, &len)
              == TALLYE_ARGUMENT,
          "relative path");
    tally_client_free(c);

    /* a base URL with the wrong path finds nothing */
    char wrong[512];
    snprintf(wrong, sizeof wrong, "%s/nothing/here", url);
    c = client_for(wrong);
    float x[3] = {1, 2, 3}, y[3] = {9, 9, 9};
    int64_t n = 3;
    code = tally_cumsum(c, TALLY_DT_FLOAT32, 1, &n, 0, 0, x, y);
    CHECK(code == TALLYE_NOT_FOUND && tally_last_status(c) == 404,
          "wrong base path: %s", tally_code_name(code));
    CHECK(y[0] == 9 && y[1] == 9 && y[2] == 9, "output written on failure");
    tally_client_free(c);
}

/* ------------------------------------------------------------------------
 * Split tensors over two servers.
 */
static void split_case(tally_client *c, tally_client *single, tally_dt dt,
                       int rank, const int64_t *shape, int axis, unsigned flags)
{
    tensor t;
    tensor_make(&t, dt, rank, shape, axis, flags);
    char what[256];
    describe(&t, what, sizeof what);
    check_one(c, &t, check_below(2), true);
    /* integers split exactly as one request computes them */
    if (!ref_is_float(engine_dtype(dt))) {
        void *one = check_alloc(t.bytes + 1);
        tally_code code =
            tally_cumsum(single, dt, rank, shape, axis, flags, t.in, one);
        CHECK(code == TALLY_OK, "%s single: %s", what,
              tally_last_message(single));
        if (code == TALLY_OK) {
            tally_cumsum(c, dt, rank, shape, axis, flags, t.in, t.out);
            CHECK(memcmp(one, t.out, t.bytes) == 0,
                  "%s: split differs from one request", what);
        }
        free(one);
    }
    tensor_free(&t);
}

static void case_split(void)
{
    const char *u1 = need_env("TALLY_URL"), *u2 = need_env("TALLY_URL2");
    CHECK(u1 != NULL && u2 != NULL, "no servers");
    if (u1 == NULL || u2 == NULL)
        return;
    tally_client *c = client_for(u1), *single = client_for(u1);
    CHECK(tally_add_url(c, u2) == TALLY_OK, "second URL");
    tally_setopt_long(single, TALLYOPT_CHUNK_BYTES, 0);
    tally_setopt_long(c, TALLYOPT_MAX_CONNECTIONS, 3);
    for (int dt = 0; dt < TALLY_NDT; dt++)
        for (unsigned flags = 0; flags < 4; flags++) {
            size_t size = tally_dt_size((tally_dt)dt);
            /* chunks of 16 to 127 elements */
            long chunk = (long)((16 + check_below(112)) * size);
            tally_setopt_long(c, TALLYOPT_CHUNK_BYTES, chunk);
            /* a long line: bands of rows, carried */
            int64_t line[1] = {1000 + (int64_t)check_below(2000)};
            split_case(c, single, (tally_dt)dt, 1, line, 0, flags);
            /* lines longer than a chunk, several columns, middle axis */
            int64_t mid[3] = {3, 300 + (int64_t)check_below(100), 5};
            split_case(c, single, (tally_dt)dt, 3, mid, 1, flags);
            /* the first axis, with rows wider than a chunk */
            int64_t wide[2] = {40, 200 + (int64_t)check_below(100)};
            split_case(c, single, (tally_dt)dt, 2, wide, 0, flags);
            /* whole lines fit: bands of columns, no carries */
            int64_t cols[2] = {10, 60};
            split_case(c, single, (tally_dt)dt, 2, cols, 0, flags);
            /* whole lines fit: several outer slices per chunk */
            int64_t rows[2] = {200, 7};
            split_case(c, single, (tally_dt)dt, 2, rows, -1, flags);
        }
    tally_client_free(c);
    tally_client_free(single);
}

/* ------------------------------------------------------------------------
 * Failures.
 */
static void case_refused(void)
{
    const char *dead = need_env("TALLY_DEAD_URL");
    CHECK(dead != NULL, "no dead URL");
    if (dead == NULL)
        return;
    tally_client *c = client_for(dead);
    tally_setopt_long(c, TALLYOPT_RETRIES, 2);
    tally_setopt_long(c, TALLYOPT_BACKOFF_MS, 10);
    int32_t x[4] = {1, 2, 3, 4}, y[4] = {-7, -7, -7, -7};
    int64_t n = 4;
    tally_code code = tally_cumsum(c, TALLY_DT_INT32, 1, &n, 0, 0, x, y);
    CHECK(code == TALLYE_CONNECT, "refused: %s", tally_code_name(code));
    CHECK(tally_last_status(c) == 0, "status %ld", tally_last_status(c));
    CHECK(strstr(tally_last_message(c), "3 attempts") != NULL, "message: %s",
          tally_last_message(c));
    CHECK(y[0] == -7 && y[3] == -7, "output written on failure");

    /* with a live second server, requests fail over to it */
    const char *live = getenv("TALLY_URL");
    if (live != NULL && live[0] != '\0') {
        CHECK(tally_add_url(c, live) == TALLY_OK, "add live");
        for (int i = 0; i < 4; i++) {
            code = tally_cumsum(c, TALLY_DT_INT32, 1, &n, 0, 0, x, y);
            CHECK(code == TALLY_OK && y[3] == 10, "failover %d: %s", i,
                  tally_last_message(c));
        }
    }
    tally_client_free(c);

    const char *fake = need_env("TALLY_FAKE_URL");
    CHECK(fake != NULL, "no fake server");
    if (fake != NULL) {
        c = client_for(fake);
        code = tally_cumsum(c, TALLY_DT_INT32, 1, &n, 0, 0, x, y);
        CHECK(code == TALLYE_PROTOCOL, "not tally: %s (%s)",
              tally_code_name(code), tally_last_message(c));
        tally_client_free(c);
    }

    c = client_for("http://no-such-host.invalid:8080");
    tally_setopt_long(c, TALLYOPT_RETRIES, 0);
    code = tally_cumsum(c, TALLY_DT_INT32, 1, &n, 0, 0, x, y);
    CHECK(code == TALLYE_CONNECT, "unknown host: %s", tally_code_name(code));
    tally_client_free(c);
}

/* The one rule of a sequence's chunks (tally.h): without
 * TALLYOPT_SHARED_STATE a chunk goes to its id's home URL only, and a
 * refused connection there is TALLYE_CONNECT (never another server's
 * "not live"); after such a failure only the same chunk may be sent,
 * until tally_sequence_forget(); with TALLYOPT_SHARED_STATE it fails
 * over to the next URL. */
static uint64_t id_home(const char *id, size_t nurls)
{
    uint64_t h = 0xcbf29ce484222325u; /* job.c's choice of the home */
    for (const char *p = id; *p; p++) {
        h ^= (unsigned char)*p;
        h *= 0x100000001b3u;
    }
    return h % nurls;
}

static void case_sequence_home(void)
{
    const char *dead = need_env("TALLY_DEAD_URL"), *live = need_env("TALLY_URL");
    CHECK(dead != NULL && live != NULL, "no dead and live URLs");
    if (dead == NULL || live == NULL)
        return;
    tally_client *c = client_for(dead); /* URL 0: dead, 1: live */
    CHECK(tally_add_url(c, live) == TALLY_OK, "add live");
    tally_setopt_long(c, TALLYOPT_RETRIES, 2);
    tally_setopt_long(c, TALLYOPT_BACKOFF_MS, 10);
    char id[32];
    for (unsigned k = 0;; k++) { /* an id whose home is the dead URL */
        snprintf(id, sizeof id, "home-%u-%u", (unsigned)check_rand(), k);
        if (id_home(id, 2) == 0)
            break;
    }
    int32_t x[3] = {1, 2, 3}, x2[3] = {5, 5, 5}, y[3] = {-7, -7, -7};
    int64_t n = 3;
    tally_code code = tally_cumsum_chunk(c, id, 1, TALLY_DT_INT32, 1, &n, 0,
                                         TALLY_SEQUENCE_START, x, y);
    CHECK(code == TALLYE_CONNECT, "home down: %s (%s)", tally_code_name(code),
          tally_last_message(c));
    CHECK(strstr(tally_last_message(c), dead) != NULL
              && strstr(tally_last_message(c), "3 attempts") != NULL,
          "not tried on its home alone: %s", tally_last_message(c));
    CHECK(y[0] == -7, "output written");
    /* another chunk, or the same one changed, is refused unsent */
    code = tally_cumsum_chunk(c, id, 2, TALLY_DT_INT32, 1, &n, 0, 0, x2, y);
    CHECK(code == TALLYE_ARGUMENT
              && strstr(tally_last_message(c), "chunk 1 failed") != NULL,
          "another chunk after a failure: %s (%s)", tally_code_name(code),
          tally_last_message(c));
    code = tally_cumsum_chunk(c, id, 1, TALLY_DT_INT32, 1, &n, 0,
                              TALLY_SEQUENCE_START, x2, y);
    CHECK(code == TALLYE_ARGUMENT, "the same number, other bytes: %s",
          tally_code_name(code));
    code = tally_cumsum_chunk(c, id, 1, TALLY_DT_INT32, 1, &n, 0, 0, x, y);
    CHECK(code == TALLYE_ARGUMENT, "the same chunk, other flags: %s",
          tally_code_name(code));
    /* the same chunk goes; other sequences are not held up */
    code = tally_cumsum_chunk(c, id, 1, TALLY_DT_INT32, 1, &n, 0,
                              TALLY_SEQUENCE_START, x, y);
    CHECK(code == TALLYE_CONNECT, "the same chunk again: %s",
          tally_code_name(code));
    CHECK(tally_sequence_forget(c, id) == TALLY_OK, "forget");
    code = tally_cumsum_chunk(c, id, 2, TALLY_DT_INT32, 1, &n, 0, 0, x2, y);
    CHECK(code == TALLYE_CONNECT, "another chunk once forgotten: %s",
          tally_code_name(code));
    tally_sequence_forget(c, id);
    /* a shared store: the chunk fails over to the live URL */
    CHECK(tally_setopt_long(c, TALLYOPT_SHARED_STATE, 1) == TALLY_OK,
          "shared state");
    code = tally_cumsum_chunk(c, id, 1, TALLY_DT_INT32, 1, &n, 0,
                              TALLY_SEQUENCE_START, x, y);
    CHECK(code == TALLY_OK && y[0] == 1 && y[2] == 6, "failover: %s (%s)",
          tally_code_name(code), tally_last_message(c));
    code = tally_cumsum_chunk(c, id, 2, TALLY_DT_INT32, 1, &n, 0,
                              TALLY_SEQUENCE_END, x2, y);
    CHECK(code == TALLY_OK && y[0] == 11 && y[2] == 21, "its next: %s (%s)",
          tally_code_name(code), tally_last_message(c));
    CHECK(tally_setopt_long(c, TALLYOPT_SHARED_STATE, 2) == TALLYE_ARGUMENT,
          "shared state 2");
    tally_client_free(c);
}

static void case_too_large(void)
{
    const char *url = need_env("TALLY_SMALL_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    tally_client *c = client_for(url);
    tally_setopt_long(c, TALLYOPT_CHUNK_BYTES, 0);
    tally_setopt_long(c, TALLYOPT_MAX_CONNECTIONS, 3);
    /* a batch where one item is over the server's 1 MiB limit */
    tensor small[3], big;
    int64_t s[2] = {20, 30}, b[1] = {300000};
    tally_batch *batch = tally_batch_new(c);
    for (int i = 0; i < 3; i++) {
        tensor_make(&small[i], TALLY_DT_INT64, 2, s, i % 2, 0);
        tally_batch_add(batch, TALLY_DT_INT64, 2, s, i % 2, 0, small[i].in,
                        small[i].out);
        if (i == 0) {
            tensor_make(&big, TALLY_DT_FLOAT32, 1, b, 0, 0);
            tally_batch_add(batch, TALLY_DT_FLOAT32, 1, b, 0, 0, big.in,
                            big.out);
        }
    }
    tally_code code = tally_batch_run(batch);
    CHECK(code == TALLYE_TOO_LARGE, "run: %s", tally_code_name(code));
    CHECK(tally_batch_code(batch, 1) == TALLYE_TOO_LARGE
              && tally_batch_status(batch, 1) == 413,
          "the big item: %s %ld", tally_code_name(tally_batch_code(batch, 1)),
          tally_batch_status(batch, 1));
    CHECK(strstr(tally_batch_message(batch, 1), "413") != NULL, "message: %s",
          tally_batch_message(batch, 1));
    CHECK(tally_last_status(c) == 413, "client status");
    CHECK(untouched(&big), "the big item's output was written");
    for (int i = 0; i < 3; i++)
        CHECK(ref_compare(&small[i].ref, small[i].out, "small") == 0,
              "small item %d", i);
    tally_batch_free(batch);

    /* what the hint says: split it */
    tally_setopt_long(c, TALLYOPT_CHUNK_BYTES, 256 * 1024);
    check_one(c, &big, false, true);
    tensor_free(&big);
    for (int i = 0; i < 3; i++)
        tensor_free(&small[i]);
    tally_client_free(c);
}

static void case_busy(void)
{
    const char *url = need_env("TALLY_BUSY_URL");
    CHECK(url != NULL, "no server");
    if (url == NULL)
        return;
    /* retries get every request through a server that turns most away */
    tally_client *c = client_for(url);
    tally_setopt_long(c, TALLYOPT_MAX_CONNECTIONS, 12);
    tally_setopt_long(c, TALLYOPT_RETRIES, 40);
    tally_setopt_long(c, TALLYOPT_BACKOFF_MS, 20);
    tally_setopt_long(c, TALLYOPT_BACKOFF_MAX_MS, 300);
    enum { N = 12 };
    tensor ts[N];
    int64_t shape[1] = {100};
    tally_batch *b = tally_batch_new(c);
    for (int i = 0; i < N; i++) {
        tensor_make(&ts[i], TALLY_DT_INT16, 1, shape, 0, 0);
        tally_batch_add(b, TALLY_DT_INT16, 1, shape, 0, 0, ts[i].in, ts[i].out);
    }
    tally_code code = tally_batch_run(b);
    CHECK(code == TALLY_OK, "with retries: %s", tally_last_message(c));
    for (int i = 0; i < N; i++)
        CHECK(ref_compare(&ts[i].ref, ts[i].out, "busy") == 0, "item %d", i);
    tally_batch_free(b);

    /* without retries, some come back busy, with nothing written */
    tally_setopt_long(c, TALLYOPT_RETRIES, 0);
    b = tally_batch_new(c);
    for (int i = 0; i < N; i++) {
        ref_poison(&ts[i].ref, ts[i].out);
        tally_batch_add(b, TALLY_DT_INT16, 1, shape, 0, 0, ts[i].in, ts[i].out);
    }
    code = tally_batch_run(b);
    CHECK(code == TALLYE_BUSY, "without retries: %s", tally_code_name(code));
    int busy = 0;
    for (int i = 0; i < N; i++) {
        if (tally_batch_code(b, (size_t)i) == TALLYE_BUSY) {
            busy++;
            CHECK(tally_batch_status(b, (size_t)i) == 503, "status");
            CHECK(strstr(tally_batch_message(b, (size_t)i), "queue") != NULL,
                  "message: %s", tally_batch_message(b, (size_t)i));
            CHECK(untouched(&ts[i]), "a busy item's output was written");
        } else {
            CHECK(tally_batch_code(b, (size_t)i) == TALLY_OK, "item %d: %s", i,
                  tally_batch_message(b, (size_t)i));
            CHECK(ref_compare(&ts[i].ref, ts[i].out, "busy") == 0, "item %d",
                  i);
        }
    }
    CHECK(busy > 0, "no request was turned away");
    tally_batch_free(b);

    /* the server takes longer than the client waits */
    tally_setopt_long(c, TALLYOPT_TIMEOUT_MS, 20);
    ref_poison(&ts[0].ref, ts[0].out);
    code = tally_cumsum(c, TALLY_DT_INT16, 1, shape, 0, 0, ts[0].in, ts[0].out);
    CHECK(code == TALLYE_TIMEOUT, "timeout: %s (%s)", tally_code_name(code),
          tally_last_message(c));
    CHECK(untouched(&ts[0]), "a timed-out request's output was written");
    for (int i = 0; i < N; i++)
        tensor_free(&ts[i]);
    tally_client_free(c);
}

int main(int argc, char **argv)
{
    static const check_case cases[] = {
        {"codes_and_dtypes", case_codes_and_dtypes},
        {"bad_arguments", case_bad_arguments},
        {"npy_files", case_npy_files},
        {"every_dtype", case_every_dtype},
        {"in_place", case_in_place},
        {"strided", case_strided},
        {"batch", case_batch},
        {"threads", case_threads},
        {"http", case_http},
        {"split", case_split},
        {"refused", case_refused},
        {"sequence_home", case_sequence_home},
        {"too_large", case_too_large},
        {"busy", case_busy},
        {"shm", case_shm},
    };
    return check_main(argc, argv, cases, sizeof cases / sizeof *cases);
}
