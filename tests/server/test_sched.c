/*
 * test_sched.c - the scheduler (server/sched/) on its own: the job queue
 * (queue.h) by itself, then the scheduler with the fake backend that
 * records every launch and the fake clock the test moves (fake_sched.h),
 * and no HTTP.
 *
 * Each job carries a record of its own: how many times its done ran
 * (exactly once for an accepted job, never for a refused one), with which
 * status, and which device ran it. Devices can be made to fail (refused
 * launches, or late failures of in-place tensors), to hold a launch until
 * the test lets it go, and to see the client leave during a launch. Cold
 * devices build their kernels through the fake's prepare, which the test
 * holds, lets go, or makes fail.
 *
 * The sequences, which live in server/seq/, have test_seq.c.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "carry.h"
#include "check.h"
#include "clock.h"
#include "fake_sched.h"
#include "queue.h"
#include "scheduler.h"
#include "status.h"
#include "tx_half.h"

/* A job and what happened to it. */
typedef struct {
    job j;
    float data[16];
    atomic_int done;      /* how many times done ran */
    atomic_int ran_on;    /* the device that ran it; -1: none */
    atomic_bool gone;     /* the client has left */
    bool leave_in_launch; /* the client leaves while it runs */
    status_code status;
} rec;

/* The fake's look at each job it runs: the client leaves during the
 * launch if the test said so, and the job records its device. */
static void rec_ran(job *j, int device)
{
    rec *r = j->ctx;
    if (r->leave_in_launch)
        atomic_store(&r->gone, true);
    if (device != -1)
        atomic_store(&r->ran_on, device);
}

/* A scheduler over f's fake devices (the scheduler copies the backend). */
static sched *new_sched(fake *f, const sched_options *o)
{
    f->on_run = rec_ran;
    sched_backend b = fake_backend(f);
    return sched_new(o, &b);
}

static void start(sched *s)
{
    char msg[128];
    CHECK(sched_start(s, msg, sizeof msg) == ENG_E_OK, "start: %s", msg);
}

static void on_done(job *j)
{
    rec *r = j->ctx;
    r->status = j->status;
    atomic_fetch_add(&r->done, 1);
}

static bool probe(void *ctx)
{
    return atomic_load(&((rec *)ctx)->gone);
}

/* A float32 job of n elements in one line (so jobs of the same n batch),
 * in place unless out_of_place. */
static void make(rec *r, uint64_t n, tx_dtype t, uint64_t deadline)
{
    memset(r, 0, sizeof *r);
    atomic_init(&r->ran_on, -1);
    r->j.desc.dtype = t;
    r->j.desc.rank = 1;
    r->j.desc.shape[0] = n;
    r->j.in = r->data;
    r->j.out = r->data;
    r->j.deadline_ns = deadline;
    r->j.done = on_done;
    r->j.gone = probe;
    r->j.watch_fd = -1;
    r->j.ctx = r;
    CHECK(sched_prepare(&r->j) == STATUS_OK, "prepare: %s", r->j.msg);
}

static sched_options options(unsigned workers, unsigned devices, unsigned depth,
                             unsigned max_batch)
{
    static const char *const names[] = {"dev0", "dev1", "dev2", "dev3"};
    return (sched_options){.workers = workers,
                           .devices = devices,
                           .device_names = names,
                           .queue_depth = depth,
                           .max_batch = max_batch,
                           .device_max_failures = 1,
                           .clock = fake_clock};
}

/* Waits (a few seconds at most) until every rec in rs has completed. */
static bool all_done(rec *rs, size_t n)
{
    for (int tries = 0; tries < 5000; tries++) {
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            k += atomic_load(&rs[i].done) > 0;
        if (k == n)
            return true;
        uv_sleep(1);
    }
    return false;
}

static void check_once(rec *rs, size_t n, const char *what)
{
    for (size_t i = 0; i < n; i++)
        CHECK(atomic_load(&rs[i].done) == 1, "%s: job %zu done %d times", what,
              i, atomic_load(&rs[i].done));
}

/* ------------------------------------------------------------------------
 * The cases.
 */
static void status_table(void)
{
    for (int s = 0; s < STATUS_COUNT; s++) {
        const char *name = status_name((status_code)s);
        int http = status_http((status_code)s), grpc = status_grpc(s);
        CHECK(strcmp(name, "UNKNOWN") != 0 && status_text(s)[0] != '\0',
              "status %d", s);
        CHECK(s == STATUS_OK
                  ? http == 200 && grpc == 0
                  : http >= 400 && http < 600 && grpc > 0 && grpc <= 16,
              "%s: HTTP %d, gRPC %d", name, http, grpc);
    }
    for (int e = 0; e < ENG_NERRORS; e++)
        CHECK(strcmp(eng_err_name((eng_err)e),
                     status_name(status_from_eng((eng_err)e)))
                  == 0,
              "engine code %s keeps its name", eng_err_name((eng_err)e));
    CHECK(status_http(STATUS_AXIS) == 400
              && status_http(STATUS_TOO_LARGE) == 413
              && status_http(STATUS_NOMEM) == 503
              && status_http(STATUS_DEVICE) == 500
              && status_http(STATUS_QUEUE_FULL) == 503
              && status_http(STATUS_DEADLINE) == 504
              && status_http(STATUS_CANCELLED) == 499,
          "HTTP statuses");
    CHECK(status_grpc(STATUS_DEADLINE) == GRPC_DEADLINE_EXCEEDED
              && status_grpc(STATUS_QUEUE_FULL) == GRPC_RESOURCE_EXHAUSTED
              && status_grpc(STATUS_INVALID) == GRPC_INVALID_ARGUMENT
              && status_grpc(STATUS_CANCELLED) == GRPC_CANCELLED
              && status_grpc(STATUS_UNAUTHORIZED) == GRPC_UNAUTHENTICATED,
          "gRPC codes");
    CHECK(status_retry_later(STATUS_QUEUE_FULL)
              && !status_retry_later(STATUS_AXIS),
          "retry later");
}

static void prepare_refuses(void)
{
    rec r;
    memset(&r, 0, sizeof r);
    r.j.desc.dtype = TX_FLOAT32;
    r.j.desc.rank = 1;
    r.j.desc.shape[0] = 4;
    r.j.desc.axis = 3;
    CHECK(sched_prepare(&r.j) == STATUS_AXIS && r.j.msg[0] != '\0',
          "a bad axis is refused: %s", r.j.msg);
}

