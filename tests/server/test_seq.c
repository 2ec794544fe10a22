/*
 * test_seq.c - the sequences' engine (server/seq/) and its one contract
 * over every store it keeps states in: each rule of docs/sequences.md is
 * a case, run once per store, through the engine's own API:
 *   - memory (store/kv_mem.h);
 *   - the log (store/kv_log.h) in a directory of its own, its writer run
 *     batch by batch (manual), restarted by reading it back;
 *   - the fake store (tests/server/fake_kv.h), two replicas on it, its
 *     answers delivered when the case says, lost, or rolled back;
 *   - Redis (redis/redis_store.h), Debian's redis-server started here,
 *     two replicas on it.
 * A case's name is its store's, then its rule's: "log/failed_start_
 * leaves_the_old". The memory, log and fake stores run on a fake clock;
 * Redis's time to live is its own, so its cases wait the (short) timers
 * out. And apart from the stores: the carries against a whole-tensor
 * reference (engine/carry.h), and the record format through every
 * truncation and a flipped byte.
 */
#define _GNU_SOURCE /* mkdtemp */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "carry.h"
#include "check.h"
#include "clock.h"
#include "fake_kv.h"
#include "kv_log.h"
#include "kv_mem.h"
#include "list.h"
#include "redis_server.h"
#include "redis_store.h"
#include "seq_rules.h"
#include "sequence.h"
#include "sequence_file.h"
#include "status.h"
#include "temp_dir.h"
#include "tx_half.h"

/* ------------------------------------------------------------------------
 * Apart from the stores.
 */

/* An int32 tensor [rows, n] cut along axis 1 into chunks, each "scanned"
 * by a plain loop and then joined by the carries: the whole tensor's
 * inclusive, exclusive and reverse sums, wrapping. */
static void seq_carries(void)
{
    enum { R = 3, N = 23 };
    int32_t x[R][N];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < N; i++)
            x[r][i] = (int32_t)(check_rand() & 0xffffffffu);
    for (int mode = 0; mode < 4; mode++) {
        bool excl = mode & 1, rev = mode & 2;
        int32_t want[R][N];
        for (int r = 0; r < R; r++) {
            uint32_t acc = 0;
            for (int s = 0; s < N; s++) {
                int i = rev ? N - 1 - s : s;
                if (!excl)
                    acc += (uint32_t)x[r][i];
                want[r][i] = (int32_t)acc;
                if (excl)
                    acc += (uint32_t)x[r][i];
            }
        }
        eng_carry carry[R] = {{0}};
        int32_t got[R][N];
        int cuts[] = {0, 5, 5, 14, N}; /* one chunk is empty */
        for (int c = 0; c < 4; c++) {
            int k = rev ? 3 - c : c;
            int a = cuts[k], n = cuts[k + 1] - a;
            int32_t chunk[R][N], out[R][N];
            for (int r = 0; r < R; r++)
                for (int i = 0; i < n; i++)
                    chunk[r][i] = x[r][a + i];
            /* packed [R, n] */
            int32_t *pc = &chunk[0][0], *po = &out[0][0];
            for (int r = 0; r < R; r++)
                for (int i = 0; i < n; i++)
                    pc[r * n + i] = chunk[r][i];
            for (int r = 0; r < R; r++) {
                uint32_t acc = 0;
                for (int s = 0; s < n; s++) {
                    int i = rev ? n - 1 - s : s;
                    if (!excl)
                        acc += (uint32_t)pc[r * n + i];
                    po[r * n + i] = (int32_t)acc;
                    if (excl)
                        acc += (uint32_t)pc[r * n + i];
                }
            }
            eng_lines l = {TX_INT32,
                           R,
                           (uint64_t)n,
                           1,
                           (uint64_t)(R * n),
                           (size_t)(R * n * 4),
                           excl,
                           rev};
            eng_carry t[R] = {{0}};
            eng_carry_totals(&l, pc, t);
            eng_carry_apply(&l, po, carry);
            for (int r = 0; r < R; r++) {
                carry[r].u += t[r].u;
                for (int i = 0; i < n; i++)
                    got[r][a + i] = po[r * n + i];
            }
        }
        CHECK(memcmp(got, want, sizeof got) == 0, "mode %d", mode);
    }
    /* float16: rescanned from the input, rounded once */
    uint16_t h[4] = {tx_f32_to_f16(1.0f), tx_f32_to_f16(0.5f),
                     tx_f32_to_f16(0.25f), tx_f32_to_f16(2048.0f)};
    uint16_t y[4];
    eng_lines l = {TX_FLOAT16, 1, 4, 1, 4, 8, false, false};
    eng_carry c = {.f = 1.0 / 4096};
    eng_carry_scan(&l, h, y, &c);
    CHECK(tx_f16_to_f32(y[0]) == 1.0f && tx_f16_to_f32(y[2]) == 1.75f,
          "float16 rescan: %g %g", tx_f16_to_f32(y[0]), tx_f16_to_f32(y[2]));
}

/* The state file: a round trip, and every truncation and a flipped byte
 * refused whole. */
