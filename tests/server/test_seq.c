/*
 * test_seq.c - the sequences (server/seq/) on their own: the carries
 * against a whole-tensor reference (engine/carry.h), the table's turns,
 * refusals and limits, the linger and idle expiry on a fake clock,
 * numbered chunks, and the record format through every truncation and a
 * flipped byte.
 */
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
#include "seq_log.h"
#include "seq_logged.h"
#include "seq_memory.h"
#include "seq_remote.h"
#include "sequence.h"
#include "sequence_file.h"
#include "status.h"
#include "tx_half.h"

/* The monotonic clock the table reads, moved by the test. */
static atomic_ullong fake_now;

static uint64_t fake_clock(void *user)
{
    (void)user;
    return atomic_load(&fake_now);
}

/* ------------------------------------------------------------------------
 * Sequences.
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

static int seq_readies;
static void seq_ready(seq_slot *s)
{
    (void)s;
    seq_readies++;
}

static seq_params seq_num(uint64_t v, bool start, bool end)
{
    seq_params p;
    memset(&p, 0, sizeof p);
    char msg[128];
    CHECK(seq_id_number(&p, v, msg, sizeof msg), "id %llu",
          (unsigned long long)v);
    p.start = start;
    p.end = end;
    return p;
}

/* Each slot's refusal, where its submitter keeps it (seq_slot's
 * refused and why): a few slots, each with its own. */
static struct {
    seq_slot *s;
    status_code st;
    char why[512];
} refusals[16];

static void keep_refusal(seq_slot *s)
{
    size_t i = 0;
    while (i < 15 && refusals[i].s != NULL && refusals[i].s != s)
        i++;
    refusals[i].s = s;
    refusals[i].st = STATUS_OK;
    refusals[i].why[0] = '\0';
    s->refused = &refusals[i].st;
    s->why = refusals[i].why;
    s->whylen = sizeof refusals[i].why;
}

/* Admits a float32 [n] chunk of sequence p: the status. */
static status_code seq_try(seq_table *t, seq_params p, float *x, uint64_t n,
                           seq_slot *s, bool *wait, char *msg)
{
    eng_scan_desc d = {.dtype = TX_FLOAT32, .rank = 1, .shape = {n}};
    eng_lines l;
    CHECK(eng_lines_from_desc(&d, &l, msg, 256) == ENG_E_OK, "%s", msg);
    memset(s, 0, sizeof *s);
    s->ready = seq_ready;
    keep_refusal(s);
    return seq_admit(t, &p, &d, &l, x, s, wait, msg, 256);
}

