/*
 * test_api.c - server/api/: its route table (routes.c), and the one
 * adapter from a parsed request to a job and back (submit.h) on its own:
 * a fake door that records every call the adapter makes, the real
 * scheduler over the fake backend whose launches the test can hold and
 * the fake clock the test moves (fake_sched.h, test_sched.c's too), and
 * no transport.
 *
 * What every door relies on: the deadline rule (the tightest bound wins),
 * small tensors summed at once and larger ones queued, the door's times
 * before exactly one outcome (an answer, a failure in words, or "the
 * client has gone"), and the same words for the same refusal whichever
 * door asks; and a sequence's chunk: summed at once without a log, and
 * with one queued, its answer waiting for its record (the wait step),
 * or failing with nothing moved when the record cannot be written.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "api.h"
#include "check.h"
#include "kv_mem.h"
#include "sequence.h"
#include "fake_sched.h"
#include "status.h"
#include "submit.h"

/* The scheduler's fake backend (fake_sched.h): its gate holds a launch. */
static fake backend;

/* ------------------------------------------------------------------------
 * The fake door: a request and what the adapter did with it.
 */
typedef struct {
    submit_work w;
    float data[64];
    bool suspended;
    atomic_bool gone;
    atomic_int resumed;
    req_record rec; /* the adapter writes the steps into it */
    int answers, fails, cancels;
    int outcome_before_times; /* an outcome came before the times */
    status_code st;
    char msg[512];
} door_req;

static bool door_suspend(void *req, bool (*push)(submit_work *w),
                         submit_work *w)
{
    door_req *r = req;
    r->suspended = true; /* before the push, as the doors do */
    if (!push(w)) {
        r->suspended = false;
        return false;
    }
    return true;
}

static void door_resume(void *req)
{
    atomic_fetch_add(&((door_req *)req)->resumed, 1);
}

static bool door_gone(const submit_work *w)
{
    return atomic_load(&((const door_req *)w->req)->gone);
}

/* A step's time before the adapter has written it. */
#define UNWRITTEN UINT64_MAX

static bool times_written(const door_req *r)
{
    return r->rec.parse_ns != UNWRITTEN && r->rec.queue_ns != UNWRITTEN
           && r->rec.compute_ns != UNWRITTEN;
}

static void door_outcome(door_req *r)
{
    if (!times_written(r))
        r->outcome_before_times++;
}

static void door_answer(void *req)
{
    door_req *r = req;
    door_outcome(r);
    r->answers++;
}

static void door_fail(void *req, status_code st, const char *msg)
{
    door_req *r = req;
    door_outcome(r);
    r->fails++;
    r->st = st;
    snprintf(r->msg, sizeof r->msg, "%s", msg);
}

static void door_cancelled(void *req)
{
    door_req *r = req;
    door_outcome(r);
    r->cancels++;
}

static const submit_door door = {door_suspend, door_resume, door_gone,
                                 door_answer,  door_fail,   door_cancelled};

/* ------------------------------------------------------------------------
 * Helpers.
 */
static tallyd_server server;

/* A started scheduler of one worker on one fake device; `depth` jobs may
 * wait. */
static sched *new_sched(unsigned depth)
{
    static const char *const names[] = {"dev0"};
    sched_options o = {.workers = 1,
                       .devices = 1,
                       .device_names = names,
                       .queue_depth = depth,
                       .max_batch = 1,
                       .device_max_failures = 1,
                       .clock = fake_clock};
    sched_backend b = fake_backend(&backend);
    sched *s = sched_new(&o, &b);
    CHECK(s != NULL, "sched_new");
    char msg[128];
    CHECK(sched_start(s, msg, sizeof msg) == ENG_E_OK, "start: %s", msg);
    return s;
}

static void settings(uint64_t timeout_ms, uint64_t inline_max,
                     uint64_t json_inline_max, unsigned depth)
{
    memset(&server, 0, sizeof server);
    server.cfg.timeout_ms = (unsigned)timeout_ms;
    server.cfg.inline_max = inline_max;
    server.cfg.json_inline_max = json_inline_max;
    server.cfg.queue_depth = depth;
    atomic_store(&backend.gate, false);
    atomic_store(&backend.open, false);
    atomic_store(&backend.holding, false);
}