/* Deadlines: the tick fails a job whose deadline passed in the queue, and
 * not before; a worker drops one whose deadline passed before its launch,
 * and fails one whose launch ended after it. */
static void deadline_expiry(void)
{
    fake f;
    fake_init(&f);
    sched_options o = options(1, 1, 16, 1);
    sched *s = new_sched(&f, &o);
    atomic_store(&fake_now, 1000);
    rec r[3];
    make(&r[0], 8, TX_FLOAT32, 1100);
    make(&r[1], 8, TX_FLOAT32, 0); /* none */
    make(&r[2], 8, TX_FLOAT32, 5000);
    for (int i = 0; i < 3; i++)
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    sched_tick(s);
    CHECK(atomic_load(&r[0].done) == 0, "not expired at 1000");
    atomic_store(&fake_now, 1100);
    sched_tick(s);
    CHECK(atomic_load(&r[0].done) == 1 && r[0].status == STATUS_DEADLINE
              && r[0].j.started_ns == 0 && r[0].j.finished_ns == 1100
              && atomic_load(&r[0].ran_on) == -1,
          "expired in the queue at its deadline, unrun");
    CHECK(sched_queue_depth(s) == 2, "two left");
    /* the worker starts at 6000: r[2]'s deadline has passed, r[1] has
     * none */
    atomic_store(&fake_now, 6000);
    start(s);
    CHECK(all_done(r, 3), "all done");
    CHECK(r[1].status == STATUS_OK && atomic_load(&r[1].ran_on) == 0,
          "no deadline: ran");
    CHECK(r[2].status == STATUS_DEADLINE && atomic_load(&r[2].ran_on) == -1,
          "late for its launch: dropped unrun");
    sched_stop(s);
    CHECK(sched_counters_of(s)->expired == 2, "two expired: %llu",
          (unsigned long long)sched_counters_of(s)->expired);
    check_once(r, 3, "deadlines");
    CHECK(atomic_load(&f.streams_open) == 0, "streams closed");
    sched_free(s);
}

/* A full queue refuses at once and never calls done; a stopped scheduler
 * refuses as draining. */
static void full_queue(void)
{
    fake f;
    fake_init(&f);
    sched_options o = options(1, 1, 3, 1);
    sched *s = new_sched(&f, &o);
    rec r[5];
    for (int i = 0; i < 5; i++)
        make(&r[i], 8, TX_FLOAT32, 0);
    for (int i = 0; i < 3; i++)
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    CHECK(sched_submit(s, &r[3].j) == STATUS_QUEUE_FULL,
          "the fourth is refused");
    CHECK(sched_queue_depth(s) == 3, "depth 3");
    start(s);
    sched_stop(s); /* the drain: every queued job runs first */
    CHECK(sched_submit(s, &r[4].j) == STATUS_DRAINING, "stopped: draining");
    check_once(r, 3, "queued before the drain");
    CHECK(atomic_load(&r[3].done) == 0 && atomic_load(&r[4].done) == 0,
          "refused jobs never complete");
    for (int i = 0; i < 3; i++)
        CHECK(r[i].status == STATUS_OK, "job %d ran", i);
    sched_free(s);
}

/* Drain: jobs held behind a launch in progress all run once the stop
 * begins, before it returns. */
static void drain(void)
{
    fake f;
    fake_init(&f);
    atomic_store(&f.gate, true);
    sched_options o = options(2, 1, 64, 4);
    sched *s = new_sched(&f, &o);
    start(s);
    rec r[40];
    for (int i = 0; i < 40; i++) {
        make(&r[i], 8 + (unsigned)i % 3, TX_FLOAT32, 0);
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    }
    fake_wait_holding(&f);
    atomic_store(&f.open, true);
    sched_stop(s);
    check_once(r, 40, "drained");
    for (int i = 0; i < 40; i++)
        CHECK(r[i].status == STATUS_OK && atomic_load(&r[i].ran_on) == 0,
              "job %d ran on the device", i);
    sched_free(s);
}

/* Cancellation: a waiting job whose client leaves is dropped unrun; one
 * whose client leaves while it runs completes as cancelled; both counted. */
static void cancellation(void)
{
    fake f;
    fake_init(&f);
    atomic_store(&f.gate, true);
    sched_options o = options(1, 1, 16, 1);
    sched *s = new_sched(&f, &o);
    start(s);
    rec r[3];
    make(&r[0], 8, TX_FLOAT32, 0); /* its launch holds the worker */
    r[0].leave_in_launch = true;
    make(&r[1], 8, TX_INT32, 0); /* waits; its client leaves */
    make(&r[2], 8, TX_INT32, 0); /* waits; its client stays */
    CHECK(sched_submit(s, &r[0].j) == STATUS_OK, "submit 0");
    fake_wait_holding(&f);
    CHECK(sched_submit(s, &r[1].j) == STATUS_OK
              && sched_submit(s, &r[2].j) == STATUS_OK,
          "submit 1, 2");
    atomic_store(&r[1].gone, true);
    sched_tick(s);
    CHECK(atomic_load(&r[1].done) == 1 && r[1].status == STATUS_CANCELLED
              && atomic_load(&r[1].ran_on) == -1,
          "dropped unrun while queued");
    CHECK(sched_queue_depth(s) == 1, "the other stays queued");
    atomic_store(&f.open, true);
    CHECK(all_done(r, 3), "all done");
    CHECK(r[0].status == STATUS_CANCELLED, "left during its launch: %s",
          status_name(r[0].status));
    CHECK(r[2].status == STATUS_OK, "the one whose client stayed ran");
    sched_stop(s);
    const sched_counters *c = sched_counters_of(s);
    CHECK(c->cancelled_queued == 1 && c->cancelled_running == 1,
          "counted: queued %llu, running %llu",
          (unsigned long long)c->cancelled_queued,
          (unsigned long long)c->cancelled_running);
    check_once(r, 3, "cancellation");
    sched_free(s);
}

/* Jobs with a socket of their own are asked in one poll(2): a hung-up
 * client's job is dropped; one whose client is still there, or has sent
 * the bytes of a next request, stays. */