static void seq_state_file(void)
{
    seq_file_entry e[2];
    memset(e, 0, sizeof e);
    char msg[256];
    eng_carry c0[3] = {{.u = 7}, {.u = 8}, {.u = 9}}, c1[1] = {{.f = 0.5}};
    CHECK(seq_id_string(&e[0].id, "abc", 3, msg, sizeof msg), "%s", msg);
    e[0].desc = (eng_scan_desc){.dtype = TX_INT8,
                                .rank = 2,
                                .shape = {3, 0},
                                .axis = 1,
                                .exclusive = true};
    e[0].idle_deadline_ms = 123;
    e[0].count = 3;
    e[0].carry = c0;
    CHECK(seq_id_number(&e[1].id, 42, msg, sizeof msg), "%s", msg);
    e[1].desc = (eng_scan_desc){
        .dtype = TX_FLOAT64, .rank = 1, .shape = {0}, .reverse = true};
    e[1].count = 1;
    e[1].carry = c1;
    eng_carry p1[1] = {{.f = 0.25}};
    e[1].numbered = true;
    e[1].applied = 5;
    e[1].last_end = true;
    memset(e[1].sha, 0xab, sizeof e[1].sha);
    e[1].prev = p1;
    size_t len;
    uint8_t *b = seq_file_encode(e, 2, &len);
    CHECK(b != NULL, "encoded");
    seq_file_entry *got;
    size_t n;
    CHECK(seq_file_decode(b, len, 8, 1024, &got, &n, msg, sizeof msg) && n == 2,
          "decoded: %s", msg);
    CHECK(got[0].id.is_string && strcmp(got[0].id.str, "abc") == 0
              && got[0].count == 3 && got[0].carry[2].u == 9
              && got[0].desc.exclusive && got[0].desc.shape[0] == 3
              && got[1].id.num == 42 && got[1].carry[0].f == 0.5
              && got[1].desc.reverse && !got[0].numbered && got[1].numbered
              && got[1].applied == 5 && got[1].last_end
              && got[1].sha[31] == 0xab && got[1].prev[0].f == 0.25,
          "round trip");
    seq_file_free(got, n);
    for (size_t k = 0; k < len; k++)
        CHECK(!seq_file_decode(b, k, 8, 1024, &got, &n, msg, sizeof msg),
              "truncated at %zu decoded", k);
    for (size_t k = 0; k < len; k++) {
        b[k] ^= 0x10;
        CHECK(!seq_file_decode(b, len, 8, 1024, &got, &n, msg, sizeof msg),
              "flipped byte %zu decoded", k);
        b[k] ^= 0x10;
    }
    CHECK(!seq_file_decode(b, len, 1, 1024, &got, &n, msg, sizeof msg)
              && strstr(msg, "--max-sequences"),
          "limit: %s", msg);
    CHECK(!seq_file_decode(b, len, 8, 16, &got, &n, msg, sizeof msg),
          "bytes limit");
    /* the state each record carries */
    e[0].state = SEQ_ENDED;
    e[1].state = SEQ_GONE;
    free(b);
    b = seq_file_encode(e, 2, &len);
    CHECK(
        b != NULL && seq_file_decode(b, len, 8, 1024, &got, &n, msg, sizeof msg)
            && n == 2 && got[0].state == SEQ_ENDED && got[1].state == SEQ_GONE,
        "states: %s", msg);
    seq_file_free(got, n);
    free(b);
}

/* ------------------------------------------------------------------------
 * The stores.
 */

enum { ST_MEMORY, ST_LOG, ST_FAKE, ST_REDIS };

/* The fake clock (ns) the engine and the local and fake stores read. */
static atomic_ullong fake_now;

static uint64_t clock_ns(void *user)
{
    (void)user;
    return atomic_load(&fake_now);
}

static int64_t clock_wall(void *user)
{
    (void)user;
    return 1700000000000 + (int64_t)(atomic_load(&fake_now) / 1000000u);
}

static uint64_t clock_ms(void *user)
{
    (void)user;
    return atomic_load(&fake_now) / 1000000u;
}

#define IDLE_MS 400
#define LINGER_MS 150
#define REORDER_MS 150

/* A store under one table (a local one), or two replicas (shared). */
typedef struct {
    int kind;
    seq_options o;
    kv_mem_options mo;
    int replicas;
    seq_table *t[2];
    kv *local; /* memory, the log: t[0]'s store */
    fake_kv *f;
    char dir[128];
    pid_t redis;
    unsigned port;
    bool manual_clock;
} env;

static seq_table *replica(env *e)
{
    char msg[512];
    kv *k = NULL;
    if (e->kind == ST_FAKE) {
        k = fake_kv_connect(e->f);
    } else {
        char url[64];
        snprintf(url, sizeof url, "redis://127.0.0.1:%u", e->port);
        redis_url u;
        CHECK(redis_url_parse(url, &u, msg, sizeof msg), "%s", msg);
        k = redis_store_open(&u, "tally:test:", 2000, 0, msg, sizeof msg);
        CHECK(k != NULL, "redis: %s", msg);
    }
    return seq_table_new(&e->o, k);
}

