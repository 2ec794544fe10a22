/*
 * test_store.c - this tallyd's own stores (server/store/): the memory
 * store's versions, bounds and times to live, and the log's: a replay
 * that applies a record only onto the version it was written over, an
 * expiry written (or, on a full disk, implied), a torn tail dropped, a
 * damaged record refused with its offset, a start whose fresh log the
 * disk refuses, a rewrite while writes go on, an older tallyd's log read,
 * the writer's thread, and everysec's failed flush.
 */
#define _GNU_SOURCE /* mkdtemp */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "clock.h"
#include "kv_log.h"
#include "kv_mem.h"
#include "temp_dir.h"
#include "tx_fnv.h"

static atomic_ullong fake_now = 1000000000ull;

static uint64_t mono(void *user)
{
    (void)user;
    return atomic_load(&fake_now);
}

static int64_t wall(void *user)
{
    (void)user;
    return 1700000000000 + (int64_t)(atomic_load(&fake_now) / 1000000u);
}

static void advance(uint64_t ms)
{
    atomic_fetch_add(&fake_now, ms * 1000000u);
}

/* A request's end, kept. */
typedef struct {
    atomic_int calls;
    kv_result r;
    kv_version v;
    char rec[256];
    size_t len;
    bool has_rec;
    char why[300];
} heard;

static void on_done(void *ctx, kv_result r, kv_version v, const uint8_t *rec,
                    size_t len, const char *why)
{
    heard *h = ctx;
    h->r = r;
    h->v = v;
    h->has_rec = rec != NULL;
    h->len = len < sizeof h->rec ? len : sizeof h->rec;
    if (rec != NULL)
        memcpy(h->rec, rec, h->len);
    snprintf(h->why, sizeof h->why, "%s", why ? why : "");
    atomic_fetch_add(&h->calls, 1);
}

/* The log in hand is manual: the case runs its writer's batches. */
static bool stepping;

static kv_mem_options options(size_t records, size_t bytes)
{
    return (kv_mem_options){.max_records = records,
                            .max_bytes = bytes,
                            .mono_ns = mono,
                            .wall_ms = wall,
                            .seed = check_rand() | 1};
}

/* A write (rec NULL: a delete) at expect, answered (the log: after its
 * batch); its result. */
static kv_result put(kv *k, heard *h, const char *key, kv_version expect,
                     const char *rec, uint64_t ttl, unsigned flags)
{
    int want = atomic_load(&h->calls) + 1;
    CHECK(k->ops->put(k, (const uint8_t *)key, strlen(key), expect,
                      (const uint8_t *)rec, rec ? strlen(rec) : 0, ttl, flags,
                      0, 0, on_done, h),
          "put %s taken", key);
    for (int i = 0; i < 2000 && atomic_load(&h->calls) < want; i++) {
        if (stepping && kv_log_waiting(k))
            kv_log_step(k);
        else if (atomic_load(&h->calls) < want)
            uv_sleep(1);
    }
    CHECK(atomic_load(&h->calls) == want, "put %s answered", key);
    return h->r;
}

static kv_result get(kv *k, heard *h, const char *key)
{
    int want = atomic_load(&h->calls) + 1;
    CHECK(k->ops->get(k, (const uint8_t *)key, strlen(key), 0, 0, on_done, h),
          "get %s taken", key);
    CHECK(atomic_load(&h->calls) == want, "get %s answered at once", key);
    return h->r;
}

static const kv_version none = {0, 0};

/* ------------------------------------------------------------------------
 * Memory.
 */

/* Versions drawn per write, compare-and-set, the bounds (counted
 * records, bytes), a touch, a time to live. */