static void watched_sockets(void)
{
    fake f;
    fake_init(&f);
    sched_options o = options(1, 1, 16, 1);
    sched *s = new_sched(&f, &o);
    int a[2], b[2], c[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, a) == 0
              && socketpair(AF_UNIX, SOCK_STREAM, 0, b) == 0
              && socketpair(AF_UNIX, SOCK_STREAM, 0, c) == 0,
          "socketpairs");
    rec r[3];
    int fds[3] = {a[0], b[0], c[0]};
    for (int i = 0; i < 3; i++) {
        make(&r[i], 8, TX_FLOAT32, 0);
        r[i].j.watch_fd = fds[i];
        r[i].j.gone = NULL; /* the socket alone speaks */
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    }
    close(a[1]); /* hung up */
    CHECK(write(c[1], "GET", 3) == 3, "a pipelined request's bytes");
    sched_tick(s);
    CHECK(atomic_load(&r[0].done) == 1 && r[0].status == STATUS_CANCELLED,
          "the hung-up client's job is dropped");
    CHECK(atomic_load(&r[1].done) == 0 && atomic_load(&r[2].done) == 0
              && sched_queue_depth(s) == 2,
          "the others wait on");
    CHECK(sched_counters_of(s)->cancelled_queued == 1, "counted");
    start(s);
    sched_stop(s);
    CHECK(r[1].status == STATUS_OK && r[2].status == STATUS_OK, "they ran");
    check_once(r, 3, "watched");
    close(a[0]);
    close(b[0]);
    close(b[1]);
    close(c[0]);
    close(c[1]);
    sched_free(s);
}

/* Batching: while the worker is held, compatible jobs gather and run as
 * one launch (up to --max-batch); incompatible ones, strided ones and
 * large ones run alone. */
static void batching(void)
{
    fake f;
    fake_init(&f);
    atomic_store(&f.gate, true);
    sched_options o = options(1, 1, 64, 4);
    sched *s = new_sched(&f, &o);
    start(s);
    rec first, r[8];
    make(&first, 4, TX_INT8, 0);
    CHECK(sched_submit(s, &first.j) == STATUS_OK, "submit the first");
    fake_wait_holding(&f);
    /* five compatible, one of another dtype, one strided, one too large */
    for (int i = 0; i < 5; i++)
        make(&r[i], 8, TX_FLOAT32, 0);
    make(&r[5], 8, TX_INT32, 0);
    make(&r[6], 8, TX_FLOAT32, 0);
    static const eng_view v = {0};
    r[6].j.iv = r[6].j.ov = &v; /* strided: never batched */
    make(&r[7], 8, TX_FLOAT32, 0);
    r[7].j.lines.bytes = SCHED_BATCH_BYTES + 1; /* too large to batch */
    for (int i = 0; i < 8; i++)
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    atomic_store(&f.open, true);
    CHECK(all_done(r, 8), "all done");
    sched_stop(s);
    check_once(r, 8, "batching");
    /* launches: first (1), then 4 of the five, the int32 one... in queue
     * order: [r0..r3] (4, the limit), r4 with... r4 is compatible with r6?
     * no (strided), with r7? no (too large): alone. */
    size_t sizes[16] = {0}, n = f.nlaunches;
    for (size_t i = 0; i < n && i < 16; i++)
        sizes[i] = f.launch_jobs[i];
    CHECK(n == 6, "6 launches, not %zu", n);
    CHECK(n == 6 && sizes[0] == 1 && sizes[1] == 4 && sizes[2] == 1
              && sizes[3] == 1 && sizes[4] == 1 && sizes[5] == 1,
          "launch sizes %zu %zu %zu %zu %zu %zu", sizes[0], sizes[1], sizes[2],
          sizes[3], sizes[4], sizes[5]);
    const sched_counters *c = sched_counters_of(s);
    CHECK(c->batched_jobs == 9 && c->batches[2] == 1, "counted: %llu jobs",
          (unsigned long long)c->batched_jobs);
    for (int i = 0; i < 8; i++)
        CHECK(r[i].j.batch == (i < 4 ? 4u : 1u), "job %d in a batch of %u", i,
              r[i].j.batch);
    sched_free(s);
}

/* Failover to another device: device 0 refuses its launches; its jobs run
 * again on the host (their inputs are intact), it leaves the pool, its
 * worker stops, and device 1 runs the rest. */
static void failover_device(void)
{
    fake f;
    fake_init(&f);
    f.fail[0] = ENG_E_LAUNCH;
    /* device 1 holds its first launch until device 0 has failed, so that
     * device 0 surely gets a job */
    atomic_store(&f.gate, true);
    f.gate_device = 2;
    sched_options o = options(2, 2, 64, 1);
    sched *s = new_sched(&f, &o);
    start(s);
    rec r[30];
    for (int i = 0; i < 30; i++) {
        make(&r[i], 8, TX_FLOAT32, 0);
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    }
    sched_pool p = sched_devices(s);
    for (int tries = 0; tries < 5000 && p.up == 2; tries++) {
        p = sched_devices(s);
        uv_sleep(1);
    }
    atomic_store(&f.open, true);
    CHECK(all_done(r, 30), "all done");
    p = sched_devices(s);
    CHECK(p.devices == 2 && p.up == 1 && p.compiling == 0 && !p.on_host,
          "device 0 left: %u of %u up", p.up, p.devices);
    int host = 0, dev1 = 0;
    for (int i = 0; i < 30; i++) {
        CHECK(r[i].status == STATUS_OK, "job %d: %s", i,
              status_name(r[i].status));
        host += atomic_load(&r[i].ran_on) == FAKE_HOST_DEV;
        dev1 += atomic_load(&r[i].ran_on) == 1;
    }
    const sched_counters *c = sched_counters_of(s);
    CHECK(host >= 1 && host + dev1 == 30 && c->host_reruns == (unsigned)host
              && c->device_errors[0] >= 1 && c->device_jobs[0] == 0,
          "host reran %d, device 1 ran %d", host, dev1);
    textbuf tb;
    textbuf_init(&tb, 1024);
    sched_render_metrics(s, &tb);
    size_t len;
    char *text = textbuf_take(&tb, &len);
    char want[128];
    snprintf(want, sizeof want, "tally_host_reruns_total %d\n", host);
    CHECK(text != NULL && strstr(text, "tally_device_up{device=\"dev0\"} 0\n")
              && strstr(text, "tally_device_up{device=\"dev1\"} 1\n")
              && strstr(text, want) && strstr(text, "tally_host_fallback 0\n")
              && strstr(text, "tally_queue_depth 0\n"),
          "the scheduler's section: %s", text ? text : "(none)");
    free(text);
    sched_stop(s);
    check_once(r, 30, "failover");
    CHECK(atomic_load(&f.streams_open) == 0, "streams closed");
    sched_free(s);
}