static void local_open(env *e)
{
    char msg[512];
    if (e->kind == ST_MEMORY) {
        e->local = kv_mem_new(&e->mo);
    } else {
        kv_log_options lo = {.dir = e->dir,
                             .fsync = KV_FSYNC_ALWAYS,
                             .mem = e->mo,
                             .manual = true,
                             .prealloc = 4096};
        e->local = kv_log_open(&lo, msg, sizeof msg);
        CHECK(e->local != NULL, "the log: %s", msg);
    }
    e->t[0] = seq_table_new(&e->o, e->local);
    e->replicas = 1;
}

static void env_open(env *e, int kind, unsigned max_sequences)
{
    memset(e, 0, sizeof *e);
    e->kind = kind;
    e->manual_clock = kind != ST_REDIS;
    atomic_store(&fake_now, 5000000000ull);
    e->o = (seq_options){.max_sequences = max_sequences,
                         .idle_ms = IDLE_MS,
                         .linger_ms = LINGER_MS,
                         .reorder_ms = REORDER_MS,
                         .max_bytes = 1 << 20,
                         .store_timeout_ms = 2000,
                         .clock = e->manual_clock ? clock_ns : NULL};
    e->mo = (kv_mem_options){.max_records = max_sequences,
                             .max_bytes = 1 << 20,
                             .mono_ns = clock_ns,
                             .wall_ms = clock_wall,
                             .seed = check_rand() | 1};
    if (kind == ST_LOG) {
        snprintf(e->dir, sizeof e->dir, "/tmp/tally-test-seq-XXXXXX");
        CHECK(mkdtemp(e->dir) != NULL, "mkdtemp");
    }
    if (kind == ST_MEMORY || kind == ST_LOG) {
        local_open(e);
        return;
    }
    if (kind == ST_FAKE) {
        e->f = fake_kv_new(check_rand(), clock_ms, NULL);
    } else {
        e->port = free_port();
        static const char *const extra[] = {"--appendonly", "no", NULL};
        e->redis = start_redis_with(e->port, NULL, extra);
    }
    e->replicas = 2;
    for (int i = 0; i < 2; i++)
        e->t[i] = replica(e);
}

static void tables_free(env *e)
{
    for (int i = 0; i < 2; i++) {
        seq_close(e->t[i]);
        seq_table_free(e->t[i]);
        e->t[i] = NULL;
    }
}

static void env_close(env *e)
{
    tables_free(e);
    fake_kv_free(e->f);
    stop_redis(e->redis, SIGKILL);
    if (e->dir[0])
        temp_dir_remove(e->dir);
}

/* The tallyds stop and start again: a local store keeps what the log
 * has (memory: nothing); a shared one all of it. */
static void env_restart(env *e)
{
    tables_free(e);
    if (e->kind == ST_MEMORY || e->kind == ST_LOG)
        local_open(e);
    else
        for (int i = 0; i < 2; i++)
            e->t[i] = replica(e);
}

/* The stores' work that waits: the fake store's answers, the log's
 * writer. */
static void env_step(env *e)
{
    if (e->kind == ST_FAKE)
        fake_kv_settle(e->f);
    else if (e->kind == ST_LOG)
        while (kv_log_waiting(e->local))
            kv_log_step(e->local);
}

static void env_sweep(env *e)
{
    for (int i = 0; i < 2; i++)
        seq_sweep(e->t[i]);
}

/* The clock moves ms (Redis's: waited out), and the tick sweeps. */
static void env_advance(env *e, uint64_t ms)
{
    env_step(e);
    if (e->manual_clock)
        atomic_fetch_add(&fake_now, ms * 1000000u);
    else
        uv_sleep((unsigned)ms);
    env_sweep(e);
    env_step(e);
}

/* ------------------------------------------------------------------------
 * Chunks.
 */

/* A chunk of int64 values, through the engine as a door sends one. */
typedef struct {
    seq_slot slot;
    seq_params p;
    eng_scan_desc d;
    eng_lines l;
    int64_t x[8], y[8];
    int n;
    seq_table *t;
    atomic_bool done;
    status_code st;
    char msg[512];
} chunk;

static void on_done(seq_slot *s, status_code st, const char *msg)
{
    chunk *c = container_of(s, chunk, slot);
    seq_answer(s);
    c->st = st;
    snprintf(c->msg, sizeof c->msg, "%s", msg != NULL ? msg : "");
    atomic_store(&c->done, true);
}

/* Flags of a chunk: S start, E end; number 0: unnumbered. */
enum { NONE = 0, S = 1, E = 2 };

/* Admits chunk c of sequence `id` (a number) on replica rep: false when
 * it was refused at once (c->st). */