static void memory_store(void)
{
    kv_mem_options o = options(2, 10);
    kv *k = kv_mem_new(&o);
    heard h = {0};
    CHECK(put(k, &h, "a", none, "one", 1000, KV_COUNTED) == KV_OK
              && !kv_version_none(h.v),
          "made: %d", h.r);
    kv_version a1 = h.v;
    CHECK(put(k, &h, "a", none, "two", 1000, KV_COUNTED) == KV_CONFLICT
              && kv_version_equal(h.v, a1) && h.len == 3
              && memcmp(h.rec, "one", 3) == 0,
          "a stale write: %d", h.r);
    CHECK(put(k, &h, "a", a1, "two", 1000, KV_COUNTED) == KV_OK
              && !kv_version_equal(h.v, a1),
          "written: %d", h.r);
    kv_version a2 = h.v;
    CHECK(put(k, &h, "b", none, "x", 1000, KV_COUNTED) == KV_OK, "b: %d", h.r);
    CHECK(put(k, &h, "c", none, "x", 1000, KV_COUNTED) == KV_FULL
              && strstr(h.why, "records"),
          "a third counted one: %d %s", h.r, h.why);
    CHECK(put(k, &h, "c", none, "x", 1000, 0) == KV_OK,
          "one not counted: %d %s", h.r, h.why);
    CHECK(put(k, &h, "d", none, "0123456789", 1000, 0) == KV_FULL
              && strstr(h.why, "bytes"),
          "past the bytes: %d %s", h.r, h.why);
    /* a touch, then a time to live that runs out */
    int want = atomic_load(&h.calls) + 1;
    CHECK(k->ops->touch(k, (const uint8_t *)"a", 1, a2, 5000, 0, on_done, &h)
              && atomic_load(&h.calls) == want && h.r == KV_OK
              && kv_version_equal(h.v, a2),
          "touched: %d", h.r);
    advance(2000);
    CHECK(get(k, &h, "a") == KV_OK && kv_version_equal(h.v, a2),
          "renewed: alive");
    CHECK(get(k, &h, "b") == KV_OK && !h.has_rec && kv_version_none(h.v),
          "expired at its ttl");
    k->ops->sweep(k);
    kv_stats st;
    k->ops->stats(k, &st);
    CHECK(st.records == 1 && st.expired == 1,
          "counts: %zu records, %llu expired", st.records,
          (unsigned long long)st.expired);
    advance(4000);
    k->ops->sweep(k);
    k->ops->stats(k, &st);
    CHECK(st.records == 0 && st.expired == 2 && st.bytes == 0,
          "swept: %zu records, %llu expired, %zu bytes", st.records,
          (unsigned long long)st.expired, st.bytes);
    k->ops->close(k);
}

/* ------------------------------------------------------------------------
 * The log.
 */

static char dir[128];

static void fresh_dir(void)
{
    snprintf(dir, sizeof dir, "/tmp/tally-test-store-XXXXXX");
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
}

static kv *log_open(bool manual, char *msg, size_t msglen)
{
    stepping = manual;
    kv_log_options lo = {.dir = dir,
                         .fsync = KV_FSYNC_ALWAYS,
                         .mem = options(0, 0),
                         .manual = manual,
                         .prealloc = 4096};
    return kv_log_open(&lo, msg, msglen);
}

static kv *log_open_ok(void)
{
    char msg[512];
    kv *k = log_open(true, msg, sizeof msg);
    CHECK(k != NULL, "the log: %s", msg);
    return k;
}

/* The log file, whole. */
static uint8_t *read_file(const char *name, size_t *len)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    uint8_t *b = malloc(1 << 20);
    *len = f != NULL ? fread(b, 1, 1 << 20, f) : 0;
    if (f != NULL)
        fclose(f);
    return b;
}

static void write_file(const char *name, const uint8_t *b, size_t len)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "wb");
    CHECK(f != NULL && fwrite(b, 1, len, f) == len, "write %s", p);
    if (f != NULL)
        fclose(f);
}

/* A raw record: op on key, expect -> version, made at `at` (ms from the
 * fake clock's base), with deadline (0: none) and value. */
