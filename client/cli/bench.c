/*
 * bench.c - `tally bench`: a closed-loop load generator.
 *
 * N threads, each with its own client (and so its own connection), send
 * the same tensor with tally_cumsum() (or, with --format json, as a KServe
 * JSON request through tally_http(); with --format shm, from one region of
 * shared memory into another through tally_cumsum_shm(), the regions made
 * and filled once per thread) one request after another until the
 * duration is up or the count is reached. The main thread prints progress
 * once a second to stderr, then a summary: requests/s, payload MB/s and
 * latency percentiles from every request's own time.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const char help[] =
    "usage: tally bench [options]\n"
    "\n"
    "Sends cumulative sums to the servers as fast as they answer, from\n"
    "--concurrency connections at once, and reports throughput and latency.\n"
    "Progress goes to stderr once a second; the summary to stdout.\n"
    "\n"
    "  --concurrency N      requests in flight at once (default 4)\n"
    "  --duration S         run for S seconds (default 10)\n"
    "  --count N            stop after N requests instead\n"
    "  --dtype NAME         element type (default float32)\n"
    "  --shape D0,D1,...    tensor shape (default 65536)\n"
    "  --axis N             axis (default -1)\n"
    "  --exclusive, --reverse   as for tally cumsum\n"
    "  --format raw|json|shm  raw bytes (default), KServe v2 JSON requests\n"
    "                       and answers (the values are small integers), or\n"
    "                       KServe requests whose input and output lie in\n"
    "                       POSIX shared memory (a server on this machine\n"
    "                       with --allow-shared-memory)\n"
    "  --quiet              no progress lines\n"
    "\n"
    "Server options as for tally cumsum: --url URL (repeatable; requests\n"
    "are spread over the servers), --timeout-ms, --connect-timeout-ms,\n"
    "--retries, --chunk-bytes, --token, --cacert, --insecure, --verbose.\n"
    "\n"
    "Exits 0 when every request succeeded, else with the code of the first\n"
    "failure (1 server error, 3 no answer); the summary counts errors.\n"
    "\n"
    "Example: tally bench --concurrency 8 --duration 30 --shape 1024,1024\n";

typedef struct {
    /* shared, read-only while running */
    const cli_common *common;
    tally_dt dtype;
    int rank, axis;
    int64_t shape[TALLY_MAX_RANK];
    unsigned flags;
    size_t bytes;
    char *json; /* --format json: the request body, built once */
    size_t json_len;
    bool shm; /* --format shm */
    long count;         /* 0: until stop */
    atomic_long issued; /* requests claimed (when counting) */
    atomic_long done;   /* requests finished */
    atomic_long errors; /* of which failed */
    atomic_bool stop;
    pthread_mutex_t lock; /* guards first_error */
    tally_code first_code;
    char first_error[512];
} bench;

typedef struct {
    bench *b;
    pthread_t thread;
    double *lat_ms; /* every successful request's latency */
    size_t nlat, cap;
    int setup_rc;
} worker;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void record_error(bench *b, tally_code code, const char *msg)
{
    atomic_fetch_add(&b->errors, 1);
    pthread_mutex_lock(&b->lock);
    if (b->first_code == TALLYE_OK) {
        b->first_code = code;
        snprintf(b->first_error, sizeof b->first_error, "%s", msg);
    }
    pthread_mutex_unlock(&b->lock);
}

static void *run_worker(void *arg)
{
    worker *w = arg;
    bench *b = w->b;
    int rc;
    tally_client *c = cli_client("bench", b->common, -1, &rc);
    char *in = malloc(b->bytes ? b->bytes : 1);
    char *out = malloc(b->bytes ? b->bytes : 1);
    if (c == NULL || in == NULL || out == NULL) {
        record_error(b, TALLYE_NOMEM, "could not set up a client");
        free(in);
        free(out);
        tally_client_free(c);
        return NULL;
    }
    /* small values, so that float sums stay finite and integers vary */
    for (size_t i = 0; i < b->bytes; i++)
        in[i] = (char)((i * 7) & 0x3f);
    tally_shm *rin = NULL, *rout = NULL;
    tally_shm_place pin = {0}, pout = {0};
    if (b->shm) {
        void *min, *mout;
        tally_code code = tally_shm_new(c, b->bytes ? b->bytes : 1, &rin, &min,
                                        &pin.region);
        if (code == TALLYE_OK)
            code = tally_shm_new(c, b->bytes ? b->bytes : 1, &rout, &mout,
                                 &pout.region);
        if (code != TALLYE_OK) {
            record_error(b, code, tally_last_message(c));
            tally_shm_free(c, rin);
            atomic_store(&b->stop, true);
        } else {
            memcpy(min, in, b->bytes);
            pin.byte_size = pout.byte_size = b->bytes;
        }
    }
    while (!atomic_load(&b->stop)) {
        if (b->count > 0 && atomic_fetch_add(&b->issued, 1) >= b->count)
            break;
        double t0 = now_s();
        tally_code code;
        if (b->json != NULL) {
            char *answer = NULL;
            code = tally_http(c, "POST", "/v2/models/cumsum/infer",
                              "application/json", b->json, b->json_len, &answer,
                              NULL);
            tally_free(answer);
        } else if (b->shm) {
            code = tally_cumsum_shm(c, b->dtype, b->rank, b->shape, b->axis,
                                    b->flags, &pin, &pout);
        } else {
            code = tally_cumsum(c, b->dtype, b->rank, b->shape, b->axis,
                                b->flags, in, out);
        }
        double ms = (now_s() - t0) * 1e3;
        if (code != TALLYE_OK) {
            record_error(b, code, tally_last_message(c));
        } else {
            if (w->nlat == w->cap) {
                size_t cap = w->cap ? w->cap * 2 : 1024;
                double *p = realloc(w->lat_ms, cap * sizeof *p);
                if (p != NULL) {
                    w->lat_ms = p;
                    w->cap = cap;
                }
            }
            if (w->nlat < w->cap)
                w->lat_ms[w->nlat++] = ms;
        }
        atomic_fetch_add(&b->done, 1);
    }
    tally_shm_free(c, rout);
    tally_shm_free(c, rin);
    free(in);
    free(out);
    tally_client_free(c);
    return NULL;
}