static bool chunk_begin(env *e, int rep, chunk *c, uint64_t id, int flags,
                        uint64_t number, int n, const int64_t *x)
{
    memset(c, 0, sizeof *c);
    char msg[256];
    CHECK(seq_id_number(&c->p, id, msg, sizeof msg), "%s", msg);
    c->p.start = flags & S;
    c->p.end = (flags & E) != 0;
    c->p.has_flags = flags != NONE;
    if (number)
        CHECK(seq_chunk_number(&c->p, number, msg, sizeof msg), "%s", msg);
    c->n = n;
    memcpy(c->x, x, (size_t)n * sizeof *x);
    c->d =
        (eng_scan_desc){.dtype = TX_INT64, .rank = 1, .shape = {(uint64_t)n}};
    CHECK(eng_lines_from_desc(&c->d, &c->l, msg, sizeof msg) == ENG_E_OK, "%s",
          msg);
    c->t = e->t[rep];
    c->slot.done = on_done;
    c->slot.out = c->y;
    c->st = seq_admit(c->t, &c->p, &c->d, &c->l, c->x, &c->slot, c->msg,
                      sizeof c->msg);
    if (c->st != STATUS_OK) {
        atomic_store(&c->done, true);
        return false;
    }
    return true;
}

/* Its scan ends (ok: its prefix sums; else it failed). */
static void chunk_scan(chunk *c, bool ok)
{
    int64_t a = 0;
    for (int i = 0; i < c->n; i++)
        c->y[i] = a += c->x[i];
    seq_finish(c->t, &c->slot, ok);
}

/* Until c has ended (5 s at most of the stores' work and the sweep). */
static void chunk_wait(env *e, chunk *c)
{
    for (int i = 0; i < 5000 && !atomic_load(&c->done); i++) {
        env_step(e);
        if (!atomic_load(&c->done) && e->kind == ST_REDIS) {
            uv_sleep(1);
            env_sweep(e);
        }
    }
    CHECK(atomic_load(&c->done), "a chunk never ended");
}

/* A chunk sent and answered: its status; its answer in c->y. */
static status_code send_chunk(env *e, int rep, chunk *c, uint64_t id, int flags,
                              uint64_t number, int n, const int64_t *x)
{
    if (chunk_begin(e, rep, c, id, flags, number, n, x)) {
        chunk_scan(c, true);
        chunk_wait(e, c);
    }
    return c->st;
}

/* Whether c was answered with the values want[0..c->n). */
static bool answered(const chunk *c, const int64_t *want)
{
    return c->st == STATUS_OK && memcmp(c->y, want, (size_t)c->n * 8) == 0;
}

#define X(...) ((const int64_t[]){__VA_ARGS__})
#define N(...) (int)(sizeof((const int64_t[]){__VA_ARGS__}) / 8)
#define SEND(e, rep, c, id, flags, number, ...)                                \
    send_chunk(e, rep, c, id, flags, number, N(__VA_ARGS__), X(__VA_ARGS__))
#define BEGIN(e, rep, c, id, flags, number, ...)                               \
    chunk_begin(e, rep, c, id, flags, number, N(__VA_ARGS__), X(__VA_ARGS__))
#define ANSWERED(c, ...) answered(c, X(__VA_ARGS__))

/* The other replica of a shared store (the one of a local one). */
static int other(const env *e)
{
    return e->replicas > 1 ? 1 : 0;
}

/* ------------------------------------------------------------------------
 * The rules, each once per store.
 */

/* Chunks join their sequence's running sum; the end answers and ends
 * it; a chunk after the end, within the linger, is taken late; after
 * it, the sequence is gone. */
static void chunks_join_and_end(env *e)
{
    chunk c;
    CHECK(SEND(e, 0, &c, 1, S, 0, 1, 2, 3) == STATUS_OK
              && ANSWERED(&c, 1, 3, 6),
          "start: %d %s", c.st, c.msg);
    CHECK(SEND(e, other(e), &c, 1, NONE, 0, 4, 5) == STATUS_OK
              && ANSWERED(&c, 10, 15),
          "a chunk: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 1, E, 0, 6) == STATUS_OK && ANSWERED(&c, 21),
          "the end: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 1, NONE, 0, 1) == STATUS_OK && ANSWERED(&c, 22),
          "late, within the linger: %d %s", c.st, c.msg);
    env_advance(e, LINGER_MS + 50);
    CHECK(SEND(e, 0, &c, 1, NONE, 0, 1) == STATUS_INVALID
              && strstr(c.msg, "not live"),
          "after the linger: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 2, NONE, 0, 1) == STATUS_INVALID
              && strstr(c.msg, "the first request of a sequence must carry "
                               "sequence_start"),
          "never started: %d %s", c.st, c.msg);
}

/* A chunk unlike its sequence's first (dtype, shape off the axis,
 * numbered or not) is refused, and changes nothing. */
static void kinds_kept(env *e)
{
    chunk c, d;
    CHECK(SEND(e, 0, &c, 3, S, 0, 5) == STATUS_OK, "start: %s", c.msg);
    /* [1, 2] along axis 1: another rank */
    memset(&d, 0, sizeof d);
    char msg[256];
    seq_id_number(&d.p, 3, msg, sizeof msg);
    d.n = 2;
    d.x[0] = d.x[1] = 1;
    d.d = (eng_scan_desc){
        .dtype = TX_INT64, .rank = 2, .shape = {1, 2}, .axis = 1};
    eng_lines_from_desc(&d.d, &d.l, msg, sizeof msg);
    d.t = e->t[0];
    d.slot.done = on_done;
    CHECK(seq_admit(d.t, &d.p, &d.d, &d.l, d.x, &d.slot, d.msg, sizeof d.msg)
              == STATUS_OK,
          "admitted: %s", d.msg);
    chunk_scan(&d, true);
    chunk_wait(e, &d);
    CHECK(d.st == STATUS_INVALID && strstr(d.msg, "keeps its first chunk"),
          "another rank: %d %s", d.st, d.msg);
    CHECK(SEND(e, 0, &c, 3, NONE, 2, 1) == STATUS_INVALID
              && strstr(c.msg, "does not number its chunks"),
          "numbered: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 3, NONE, 0, 1) == STATUS_OK && ANSWERED(&c, 6),
          "nothing changed: %d %s", c.st, c.msg);
}