/* A float32 request of n (<= 64) elements in one line. */
static void make(door_req *r, uint64_t n)
{
    memset(r, 0, sizeof *r);
    r->w.j.desc.dtype = TX_FLOAT32;
    r->w.j.desc.rank = 1;
    r->w.j.desc.shape[0] = n;
    r->w.j.in = r->data;
    r->w.j.out = r->data;
    r->w.j.watch_fd = -1;
    r->rec.parse_ns = r->rec.queue_ns = r->rec.compute_ns = UNWRITTEN;
    r->w.rec = &r->rec;
}

/* The live sequences the chunks go to (the wait step's case); NULL
 * elsewhere. */
static seq_table *seqs;

static void start(door_req *r, sched *sc, int64_t transport_ms,
                  int64_t protocol_ms, submit_from from)
{
    seq_params seq = r->w.seq;
    submit_req q = {.desc = r->w.j.desc,
                    .in = r->w.j.in,
                    .out = r->w.j.out,
                    .seq = &seq,
                    .watch_fd = r->w.j.watch_fd,
                    .rec = r->w.rec,
                    .transport_ms = transport_ms,
                    .protocol_ms = protocol_ms,
                    .from = from};
    submit_start(&r->w, &door, r, &server, sc, seqs, &q);
}

/* Until r has been resumed (a few seconds at most), then its end. */
static void finish(door_req *r, const char *what)
{
    for (int tries = 0; tries < 5000 && atomic_load(&r->resumed) == 0; tries++)
        uv_sleep(1);
    CHECK(atomic_load(&r->resumed) == 1, "%s: resumed %d times", what,
          atomic_load(&r->resumed));
    submit_finish(&r->w, false);
}

/* Exactly one outcome, after the times. */
static void check_one(const door_req *r, const char *what)
{
    CHECK(r->answers + r->fails + r->cancels == 1 && times_written(r)
              && r->outcome_before_times == 0,
          "%s: %d answers, %d failures, %d cancellations, times %s (%d "
          "outcomes before them)",
          what, r->answers, r->fails, r->cancels,
          times_written(r) ? "written" : "not written",
          r->outcome_before_times);
}

/* ------------------------------------------------------------------------
 * The cases.
 */

/* The rule itself: every bound that is set (> 0) counts, the least wins,
 * and 0 or "not given" sets none. */