/* The KServe JSON request for b's tensor: the values the raw form sends
 * (small integers, a valid number in every dtype), the shape, and the
 * scan's parameters. The datatype is KServe's name ("FP32"), so any
 * server of the protocol takes it (make bench-peers drives Python servers
 * with it). */
static bool json_body(bench *b, bool exclusive, bool reverse)
{
    size_t elems = b->bytes / tally_dt_size(b->dtype);
    size_t cap = 256 + elems * 4 + (size_t)b->rank * 24, n = 0;
    char *s = malloc(cap);
    if (s == NULL)
        return false;
    n += (size_t)snprintf(s + n, cap - n,
                          "{\"inputs\":[{\"name\":\"x\",\"datatype\":\"%s\","
                          "\"shape\":[",
                          tally_dt_kserve(b->dtype));
    for (int d = 0; d < b->rank; d++)
        n += (size_t)snprintf(s + n, cap - n, "%s%lld", d ? "," : "",
                              (long long)b->shape[d]);
    n += (size_t)snprintf(s + n, cap - n, "],\"data\":[");
    for (size_t i = 0; i < elems; i++)
        n += (size_t)snprintf(s + n, cap - n, "%s%u", i ? "," : "",
                              (unsigned)((i * 7) & 0x3f));
    n += (size_t)snprintf(s + n, cap - n,
                          "]}],\"parameters\":{\"axis\":%d,\"exclusive\":%s,"
                          "\"reverse\":%s}}",
                          b->axis, exclusive ? "true" : "false",
                          reverse ? "true" : "false");
    b->json = s;
    b->json_len = n;
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return NAN;
    size_t i = (size_t)ceil(p / 100.0 * (double)n);
    return sorted[i ? i - 1 : 0];
}