static size_t raw(uint8_t *out, uint8_t op, const char *key, kv_version expect,
                  kv_version version, int64_t at, int64_t deadline,
                  const char *val)
{
    kv_write *w = kv_write_new(op, (const uint8_t *)key, strlen(key));
    w->expect = expect;
    w->version = version;
    w->at_ms = 1700000000000 + at;
    w->deadline_ms = deadline ? 1700000000000 + deadline : 0;
    w->flags = KV_COUNTED;
    if (val != NULL)
        w->val = kv_val_new((const uint8_t *)val, strlen(val));
    size_t len;
    uint8_t *b = kv_log_encode(w, &len);
    memcpy(out, b, len);
    free(b);
    kv_write_free(w);
    return len;
}

/* Rule: a record replays only onto the version it was written over: an
 * old sequence's record appended after a new start's cannot bring it
 * back (issue 70's item 1), a start whose id's expiry was never
 * written (a full disk) is not lost (item 2), and a write over a record
 * at its deadline's very millisecond (the store saw it live) replays. */
static void log_replays_what_was_answered(void)
{
    fresh_dir();
    uint64_t now_ms = atomic_load(&fake_now) / 1000000u;
    kv_version v1 = {1, 1}, v2 = {2, 2}, v3 = {3, 3}, w1 = {4, 4}, w2 = {5, 5};
    uint8_t b[4096];
    size_t n = 0;
    n += raw(b + n, KV_W_PUT, "k", none, v1, 0, 0, "old");
    n += raw(b + n, KV_W_PUT, "k", v1, v2, 1, 0, "new start");
    n += raw(b + n, KV_W_PUT, "k", v1, v3, 2, 0, "the old one's late chunk");
    /* j expired at 100 with no record of it; a start at 150 */
    n += raw(b + n, KV_W_PUT, "j", none, w1, 0, 100, "expired");
    n += raw(b + n, KV_W_PUT, "j", none, w2, 150, (int64_t)now_ms + 100000,
             "started as it expired");
    /* i's next chunk taken at its deadline in wall ms, which the store's
     * own clock had not reached (a model checker's run lost the sequence
     * at the next start) */
    kv_version i1 = {6, 6}, i2 = {7, 7};
    n += raw(b + n, KV_W_PUT, "i", none, i1, 0, 900, "chunk 1");
    n += raw(b + n, KV_W_PUT, "i", i1, i2, 900, (int64_t)now_ms + 100000,
             "chunk 2");
    write_file("sequences.log", b, n);
    kv *k = log_open_ok();
    heard h = {0};
    CHECK(get(k, &h, "k") == KV_OK && kv_version_equal(h.v, v2) && h.len == 9
              && memcmp(h.rec, "new start", 9) == 0,
          "the new start: %.*s", (int)h.len, h.rec);
    CHECK(get(k, &h, "j") == KV_OK && kv_version_equal(h.v, w2),
          "the start after the expiry: %.*s", (int)h.len, h.rec);
    CHECK(get(k, &h, "i") == KV_OK && kv_version_equal(h.v, i2),
          "the chunk written over its predecessor at its deadline: %d", h.r);
    k->ops->close(k);
    temp_dir_remove(dir);
}

/* A store's writes, its expiry, a crash anywhere in a batch: what was
 * answered comes back, what was not may or may not. */
