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

/* Admits a float32 [n] chunk of sequence p: the status. */
static status_code seq_try(seq_table *t, seq_params p, float *x, uint64_t n,
                           seq_slot *s, bool *wait, char *msg)
{
    eng_scan_desc d = {.dtype = TX_FLOAT32, .rank = 1, .shape = {n}};
    eng_lines l;
    CHECK(eng_lines_from_desc(&d, &l, msg, 256) == ENG_E_OK, "%s", msg);
    memset(s, 0, sizeof *s);
    s->ready = seq_ready;
    return seq_admit(t, &p, &d, &l, x, s, wait, msg, 256);
}

static void seq_turns_and_refusals(void)
{
    atomic_store(&fake_now, 1000000000u);
    seq_options o = {.max_sequences = 2,
                     .idle_ms = 100,
                     .max_bytes = 1024,
                     .clock = fake_clock};
    seq_table *t = seq_table_new(&o);
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
    seq_finish(t, &a, false, y, msg, sizeof msg); /* a failed start: never started */
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
    t = seq_table_new(&small);
    float big[200];
    memset(big, 0, sizeof big);
    eng_scan_desc bd = {.dtype = TX_FLOAT32, .rank = 2, .shape = {1, 200}};
    eng_lines bl;
    eng_lines_from_desc(&bd, &bl, msg, sizeof msg);
    seq_params p9 = seq_num(9, true, false);
    memset(&a, 0, sizeof a);
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
    seq_table *t = seq_table_new(&o);
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

static seq_params seq_numbered(uint64_t v, uint64_t chunk, bool start,
                               bool end)
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
    seq_table *t = seq_table_new(&o);
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
    CHECK(seq_finish(t, &b, true, y, msg, sizeof msg) == STATUS_OK
              && y[0] == 10 && y[1] == 15,
          "chunk 2: %g %g", y[0], y[1]);
    CHECK(seq_readies == 1 && c.refused == STATUS_OK, "chunk 3's turn");
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
    CHECK(seq_readies == 1 && d.refused == STATUS_CHUNK_GAP
              && strstr(d.msg, "chunk 4"),
          "gap: %d %s", seq_readies, d.msg);
    /* refused before it was armed: seq_arm says so */
    CHECK(seq_try(t, seq_numbered(8, 6, false, false), x3, 1, &d, &wait, msg)
                  == STATUS_OK
              && wait,
          "early: %s", msg);
    atomic_fetch_add(&fake_now, 101000000u);
    seq_sweep(t);
    CHECK(!seq_arm(t, &d) && d.refused == STATUS_CHUNK_GAP, "refused first");
    /* the end, chunk 4; then its repeat, and nothing after it */
    CHECK(seq_try(t, seq_numbered(8, 4, false, true), x4, 2, &d, &wait, msg)
                  == STATUS_OK
              && !wait,
          "end: %s", msg);
    scanned(x4, y, 2);
    CHECK(seq_finish(t, &d, true, y, msg, sizeof msg) == STATUS_OK
              && y[0] == 28 && y[1] == 36,
          "end: %g %g", y[0], y[1]);
    CHECK(seq_try(t, seq_numbered(8, 4, false, true), x4, 2, &d, &wait, msg)
              == STATUS_OK,
          "end again: %s", msg);
    scanned(x4, y, 2);
    CHECK(seq_finish(t, &d, true, y, msg, sizeof msg) == STATUS_OK
              && y[0] == 28 && y[1] == 36,
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
    CHECK(seq_finish(t, &a, true, y, msg, sizeof msg) == STATUS_OK
              && y[2] == 6,
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
    CHECK(m != NULL
              && strstr(m, "tally_sequence_numbered_chunks_total{outcome=\"repeat\"} 3")
              && strstr(m, "tally_sequence_numbered_chunks_total{outcome=\"gap\"} 2")
              && strstr(m, "tally_sequence_numbered_chunks_total{outcome=\"conflict\"} 3"),
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
    /* the same file after room of the caller's (--state-store's record
     * keeps its first byte), the checksum over the file alone */
    for (size_t head = 0; head <= 17; head += 17) {
        size_t alen;
        uint8_t *a = seq_file_encode_after(e, 2, head, &alen);
        CHECK(a != NULL && alen == len + head
                  && memcmp(a + head, b, len) == 0,
              "after %zu bytes: the same file", head);
        for (size_t k = 0; k < head; k++)
            CHECK(a[k] == 0, "after %zu bytes: byte %zu is %u", head, k, a[k]);
        free(a);
    }
    free(b);

    /* saved and loaded through a directory */
    char dir[] = "/tmp/tally-seq-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    seq_options o = {.max_sequences = 4, .idle_ms = 60000, .max_bytes = 4096};
    seq_table *t = seq_table_new(&o);
    float x[3] = {1, 2, 3}, y[3] = {1, 3, 6};
    seq_slot s;
    bool wait;
    CHECK(seq_try(t, seq_num(77, true, false), x, 3, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    seq_finish(t, &s, true, y, msg, sizeof msg);
    size_t saved, loaded, expired;
    CHECK(seq_save(t, dir, &saved, msg, sizeof msg) && saved == 1, "%s", msg);
    seq_table_free(t);
    t = seq_table_new(&o);
    CHECK(seq_load(t, dir, &loaded, &expired, msg, sizeof msg) && loaded == 1
              && expired == 0,
          "load: %s", msg);
    y[0] = 4;
    CHECK(seq_try(t, seq_num(77, false, true), x, 1, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    seq_finish(t, &s, true, y, msg, sizeof msg);
    CHECK(y[0] == 10, "went on: %g", y[0]);
    /* the caller removes the file once its sequences are safe elsewhere */
    char path[64];
    snprintf(path, sizeof path, "%s/sequences.state", dir);
    CHECK(unlink(path) == 0, "the file was left for the caller");
    CHECK(seq_load(t, dir, &loaded, &expired, msg, sizeof msg) && loaded == 0,
          "no file, nothing loaded: %s", msg);
    /* a numbered one keeps its numbers: its last chunk is a repeat */
    float x2[2] = {4, 5}, x3[1] = {6}, y2[2];
    CHECK(seq_try(t, seq_numbered(78, 1, true, false), x, 3, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x, y, 3);
    seq_finish(t, &s, true, y, msg, sizeof msg);
    CHECK(seq_try(t, seq_numbered(78, 2, false, false), x2, 2, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x2, y2, 2);
    seq_finish(t, &s, true, y2, msg, sizeof msg);
    CHECK(seq_save(t, dir, &saved, msg, sizeof msg) && saved == 1, "%s", msg);
    seq_table_free(t);
    t = seq_table_new(&o);
    CHECK(seq_load(t, dir, &loaded, &expired, msg, sizeof msg) && loaded == 1,
          "load: %s", msg);
    unlink(path);
    CHECK(seq_try(t, seq_numbered(78, 2, false, false), x2, 2, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x2, y2, 2);
    CHECK(seq_finish(t, &s, true, y2, msg, sizeof msg) == STATUS_OK
              && y2[1] == 15,
          "repeat after a restart: %g", y2[1]);
    CHECK(seq_try(t, seq_numbered(78, 3, false, false), x3, 1, &s, &wait, msg)
              == STATUS_OK,
          "%s", msg);
    scanned(x3, y2, 1);
    CHECK(seq_finish(t, &s, true, y2, msg, sizeof msg) == STATUS_OK
              && y2[0] == 21,
          "went on: %g", y2[0]);
    seq_table_free(t);
    rmdir(dir);
}

static const check_case cases[] = {
    {"seq_carries", seq_carries},
    {"seq_turns_and_refusals", seq_turns_and_refusals},
    {"seq_state_file", seq_state_file},
    {"seq_linger", seq_linger},
    {"seq_numbered_chunks", seq_numbered_chunks},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