/* Numbered chunks: applied once each, in their numbers' order; a repeat
 * answered again; another input, or an older number, a conflict. */
static void numbered_exactly_once(env *e)
{
    chunk c, a, b;
    CHECK(SEND(e, 0, &c, 4, S, 1, 1, 1) == STATUS_OK && ANSWERED(&c, 1, 2),
          "chunk 1: %d %s", c.st, c.msg);
    CHECK(SEND(e, other(e), &c, 4, NONE, 2, 3) == STATUS_OK && ANSWERED(&c, 5),
          "chunk 2: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 4, NONE, 2, 3) == STATUS_OK && ANSWERED(&c, 5),
          "chunk 2 again: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 4, NONE, 2, 9) == STATUS_CHUNK_CONFLICT
              && strstr(c.msg, "another input"),
          "chunk 2, another input: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 4, S, 1, 1, 1) == STATUS_CHUNK_CONFLICT
              && strstr(c.msg, "older than its last applied chunk, 2"),
          "chunk 1 again: %d %s", c.st, c.msg);
    /* 4 comes first and waits for 3, on the same replica */
    CHECK(BEGIN(e, 0, &a, 4, NONE, 4, 10) && BEGIN(e, 0, &b, 4, NONE, 3, 20),
          "admitted");
    chunk_scan(&a, true);
    env_step(e);
    CHECK(!atomic_load(&a.done), "chunk 4 waits for chunk 3");
    chunk_scan(&b, true);
    chunk_wait(e, &b);
    chunk_wait(e, &a);
    CHECK(ANSWERED(&b, 25) && ANSWERED(&a, 35), "in order: %d %s; %d %s", b.st,
          b.msg, a.st, a.msg);
    /* 6 waits for 5, which never comes: a gap, nothing changed */
    CHECK(BEGIN(e, 0, &a, 4, NONE, 6, 1), "admitted");
    chunk_scan(&a, true);
    env_advance(e, REORDER_MS / 2);
    CHECK(!atomic_load(&a.done), "chunk 6 waits for chunk 5");
    env_advance(e, REORDER_MS);
    chunk_wait(e, &a);
    CHECK(a.st == STATUS_CHUNK_GAP && strstr(a.msg, "for chunk 5"),
          "the gap: %d %s", a.st, a.msg);
    CHECK(SEND(e, 0, &c, 4, NONE, 5, 1) == STATUS_OK && ANSWERED(&c, 36),
          "then 5: %d %s", c.st, c.msg);
}

/* Rule: a start that fails leaves the old sequence as it was (issue 70's
 * item 4): its scan missed its deadline, its client left. */
static void failed_start_leaves_the_old(env *e)
{
    chunk c, s;
    CHECK(SEND(e, 0, &c, 5, S, 0, 100) == STATUS_OK, "start: %s", c.msg);
    CHECK(BEGIN(e, 0, &s, 5, S, 0, 1), "a start again, admitted");
    chunk_scan(&s, false); /* it failed before its decision */
    chunk_wait(e, &s);
    CHECK(SEND(e, 0, &c, 5, NONE, 0, 1) == STATUS_OK && ANSWERED(&c, 101),
          "the old sequence goes on: %d %s", c.st, c.msg);
    env_restart(e);
    if (e->kind != ST_MEMORY)
        CHECK(SEND(e, 0, &c, 5, NONE, 0, 1) == STATUS_OK && ANSWERED(&c, 102),
              "and after a restart: %d %s", c.st, c.msg);
}

/* Rule: a chunk of the old sequence that is scanned while a new start
 * arrives is decided first, on the old one (it arrived first), and the
 * start then replaces it; a restart keeps the new one (item 1). */
static void old_chunk_before_a_new_start(env *e)
{
    chunk c, x, s;
    CHECK(SEND(e, 0, &c, 6, S, 0, 100) == STATUS_OK, "start: %s", c.msg);
    CHECK(BEGIN(e, 0, &x, 6, NONE, 0, 5000), "a large chunk, admitted");
    CHECK(BEGIN(e, 0, &s, 6, S, 0, 1), "a start, admitted after it");
    chunk_scan(&s, true);
    env_step(e);
    CHECK(!atomic_load(&s.done), "the start waits for the chunk ahead");
    chunk_scan(&x, true);
    chunk_wait(e, &x);
    chunk_wait(e, &s);
    CHECK(ANSWERED(&x, 5100) && ANSWERED(&s, 1), "%d %s; %d %s", x.st, x.msg,
          s.st, s.msg);
    env_restart(e);
    if (e->kind != ST_MEMORY)
        CHECK(SEND(e, 0, &c, 6, NONE, 0, 1) == STATUS_OK && ANSWERED(&c, 2),
              "after a restart, the new one: %d %s", c.st, c.msg);
}