static void log_crash_and_expiry(void)
{
    fresh_dir();
    kv *k = log_open_ok();
    heard h = {0};
    CHECK(put(k, &h, "a", none, "1", 100, KV_COUNTED) == KV_OK, "a");
    kv_version a1 = h.v;
    advance(150);
    k->ops->sweep(k); /* a expired: written */
    CHECK(put(k, &h, "a", none, "2", 100000, KV_COUNTED) == KV_OK,
          "a again: %d", h.r);
    kv_version a2 = h.v;
    CHECK(!kv_version_equal(a1, a2), "a new version");
    CHECK(put(k, &h, "b", none, "x", 100000, KV_COUNTED) == KV_OK, "b");
    /* c's write is taken, never answered: the crash writes it */
    CHECK(k->ops->put(k, (const uint8_t *)"c", 1, none, (const uint8_t *)"y", 1,
                      100000, KV_COUNTED, 0, 0, on_done, &h),
          "c taken");
    int calls = atomic_load(&h.calls);
    kv_log_crash(k, 1);
    CHECK(atomic_load(&h.calls) == calls, "a crash answers nothing");
    k = log_open_ok();
    CHECK(get(k, &h, "a") == KV_OK && kv_version_equal(h.v, a2)
              && h.rec[0] == '2',
          "a, the second: %d", h.r);
    CHECK(get(k, &h, "c") == KV_OK && h.has_rec,
          "c, written before the crash, replayed");
    k->ops->close(k);
    temp_dir_remove(dir);
}

/* A torn last record is dropped (and said); damage before the end stops
 * the start, naming the offset. */
static void log_torn_and_damaged(void)
{
    fresh_dir();
    kv *k = log_open_ok();
    heard h = {0};
    for (int i = 0; i < 3; i++) {
        char key[8];
        snprintf(key, sizeof key, "k%d", i);
        CHECK(put(k, &h, key, none, "value", 0, KV_COUNTED) == KV_OK, "%s",
              key);
    }
    k->ops->close(k);
    size_t len;
    uint8_t *b = read_file("sequences.log", &len);
    CHECK(len > 100, "a log of %zu bytes", len);
    write_file("sequences.log", b, len - 5); /* the last cut short */
    char msg[512];
    k = log_open(true, msg, sizeof msg);
    CHECK(k != NULL, "torn: %s", msg);
    size_t expired, torn;
    kv_log_loaded(k, &expired, &torn);
    CHECK(torn > 0 && get(k, &h, "k1") == KV_OK && h.has_rec
              && get(k, &h, "k2") == KV_OK && !h.has_rec,
          "torn %zu bytes", torn);
    CHECK(put(k, &h, "k3", none, "after", 0, 0) == KV_OK,
          "appends after it: %d %s", h.r, h.why);
    k->ops->close(k);
    free(b);
    b = read_file("sequences.log", &len);
    b[20] ^= 0x40; /* the first record's payload */
    write_file("sequences.log", b, len);
    k = log_open(true, msg, sizeof msg);
    CHECK(k == NULL && strstr(msg, "at byte 0") && strstr(msg, "move it away"),
          "damaged: %s", msg);
    free(b);
    temp_dir_remove(dir);
}

/* Rule: a full disk stops no start: the fresh log's write fails, the old
 * log goes on (its torn end zeroed), writes fail until there is room
 * (nothing applied), then go on. */
static void log_start_on_a_full_disk(void)
{
    fresh_dir();
    kv *k = log_open_ok();
    heard h = {0};
    CHECK(put(k, &h, "a", none, "1", 0, KV_COUNTED) == KV_OK, "a");
    kv_version a1 = h.v;
    kv_log_crash(k, 0);
    kv_log_options lo = {.dir = dir,
                         .fsync = KV_FSYNC_ALWAYS,
                         .mem = options(0, 0),
                         .manual = true,
                         .prealloc = 4096,
                         .faults = {.at_start = ENOSPC, .err = ENOSPC}};
    stepping = true;
    char msg[512];
    k = kv_log_open(&lo, msg, sizeof msg);
    CHECK(k != NULL, "started on a full disk: %s", msg);
    CHECK(get(k, &h, "a") == KV_OK && kv_version_equal(h.v, a1),
          "its log read back");
    CHECK(put(k, &h, "a", a1, "2", 0, KV_COUNTED) == KV_FAILED
              && strstr(h.why, "No space left"),
          "a write refused: %d %s", h.r, h.why);
    CHECK(get(k, &h, "a") == KV_OK && kv_version_equal(h.v, a1),
          "nothing applied");
    kv_log_fail_writes(k, 0, 0, 0); /* room again */
    CHECK(put(k, &h, "a", a1, "2", 0, KV_COUNTED) == KV_OK, "then written");
    kv_version a2 = h.v;
    k->ops->close(k);
    k = log_open_ok();
    CHECK(get(k, &h, "a") == KV_OK && kv_version_equal(h.v, a2)
              && h.rec[0] == '2',
          "kept");
    k->ops->close(k);
    temp_dir_remove(dir);
}