/* Failover to the host: the only device fails late. An in-place tensor it
 * may have half-written fails with the device's error; one out of place
 * runs again on the host; once the device has left, the host backend runs
 * every job. */
static void failover_host(void)
{
    fake f;
    fake_init(&f);
    f.fail[0] = ENG_E_DEVICE;
    sched_options o = options(1, 1, 64, 1);
    o.device_max_failures = 2;
    sched *s = new_sched(&f, &o);
    start(s);
    rec r[6];
    float out[16];
    for (int i = 0; i < 6; i++)
        make(&r[i], 8, TX_FLOAT32, 0);
    r[1].j.out = out; /* out of place: its input survives */
    for (int i = 0; i < 6; i++) {
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
        CHECK(all_done(&r[i], 1), "job %d done", i); /* one at a time */
    }
    CHECK(r[0].status == STATUS_DEVICE && atomic_load(&r[0].ran_on) == -1,
          "in place, half-written: fails (%s)", status_name(r[0].status));
    CHECK(r[1].status == STATUS_OK && atomic_load(&r[1].ran_on) == FAKE_HOST_DEV,
          "out of place: rerun on the host (%s)", status_name(r[1].status));
    for (int i = 2; i < 6; i++)
        CHECK(r[i].status == STATUS_OK && atomic_load(&r[i].ran_on) == FAKE_HOST_DEV,
              "job %d on the host: %s", i, status_name(r[i].status));
    sched_pool p = sched_devices(s);
    CHECK(p.up == 0 && p.on_host, "every device left; the host runs every job");
    sched_stop(s);
    check_once(r, 6, "host fallback");
    sched_free(s);
}

/* Stops and frees s, after which every one of r[0..n) has completed
 * exactly once and every stream of f is closed. */
static void stop_and_check(sched *s, fake *f, rec *r, size_t n,
                           const char *what)
{
    sched_stop(s);
    check_once(r, n, what);
    CHECK(atomic_load(&f->streams_open) == 0, "%s: streams closed", what);
    sched_free(s);
}

/* The scheduler's section of /metrics, as text to search (freed by the
 * caller). */
static char *metrics_text(sched *s)
{
    textbuf tb;
    textbuf_init(&tb, 4096);
    sched_render_metrics(s, &tb);
    size_t len;
    return textbuf_take(&tb, &len);
}

/* Waits (a few seconds at most) until the pool has `up` devices in it
 * and none compiling. */
static bool pool_settles(sched *s, unsigned up)
{
    for (int tries = 0; tries < 5000; tries++) {
        sched_pool p = sched_devices(s);
        if (p.up == up && p.compiling == 0)
            return true;
        uv_sleep(1);
    }
    return false;
}

/* Submits n jobs of 8 elements and waits until every one has completed
 * with STATUS_OK; returns how many ran on the host backend, and sets
 * *on[d] to how many ran on each device. */
static int run_jobs(sched *s, rec *r, int n, int on[4])
{
    for (int i = 0; i < n; i++) {
        make(&r[i], 8, TX_FLOAT32, 0);
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    }
    CHECK(all_done(r, (size_t)n), "all done");
    int host = 0;
    memset(on, 0, 4 * sizeof on[0]);
    for (int i = 0; i < n; i++) {
        CHECK(r[i].status == STATUS_OK, "job %d: %s", i,
              status_name(r[i].status));
        int d = atomic_load(&r[i].ran_on);
        if (d == FAKE_HOST_DEV) {
            host++;
            CHECK(strcmp(r[i].j.device, "host") == 0, "job %d's device: %s", i,
                  r[i].j.device);
        } else if (d >= 0 && d < 4) {
            on[d]++;
        }
    }
    return host;
}

/* Cold devices: while their kernels build, their workers run every job on
 * the host backend, and readiness and /metrics say so; each joins the
 * pool when its build returns, and from then on runs the jobs itself. */
static void build_joins(void)
{
    fake f;
    fake_init(&f);
    sched_options o = options(2, 2, 64, 1);
    o.cold[0] = o.cold[1] = true;
    sched *s = new_sched(&f, &o);
    start(s);
    rec r[20];
    int on[4];
    int host = run_jobs(s, r, 20, on);
    CHECK(host == 20, "while building, the host ran %d of 20", host);
    sched_pool p = sched_devices(s);
    CHECK(p.devices == 2 && p.up == 0 && p.compiling == 2 && !p.on_host,
          "building: %u up, %u compiling", p.up, p.compiling);
    const sched_counters *c = sched_counters_of(s);
    CHECK(c->host_jobs == 20 && c->device_jobs[0] == 0
              && c->device_jobs[1] == 0 && c->host_reruns == 0,
          "counted: %llu on the host", (unsigned long long)c->host_jobs);
    char *text = metrics_text(s);
    CHECK(text != NULL
              && strstr(text, "tally_device_up{device=\"dev0\"} 0\n")
              && strstr(text, "tally_device_state{device=\"dev0\",state="
                              "\"compiling\"} 1\n")
              && strstr(text, "tally_device_state{device=\"dev1\",state="
                              "\"up\"} 0\n")
              && strstr(text, "tally_host_jobs_total 20\n")
              && strstr(text, "tally_host_fallback 0\n"),
          "building: %s", text ? text : "(none)");
    free(text);

    atomic_store(&f.build_open, true);
    CHECK(pool_settles(s, 2), "both joined");
    host = run_jobs(s, r, 20, on);
    CHECK(host == 0 && on[0] + on[1] == 20,
          "once joined: host %d, dev0 %d, dev1 %d", host, on[0], on[1]);
    CHECK(c->device_jobs[0] + c->device_jobs[1] == 20 && c->host_jobs == 20,
          "counted");
    text = metrics_text(s);
    CHECK(text != NULL && strstr(text, "tally_device_up{device=\"dev1\"} 1\n")
              && strstr(text, "tally_device_state{device=\"dev1\",state="
                              "\"up\"} 1\n")
              && strstr(text, "tally_device_state{device=\"dev1\",state="
                              "\"compiling\"} 0\n")
              && strstr(text, "tally_device_build_seconds{device=\"dev1\"} "),
          "joined: %s", text ? text : "(none)");
    free(text);
    CHECK(atomic_load(&f.builds) == 2, "one build per cold device");
    stop_and_check(s, &f, r, 20, "build_joins");
}