static void deadline_rule(void)
{
    static const struct {
        int64_t transport, protocol, server, want;
    } t[] = {
        {-1, -1, 0, 0},           {50, -1, 0, 50},     {-1, 50, 0, 50},
        {-1, -1, 50, 50},         {60000, 50, 0, 50},  {50, 60000, 0, 50},
        {60000, 60000, 200, 200}, {100, -1, 200, 100}, {-1, 100, 200, 100},
        {0, -1, 200, 200},        {0, 0, 0, 0},        {0, 70, 0, 70},
        {30, 20, 10, 10},         {10, 20, 30, 10},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        CHECK(submit_deadline_ms(t[i].transport, t[i].protocol, t[i].server)
                  == t[i].want,
              "bounds %lld, %lld, %lld: %lld, not %lld",
              (long long)t[i].transport, (long long)t[i].protocol,
              (long long)t[i].server,
              (long long)submit_deadline_ms(t[i].transport, t[i].protocol,
                                            t[i].server),
              (long long)t[i].want);
    /* KServe's "timeout" is in microseconds, rounded up */
    CHECK(submit_protocol_ms(false, 5) == -1 && submit_protocol_ms(true, 0) == 0
              && submit_protocol_ms(true, 1) == 1
              && submit_protocol_ms(true, 1000) == 1
              && submit_protocol_ms(true, 1001) == 2,
          "microseconds to milliseconds");
}

/* The rule as the adapter applies it: the queued job's absolute deadline
 * and the milliseconds its words will quote. */
static void deadline_applied(void)
{
    static const struct {
        int64_t transport, protocol;
        unsigned server;
        int64_t want;
    } t[] = {{60000, 50, 0, 50},
             {50, 60000, 0, 50},
             {0, -1, 200, 200},
             {-1, -1, 0, 0},
             {-1, 300, 100, 100}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        settings(t[i].server, 0, 0, 8);
        atomic_store(&backend.gate, true); /* the launch waits; the clock stands */
        sched *sc = new_sched(8);
        atomic_store(&fake_now, 1000000);
        door_req r;
        make(&r, 4);
        start(&r, sc, t[i].transport, t[i].protocol, SUBMIT_BYTES);
        CHECK(r.suspended && r.w.timeout_ms == t[i].want,
              "case %zu: queued, %lld ms", i, (long long)r.w.timeout_ms);
        uint64_t want =
            t[i].want ? 1000000 + (uint64_t)t[i].want * 1000000u : 0;
        CHECK(r.w.j.deadline_ns == want, "case %zu: deadline %llu, not %llu", i,
              (unsigned long long)r.w.j.deadline_ns, (unsigned long long)want);
        atomic_store(&backend.open, true);
        finish(&r, "deadline applied");
        CHECK(r.answers == 1, "case %zu: answered", i);
        sched_stop(sc);
        sched_free(sc);
    }
}

/* At most --inline-max-elements (or, for text, the larger
 * --json-inline-max-elements) is summed at once on the door's thread: no
 * suspend, no resume, the answer before submit_start() returns. */
static void inline_or_queued(void)
{
    settings(0, 8, 32, 8);
    sched *sc = new_sched(8);
    atomic_store(&backend.inline_runs, 0);
    door_req r;
    make(&r, 8);
    start(&r, sc, -1, -1, SUBMIT_BYTES);
    CHECK(!r.suspended && r.answers == 1 && atomic_load(&backend.inline_runs) == 1,
          "8 bytes' elements: at once");
    check_one(&r, "inline");
    make(&r, 9);
    start(&r, sc, -1, -1, SUBMIT_BYTES);
    CHECK(r.suspended && r.answers == 0, "9 elements: queued");
    finish(&r, "queued");
    CHECK(r.answers == 1 && atomic_load(&backend.inline_runs) == 1, "answered");
    check_one(&r, "queued");
    make(&r, 32);
    start(&r, sc, -1, -1, SUBMIT_TEXT);
    CHECK(!r.suspended && r.answers == 1, "32 text elements: at once");
    make(&r, 33);
    start(&r, sc, -1, -1, SUBMIT_TEXT);
    CHECK(r.suspended, "33 text elements: queued");
    finish(&r, "text queued");
    check_one(&r, "text queued");
    sched_stop(sc);
    sched_free(sc);
}

/* A scan that cannot run is refused before anything is queued, with the
 * scheduler's words. */
static void prepare_refused(void)
{
    settings(0, 0, 0, 8);
    sched *sc = new_sched(8);
    door_req r;
    make(&r, 4);
    r.w.j.desc.axis = 3;
    start(&r, sc, -1, -1, SUBMIT_BYTES);
    CHECK(!r.suspended && r.fails == 1 && r.st == STATUS_AXIS
              && strstr(r.msg, "axis") != NULL,
          "refused: %s (%s)", status_name(r.st), r.msg);
    check_one(&r, "refused");
    sched_stop(sc);
    sched_free(sc);
}

/* A job whose deadline passes in the queue ends with words that say the
 * deadline, how long it waited and that the work was dropped; one behind
 * it with no deadline is answered. */
static void deadline_words(void)
{
    settings(0, 0, 0, 8);
    atomic_store(&backend.gate, true);
    atomic_store(&fake_now, 5000000);
    sched *sc = new_sched(8);
    door_req blocker, late;
    make(&blocker, 4);
    start(&blocker, sc, -1, -1, SUBMIT_BYTES);
    fake_wait_holding(&backend);
    make(&late, 4);
    start(&late, sc, 50, -1, SUBMIT_BYTES);
    CHECK(late.suspended, "queued behind the blocker");
    atomic_store(&fake_now, 5000000 + 49 * 1000000u);
    sched_tick(sc);
    CHECK(atomic_load(&late.resumed) == 0, "not due at 49 ms");
    atomic_store(&fake_now, 5000000 + 50 * 1000000u);
    sched_tick(sc);
    finish(&late, "expired");
    CHECK(late.fails == 1 && late.st == STATUS_DEADLINE
              && strcmp(late.msg, "the deadline of 50 ms expired after 50 "
                                  "ms in the queue; the work was dropped")
                     == 0,
          "words: %s", late.msg);
    CHECK(late.rec.queue_ns == 50 * 1000000u && late.rec.compute_ns == 0,
          "its queue time: %llu ns", (unsigned long long)late.rec.queue_ns);
    check_one(&late, "expired");
    atomic_store(&backend.open, true);
    finish(&blocker, "blocker");
    CHECK(blocker.answers == 1, "the blocker answered");
    check_one(&blocker, "blocker");
    sched_stop(sc);
    sched_free(sc);
}

/* Refusals read the same through every door: a full queue, and a server
 * that is draining. Neither is resumed. */
static void refusal_words(void)
{
    settings(0, 0, 0, 1);
    atomic_store(&backend.gate, true);
    sched *sc = new_sched(1);
    door_req blocker, waiting, refused;
    make(&blocker, 4);
    start(&blocker, sc, -1, -1, SUBMIT_BYTES);
    fake_wait_holding(&backend);
    make(&waiting, 4);
    start(&waiting, sc, -1, -1, SUBMIT_BYTES);
    make(&refused, 4);
    start(&refused, sc, -1, -1, SUBMIT_BYTES);
    CHECK(!refused.suspended && refused.fails == 1
              && refused.st == STATUS_QUEUE_FULL
              && strcmp(refused.msg, "the queue is full (1 jobs wait); retry "
                                     "after a moment")
                     == 0,
          "full: %s (%s)", status_name(refused.st), refused.msg);
    check_one(&refused, "full");
    atomic_store(&backend.open, true);
    finish(&blocker, "blocker");
    finish(&waiting, "waiting");
    CHECK(blocker.answers == 1 && waiting.answers == 1, "both answered");
    sched_stop(sc);
    make(&refused, 4);
    start(&refused, sc, -1, -1, SUBMIT_BYTES);
    CHECK(!refused.suspended && refused.fails == 1
              && refused.st == STATUS_DRAINING
              && strcmp(refused.msg, "the server is shutting down") == 0
              && atomic_load(&refused.resumed) == 0,
          "draining: %s (%s)", status_name(refused.st), refused.msg);
    check_one(&refused, "draining");
    sched_free(sc);
}

/* A client that leaves: while its job waits (the tick drops it unrun), or
 * after its job ran (the door's probe at the end sees it). Either way the
 * door hears "cancelled", never an answer, and the scheduler counts it. */
static void client_gone(void)
{
    settings(0, 0, 0, 8);
    atomic_store(&backend.gate, true);
    sched *sc = new_sched(8);
    door_req blocker, waiting;
    make(&blocker, 4);
    start(&blocker, sc, -1, -1, SUBMIT_BYTES);
    fake_wait_holding(&backend);
    make(&waiting, 4);
    start(&waiting, sc, -1, -1, SUBMIT_BYTES);
    atomic_store(&waiting.gone, true);
    sched_tick(sc);
    finish(&waiting, "left while waiting");
    CHECK(waiting.cancels == 1 && waiting.answers == 0,
          "dropped unrun: cancelled");
    check_one(&waiting, "left while waiting");
    /* the blocker's client leaves while it runs */
    atomic_store(&blocker.gone, true);
    atomic_store(&backend.open, true);
    finish(&blocker, "left while running");
    CHECK(blocker.cancels == 1 && blocker.answers == 0, "ran, then cancelled");
    check_one(&blocker, "left while running");
    const sched_counters *c = sched_counters_of(sc);
    CHECK(atomic_load(&c->cancelled_queued) + atomic_load(&c->cancelled_running)
              == 2,
          "both counted: %llu queued, %llu running",
          (unsigned long long)atomic_load(&c->cancelled_queued),
          (unsigned long long)atomic_load(&c->cancelled_running));
    sched_stop(sc);
    sched_free(sc);
}

/* A chunk of sequence 5, numbered n (start with n == 1), of x[0..len). */
static void make_chunk(door_req *r, const float *x, uint64_t len, uint64_t n)
{
    make(r, len);
    memcpy(r->data, x, len * sizeof *x);
    char msg[128];
    CHECK(seq_id_number(&r->w.seq, 5, msg, sizeof msg)
              && seq_chunk_number(&r->w.seq, n, msg, sizeof msg),
          "%s", msg);
    r->w.seq.start = n == 1;
}

/* A journal the case holds back: append() keeps the write, and
 * journal_settle() says it is durable (or failed) when the case chooses,
 * as the log's writer would from its thread. */
static struct {
    kv *store;
    kv_write *w;
    uint64_t records;
} held;

static void hold_append(void *self, kv_write *w)
{
    (void)self;
    CHECK(held.w == NULL, "one record at a time");
    held.w = w;
    held.records++;
}

static void journal_settle(bool ok, const char *why)
{
    CHECK(held.w != NULL, "a record is held");
    kv_write *w = held.w;
    held.w = NULL;
    kv_mem_commit(held.store, w, ok, why);
}

/* The wait step: without a journal a small chunk is summed and answered
 * at once; with one it is summed at once too, but its request is
 * suspended, and comes back (from the journal's thread) only once its
 * record is durable; a record that fails fails the chunk (503, the
 * reason), and nothing moved. (The fake backend's scan leaves the input
 * as it is: a chunk's answer is its input plus the carry, the total of
 * the chunks before it.) */
static void sequence_wait_step(void)
{
    settings(0, 64, 64, 8);
    sched *sc = new_sched(8);
    seq_options so = {.max_sequences = 4,
                      .idle_ms = 60000,
                      .reorder_ms = 1000,
                      .max_bytes = 1024};
    kv_mem_options mo = {.max_records = 4, .max_bytes = 1024};
    seqs = seq_table_new(&so, kv_mem_new(&mo));
    CHECK(seqs != NULL, "a table");
    float x[4] = {1, 2, 3, 4}, ones[2] = {1, 1};
    door_req r;
    /* no journal: at once */
    make_chunk(&r, x, 4, 1);
    start(&r, sc, -1, -1, SUBMIT_BYTES);
    CHECK(!r.suspended && r.answers == 1, "in memory: at once");
    check_one(&r, "in memory");
    seq_table_free(seqs);

    /* a journal: suspended, answered once the record is durable */
    held.store = kv_mem_new(&mo);
    CHECK(held.store != NULL, "a store");
    kv_journal j = {.append = hold_append, .self = NULL};
    kv_mem_set_journal(held.store, &j);
    seqs = seq_table_new(&so, held.store);
    make_chunk(&r, x, 4, 1);
    start(&r, sc, -1, -1, SUBMIT_BYTES);
    CHECK(r.suspended && r.answers == 0 && held.records == 1,
          "durable: suspended for its record");
    journal_settle(true, NULL);
    finish(&r, "durable start");
    check_one(&r, "durable start");
    CHECK(r.answers == 1 && r.data[3] == 4, "answered: %g", r.data[3]);
    /* the disk is full: 503 with the reason, and the carry as it was */
    make_chunk(&r, ones, 2, 2);
    start(&r, sc, -1, -1, SUBMIT_BYTES);
    CHECK(r.suspended && r.answers == 0, "suspended for its record");
    journal_settle(false, "writing the sequence log: No space left on device");
    finish(&r, "a full disk");
    check_one(&r, "a full disk");
    CHECK(r.fails == 1 && r.st == STATUS_STORE
              && strstr(r.msg, "No space left") != NULL,
          "%d: %s", r.st, r.msg);
    make_chunk(&r, ones, 2, 2);
    start(&r, sc, -1, -1, SUBMIT_BYTES);
    journal_settle(true, NULL);
    finish(&r, "written");
    check_one(&r, "written");
    CHECK(r.answers == 1 && r.data[0] == 11 && r.data[1] == 11,
          "nothing had moved: %g %g", r.data[0], r.data[1]);
    CHECK(held.records == 3, "%llu records", (unsigned long long)held.records);
    sched_stop(sc);
    sched_free(sc);
    seq_table_free(seqs);
    seqs = NULL;
}

/* ------------------------------------------------------------------------
 * The route table (api/routes.c): every method and path tallyd serves.
 */
static void routes_table(void)
{
    static const struct {
        const char *method, *path;
        http_handler handler;
        int status;
        const char *says; /* in the message, or Allow for 405 */
    } cases[] = {
        {"POST", "/v1/cumsum", api_native, 200, NULL},
        {"GET", "/v1/cumsum", NULL, 405, "POST"},
        {"GET", "/metrics", api_metrics, 200, NULL},
        {"HEAD", "/metrics", api_metrics, 200, NULL},
        {"POST", "/metrics", NULL, 405, "GET, HEAD"},
        {"GET", "/v2", api_server_metadata, 200, NULL},
        {"GET", "/v2/health/live", api_health_live, 200, NULL},
        {"GET", "/v2/health/ready", api_health_ready, 200, NULL},
        {"GET", "/v2/models/cumsum", api_model_metadata, 200, NULL},
        {"GET", "/v2/models/cumsum/versions/1", api_model_metadata, 200, NULL},
        {"GET", "/v2/models/cumsum/ready", api_model_ready, 200, NULL},
        {"GET", "/v2/models/cumsum/versions/1/ready", api_model_ready, 200,
         NULL},
        {"GET", "/v2/models/cumsum/config", api_model_config, 200, NULL},
        {"POST", "/v2/models/cumsum/infer", api_infer, 200, NULL},
        {"POST", "/v2/models/cumsum/versions/1/infer", api_infer, 200, NULL},
        {"GET", "/v2/models/cumsum/infer", NULL, 405, "POST"},
        {"DELETE", "/v2/models/cumsum", NULL, 405, "GET, HEAD"},
        {"POST", "/v2/models/resnet/infer", NULL, 404, "unknown model"},
        {"GET", "/v2/models/nope", NULL, 404, "\"nope\""},
        {"GET", "/v2/models/", NULL, 404, "unknown model"},
        {"GET", "/v2/models/cumsum/versions/2", NULL, 404, "no version \"2\""},
        {"GET", "/v2/models/cumsum/versions/1/config", NULL, 404, "no route"},
        {"GET", "/v2/models/cumsum/", NULL, 404, "no route"},
        {"GET", "/nope", NULL, 404, "no route GET /nope"},
        {"GET", "/", api_landing, 200, NULL},
        {"HEAD", "/", api_landing, 200, NULL},
        {"GET", "/openapi.yaml", api_openapi, 200, NULL},
        {"GET", "/openapi.json", api_openapi_json, 200, NULL},
        {"GET", "/docs", api_docs_page, 200, NULL},
        {"GET", "/docs/swagger-ui.css", api_docs_file, 200, NULL},
        {"GET", "/docs/swagger-ui-bundle.js", api_docs_file, 200, NULL},
        {"GET", "/docs/", NULL, 404, "no route"},
        {"GET", "/docs/index.html", NULL, 404, "no route"},
        {"POST", "/docs", NULL, 405, "GET, HEAD"},
        {"GET", "//", NULL, 404, "no route"},
        {"POST", "/v1/cumsum/", NULL, 404, "no route"},
        {"POST", "/v1//cumsum", NULL, 404, "no route"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        http_match m;
        http_route_match(&api_routes, cases[i].method, cases[i].path, &m);
        const char *where = m.status == 405 ? m.allow : m.msg;
        CHECK(m.status == cases[i].status && m.handler == cases[i].handler
                  && (cases[i].says == NULL
                      || strstr(where, cases[i].says) != NULL),
              "%s %s: status %d, \"%s\"", cases[i].method, cases[i].path,
              m.status, where);
        if (m.status == 405)
            CHECK(strcmp(m.allow, cases[i].says) == 0
                      && strstr(m.msg, "is not allowed") != NULL,
                  "%s %s: Allow \"%s\"", cases[i].method, cases[i].path,
                  m.allow);
    }
    /* with tokens, only probes' and scrapers' routes, and the landing
     * page's (which fetches the rest with the token it is given), may be
     * open; the trace settings are closed like /metrics */
    for (size_t i = 0; i < api_routes.nrows; i++) {
        const http_route *row = &api_routes.rows[i];
        const char *label = api_routes.labels[row->label];
        http_access want = strcmp(label, "health") == 0 || strcmp(label, "page") == 0
                               ? HTTP_ACCESS_HEALTH
                           : strcmp(label, "metrics") == 0
                                   || strstr(row->pattern, "/trace/setting")
                               ? HTTP_ACCESS_METRICS
                               : HTTP_ACCESS_TOKEN;
        CHECK(row->access == want, "%s %s: access %d, not %d", row->method,
              row->pattern, (int)row->access, (int)want);
    }
    http_match m;
    http_route_match(&api_routes, "POST", "/v2/models/cumsum/infer", &m);
    CHECK(strcmp(api_routes.labels[m.label], "infer") == 0
              && m.access == HTTP_ACCESS_TOKEN && m.ended != NULL,
          "infer counts as infer, in the statistics too, and needs a token");
    http_route_match(&api_routes, "GET", "/v1/cumsum", &m);
    CHECK(strcmp(api_routes.labels[m.label], "native") == 0 && m.ended != NULL,
          "a 405 counts under its route, in the statistics too");
    http_route_match(&api_routes, "GET", "/nope", &m);
    CHECK(strcmp(api_routes.labels[m.label], "other") == 0,
          "a 404 counts as other");
    http_route_match(&api_routes, "GET", "/metrics", &m);
    CHECK(m.ended == NULL, "/metrics is no inference");
}

static const check_case cases[] = {
    {"deadline_rule", deadline_rule},
    {"deadline_applied", deadline_applied},
    {"inline_or_queued", inline_or_queued},
    {"prepare_refused", prepare_refused},
    {"deadline_words", deadline_words},
    {"refusal_words", refusal_words},
    {"client_gone", client_gone},
    {"sequence_wait_step", sequence_wait_step},
    {"routes_table", routes_table},
};

int main(int argc, char **argv)
{
    fake_init(&backend);
    atomic_store(&backend.build_open, true); /* warm devices */
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