/* The rewrite: one record a key, written while writes go on (the
 * rewriter held before its snapshot's write), the appends after it. */
static void log_rewrite(void)
{
    fresh_dir();
    char msg[512];
    kv *k = log_open(false, msg, sizeof msg); /* the writer's thread */
    CHECK(k != NULL, "%s", msg);
    heard h = {0};
    kv_log_test_rewrites(k, 512, true);
    kv_version v = none;
    for (int i = 0; i < 40; i++) {
        char val[16];
        snprintf(val, sizeof val, "v%d", i);
        CHECK(put(k, &h, "r", v, val, 0, KV_COUNTED) == KV_OK, "%d", i);
        v = h.v;
    }
    kv_log_test_rewrites(k, 512, false);
    for (int i = 40; i < 60; i++) {
        char val[16];
        snprintf(val, sizeof val, "v%d", i);
        CHECK(put(k, &h, "r", v, val, 0, KV_COUNTED) == KV_OK, "%d", i);
        v = h.v;
    }
    k->ops->close(k);
    size_t len;
    uint8_t *b = read_file("sequences.log", &len);
    CHECK(len < 40 * 70, "rewritten: %zu bytes", len);
    free(b);
    k = log_open_ok();
    CHECK(get(k, &h, "r") == KV_OK && kv_version_equal(h.v, v)
              && memcmp(h.rec, "v59", 3) == 0,
          "the last: %.*s", (int)h.len, h.rec);
    k->ops->close(k);
    temp_dir_remove(dir);
}

/* Two threads write through the writer's thread: every write answered
 * once, each key's last value kept. */
typedef struct {
    kv *k;
    char key[8];
    kv_version v;
    int n;
} writer_arg;

static void writes(void *arg)
{
    writer_arg *a = arg;
    heard h = {0};
    for (int i = 0; i < a->n; i++)
        if (put(a->k, &h, a->key, a->v, "x", 0, KV_COUNTED) == KV_OK)
            a->v = h.v;
}

static void log_group_commit(void)
{
    fresh_dir();
    char msg[512];
    kv *k = log_open(false, msg, sizeof msg);
    CHECK(k != NULL, "%s", msg);
    writer_arg a = {k, "ga", none, 200}, b = {k, "gb", none, 200};
    uv_thread_t ta, tb;
    uv_thread_create(&ta, writes, &a);
    uv_thread_create(&tb, writes, &b);
    uv_thread_join(&ta);
    uv_thread_join(&tb);
    textbuf t;
    textbuf_init(&t, 4096);
    k->ops->render_metrics(k, &t);
    size_t tlen;
    char *text = textbuf_take(&t, &tlen);
    CHECK(text != NULL && strstr(text, "tally_sequence_log_records_total 400"),
          "400 records");
    free(text);
    k->ops->close(k);
    k = log_open_ok();
    heard h = {0};
    CHECK(get(k, &h, "ga") == KV_OK && kv_version_equal(h.v, a.v)
              && get(k, &h, "gb") == KV_OK && kv_version_equal(h.v, b.v),
          "both kept");
    k->ops->close(k);
    temp_dir_remove(dir);
}

/* An older tallyd's log ('TSLR' records: whole states, the last of each
 * key its state) is read through the upgrade hook, in order. */