/* Rule: the next numbered chunk behind a start in flight waits for it,
 * whatever the id held before (an ended numbered sequence kept for a
 * repeat, or a live unnumbered one): item 5. */
static void start_in_flight_and_the_next_chunk(env *e)
{
    chunk c, s, n2;
    for (int kept = 0; kept < 2; kept++) {
        uint64_t id = 7 + (uint64_t)kept;
        if (kept == 0) { /* ended numbered, kept for a repeat */
            CHECK(SEND(e, 0, &c, id, S, 1, 1) == STATUS_OK
                      && SEND(e, 0, &c, id, NONE, 2, 1) == STATUS_OK
                      && SEND(e, 0, &c, id, E, 3, 1) == STATUS_OK,
                  "an ended numbered sequence: %s", c.msg);
        } else {
            CHECK(SEND(e, 0, &c, id, S, 0, 1) == STATUS_OK,
                  "a live unnumbered sequence: %s", c.msg);
        }
        CHECK(BEGIN(e, 0, &s, id, S, 1, 10) && BEGIN(e, 0, &n2, id, NONE, 2, 5),
              "a start and chunk 2, admitted");
        chunk_scan(&n2, true); /* 2's scan ends first */
        env_advance(e, 100);
        CHECK(!atomic_load(&n2.done), "chunk 2 waits for its start");
        chunk_scan(&s, true);
        chunk_wait(e, &s);
        chunk_wait(e, &n2);
        CHECK(ANSWERED(&s, 10) && ANSWERED(&n2, 15), "kept %d: %d %s; %d %s",
              kept, s.st, s.msg, n2.st, n2.msg);
    }
}

/* Rule: a chunk pending across its sequence's idle deadline finds it
 * gone (idle counts from the last answered chunk, whatever is in
 * flight). */
static void pending_across_the_idle_deadline(env *e)
{
    chunk c, x;
    CHECK(SEND(e, 0, &c, 9, S, 0, 1) == STATUS_OK, "start: %s", c.msg);
    CHECK(BEGIN(e, 0, &x, 9, NONE, 0, 1), "admitted within the idle time");
    env_advance(e, IDLE_MS + 100);
    chunk_scan(&x, true);
    chunk_wait(e, &x);
    CHECK(x.st == STATUS_INVALID && strstr(x.msg, "not live"),
          "decided after it: %d %s", x.st, x.msg);
}

/* Rule: a repeat keeps its first send's flags: chunk n sent again with
 * sequence_end added is a conflict, and the sequence goes on. */
static void a_repeat_keeps_its_flags(env *e)
{
    chunk c;
    CHECK(SEND(e, 0, &c, 10, S, 1, 1) == STATUS_OK
              && SEND(e, 0, &c, 10, NONE, 2, 2) == STATUS_OK,
          "two chunks: %s", c.msg);
    CHECK(SEND(e, 0, &c, 10, E, 2, 2) == STATUS_CHUNK_CONFLICT
              && strstr(c.msg, "keeps its flags"),
          "2 again with its end: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 10, E, 3, 3) == STATUS_OK && ANSWERED(&c, 6),
          "not ended: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 10, NONE, 3, 3) == STATUS_CHUNK_CONFLICT
              && strstr(c.msg, "keeps its flags"),
          "the end again without it: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 10, E, 3, 3) == STATUS_OK && ANSWERED(&c, 6),
          "the end again: %d %s", c.st, c.msg);
}

/* Rule: a new start on an ended one-chunk numbered sequence is that
 * chunk again only with the same input and flags; else a new sequence. */
static void a_start_on_an_ended_one_chunk_sequence(env *e)
{
    chunk c;
    CHECK(SEND(e, 0, &c, 11, S | E, 1, 7) == STATUS_OK && ANSWERED(&c, 7),
          "a one-chunk sequence: %s", c.msg);
    CHECK(SEND(e, 0, &c, 11, S | E, 1, 7) == STATUS_OK && ANSWERED(&c, 7),
          "the same again: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 11, S, 1, 7) == STATUS_OK && ANSWERED(&c, 7),
          "a new start, the same input: %d %s", c.st, c.msg);
    CHECK(SEND(e, 0, &c, 11, NONE, 2, 1) == STATUS_OK && ANSWERED(&c, 8),
          "its chunk 2: %d %s", c.st, c.msg);
}

/* Rule: a start as its id expires, then a restart: the start is kept
 * (item 2). */
static void a_start_as_its_id_expires(env *e)
{
    chunk c;
    CHECK(SEND(e, 0, &c, 12, S, 0, 1) == STATUS_OK, "start: %s", c.msg);
    env_advance(e, IDLE_MS + 20); /* expired, swept */
    CHECK(SEND(e, 0, &c, 12, S, 0, 5) == STATUS_OK && ANSWERED(&c, 5),
          "started again: %d %s", c.st, c.msg);
    env_restart(e);
    if (e->kind != ST_MEMORY)
        CHECK(SEND(e, 0, &c, 12, NONE, 0, 1) == STATUS_OK && ANSWERED(&c, 6),
              "after a restart: %d %s", c.st, c.msg);
}