static void seq_turns_and_refusals(void)
{
    atomic_store(&fake_now, 1000000000u);
    seq_options o = {.max_sequences = 2,
                     .idle_ms = 100,
                     .max_bytes = 1024,
                     .clock = fake_clock};
    seq_table *t = seq_table_new(&o, seq_memory_new(&o));
    float x[4] = {1, 2, 3, 4}, y[4];
    char msg[256];
    seq_slot a, b, c, d;
    bool wait;
    /* not live */
    CHECK(seq_try(t, seq_num(5, false, false), x, 4, &a, &wait, msg)
                  == STATUS_INVALID
              && strstr(msg, "sequence_start"),
          "%s", msg);
    CHECK(seq_try(t, seq_num(5, true, false), x, 4, &a, &wait, msg) == STATUS_OK
              && !wait,
          "start: %s", msg);
    /* a second chunk waits for the first's turn; armed, it is called */
    CHECK(seq_try(t, seq_num(5, false, false), x, 2, &b, &wait, msg)
                  == STATUS_OK
              && wait,
          "second: %s", msg);
    CHECK(seq_arm(t, &b), "armed");
    /* a differing chunk is refused and changes nothing */
    double dx[1] = {1};
    eng_scan_desc dd = {.dtype = TX_FLOAT64, .rank = 1, .shape = {1}};
    eng_lines dl;
    eng_lines_from_desc(&dd, &dl, msg, sizeof msg);
    seq_params p5x = seq_num(5, false, false);
    CHECK(seq_admit(t, &p5x, &dd, &dl, dx, &d, &wait, msg, sizeof msg)
                  == STATUS_INVALID
              && strstr(msg, "float64"),
          "%s", msg);
    /* a third waits too, but its turn comes before it is armed */
    CHECK(seq_try(t, seq_num(5, false, true), x, 1, &c, &wait, msg) == STATUS_OK
              && wait,
          "third: %s", msg);
    memcpy(y, (float[]){1, 3, 6, 10}, sizeof y);
    seq_readies = 0;
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(seq_readies == 1, "b's turn: %d", seq_readies);
    memcpy(y, (float[]){1, 3}, 2 * sizeof *y);
    seq_finish(t, &b, true, y, msg, sizeof msg);
    CHECK(y[0] == 11 && y[1] == 13, "carried: %g %g", y[0], y[1]);
    CHECK(seq_readies == 1 && !seq_arm(t, &c), "c's turn came first");
    /* after the end was admitted, a chunk finds no live sequence */
    seq_params p5 = seq_num(5, false, false);
    CHECK(seq_try(t, p5, x, 1, &d, &wait, msg) == STATUS_INVALID
              && strstr(msg, "not live"),
          "%s", msg);
    y[0] = 1;
    seq_finish(t, &c, true, y, msg, sizeof msg); /* the end: 1 + 13 */
    CHECK(y[0] == 14, "end: %g", y[0]);
    CHECK(seq_live(t) == 0, "ended");
    /* the limits */
    CHECK(seq_try(t, seq_num(1, true, false), x, 4, &a, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    seq_finish(t, &a, false, y, msg,
               sizeof msg); /* a failed start: never started */
    CHECK(seq_live(t) == 0, "a failed start leaves nothing");
    CHECK(seq_try(t, seq_num(1, true, false), x, 4, &a, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(seq_try(t, seq_num(2, true, false), x, 4, &a, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(seq_try(t, seq_num(3, true, false), x, 4, &a, &wait, msg)
              == STATUS_SEQUENCES_FULL,
          "%s", msg);
    /* starting a live one again is no new sequence */
    CHECK(seq_try(t, seq_num(2, true, false), x, 4, &a, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    memcpy(y, x, sizeof y);
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(y[3] == 4, "from zero: %g", y[3]);
    /* idle: both expire on the fake clock */
    atomic_fetch_add(&fake_now, 99000000u);
    seq_sweep(t);
    CHECK(seq_live(t) == 2, "not yet");
    atomic_fetch_add(&fake_now, 2000000u);
    seq_sweep(t);
    CHECK(seq_live(t) == 0, "expired");
    seq_table_free(t);

    /* the bytes: 200 lines of 8 bytes pass 1024 alone */
    seq_options small = {.max_sequences = 8, .idle_ms = 100, .max_bytes = 1024};
    t = seq_table_new(&small, seq_memory_new(&small));
    float big[200];
    memset(big, 0, sizeof big);
    eng_scan_desc bd = {.dtype = TX_FLOAT32, .rank = 2, .shape = {1, 200}};
    eng_lines bl;
    eng_lines_from_desc(&bd, &bl, msg, sizeof msg);
    seq_params p9 = seq_num(9, true, false);
    memset(&a, 0, sizeof a);
    keep_refusal(&a);
    CHECK(seq_admit(t, &p9, &bd, &bl, big, &a, &wait, msg, sizeof msg)
              == STATUS_TOO_LARGE,
          "%s", msg);
    seq_table_free(t);
}

/* An ended sequence lingers: a late chunk is taken after the end, a start
 * takes the id, and after linger_ms the id is gone. */
static void seq_linger(void)
{
    atomic_store(&fake_now, 5000000000u);
    seq_options o = {.max_sequences = 1,
                     .idle_ms = 1000,
                     .linger_ms = 50,
                     .max_bytes = 1024,
                     .clock = fake_clock};
    seq_table *t = seq_table_new(&o, seq_memory_new(&o));
    float x[2] = {1, 2}, y[2];
    char msg[256];
    seq_slot a;
    bool wait;
    CHECK(seq_try(t, seq_num(3, true, true), x, 2, &a, &wait, msg) == STATUS_OK,
          "%s", msg);
    memcpy(y, (float[]){1, 3}, sizeof y);
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(seq_live(t) == 0, "ended: not live");
    /* room for another at once, though 3 lingers */
    CHECK(seq_try(t, seq_num(4, true, false), x, 2, &a, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(seq_try(t, seq_num(3, false, false), x, 1, &a, &wait, msg)
                  == STATUS_OK
              && !wait,
          "late: %s", msg);
    y[0] = 1;
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(y[0] == 4, "late chunk after the end: %g", y[0]);
    CHECK(seq_live(t) == 1, "the late chunk revived nothing");
    atomic_fetch_add(&fake_now, 51000000u);
    seq_sweep(t);
    CHECK(seq_try(t, seq_num(3, false, false), x, 1, &a, &wait, msg)
              == STATUS_INVALID,
          "gone: %s", msg);
    textbuf o2;
    textbuf_init(&o2, 1024);
    seq_render_metrics(t, &o2);
    size_t len;
    char *m = textbuf_take(&o2, &len);
    CHECK(m != NULL && strstr(m, "tally_sequence_late_chunks_total 1"), "%s",
          m ? m : "");
    free(m);
    seq_table_free(t);
}

static seq_params seq_numbered(uint64_t v, uint64_t chunk, bool start, bool end)
{
    seq_params p = seq_num(v, start, end);
    char msg[128];
    CHECK(seq_chunk_number(&p, chunk, msg, sizeof msg), "chunk %llu",
          (unsigned long long)chunk);
    return p;
}

/* A chunk's scanned answer, as the engine would give it: the inclusive
 * prefix sums of x[0..n), into y. */
static void scanned(const float *x, float *y, int n)
{
    float s = 0;
    for (int i = 0; i < n; i++)
        y[i] = s += x[i];
}

/* Numbered chunks: in order whatever the arrival, a repeat answered again
 * and not added, conflicts refused, an early chunk refused after
 * reorder_ms, numbered and unnumbered kept apart, the end repeated. */
static void seq_numbered_chunks(void)
{
    atomic_store(&fake_now, 7000000000u);
    seq_options o = {.max_sequences = 4,
                     .idle_ms = 1000,
                     .linger_ms = 0,
                     .reorder_ms = 100,
                     .max_bytes = 4096,
                     .clock = fake_clock};
    seq_table *t = seq_table_new(&o, seq_memory_new(&o));
    float x1[3] = {1, 2, 3}, x2[2] = {4, 5}, x3[1] = {6}, x4[2] = {7, 8};
    float y[3];
    char msg[256];
    seq_slot a, b, c, d;
    bool wait;
    CHECK(seq_try(t, seq_numbered(8, 1, true, false), x1, 3, &a, &wait, msg)
                  == STATUS_OK
              && !wait,
          "start: %s", msg);
    scanned(x1, y, 3);
    CHECK(seq_finish(t, &a, true, y, msg, sizeof msg) == STATUS_OK && y[2] == 6,
          "chunk 1: %g", y[2]);
    /* chunk 3 comes before chunk 2: it waits, though nothing runs */
    CHECK(seq_try(t, seq_numbered(8, 3, false, false), x3, 1, &c, &wait, msg)
                  == STATUS_OK
              && wait,
          "early: %s", msg);
    CHECK(seq_arm(t, &c), "armed");
    seq_readies = 0;
    CHECK(seq_try(t, seq_numbered(8, 2, false, false), x2, 2, &b, &wait, msg)
                  == STATUS_OK
              && !wait,
          "chunk 2 goes first: %s", msg);
    scanned(x2, y, 2);
    CHECK(seq_finish(t, &b, true, y, msg, sizeof msg) == STATUS_OK && y[0] == 10
              && y[1] == 15,
          "chunk 2: %g %g", y[0], y[1]);
    CHECK(seq_readies == 1 && *c.refused == STATUS_OK, "chunk 3's turn");
    scanned(x3, y, 1);
    CHECK(seq_finish(t, &c, true, y, msg, sizeof msg) == STATUS_OK
              && y[0] == 21,
          "chunk 3: %g", y[0]);
    /* chunk 3 again, same input: the first answer, not added again */
    CHECK(seq_try(t, seq_numbered(8, 3, false, false), x3, 1, &c, &wait, msg)
              == STATUS_OK,
          "repeat: %s", msg);
    scanned(x3, y, 1);
    CHECK(seq_finish(t, &c, true, y, msg, sizeof msg) == STATUS_OK
              && y[0] == 21,
          "repeat answered: %g", y[0]);
    /* chunk 3 with another input, and chunk 2: conflicts */
    CHECK(seq_try(t, seq_numbered(8, 3, false, false), x4, 1, &c, &wait, msg)
                  == STATUS_CHUNK_CONFLICT
              && strstr(msg, "another input"),
          "conflict: %s", msg);
    CHECK(seq_try(t, seq_numbered(8, 2, false, false), x2, 2, &c, &wait, msg)
                  == STATUS_CHUNK_CONFLICT
              && strstr(msg, "older"),
          "older: %s", msg);
    /* unnumbered chunks of a numbered sequence, and the other way */
    CHECK(seq_try(t, seq_num(8, false, false), x2, 2, &c, &wait, msg)
                  == STATUS_INVALID
              && strstr(msg, "no number"),
          "unnumbered: %s", msg);
    CHECK(seq_try(t, seq_num(9, true, false), x2, 2, &d, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x2, y, 2);
    seq_finish(t, &d, true, y, msg, sizeof msg);
    CHECK(seq_try(t, seq_numbered(9, 2, false, false), x2, 2, &d, &wait, msg)
                  == STATUS_INVALID
              && strstr(msg, "has one"),
          "numbered: %s", msg);
    /* chunk 5 waits for chunk 4, which never comes: refused after 100 ms */
    CHECK(seq_try(t, seq_numbered(8, 5, false, false), x3, 1, &d, &wait, msg)
                  == STATUS_OK
              && wait,
          "early: %s", msg);
    CHECK(seq_arm(t, &d), "armed");
    seq_readies = 0;
    atomic_fetch_add(&fake_now, 99000000u);
    seq_sweep(t);
    CHECK(seq_readies == 0, "not yet");
    atomic_fetch_add(&fake_now, 2000000u);
    seq_sweep(t);
    CHECK(seq_readies == 1 && *d.refused == STATUS_CHUNK_GAP
              && strstr(d.why, "chunk 4"),
          "gap: %d %s", seq_readies, d.why);
    /* refused before it was armed: seq_arm says so */
    CHECK(seq_try(t, seq_numbered(8, 6, false, false), x3, 1, &d, &wait, msg)
                  == STATUS_OK
              && wait,
          "early: %s", msg);
    atomic_fetch_add(&fake_now, 101000000u);
    seq_sweep(t);
    CHECK(!seq_arm(t, &d) && *d.refused == STATUS_CHUNK_GAP, "refused first");
    /* the end, chunk 4; then its repeat, and nothing after it */
    CHECK(seq_try(t, seq_numbered(8, 4, false, true), x4, 2, &d, &wait, msg)
                  == STATUS_OK
              && !wait,
          "end: %s", msg);
    scanned(x4, y, 2);
    CHECK(seq_finish(t, &d, true, y, msg, sizeof msg) == STATUS_OK && y[0] == 28
              && y[1] == 36,
          "end: %g %g", y[0], y[1]);
    CHECK(seq_try(t, seq_numbered(8, 4, false, true), x4, 2, &d, &wait, msg)
              == STATUS_OK,
          "end again: %s", msg);
    scanned(x4, y, 2);
    CHECK(seq_finish(t, &d, true, y, msg, sizeof msg) == STATUS_OK && y[0] == 28
              && y[1] == 36,
          "end repeated: %g %g", y[0], y[1]);
    CHECK(seq_try(t, seq_numbered(8, 5, false, false), x3, 1, &d, &wait, msg)
                  == STATUS_CHUNK_CONFLICT
              && strstr(msg, "ended at chunk 4"),
          "after the end: %s", msg);
    /* a retried start of a live numbered sequence is its chunk 1 */
    CHECK(seq_try(t, seq_numbered(10, 1, true, false), x1, 3, &a, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x1, y, 3);
    seq_finish(t, &a, true, y, msg, sizeof msg);
    CHECK(seq_try(t, seq_numbered(10, 1, true, false), x1, 3, &a, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x1, y, 3);
    CHECK(seq_finish(t, &a, true, y, msg, sizeof msg) == STATUS_OK && y[2] == 6,
          "start repeated: %g", y[2]);
    CHECK(seq_try(t, seq_numbered(10, 2, false, false), x2, 2, &b, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x2, y, 2);
    CHECK(seq_finish(t, &b, true, y, msg, sizeof msg) == STATUS_OK
              && y[1] == 15,
          "after the repeat, counted once: %g", y[1]);
    /* frozen: a chunk that finishes now adds nothing, and says why */
    CHECK(seq_try(t, seq_numbered(10, 3, false, false), x3, 1, &c, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    CHECK(seq_freeze(t, 100), "frozen");
    scanned(x3, y, 1);
    CHECK(seq_finish(t, &c, true, y, msg, sizeof msg) == STATUS_DRAINING
              && strstr(msg, "shutting down"),
          "frozen: %s", msg);
    textbuf o2;
    textbuf_init(&o2, 2048);
    seq_render_metrics(t, &o2);
    size_t len;
    char *m = textbuf_take(&o2, &len);
    CHECK(
        m != NULL
            && strstr(
                m, "tally_sequence_numbered_chunks_total{outcome=\"repeat\"} 3")
            && strstr(m,
                      "tally_sequence_numbered_chunks_total{outcome=\"gap\"} 2")
            && strstr(
                m,
                "tally_sequence_numbered_chunks_total{outcome=\"conflict\"} 3"),
        "%s", m ? m : "");
    free(m);
    seq_table_free(t);
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

/* A chunk through a durable table: its state written first, then its
 * durable() (the log's writer's thread), whose outcome this returns. */
static atomic_int durable_st;

static void on_durable(seq_slot *s, status_code st, const char *msg)
{
    (void)s;
    (void)msg;
    atomic_store(&durable_st, (int)st);
}

static status_code finish_logged(seq_table *t, seq_slot *s, void *out,
                                 char *msg)
{
    atomic_store(&durable_st, -1);
    s->durable = on_durable;
    bool later;
    status_code st = seq_finish_durable(t, s, true, out, &later, msg, 256);
    if (st != STATUS_OK || !later)
        return st;
    for (int i = 0; i < 5000 && atomic_load(&durable_st) < 0; i++)
        uv_sleep(1);
    return (status_code)atomic_load(&durable_st);
}

/* The log (--state-dir): a table over it goes on after a restart where
 * it stopped, numbers and all; one tallyd a directory. */
static void seq_log_restart(void)
{
    char dir[] = "/tmp/tally-seq-XXXXXX", msg[256];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    seq_options o = {.max_sequences = 4, .idle_ms = 60000, .max_bytes = 4096};
    seq_backend *b =
        seq_logged_open(dir, SEQ_FSYNC_ALWAYS, &o, NULL, msg, sizeof msg);
    CHECK(b != NULL, "%s", msg);
    seq_table *t = seq_table_new(&o, b);
    CHECK(t != NULL && seq_durable(t), "a durable table");
    CHECK(seq_logged_open(dir, SEQ_FSYNC_ALWAYS, &o, NULL, msg, sizeof msg)
                  == NULL
              && strstr(msg, "pid") != NULL,
          "a second tallyd on the directory: %s", msg);
    float x[3] = {1, 2, 3}, y[3] = {1, 3, 6};
    seq_slot s;
    bool wait;
    CHECK(seq_try(t, seq_num(77, true, false), x, 3, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    CHECK(finish_logged(t, &s, y, msg) == STATUS_OK, "%s", msg);
    /* a numbered one keeps its numbers: its last chunk is a repeat */
    float x2[2] = {4, 5}, x3[1] = {6}, y2[2];
    CHECK(seq_try(t, seq_numbered(78, 1, true, false), x, 3, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x, y, 3);
    CHECK(finish_logged(t, &s, y, msg) == STATUS_OK, "%s", msg);
    CHECK(seq_try(t, seq_numbered(78, 2, false, false), x2, 2, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x2, y2, 2);
    CHECK(finish_logged(t, &s, y2, msg) == STATUS_OK, "%s", msg);
    seq_close(t);
    seq_table_free(t);

    b = seq_logged_open(dir, SEQ_FSYNC_ALWAYS, &o, NULL, msg, sizeof msg);
    CHECK(b != NULL, "reopened: %s", msg);
    t = seq_table_new(&o, b);
    y[0] = 4;
    CHECK(seq_try(t, seq_num(77, false, true), x, 1, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    CHECK(finish_logged(t, &s, y, msg) == STATUS_OK && y[0] == 10,
          "went on: %g (%s)", y[0], msg);
    CHECK(seq_try(t, seq_numbered(78, 2, false, false), x2, 2, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x2, y2, 2);
    CHECK(finish_logged(t, &s, y2, msg) == STATUS_OK && y2[1] == 15,
          "repeat after a restart: %g", y2[1]);
    CHECK(seq_try(t, seq_numbered(78, 3, false, false), x3, 1, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x3, y2, 1);
    CHECK(finish_logged(t, &s, y2, msg) == STATUS_OK && y2[0] == 21,
          "went on: %g", y2[0]);
    seq_close(t);
    seq_table_free(t);
    /* sequence 77 ended: a restart does not bring it back */
    b = seq_logged_open(dir, SEQ_FSYNC_ALWAYS, &o, NULL, msg, sizeof msg);
    CHECK(b != NULL, "reopened: %s", msg);
    t = seq_table_new(&o, b);
    CHECK(seq_try(t, seq_num(77, false, false), x, 1, &s, &wait, msg)
              == STATUS_INVALID,
          "an ended sequence stays ended: %s", msg);
    seq_close(t);
    seq_table_free(t);
    char path[64];
    snprintf(path, sizeof path, "%s/sequences.log", dir);
    unlink(path);
    snprintf(path, sizeof path, "%s/tallyd.lock", dir);
    unlink(path);
    CHECK(rmdir(dir) == 0, "the directory held only the log and the lock");
}

/* The log's rewrite runs beside the appends: held before its snapshot's
 * write, it keeps no append waiting; let go, it replaces the log with
 * the snapshot and what was appended meanwhile, and a replay gives each
 * sequence's last state. */
static atomic_int log_dones, log_fails;

static void on_logged(void *ctx, bool ok, const char *why)
{
    (void)ctx, (void)why;
    atomic_fetch_add(ok ? &log_dones : &log_fails, 1);
}

/* Appends sequence id's state, its one carry v. */
static void log_state(seq_log *log, uint64_t id, uint64_t v)
{
    seq_params p;
    char msg[128];
    CHECK(seq_id_number(&p, id, msg, sizeof msg), "%s", msg);
    eng_scan_desc d = {.dtype = TX_INT64, .rank = 1, .shape = {0}};
    eng_carry c = {.u = v};
    seq_file_entry x;
    seq_record_init(&x, &p, &d, SEQ_LIVE, INT64_MAX, 1, &c);
    CHECK(seq_log_append(log, &x, on_logged, NULL), "appended");
}

static bool until_logged(int n)
{
    for (int i = 0; i < 5000 && atomic_load(&log_dones) < n; i++)
        uv_sleep(1);
    return atomic_load(&log_dones) == n && atomic_load(&log_fails) == 0;
}

static uint64_t replayed[6];
static int replayed_records;

static bool replay_one(void *user, seq_file_entry *e)
{
    (void)user;
    replayed_records++;
    if (!e->id.is_string && e->id.num >= 1 && e->id.num <= 5)
        replayed[e->id.num] = e->carry[0].u;
    return true;
}

static void seq_log_rewrite(void)
{
    char dir[] = "/tmp/tally-seq-XXXXXX", msg[512], path[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    seq_log *log =
        seq_log_open(dir, SEQ_FSYNC_EVERYSEC, NULL, 0, msg, sizeof msg);
    CHECK(log != NULL, "%s", msg);
    seq_log_test_rewrites(log, 4096, true);
    int n = 0;
    seq_log_stats st = {0};
    uint64_t v = 0;
    while (!st.rewriting && n < 2000) {
        log_state(log, 1 + (uint64_t)n % 5, ++v);
        CHECK(until_logged(++n), "record %d", n);
        seq_log_get_stats(log, &st);
    }
    CHECK(st.rewriting && st.rewrites == 0, "a rewrite began, held");
    int before = n; /* the snapshot has at most 5 records for these */
    for (int k = 0; k < 100; k++)
        log_state(log, 1 + (uint64_t)k % 5, ++v);
    n += 100;
    CHECK(until_logged(n), "the appends went on beside it: %d of %d",
          atomic_load(&log_dones), n);
    seq_log_get_stats(log, &st);
    CHECK(st.rewriting && st.rewrites == 0, "still held");
    seq_log_test_rewrites(log, UINT64_MAX, false);
    for (int i = 0; i < 5000 && st.rewrites == 0; i++) {
        uv_sleep(1);
        log_state(log, 1, ++v); /* the writer ends it at its next batch */
        CHECK(until_logged(++n), "record %d", n);
        seq_log_get_stats(log, &st);
    }
    CHECK(st.rewrites == 1 && !st.rewriting, "rewritten");
    log_state(log, 2, ++v);
    CHECK(until_logged(++n), "after it");
    seq_log_close(log);
    snprintf(path, sizeof path, "%s/sequences.log", dir);
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL, "the log");
    static uint8_t buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf, f);
    fclose(f);
    size_t torn;
    CHECK(seq_log_decode(buf, len, 1, 1 << 16, replay_one, NULL, &torn, msg,
                         sizeof msg)
              && torn == 0,
          "replayed: %s", msg);
    /* each id's last append; the snapshot in place of the appends
     * before it */
    CHECK(replayed[1] == v - 1 && replayed[2] == v, "1: %llu, 2: %llu of %llu",
          (unsigned long long)replayed[1], (unsigned long long)replayed[2],
          (unsigned long long)v);
    CHECK(replayed_records <= 5 + n - before && replayed_records < n,
          "%d records for %d appends, %d of them after the snapshot",
          replayed_records, n, n - before);
    unlink(path);
    CHECK(rmdir(dir) == 0, "nothing else left in the directory");
}

/* ------------------------------------------------------------------------
 * The shared store's backend (seq_remote.h), over the fake store: its
 * decisions, with the store's answers in the order the case chooses.
 */

/* A chunk's end through a durable table: what durable() said. */
typedef struct {
    int calls;
    status_code st;
    char msg[512];
} heard;

/* Which heard each slot tells (a slot is the submitter's, embedded in
 * its own record; here, a few of them). */
static struct {
    seq_slot *s;
    heard *h;
} hearers[8];

static void on_heard(seq_slot *s, status_code st, const char *msg)
{
    heard *h = NULL;
    for (size_t i = 0; i < 8 && h == NULL; i++)
        if (hearers[i].s == s)
            h = hearers[i].h;
    CHECK(h != NULL, "a slot nobody listens to");
    h->calls++;
    h->st = st;
    snprintf(h->msg, sizeof h->msg, "%s", msg != NULL ? msg : "");
}

/* s's end is told to h (durable()). */
static void listen_to(seq_slot *s, heard *h)
{
    size_t i = 0;
    while (i < 7 && hearers[i].s != NULL && hearers[i].s != s)
        i++;
    hearers[i].s = s;
    hearers[i].h = h;
    s->durable = on_heard;
}

/* A replica: a table over its own connection to f. */
static seq_table *replica(fake_kv *f, const seq_options *o)
{
    seq_table *t =
        seq_table_new(o, seq_remote_new(fake_kv_connect(f), o, 2000));
    CHECK(t != NULL && seq_durable(t), "a replica");
    return t;
}

/* A chunk of x[0..n) admitted on t as p, and finished with its scanned
 * answer in y: its end is told to h, once the store has answered (or at
 * once, when it ends without the store: the status, with msg). */
static status_code send_chunk(seq_table *t, seq_params p, float *x, float *y,
                              int n, seq_slot *s, heard *h)
{
    char msg[256];
    bool wait, later;
    memset(h, 0, sizeof *h);
    status_code st = seq_try(t, p, x, (uint64_t)n, s, &wait, msg);
    if (st != STATUS_OK) {
        snprintf(h->msg, sizeof h->msg, "%s", msg);
        return st;
    }
    listen_to(s, h);
    scanned(x, y, n);
    st = seq_finish_durable(t, s, true, y, &later, msg, sizeof msg);
    if (!later) {
        h->calls++;
        h->st = st;
        snprintf(h->msg, sizeof h->msg, "%s", msg);
    }
    return STATUS_OK;
}

/* Delivers the store's answers until every chunk named has ended (the
 * reads an early chunk asks for later, too): false after 2 s. */
static bool until_heard(fake_kv *f, heard *a, heard *b)
{
    for (int i = 0; i < 2000; i++) {
        fake_kv_settle(f);
        if (a->calls > 0 && (b == NULL || b->calls > 0))
            return true;
        uv_sleep(1);
    }
    return false;
}

static seq_params numbered(uint64_t id, uint64_t n, bool start, bool end)
{
    seq_params p = seq_num(id, start, end);
    char msg[128];
    CHECK(seq_chunk_number(&p, n, msg, sizeof msg), "%s", msg);
    return p;
}

/* The key a number id has in the store (seq_remote.h). */
static size_t key_of(uint64_t id, uint8_t *key)
{
    return (size_t)snprintf((char *)key, 64, "{n:%llu}",
                            (unsigned long long)id);
}

/* Applied chunks, a repeat answered again without moving the version, a
 * conflict refused, a chunk after the end refused, and a numbered chunk
 * that comes early waiting for the one before it, then applied. */
static void remote_decisions(void)
{
    fake_kv *f = fake_kv_new(1, NULL, NULL);
    seq_options o = {.max_sequences = 8,
                     .idle_ms = 60000,
                     .reorder_ms = 500,
                     .max_bytes = 1 << 16};
    seq_table *t = replica(f, &o);
    float x[3] = {1, 2, 3}, y[3], x2[2] = {4, 5}, y2[2], x9[2] = {9, 9};
    seq_slot s, s2;
    heard h, h2;
    CHECK(send_chunk(t, numbered(7, 1, true, false), x, y, 3, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK && y[2] == 6,
          "a start: %d %s, %g", h.st, h.msg, y[2]);
    CHECK(send_chunk(t, numbered(7, 2, false, false), x2, y2, 2, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK && y2[0] == 10
              && y2[1] == 15,
          "chunk 2: %d %s, %g %g", h.st, h.msg, y2[0], y2[1]);
    uint8_t key[64];
    size_t klen = key_of(7, key), len;
    kv_version v0, v1;
    CHECK(fake_kv_peek(f, key, klen, &len, &v0) != NULL && v0.n == 2,
          "two writes: version %llu", (unsigned long long)v0.n);
    /* chunk 2 again: the same answer, nothing written */
    CHECK(send_chunk(t, numbered(7, 2, false, false), x2, y2, 2, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK && y2[1] == 15,
          "a repeat: %d %s, %g", h.st, h.msg, y2[1]);
    CHECK(fake_kv_peek(f, key, klen, &len, &v1) != NULL
              && kv_version_equal(v0, v1),
          "a repeat writes nothing");
    /* chunk 2 with another input, and chunk 1 again: conflicts */
    CHECK(send_chunk(t, numbered(7, 2, false, false), x9, y2, 2, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_CHUNK_CONFLICT,
          "another input: %d %s", h.st, h.msg);
    CHECK(send_chunk(t, numbered(7, 1, false, false), x, y, 3, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_CHUNK_CONFLICT,
          "an older chunk: %d %s", h.st, h.msg);
    /* chunk 4 early: it reads again until chunk 3 lands */
    CHECK(send_chunk(t, numbered(7, 4, false, true), x2, y2, 2, &s2, &h2)
              == STATUS_OK,
          "chunk 4 admitted");
    for (int i = 0; i < 5; i++) {
        fake_kv_settle(f);
        uv_sleep(2);
    }
    CHECK(h2.calls == 0, "chunk 4 waits: %d %s", h2.st, h2.msg);
    CHECK(send_chunk(t, numbered(7, 3, false, false), x, y, 3, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, &h2) && h.st == STATUS_OK && y[2] == 21
              && h2.st == STATUS_OK && y2[1] == 30,
          "chunk 3, then 4: %d %d %s, %g %g", h.st, h2.st, h2.msg, y[2], y2[1]);
    /* ended: chunk 5 is a conflict, chunk 4 again a repeat */
    CHECK(send_chunk(t, numbered(7, 5, false, false), x2, y2, 2, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_CHUNK_CONFLICT,
          "after the end: %d %s", h.st, h.msg);
    CHECK(send_chunk(t, numbered(7, 4, false, true), x2, y2, 2, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK && y2[1] == 30,
          "the end again: %d %s %g", h.st, h.msg, y2[1]);
    /* an early chunk whose chunk before it never comes: a gap */
    CHECK(send_chunk(t, numbered(8, 1, true, false), x, y, 3, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK,
          "sequence 8");
    CHECK(send_chunk(t, numbered(8, 3, false, false), x, y, 3, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_CHUNK_GAP
              && strstr(h.msg, "chunk 2") != NULL,
          "a gap: %d %s", h.st, h.msg);
    seq_table_free(t);
    fake_kv_free(f);
}

/* Two replicas on one store: writes that race (the second finds another
 * version and decides again on it), a stale cache corrected by its
 * write's conflict, and an id used again after its key expired, whose
 * new sequence the old one's cached version never matches, though the
 * counts are the same (the incarnations differ). */
static void remote_races(void)
{
    fake_kv *f = fake_kv_new(2, NULL, NULL);
    seq_options o = {.max_sequences = 8,
                     .idle_ms = 60000,
                     .reorder_ms = 200,
                     .max_bytes = 1 << 16};
    seq_table *a = replica(f, &o), *b = replica(f, &o);
    float one[1] = {1}, ten[1] = {10}, ya[1], yb[1];
    seq_slot sa, sb;
    heard ha, hb;
    CHECK(send_chunk(a, seq_num(9, true, false), one, ya, 1, &sa, &ha)
                  == STATUS_OK
              && until_heard(f, &ha, NULL) && ha.st == STATUS_OK,
          "started on a");
    /* both replicas' chunks read the same version; b's write lands first */
    CHECK(send_chunk(b, seq_num(9, false, false), ten, yb, 1, &sb, &hb)
              == STATUS_OK,
          "b's chunk");
    fake_kv_settle(f); /* b: read, then its write */
    CHECK(hb.calls == 1 && hb.st == STATUS_OK && yb[0] == 11,
          "b applied: %d %s %g", hb.st, hb.msg, yb[0]);
    /* a's cache still holds the state before b's chunk */
    CHECK(send_chunk(a, seq_num(9, false, false), one, ya, 1, &sa, &ha)
                  == STATUS_OK
              && until_heard(f, &ha, NULL) && ha.st == STATUS_OK && ya[0] == 12,
          "a's stale cache, corrected: %d %s %g", ha.st, ha.msg, ya[0]);
    uint64_t delivered, conflicts;
    fake_kv_counts(f, &delivered, &conflicts);
    CHECK(conflicts >= 1, "a's first write found another version");
    /* two writes in flight at once, from both replicas */
    CHECK(send_chunk(a, seq_num(9, false, false), one, ya, 1, &sa, &ha)
                  == STATUS_OK
              && send_chunk(b, seq_num(9, false, false), ten, yb, 1, &sb, &hb)
                     == STATUS_OK
              && until_heard(f, &ha, &hb) && ha.st == STATUS_OK
              && hb.st == STATUS_OK,
          "both: %d %s / %d %s", ha.st, ha.msg, hb.st, hb.msg);
    CHECK((ya[0] == 13 && yb[0] == 23) || (yb[0] == 22 && ya[0] == 23),
          "one after the other: %g and %g", ya[0], yb[0]);
    /* a caches version n of sequence 9; the key expires; b starts a new
     * sequence 9 and brings it to the same count n */
    uint8_t key[64];
    size_t klen = key_of(9, key), len;
    kv_version old, now;
    CHECK(send_chunk(a, seq_num(9, false, false), one, ya, 1, &sa, &ha)
                  == STATUS_OK
              && until_heard(f, &ha, NULL) && ha.st == STATUS_OK,
          "a's last chunk of the old sequence");
    fake_kv_peek(f, key, klen, &len, &old);
    fake_kv_expire(f, key, klen);
    CHECK(send_chunk(b, seq_num(9, true, false), ten, yb, 1, &sb, &hb)
                  == STATUS_OK
              && until_heard(f, &hb, NULL) && hb.st == STATUS_OK,
          "a new sequence 9 on b");
    while (fake_kv_peek(f, key, klen, &len, &now) != NULL && now.n < old.n) {
        CHECK(send_chunk(b, seq_num(9, false, false), ten, yb, 1, &sb, &hb)
                      == STATUS_OK
                  && until_heard(f, &hb, NULL) && hb.st == STATUS_OK,
              "b's chunks");
    }
    CHECK(now.n == old.n && now.inc != old.inc,
          "the same count %llu, another incarnation",
          (unsigned long long)now.n);
    float want = yb[0] + 1;
    CHECK(send_chunk(a, seq_num(9, false, false), one, ya, 1, &sa, &ha)
                  == STATUS_OK
              && until_heard(f, &ha, NULL) && ha.st == STATUS_OK
              && ya[0] == want,
          "a's chunk goes on the new sequence: %g, not %g", ya[0], want);
    seq_table_free(a);
    seq_table_free(b);
    fake_kv_free(f);
}

/* A write whose answer is lost may have been applied: 503, and the
 * chunk sent again is answered once (a repeat when it was applied, so
 * the sum is not counted twice); one lost before it was applied is
 * applied when sent again. Unnumbered chunks of one sequence admitted
 * on one replica are decided in their admission order, whichever
 * scan ends first. */
static void remote_faults_and_order(void)
{
    fake_kv *f = fake_kv_new(3, NULL, NULL);
    seq_options o = {.max_sequences = 8,
                     .idle_ms = 60000,
                     .reorder_ms = 200,
                     .max_bytes = 1 << 16};
    seq_table *t = replica(f, &o);
    float x[2] = {1, 2}, y[2], x2[1] = {5}, y2[1];
    seq_slot s, s2;
    heard h, h2;
    CHECK(send_chunk(t, numbered(4, 1, true, false), x, y, 2, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK,
          "started");
    CHECK(send_chunk(t, numbered(4, 2, false, false), x2, y2, 1, &s, &h)
              == STATUS_OK,
          "chunk 2");
    /* decided on the cache: its write is the one request */
    CHECK(fake_kv_pending(f) == 1 && fake_kv_deliver(f, 0, FAKE_LOST_AFTER),
          "its write, applied");
    CHECK(h.calls == 1 && h.st == STATUS_STORE
              && strstr(h.msg, "may or may not") != NULL,
          "a lost answer: %d %s", h.st, h.msg);
    CHECK(send_chunk(t, numbered(4, 2, false, false), x2, y2, 1, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK && y2[0] == 8,
          "sent again: a repeat, %d %s %g", h.st, h.msg, y2[0]);
    CHECK(send_chunk(t, numbered(4, 3, false, false), x2, y2, 1, &s, &h)
              == STATUS_OK,
          "chunk 3");
    CHECK(fake_kv_pending(f) == 1 && fake_kv_deliver(f, 0, FAKE_LOST_BEFORE)
              && h.st == STATUS_STORE,
          "lost on its way: %d %s", h.st, h.msg);
    CHECK(send_chunk(t, numbered(4, 3, false, false), x2, y2, 1, &s, &h)
                  == STATUS_OK
              && until_heard(f, &h, NULL) && h.st == STATUS_OK && y2[0] == 13,
          "sent again: applied once, %d %s %g", h.st, h.msg, y2[0]);
    /* unnumbered: b admitted after a, finished first; a goes first */
    float xa[1] = {1}, xb[1] = {100}, ya[1], yb[1];
    seq_slot sa, sb;
    heard ha, hb;
    char msg[256];
    bool wait, later;
    CHECK(send_chunk(t, seq_num(5, true, false), xa, ya, 1, &sa, &ha)
                  == STATUS_OK
              && until_heard(f, &ha, NULL) && ha.st == STATUS_OK,
          "sequence 5");
    memset(&ha, 0, sizeof ha);
    memset(&hb, 0, sizeof hb);
    CHECK(seq_try(t, seq_num(5, false, false), xa, 1, &sa, &wait, msg)
                  == STATUS_OK
              && seq_try(t, seq_num(5, false, false), xb, 1, &sb, &wait, msg)
                     == STATUS_OK,
          "two admitted: %s", msg);
    listen_to(&sa, &ha);
    listen_to(&sb, &hb);
    scanned(xb, yb, 1);
    CHECK(seq_finish_durable(t, &sb, true, yb, &later, msg, sizeof msg)
                  == STATUS_OK
              && later,
          "b, finished first, waits");
    scanned(xa, ya, 1);
    CHECK(seq_finish_durable(t, &sa, true, ya, &later, msg, sizeof msg)
                  == STATUS_OK
              && later,
          "a");
    CHECK(until_heard(f, &ha, &hb) && ha.st == STATUS_OK && hb.st == STATUS_OK
              && ya[0] == 2 && yb[0] == 102,
          "in admission order: %g then %g", ya[0], yb[0]);
    (void)s2, (void)h2;
    seq_table_free(t);
    fake_kv_free(f);
}

/* A numbered chunk that comes early waits past --sequence-reorder-ms
 * while the chunks before it are admitted on its replica (as memory's
 * line holds them): their writes may land late (a slow scan, or a store
 * that came back with the early chunk's reads queued before their
 * writes). It is refused as a gap once one of them ends unapplied. */
static void remote_early_waits_for_its_line(void)
{
    fake_kv *f = fake_kv_new(4, NULL, NULL);
    seq_options o = {.max_sequences = 8,
                     .idle_ms = 60000,
                     .reorder_ms = 40,
                     .max_bytes = 1 << 16};
    seq_table *t = replica(f, &o);
    float x[2] = {1, 2}, y[2], x2[1] = {10}, y2[1], x3[1] = {100}, y3[1];
    seq_slot s, s2, s3;
    heard h, h2, h3;
    char msg[256];
    bool wait, later;
    for (uint64_t id = 21; id <= 22; id++) {
        CHECK(send_chunk(t, numbered(id, 1, true, false), x, y, 2, &s, &h)
                      == STATUS_OK
                  && until_heard(f, &h, NULL) && h.st == STATUS_OK,
              "sequence %llu started", (unsigned long long)id);
        /* chunk 2 admitted, its scan not done; chunk 3 admitted and
         * done: it reads, finds chunk 1 the last, and reads again */
        memset(&h2, 0, sizeof h2);
        CHECK(seq_try(t, numbered(id, 2, false, false), x2, 1, &s2, &wait,
                      msg)
                  == STATUS_OK,
              "chunk 2 admitted: %s", msg);
        listen_to(&s2, &h2);
        CHECK(send_chunk(t, numbered(id, 3, false, false), x3, y3, 1, &s3,
                         &h3)
                  == STATUS_OK,
              "chunk 3 admitted");
        for (int i = 0; i < 60; i++) { /* 3 x reorder_ms and more */
            fake_kv_settle(f);
            uv_sleep(2);
        }
        CHECK(h3.calls == 0, "chunk 3 waits for chunk 2, held here: %d %s",
              h3.st, h3.msg);
        bool done = id == 21; /* 22: chunk 2's scan fails */
        scanned(x2, y2, 1);
        CHECK(seq_finish_durable(t, &s2, done, y2, &later, msg, sizeof msg)
                  == STATUS_OK,
              "chunk 2 finished: %s", msg);
        if (done) {
            CHECK(later && until_heard(f, &h2, &h3) && h2.st == STATUS_OK
                      && y2[0] == 13 && h3.st == STATUS_OK && y3[0] == 113,
                  "chunk 2, then 3: %d %d %s, %g %g", h2.st, h3.st, h3.msg,
                  y2[0], y3[0]);
        } else {
            CHECK(until_heard(f, &h3, NULL) && h3.st == STATUS_CHUNK_GAP
                      && strstr(h3.msg, "chunk 2") != NULL,
                  "chunk 2 gone: chunk 3 a gap: %d %s", h3.st, h3.msg);
        }
    }
    seq_table_free(t);
    fake_kv_free(f);
}

static const check_case cases[] = {
    {"seq_carries", seq_carries},
    {"seq_turns_and_refusals", seq_turns_and_refusals},
    {"seq_state_file", seq_state_file},
    {"seq_log_restart", seq_log_restart},
    {"seq_log_rewrite", seq_log_rewrite},
    {"seq_linger", seq_linger},
    {"seq_numbered_chunks", seq_numbered_chunks},
    {"remote_decisions", remote_decisions},
    {"remote_races", remote_races},
    {"remote_faults_and_order", remote_faults_and_order},
    {"remote_early_waits_for_its_line", remote_early_waits_for_its_line},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