static bool upgrade(void *user, const uint8_t *payload, size_t len, kv_write *w)
{
    (void)user;
    /* the test's payloads: "KEY=VALUE" or "KEY-" (gone) */
    const uint8_t *eq = memchr(payload, '=', len);
    bool gone = eq == NULL;
    size_t klen = gone ? len - 1 : (size_t)(eq - payload);
    memcpy(w->key, payload, klen);
    w->keylen = klen;
    w->op = gone ? KV_W_DEL : KV_W_PUT;
    w->flags = KV_COUNTED;
    return true;
}

static size_t legacy(uint8_t *out, const char *payload)
{
    size_t plen = strlen(payload);
    uint32_t h[4] = {0x524c5354u, (uint32_t)plen, 0, 0};
    memcpy(out, h, 12);
    h[3] = tx_fnv1a32(out, 12);
    memcpy(out + 12, &h[3], 4);
    memcpy(out + 16, payload, plen);
    return 16 + plen;
}

static void log_upgrade(void)
{
    fresh_dir();
    uint8_t b[1024];
    size_t n = 0;
    n += legacy(b + n, "a=1");
    n += legacy(b + n, "b=1");
    n += legacy(b + n, "a=2");
    n += legacy(b + n, "b-");
    write_file("sequences.log", b, n);
    kv_log_options lo = {.dir = dir,
                         .fsync = KV_FSYNC_ALWAYS,
                         .mem = options(0, 0),
                         .manual = true,
                         .upgrade = upgrade};
    stepping = true;
    char msg[512];
    kv *k = kv_log_open(&lo, msg, sizeof msg);
    CHECK(k != NULL, "%s", msg);
    heard h = {0};
    CHECK(get(k, &h, "a") == KV_OK && h.len == 3
              && memcmp(h.rec, "a=2", 3) == 0,
          "a: %.*s", (int)h.len, h.rec);
    CHECK(get(k, &h, "b") == KV_OK && !h.has_rec, "b gone");
    k->ops->close(k);
    k = log_open_ok(); /* written afresh, in this tallyd's records */
    CHECK(get(k, &h, "a") == KV_OK && h.has_rec, "a kept");
    k->ops->close(k);
    temp_dir_remove(dir);
}

/* everysec: a failed once-a-second flush refuses the writes after it
 * until a flush succeeds. */
static void log_everysec_failed_flush(void)
{
    fresh_dir();
    kv_log_options lo = {.dir = dir,
                         .fsync = KV_FSYNC_EVERYSEC,
                         .mem = options(0, 0),
                         .manual = true,
                         .prealloc = 4096};
    stepping = true;
    char msg[512];
    kv *k = kv_log_open(&lo, msg, sizeof msg);
    CHECK(k != NULL, "%s", msg);
    heard h = {0};
    CHECK(put(k, &h, "a", none, "1", 0, 0) == KV_OK, "written");
    kv_log_fail_writes(k, 0, EIO, 0);
    uv_sleep(1100); /* the second's flush is due: it fails */
    kv_log_step(k);
    kv_version v = h.v;
    CHECK(put(k, &h, "a", v, "2", 0, 0) == KV_FAILED && strstr(h.why, "flush"),
          "refused after it: %d %s", h.r, h.why);
    kv_log_fail_writes(k, 0, 0, 0);
    CHECK(put(k, &h, "a", v, "2", 0, 0) == KV_OK, "then taken: %s", h.why);
    k->ops->close(k);
    temp_dir_remove(dir);
}

static const check_case cases[] = {
    {"memory_store", memory_store},
    {"log_replays_what_was_answered", log_replays_what_was_answered},
    {"log_crash_and_expiry", log_crash_and_expiry},
    {"log_torn_and_damaged", log_torn_and_damaged},
    {"log_start_on_a_full_disk", log_start_on_a_full_disk},
    {"log_rewrite", log_rewrite},
    {"log_group_commit", log_group_commit},
    {"log_upgrade", log_upgrade},
    {"log_everysec_failed_flush", log_everysec_failed_flush},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