/* A device whose build fails never joins: the other one runs every job
 * once it joins. With a single device whose build fails, the host backend runs
 * every job for good. A device built before the start is in the pool at
 * once. */
static void build_fails(void)
{
    fake f;
    fake_init(&f);
    f.build_fail[0] = ENG_E_DEVICE;
    sched_options o = options(2, 2, 64, 1);
    o.cold[0] = o.cold[1] = true;
    sched *s = new_sched(&f, &o);
    start(s);
    rec r[20];
    int on[4];
    atomic_store(&f.build_open, true);
    CHECK(pool_settles(s, 1), "dev1 joined, dev0 failed");
    sched_pool p = sched_devices(s);
    CHECK(p.up == 1 && p.compiling == 0 && !p.on_host, "one up");
    int host = run_jobs(s, r, 20, on);
    CHECK(host == 0 && on[1] == 20, "dev1 ran every job (host %d, dev0 %d)",
          host, on[0]);
    char *text = metrics_text(s);
    CHECK(text != NULL
              && strstr(text, "tally_device_state{device=\"dev0\",state="
                              "\"failed\"} 1\n")
              && strstr(text, "tally_device_up{device=\"dev0\"} 0\n"),
          "failed: %s", text ? text : "(none)");
    free(text);
    stop_and_check(s, &f, r, 20, "build_fails");

    /* the only device fails to build */
    fake_init(&f);
    f.build_fail[0] = ENG_E_DEVICE;
    o = options(1, 1, 64, 1);
    o.cold[0] = true;
    s = new_sched(&f, &o);
    start(s);
    atomic_store(&f.build_open, true);
    CHECK(pool_settles(s, 0), "it failed");
    p = sched_devices(s);
    CHECK(p.on_host, "the host runs every job");
    host = run_jobs(s, r, 10, on);
    CHECK(host == 10, "host ran %d of 10", host);
    text = metrics_text(s);
    CHECK(text != NULL && strstr(text, "tally_host_fallback 1\n"),
          "fallback: %s", text ? text : "(none)");
    free(text);
    stop_and_check(s, &f, r, 10, "build_fails, alone");

    /* a warm device beside a cold one: in the pool from the start */
    fake_init(&f);
    o = options(2, 2, 64, 1);
    o.cold[1] = true;
    s = new_sched(&f, &o);
    start(s);
    p = sched_devices(s);
    CHECK(p.up == 1 && p.compiling == 1, "dev0 up, dev1 compiling");
    host = run_jobs(s, r, 20, on);
    CHECK(on[1] == 0 && host + on[0] == 20, "dev1 ran none while building");
    CHECK(atomic_load(&f.builds) == 1, "no build for a warm device");
    stop_and_check(s, &f, r, 20, "build_fails, warm beside cold");
}

/* A drain during a build: sched_stop tells the build to stop, runs the
 * queued jobs on the host backend and returns; the device never joined. */
static void build_cancelled(void)
{
    fake f;
    fake_init(&f);
    sched_options o = options(1, 1, 64, 1);
    o.cold[0] = true;
    sched *s = new_sched(&f, &o);
    start(s);
    /* the worker holds its first launch, so that the rest wait queued */
    atomic_store(&f.gate, true);
    rec r[8];
    for (int i = 0; i < 8; i++) {
        make(&r[i], 8, TX_FLOAT32, 0);
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %d", i);
    }
    fake_wait_holding(&f);
    /* the drain must come while the build runs: its thread may not have
     * reached prepare yet (a drain before it skips the build, and then
     * nothing would see it: this case failed once in make check) */
    for (int i = 0; i < 5000 && atomic_load(&f.builds) == 0; i++)
        uv_sleep(1);
    CHECK(atomic_load(&f.builds) == 1, "the build started");
    atomic_store(&f.open, true);
    sched_stop(s); /* returns only when the build has stopped */
    check_once(r, 8, "build_cancelled");
    for (int i = 0; i < 8; i++)
        CHECK(r[i].status == STATUS_OK && atomic_load(&r[i].ran_on) == FAKE_HOST_DEV,
              "job %d on the host: %s", i, status_name(r[i].status));
    CHECK(atomic_load(&f.builds_cancelled) == 1, "the build saw the drain");
    CHECK(sched_devices(s).compiling == 1, "it never joined");
    CHECK(atomic_load(&f.streams_open) == 0, "streams closed");
    sched_free(s);
}

/* Inline: on the caller's thread, no done, counted as a launch of one. */
static void inline_run(void)
{
    fake f;
    fake_init(&f);
    sched_options o = options(1, 1, 4, 1);
    sched *s = new_sched(&f, &o);
    rec r;
    make(&r, 3, TX_INT64, 0);
    sched_run_inline(s, &r.j);
    CHECK(r.j.status == STATUS_OK && atomic_load(&r.ran_on) == -2
              && atomic_load(&r.done) == 0 && r.j.batch == 1,
          "ran inline");
    CHECK(sched_counters_of(s)->batches[0] == 1, "counted as a batch of 1");
    sched_free(s);
}

/* Every path at once, many times over: each accepted job completes
 * exactly once, a refused one never. Random expiries, departures, a
 * failing device and a small queue; the seed is printed. */
static void exactly_once(void)
{
    enum { N = 400 };
    fake f;
    fake_init(&f);
    f.fail[1] = ENG_E_LAUNCH;
    sched_options o = options(3, 2, 64, 8);
    o.device_max_failures = 3;
    sched *s = new_sched(&f, &o);
    char msg[128];
    atomic_store(&fake_now, 1);
    CHECK(sched_start(s, msg, sizeof msg) == ENG_E_OK, "start: %s", msg);
    rec *r = calloc(N, sizeof *r);
    bool *accepted = calloc(N, sizeof *accepted);
    for (int i = 0; i < N; i++) {
        make(&r[i], 4 + check_below(3), check_below(2) ? TX_FLOAT32 : TX_INT16,
             check_below(4) == 0 ? 1 + check_below(200) : 0);
        r[i].leave_in_launch = check_below(10) == 0;
        accepted[i] = sched_submit(s, &r[i].j) == STATUS_OK;
        if (check_below(8) == 0)
            atomic_store(&r[i].gone, true);
        if (check_below(4) == 0) {
            atomic_fetch_add(&fake_now, check_below(20));
            sched_tick(s);
        }
    }
    sched_stop(s);
    size_t n_ok = 0;
    for (int i = 0; i < N; i++) {
        int d = atomic_load(&r[i].done);
        CHECK(d == (accepted[i] ? 1 : 0), "job %d: accepted %d, done %d", i,
              accepted[i], d);
        n_ok += accepted[i];
    }
    CHECK(n_ok > 0, "some accepted");
    free(r);
    free(accepted);
    sched_free(s);
}