int cmd_bench(int argc, char **argv)
{
    const char *cmd = "bench";
    long concurrency = 4, duration = 10, count = 0, axis = -1;
    bool exclusive = false, reverse = false, quiet = false;
    const char *dtype_name = "float32", *shape_text = "65536";
    const char *format = "raw";
    cli_opt opts[] = {
        {"concurrency", OPT_LONG, &concurrency, false},
        {"duration", OPT_LONG, &duration, false},
        {"count", OPT_LONG, &count, false},
        {"dtype", OPT_STRING, &dtype_name, false},
        {"shape", OPT_STRING, &shape_text, false},
        {"axis", OPT_LONG, &axis, true},
        {"exclusive", OPT_FLAG, &exclusive, false},
        {"reverse", OPT_FLAG, &reverse, false},
        {"quiet", OPT_FLAG, &quiet, false},
        {"format", OPT_STRING, &format, false},
        {NULL, OPT_FLAG, NULL, false},
    };
    static bench b; /* large; and its atomics want static storage */
    memset(&b, 0, sizeof b);
    cli_common common;
    const char *pos[1];
    int npos;
    int rc = cli_begin(cmd, help, opts, &common, argc, argv, pos, 0, &npos);
    if (rc >= 0)
        return rc;
    if (concurrency < 1 || concurrency > 1024) {
        cli_say(cmd, "--concurrency must be 1 to 1024, not %ld", concurrency);
        return EXIT_USAGE;
    }
    if (duration < 1 && count == 0) {
        cli_say(cmd, "--duration must be at least 1 second");
        return EXIT_USAGE;
    }
    int t = tally_dt_parse(dtype_name);
    if (t < 0) {
        cli_say(cmd, "unknown --dtype \"%s\"", dtype_name);
        return EXIT_USAGE;
    }
    b.dtype = (tally_dt)t;
    if (!cli_parse_shape(cmd, shape_text, &b.rank, b.shape))
        return EXIT_USAGE;
    if (axis < -b.rank || axis >= b.rank) {
        cli_say(cmd, "--axis %ld is out of range for rank %d", axis, b.rank);
        return EXIT_USAGE;
    }
    b.axis = (int)axis;
    b.bytes = tally_dt_size(b.dtype);
    for (int d = 0; d < b.rank; d++) {
        if (b.shape[d] != 0
            && b.bytes > ((size_t)1 << 40) / (size_t)b.shape[d]) {
            cli_say(cmd, "--shape %s is too large", shape_text);
            return EXIT_USAGE;
        }
        b.bytes *= (size_t)b.shape[d];
    }
    b.flags =
        (exclusive ? TALLY_EXCLUSIVE : 0u) | (reverse ? TALLY_REVERSE : 0u);
    if (strcmp(format, "json") == 0) {
        if (!json_body(&b, exclusive, reverse)) {
            cli_say(cmd, "out of memory for the JSON request");
            return EXIT_SERVER;
        }
    } else if (strcmp(format, "shm") == 0) {
        b.shm = true;
    } else if (strcmp(format, "raw") != 0) {
        cli_say(cmd, "--format must be raw, json or shm, not \"%s\"", format);
        return EXIT_USAGE;
    }
    b.count = count;
    pthread_mutex_init(&b.lock, NULL);
    cli_resolve_urls(&common);
    b.common = &common;
    /* check the options once, on this thread, for a clean message */
    tally_client *probe = cli_client(cmd, &common, -1, &rc);
    if (probe == NULL)
        return rc;
    tally_client_free(probe);

    worker *ws = calloc((size_t)concurrency, sizeof *ws);
    if (ws == NULL) {
        cli_say(cmd, "out of memory");
        return EXIT_SERVER;
    }
    if (!quiet)
        fprintf(stderr,
                "tally bench: %s [%s] axis %d, %ld connections to %d "
                "server%s, %s\n",
                dtype_name, shape_text, b.axis, concurrency, common.nurls,
                common.nurls == 1 ? "" : "s",
                count > 0 ? "counting requests" : "timed");
    double start = now_s();
    long started = 0;
    for (long i = 0; i < concurrency; i++) {
        ws[i].b = &b;
        if (pthread_create(&ws[i].thread, NULL, run_worker, &ws[i]) != 0) {
            cli_say(cmd, "could not start thread %ld", i);
            atomic_store(&b.stop, true);
            break;
        }
        started++;
    }
    bool tty = isatty(2);
    long last_done = 0;
    double last_t = start;
    for (;;) {
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000 * 1000}, NULL);
        double now = now_s();
        long done = atomic_load(&b.done);
        if (count > 0 ? done >= count : now - start >= (double)duration)
            break;
        if (count > 0 && started < concurrency)
            break;
        if (now - last_t >= 1.0) {
            if (!quiet)
                fprintf(stderr,
                        "%s  %6.1f s  %8ld requests  %9.1f/s  %ld errors%s",
                        tty ? "\r" : "", now - start, done,
                        (double)(done - last_done) / (now - last_t),
                        atomic_load(&b.errors), tty ? "" : "\n");
            last_done = done;
            last_t = now;
        }
    }
    atomic_store(&b.stop, true);
    for (long i = 0; i < started; i++)
        pthread_join(ws[i].thread, NULL);
    double elapsed = now_s() - start;
    if (!quiet && tty)
        fputc('\n', stderr);

    size_t n = 0;
    for (long i = 0; i < started; i++)
        n += ws[i].nlat;
    double *all = malloc((n ? n : 1) * sizeof *all);
    size_t k = 0;
    for (long i = 0; i < started; i++) {
        if (all != NULL && ws[i].nlat > 0)
            memcpy(all + k, ws[i].lat_ms, ws[i].nlat * sizeof *all);
        k += ws[i].nlat;
        free(ws[i].lat_ms);
    }
    free(ws);
    if (all != NULL)
        qsort(all, n, sizeof *all, cmp_double);
    long done = atomic_load(&b.done), errors = atomic_load(&b.errors);
    double ok = (double)(done - errors);
    printf("tally bench: %ld requests in %.2f s, %ld connections, %d "
           "server%s\n",
           done, elapsed, concurrency, common.nurls,
           common.nurls == 1 ? "" : "s");
    printf("  requests/s  %.1f\n", ok / elapsed);
    printf(b.shm ? "  MB/s        %.1f (tensor bytes read and written in shared "
                   "memory)\n"
                 : "  MB/s        %.1f (tensor bytes sent and received)\n",
           ok * 2.0 * (double)b.bytes / elapsed / 1e6);
    if (all != NULL && n > 0)
        printf("  latency ms  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
               percentile(all, n, 50), percentile(all, n, 90),
               percentile(all, n, 99), all[n - 1]);
    printf("  errors      %ld\n", errors);
    free(all);
    free(b.json);
    if (errors > 0) {
        cli_say(cmd, "first error: %s", b.first_error);
        return cli_exit_code(b.first_code);
    }
    return EXIT_OK;
}