/* Rule: a chunk waiting for its turn past its request's deadline fails
 * (504), and changes nothing. */
static void a_deadline_while_waiting(env *e)
{
    chunk c, x, y;
    CHECK(SEND(e, 0, &c, 13, S, 0, 1) == STATUS_OK, "start: %s", c.msg);
    CHECK(BEGIN(e, 0, &x, 13, NONE, 0, 10) && BEGIN(e, 0, &y, 13, NONE, 0, 100),
          "two chunks");
    y.slot.deadline_ns =
        (e->manual_clock ? atomic_load(&fake_now) : now_ns()) + 50 * 1000000ull;
    chunk_scan(&y, true);
    env_advance(e, 100);
    chunk_wait(e, &y);
    CHECK(y.st == STATUS_DEADLINE, "past its deadline: %d %s", y.st, y.msg);
    chunk_scan(&x, true);
    chunk_wait(e, &x);
    CHECK(ANSWERED(&x, 11), "the one before it: %d %s", x.st, x.msg);
    CHECK(SEND(e, 0, &c, 13, NONE, 0, 1) == STATUS_OK && ANSWERED(&c, 12),
          "nothing of it added: %d %s", c.st, c.msg);
}

/* Rule: chunks behind a start that failed: an unnumbered one is refused,
 * a numbered one waits for chunk 1 (sent again: then it goes on). */
static void chunks_behind_a_failed_start(env *e)
{
    chunk s, u, n2, again;
    CHECK(BEGIN(e, 0, &s, 14, S, 1, 1) && BEGIN(e, 0, &n2, 14, NONE, 2, 2),
          "a start and chunk 2");
    chunk_scan(&n2, true);
    chunk_scan(&s, false);
    chunk_wait(e, &s);
    env_advance(e, REORDER_MS / 3);
    CHECK(!atomic_load(&n2.done), "chunk 2 waits for chunk 1");
    CHECK(SEND(e, 0, &again, 14, S, 1, 1) == STATUS_OK && ANSWERED(&again, 1),
          "chunk 1 again: %d %s", again.st, again.msg);
    chunk_wait(e, &n2);
    CHECK(ANSWERED(&n2, 3), "then chunk 2: %d %s", n2.st, n2.msg);
    CHECK(BEGIN(e, 0, &s, 15, S, 0, 1) && BEGIN(e, 0, &u, 15, NONE, 0, 2),
          "an unnumbered start and a chunk");
    chunk_scan(&u, true);
    chunk_scan(&s, false);
    chunk_wait(e, &s);
    chunk_wait(e, &u);
    CHECK(u.st == STATUS_INVALID && strstr(u.msg, "did not start"),
          "refused: %d %s", u.st, u.msg);
}

/* A drain that timed out: nothing moves any more (503). */
static void frozen(env *e)
{
    chunk c;
    CHECK(SEND(e, 0, &c, 16, S, 0, 1) == STATUS_OK, "start: %s", c.msg);
    CHECK(seq_freeze(e->t[0], 100), "nothing in flight");
    CHECK(SEND(e, 0, &c, 16, NONE, 0, 1) == STATUS_DRAINING,
          "after the freeze: %d %s", c.st, c.msg);
}

/* Limits: a local store holds max_sequences live ones (503 beyond, the
 * ended ones and one-chunk sequences aside); a chunk whose carries alone
 * pass max_bytes is refused at once (413). */
static void limits(env *e)
{
    chunk c;
    for (uint64_t id = 20; id < 22; id++)
        CHECK(SEND(e, 0, &c, id, S, 0, 1) == STATUS_OK, "start %llu: %s",
              (unsigned long long)id, c.msg);
    if (e->kind == ST_MEMORY || e->kind == ST_LOG) {
        CHECK(SEND(e, 0, &c, 22, S, 0, 1) == STATUS_SEQUENCES_FULL
                  && strstr(c.msg, "as many as the server keeps"),
              "a third: %d %s", c.st, c.msg);
        CHECK(SEND(e, 0, &c, 23, S | E, 0, 1) == STATUS_OK,
              "a start that ends at once keeps nothing live: %d %s", c.st,
              c.msg);
        CHECK(SEND(e, 0, &c, 20, E, 0, 1) == STATUS_OK
                  && SEND(e, 0, &c, 22, S, 0, 1) == STATUS_OK,
              "one ended: room again: %d %s", c.st, c.msg);
    }
    chunk big;
    memset(&big, 0, sizeof big);
    char msg[256];
    seq_id_number(&big.p, 30, msg, sizeof msg);
    big.p.start = true;
    big.d = (eng_scan_desc){
        .dtype = TX_INT64, .rank = 2, .shape = {1 << 20, 1}, .axis = 1};
    eng_lines_from_desc(&big.d, &big.l, msg, sizeof msg);
    big.slot.done = on_done;
    CHECK(seq_admit(e->t[0], &big.p, &big.d, &big.l, NULL, &big.slot, msg,
                    sizeof msg)
                  == STATUS_TOO_LARGE
              && strstr(msg, "--sequence-max-bytes"),
          "too large: %s", msg);
}