/* ------------------------------------------------------------------------
 * The queue on its own (queue.h).
 */
static job make_job(tx_dtype t, uint64_t n, uint64_t inner, bool exclusive,
                    uint64_t deadline)
{
    job j;
    memset(&j, 0, sizeof j);
    j.lines.dtype = t;
    j.lines.n = n;
    j.lines.inner = inner;
    j.lines.exclusive = exclusive;
    j.deadline_ns = deadline;
    return j;
}

/* A pop of at most max jobs, every size batchable, no waiting. */
static size_t pop(job_queue *q, job **out, size_t max)
{
    queue_take how = {max, SIZE_MAX, 0};
    return queue_pop(q, out, &how);
}

static void queue_order(void)
{
    job_queue q;
    queue_init(&q, 64);
    job jobs[20];
    size_t order[20];
    for (size_t i = 0; i < 20; i++)
        order[i] = i;
    /* shuffled dtypes, so that no two neighbours batch together */
    for (size_t i = 0; i < 20; i++) {
        jobs[i] = make_job((tx_dtype)(i % TX_NDTYPES), 100 + i, 1, false, 0);
        CHECK(queue_push(&q, &jobs[i]), "push %zu", i);
    }
    CHECK(queue_depth(&q) == 20, "depth %zu", queue_depth(&q));
    for (size_t i = 0; i < 20; i++) {
        job *out[4];
        size_t n = pop(&q, out, 4);
        CHECK(n == 1 && out[0] == &jobs[order[i]], "pop %zu: %zu jobs", i, n);
    }
    CHECK(queue_depth(&q) == 0, "empty");
    queue_destroy(&q);
}

static void queue_capacity(void)
{
    job_queue q;
    size_t cap = 1 + check_below(16);
    printf("  capacity %zu\n", cap);
    queue_init(&q, cap);
    job jobs[17];
    for (size_t i = 0; i < cap; i++) {
        jobs[i] = make_job(TX_FLOAT32, i + 1, 1, false, 0);
        CHECK(queue_push(&q, &jobs[i]), "push %zu of %zu", i, cap);
    }
    jobs[cap] = make_job(TX_FLOAT32, 99, 1, false, 0);
    CHECK(!queue_push(&q, &jobs[cap]), "a full queue refuses");
    CHECK(queue_depth(&q) == cap, "depth %zu", queue_depth(&q));
    job *out[1];
    CHECK(pop(&q, out, 1) == 1 && out[0] == &jobs[0], "pop head");
    CHECK(queue_push(&q, &jobs[cap]), "room again after a pop");
    queue_destroy(&q);
}

static void queue_compatible(void)
{
    job_queue q;
    queue_init(&q, 64);
    /* a: float32 n=8; b: another dtype; c: float32 n=8 exclusive; d, e:
     * like a; f: like a but another line length */
    job a = make_job(TX_FLOAT32, 8, 1, false, 0);
    job b = make_job(TX_INT32, 8, 1, false, 0);
    job c = make_job(TX_FLOAT32, 8, 1, true, 0);
    job d = make_job(TX_FLOAT32, 8, 1, false, 0);
    job e = make_job(TX_FLOAT32, 8, 1, false, 0);
    job f = make_job(TX_FLOAT32, 9, 1, false, 0);
    job g = make_job(TX_FLOAT32, 8, 2, false, 0);
    job *all[] = {&a, &b, &c, &d, &e, &f, &g};
    for (size_t i = 0; i < 7; i++)
        queue_push(&q, all[i]);
    /* each pop's jobs, in order; the queue is closed first so that a pop
     * finding it empty fails the case instead of waiting */
    queue_close(&q);
    job *want[][2] = {{&a, &d},   {&b, NULL}, {&c, NULL},
                      {&e, NULL}, {&f, NULL}, {&g, NULL}};
    for (size_t i = 0; i < 6; i++) {
        job *out[8];
        size_t n = pop(&q, out, i == 0 ? 2 : 8);
        size_t expect = want[i][1] != NULL ? 2 : 1;
        CHECK(n == expect && out[0] == want[i][0]
                  && (expect == 1 || out[1] == want[i][1]),
              "pop %zu took %zu jobs", i, n);
    }
    queue_destroy(&q);
}

static void queue_expiry(void)
{
    job_queue q;
    queue_init(&q, 64);
    job a = make_job(TX_FLOAT32, 8, 1, false, 0);   /* no deadline */
    job b = make_job(TX_FLOAT32, 8, 1, false, 100); /* expired at 100 */
    job c = make_job(TX_INT8, 8, 1, false, 300);
    job d = make_job(TX_INT8, 8, 1, false, 200);
    job *all[] = {&a, &b, &c, &d};
    for (size_t i = 0; i < 4; i++)
        queue_push(&q, all[i]);
    job *out[8];
    CHECK(queue_expire(&q, 50, out, 8) == 0, "nothing expired at 50");
    size_t n = queue_expire(&q, 200, out, 8);
    CHECK(n == 2 && out[0] == &b && out[1] == &d, "b and d at 200: %zu", n);
    CHECK(queue_depth(&q) == 2, "a and c remain");
    n = queue_expire(&q, 1000, out, 1);
    CHECK(n == 1 && out[0] == &c, "at most max: %zu", n);
    n = pop(&q, out, 8);
    CHECK(n == 1 && out[0] == &a, "a is never expired");
    queue_destroy(&q);
}

static void queue_close_drains(void)
{
    job_queue q;
    queue_init(&q, 8);
    job a = make_job(TX_FLOAT32, 8, 1, false, 0);
    job b = make_job(TX_INT8, 8, 1, false, 0);
    queue_push(&q, &a);
    queue_close(&q);
    CHECK(!queue_push(&q, &b), "a closed queue refuses");
    job *out[2];
    CHECK(pop(&q, out, 2) == 1 && out[0] == &a, "what was queued drains");
    CHECK(pop(&q, out, 2) == 0, "then pops return 0 without waiting");
    queue_destroy(&q);
}