/* Rule (shared stores): versions never repeat, whatever the store lost:
 * B's cache of a write that a rollback lost can never pass a
 * compare-and-set again (item 3). */
static void a_rollback_of_the_store(env *e)
{
    if (e->kind != ST_FAKE && e->kind != ST_REDIS)
        return;
    chunk c;
    redisContext *rc = e->kind == ST_REDIS ? sync_conn(e->port, NULL) : NULL;
    CHECK(SEND(e, 0, &c, 40, S, 0, 1) == STATUS_OK, "A starts: %s", c.msg);
    if (rc != NULL) { /* the snapshot, Redis's own */
        redisReply *r = redisCommand(rc, "SAVE");
        CHECK(r != NULL && r->type == REDIS_REPLY_STATUS, "SAVE");
        if (r != NULL)
            freeReplyObject(r);
    } else {
        fake_kv_snapshot(e->f);
    }
    CHECK(SEND(e, 1, &c, 40, NONE, 0, 10) == STATUS_OK && ANSWERED(&c, 11),
          "B adds 10: %d %s", c.st, c.msg);
    if (rc != NULL) { /* Redis restarted from the snapshot */
        redisFree(rc);
        stop_redis(e->redis, SIGKILL);
        static const char *const extra[] = {"--appendonly", "no", NULL};
        e->redis = start_redis_with(e->port, NULL, extra);
    } else {
        fake_kv_rollback(e->f);
    }
    CHECK(SEND(e, 0, &c, 40, NONE, 0, 100) == STATUS_OK && ANSWERED(&c, 101),
          "A adds 100 (the 10 lost): %d %s", c.st, c.msg);
    status_code st = SEND(e, 1, &c, 40, NONE, 0, 1000);
    CHECK(st == STATUS_STORE || (st == STATUS_OK && ANSWERED(&c, 1101)),
          "B adds 1000 on the truth, not its cache: %d %s", c.st, c.msg);
    if (st == STATUS_STORE) /* its connection saw Redis go: once more */
        CHECK(SEND(e, 1, &c, 40, NONE, 0, 1000) == STATUS_OK
                  && ANSWERED(&c, 1101),
              "B adds 1000: %d %s", c.st, c.msg);
}

typedef void (*rule_fn)(env *e);

static void run(int kind, rule_fn fn, unsigned max_sequences)
{
    if (kind == ST_REDIS && access(REDIS_SERVER, X_OK) != 0) {
        CHECK(0, "no %s: `make deps-test` installs Debian's redis-server",
              REDIS_SERVER);
        return;
    }
    env e;
    env_open(&e, kind, max_sequences);
    fn(&e);
    env_close(&e);
}

#define RULE(name, max)                                                        \
    static void memory_##name(void)                                            \
    {                                                                          \
        run(ST_MEMORY, name, max);                                             \
    }                                                                          \
    static void log_##name(void)                                               \
    {                                                                          \
        run(ST_LOG, name, max);                                                \
    }                                                                          \
    static void fake_##name(void)                                              \
    {                                                                          \
        run(ST_FAKE, name, max);                                               \
    }                                                                          \
    static void redis_##name(void)                                             \
    {                                                                          \
        run(ST_REDIS, name, max);                                              \
    }
#define CASES(name)                                                            \
    {"memory/" #name, memory_##name}, {"log/" #name, log_##name},              \
        {"fake/" #name, fake_##name},                                          \
    {                                                                          \
        "redis/" #name, redis_##name                                           \
    }

RULE(chunks_join_and_end, 64)
RULE(kinds_kept, 64)
RULE(numbered_exactly_once, 64)
RULE(failed_start_leaves_the_old, 64)
RULE(old_chunk_before_a_new_start, 64)
RULE(start_in_flight_and_the_next_chunk, 64)
RULE(pending_across_the_idle_deadline, 64)
RULE(a_repeat_keeps_its_flags, 64)
RULE(a_start_on_an_ended_one_chunk_sequence, 64)
RULE(a_start_as_its_id_expires, 64)
RULE(a_deadline_while_waiting, 64)
RULE(chunks_behind_a_failed_start, 64)
RULE(frozen, 64)
RULE(limits, 2)
RULE(a_rollback_of_the_store, 64)

static const check_case cases[] = {
    {"seq_carries", seq_carries},
    {"seq_state_file", seq_state_file},
    CASES(chunks_join_and_end),
    CASES(kinds_kept),
    CASES(numbered_exactly_once),
    CASES(failed_start_leaves_the_old),
    CASES(old_chunk_before_a_new_start),
    CASES(start_in_flight_and_the_next_chunk),
    CASES(pending_across_the_idle_deadline),
    CASES(a_repeat_keeps_its_flags),
    CASES(a_start_on_an_ended_one_chunk_sequence),
    CASES(a_start_as_its_id_expires),
    CASES(a_deadline_while_waiting),
    CASES(chunks_behind_a_failed_start),
    CASES(frozen),
    CASES(limits),
    CASES(a_rollback_of_the_store),
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