/* Jobs larger than batch_bytes are taken alone, and smaller ones are not
 * batched with them. */
static void queue_batch_bytes(void)
{
    job_queue q;
    queue_init(&q, 64);
    job big = make_job(TX_FLOAT32, 8, 1, false, 0);
    job small1 = big, small2 = big, big2 = big;
    big.lines.bytes = 2000;
    small1.lines.bytes = small2.lines.bytes = 100;
    big2.lines.bytes = 3000;
    job *all[] = {&big, &small1, &big2, &small2};
    for (size_t i = 0; i < 4; i++)
        queue_push(&q, all[i]);
    queue_close(&q);
    queue_take how = {8, 1000, 0};
    job *out[8];
    size_t n = queue_pop(&q, out, &how);
    CHECK(n == 1 && out[0] == &big, "a large head goes alone: %zu", n);
    n = queue_pop(&q, out, &how);
    CHECK(n == 2 && out[0] == &small1 && out[1] == &small2,
          "small ones batch past a large one: %zu", n);
    n = queue_pop(&q, out, &how);
    CHECK(n == 1 && out[0] == &big2, "then the other large one: %zu", n);
    queue_destroy(&q);
}

/* With other workers waiting, a worker takes only its share of a batch and
 * leaves the rest to them; with none waiting it may hold the head job for
 * company up to the delay, and no longer. */
typedef struct {
    job_queue *q;
    queue_take how;
    size_t got;
    job *out[16];
} popper;

static void popper_run(void *arg)
{
    popper *p = arg;
    p->got = queue_pop(p->q, p->out, &p->how);
}

static void queue_fair_share(void)
{
    job_queue q;
    queue_init(&q, 64);
    popper idle = {&q, {8, SIZE_MAX, 0}, 0, {NULL}};
    uv_thread_t t;
    CHECK(uv_thread_create(&t, popper_run, &idle) == 0, "thread");
    unsigned waiting = 0;
    for (int i = 0; i < 200 && waiting == 0; i++) {
        uv_sleep(5); /* until the idle worker waits in the queue */
        mutex_lock(&q.mu);
        waiting = q.waiting;
        mutex_unlock(&q.mu);
    }
    CHECK(waiting == 1, "a worker waits");
    /* six compatible jobs arrive while it waits, queued under the lock so
     * that it cannot take any before this pop */
    job jobs[6];
    mutex_lock(&q.mu);
    for (int i = 0; i < 6; i++) {
        jobs[i] = make_job(TX_FLOAT32, 8, 1, false, 0);
        list_push_back(&q.jobs, &jobs[i].link);
        q.depth++;
    }
    mutex_unlock(&q.mu);
    job *out[8];
    size_t n = pop(&q, out, 8);
    uv_cond_signal(&q.cv); /* in case the idle one slept through it */
    uv_thread_join(&t);
    CHECK(n + idle.got == 6, "all six taken: %zu + %zu", n, idle.got);
    CHECK(n <= 3 && idle.got >= 3, "shared: %zu and %zu", n, idle.got);

    /* company: a second job arriving within the delay joins the first */
    job a = make_job(TX_FLOAT32, 8, 1, false, 0), b = a;
    a.enqueued_ns = now_ns();
    queue_push(&q, &a);
    popper waiter = {&q, {8, SIZE_MAX, 300000000}, 0, {NULL}}; /* 300 ms */
    CHECK(uv_thread_create(&t, popper_run, &waiter) == 0, "thread");
    uv_sleep(50);
    queue_push(&q, &b);
    uv_thread_join(&t);
    CHECK(waiter.got == 2, "the delay let b join a: %zu", waiter.got);
    /* and no longer than the delay */
    job c = make_job(TX_FLOAT32, 8, 1, false, 0);
    c.enqueued_ns = now_ns();
    queue_push(&q, &c);
    queue_take brief = {8, SIZE_MAX, 20000000}; /* 20 ms */
    uint64_t t0 = now_ns();
    n = queue_pop(&q, out, &brief);
    uint64_t waited = now_ns() - t0;
    CHECK(n == 1 && waited >= 15000000 && waited < 1000000000,
          "alone after the delay: %zu jobs, %llu ns", n,
          (unsigned long long)waited);
    queue_destroy(&q);
}

/* ------------------------------------------------------------------------
 * Placement by cost: one worker, one device, launches one job each, so
 * that every decision follows the last one's measurement on the fake
 * clock, which each launch moves on by its backend's cost.
 */

/* Runs n jobs through s in one go (a backlog, as under load) and
 * counts where they ran: *dev on device 0, *host on the host. */
static void place_phase(sched *s, rec *r, size_t n, size_t *dev, size_t *host)
{
    for (size_t i = 0; i < n; i++)
        make(&r[i], 16, TX_FLOAT32, 0);
    for (size_t i = 0; i < n; i++)
        CHECK(sched_submit(s, &r[i].j) == STATUS_OK, "submit %zu", i);
    CHECK(all_done(r, n), "%zu jobs done", n);
    *dev = *host = 0;
    for (size_t i = 0; i < n; i++) {
        int on = atomic_load(&r[i].ran_on);
        CHECK(r[i].status == STATUS_OK, "job %zu: %s", i, status_name(r[i].status));
        CHECK(r[i].j.placement != NULL, "job %zu names its placement", i);
        *dev += on == 0;
        *host += on == FAKE_HOST_DEV;
    }
}

/* The last `tail` of n jobs: how many ran on the host. */
static size_t host_in_tail(const rec *r, size_t n, size_t tail)
{
    size_t k = 0;
    for (size_t i = n - tail; i < n; i++)
        k += atomic_load(&r[i].ran_on) == FAKE_HOST_DEV;
    return k;
}

/* A started scheduler over f (initialised here) with one worker, one
 * device and `placement`, where a launch costs dev_ns on the device and
 * host_ns on the host. */
static sched *cost_sched(fake *f, unsigned long long dev_ns,
                         unsigned long long host_ns, unsigned placement,
                         unsigned depth)
{
    fake_init(f);
    atomic_store(&f->cost_ns[0], dev_ns);
    atomic_store(&f->cost_ns[4], host_ns);
    sched_options o = options(1, 1, depth, 1);
    o.placement = placement;
    sched *s = new_sched(f, &o);
    start(s);
    return s;
}

/* tally_placements_total{backend, reason} in the metrics text m; 0 when
 * absent. */
static unsigned long long placed(const char *m, const char *backend,
                                 const char *reason)
{
    char key[128];
    snprintf(key, sizeof key, "{backend=\"%s\",reason=\"%s\"} ", backend,
             reason);
    const char *p = strstr(m, key);
    return p != NULL ? strtoull(p + strlen(key), NULL, 10) : 0;
}

static void placement_cost(void)
{
    /* 600 a phase: the idle host's first turn to be explored again comes
     * within 64 x 4 launches of the busy one's (scheduler.h) */
    enum { N = 600 };
    static rec r[N];
    fake f;
    /* a device five times slower than the host's cores (a GPU behind
     * PCIe beside idle cores) */
    sched *s = cost_sched(&f, 50000, 10000, SCHED_PLACE_COST, N);
    size_t dev, host;
    place_phase(s, r, N, &dev, &host);
    printf("    slow device: %zu on the device, %zu on the host\n", dev, host);
    /* 3 to measure it, then one in SCHED_EXPLORE_EVERY x 5 */
    CHECK(host >= N - 3 - N / (SCHED_EXPLORE_EVERY * 5) - 1 && dev >= 3,
          "the host takes the work, the device is measured: %zu / %zu", dev,
          host);
    CHECK(strcmp(r[N - 1].j.placement, "cost") == 0
              || strcmp(r[N - 1].j.placement, "explore") == 0,
          "placed by cost: %s", r[N - 1].j.placement);
    char *m = metrics_text(s);
    CHECK(strstr(m, "tally_placements_total{backend=\"host\",reason=\"cost\"}")
              != NULL
              && strstr(m, "tally_placements_total{backend=\"dev0\",reason="
                           "\"explore\"}")
                     != NULL,
          "metrics name the placements:\n%s", m);
    unsigned long long hc = placed(m, "host", "cost"),
                       he = placed(m, "host", "explore"),
                       dc = placed(m, "dev0", "cost"),
                       de = placed(m, "dev0", "explore");
    CHECK(hc + he == host && dc + de == dev && dc == 0,
          "counted by backend and reason: host %llu+%llu of %zu, device "
          "%llu+%llu of %zu",
          hc, he, host, dc, de, dev);
    free(m);

    /* the cores get busy: the host is now four times slower than the
     * device, and the work moves within a few launches */
    atomic_store(&f.cost_ns[4], 200000);
    place_phase(s, r, N, &dev, &host);
    printf("    busy host: %zu on the device, %zu on the host\n", dev, host);
    CHECK(dev >= N - 3 - N / SCHED_EXPLORE_EVERY - 1,
          "the device takes the work: %zu / %zu", dev, host);
    /* and back: the host is measured again at its exploring turn, and
     * takes the work back from there */
    atomic_store(&f.cost_ns[4], 10000);
    place_phase(s, r, N, &dev, &host);
    printf("    idle host again: %zu on the device, %zu on the host\n", dev,
           host);
    CHECK(host_in_tail(r, N, 50) >= 48,
          "the host takes the work back: %zu of the last 50",
          host_in_tail(r, N, 50));
    stop_and_check(s, &f, r, N, "placement by cost");
}

/* Exploring a backend ten times slower comes ten times less often
 * (scheduler.h), so that it costs under 1/SCHED_EXPLORE_EVERY of the
 * time: one launch in SCHED_EXPLORE_EVERY on such a device took 14% more
 * time than the host alone. */
static void placement_explore_cost(void)
{
    enum { N = 2000 };
    static rec r[N];
    fake f;
    sched *s = cost_sched(&f, 100000, 10000, SCHED_PLACE_COST, N);
    size_t dev, host;
    place_phase(s, r, N, &dev, &host);
    printf("    device ten times slower: %zu on the device, %zu on the host\n",
           dev, host);
    size_t turns = (N - 6) / (SCHED_EXPLORE_EVERY * 10);
    CHECK(dev >= 3 + turns && dev <= 3 + turns + 1,
          "the device explored %zu times after its first 3, not %zu: %zu / %zu",
          dev - 3, turns, dev, host);
    double extra = (double)(dev - 3) * (100000 - 10000) / ((double)N * 10000);
    CHECK(extra < 1.0 / SCHED_EXPLORE_EVERY,
          "exploring cost %.4f of the time, over 1/%d", extra,
          SCHED_EXPLORE_EVERY);
    stop_and_check(s, &f, r, N, "explore cost");
}

static void placement_fast_device(void)
{
    enum { N = 300 };
    static rec r[N];
    fake f;
    sched *s = cost_sched(&f, 10000, 80000, SCHED_PLACE_COST, N);
    size_t dev, host;
    place_phase(s, r, N, &dev, &host);
    printf("    fast device: %zu on the device, %zu on the host\n", dev, host);
    CHECK(dev >= N - 3 - N / SCHED_EXPLORE_EVERY - 1 && host >= 3,
          "the device takes the work: %zu / %zu", dev, host);
    stop_and_check(s, &f, r, N, "fast device");

    /* --placement=device: never the host, whatever it costs */
    s = cost_sched(&f, 80000, 10000, SCHED_PLACE_DEVICE, N);
    place_phase(s, r, 100, &dev, &host);
    CHECK(dev == 100 && host == 0, "placement device: %zu / %zu", dev, host);
    CHECK(strcmp(r[0].j.placement, "device") == 0, "reason device: %s",
          r[0].j.placement);
    stop_and_check(s, &f, r, 100, "placement device");
}

static const check_case cases[] = {
    {"queue_order", queue_order},
    {"queue_capacity", queue_capacity},
    {"queue_compatible", queue_compatible},
    {"queue_expiry", queue_expiry},
    {"queue_close", queue_close_drains},
    {"queue_batch_bytes", queue_batch_bytes},
    {"queue_fair_share", queue_fair_share},
    {"status_table", status_table},
    {"prepare_refuses", prepare_refuses},
    {"deadline_expiry", deadline_expiry},
    {"full_queue", full_queue},
    {"drain", drain},
    {"cancellation", cancellation},
    {"watched_sockets", watched_sockets},
    {"batching", batching},
    {"failover_device", failover_device},
    {"failover_host", failover_host},
    {"build_joins", build_joins},
    {"build_fails", build_fails},
    {"build_cancelled", build_cancelled},
    {"inline_run", inline_run},
    {"exactly_once", exactly_once},
    {"placement_cost", placement_cost},
    {"placement_explore_cost", placement_explore_cost},
    {"placement_fast_device", placement_fast_device},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
