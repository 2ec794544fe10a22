/*
 * kv_log.c - the memory store made durable by a log (kv_log.h): the
 * journal the store writes through, its writer, the rewrite, and the
 * start that reads the log back (the records and the file's own calls:
 * kv_log_file.c).
 *
 * The file is allocated ahead of its records, PREALLOC bytes at a time
 * (fallocate, or zeros where the filesystem has none), and the records
 * are written into that room: an append that grew the file would change
 * its size, and every fdatasync would then wait for the filesystem's
 * journal as well as the data (PostgreSQL allocates its WAL ahead for the
 * same reason). The room reads as zeros, and a reader takes the first
 * record boundary with nothing but zeros after it for the log's end; a
 * clean close cuts the room off. When the disk has no room to allocate,
 * records are written as they are (they need what they need).
 */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <uv.h>

#include "clock.h"
#include "errors.h"
#include "kv_log.h"
#include "kv_log_int.h"
#include "list.h"
#include "log.h"
#include "loop_owner.h"
#include "metrics.h"
#include "mutex.h"

#define REWRITE_MIN ((uint64_t)64 << 20)
#define PREALLOC ((uint64_t)4 << 20)

/* ------------------------------------------------------------ the log */

typedef struct {
    uint64_t bytes, flushes, flush_ns, records, failures, rewrites,
        flush_failures;
} log_stats;

typedef struct rewriting rewriting;

typedef struct {
    kv base;
    kv *mem;
    kv_fsync mode;
    char dir[4096], path[4200], tmp[4200];
    int lock;
    int fd;        /* -1: no log open (the disk refused): a batch tries again */
    uint64_t size; /* the records' bytes: where the next one goes */
    uint64_t alloc; /* the file's bytes: the records and the room after */
    bool manual;
    uv_thread_t writer;
    bool running;
    mutex mu;
    uv_cond_t cv;
    kv_write *head, *tail; /* waiting to be written */
    bool stop;
    int fail_errno, fail_sync_errno; /* testing */
    uint64_t fail_after;
    bool broken; /* a failed write could not be undone */
    /* everysec: the last once-a-second flush failed: every batch is
     * flushed before its answers until a flush succeeds. The writer's. */
    bool sync_failed;
    char sync_why[300];
    bool dirty; /* everysec: written since the last flush */
    uint64_t last_sync;
    log_stats ws;    /* the writer's counters */
    log_stats stats; /* a copy of them, under mu */
    rewriting *rw;
    uint64_t rewrite_min;
    uint64_t prealloc; /* the room's step: PREALLOC, or a test's */
    bool hold_rewrite; /* testing; under mu */
    loop_owner writer_owner;
    size_t loaded_expired, torn;
    bool closed;
} kv_log;

struct rewriting {
    kv_log *s;
    uv_thread_t thread;
    encoded snap;
    int fd; /* the temporary file: the snapshot, flushed */
    uint64_t size, alloc;
    int fail;
    bool done; /* under mu */
    char msg[512];
    uint8_t *tail; /* the writer's: records appended since the snapshot */
    size_t tail_len, tail_cap;
};

static kv_log *log_of(kv *k)
{
    return (kv_log *)k;
}

/* Writes e's records to the log's temporary file, with room after them,
 * and flushes it: its descriptor, or -1 with msg. */
static int write_tmp(kv_log *s, const encoded *e, int fail, uint64_t *size,
                     uint64_t *alloc, char *msg, size_t msglen)
{
    int fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return msg_fail_as(-1, msg, msglen, "cannot create %.300s: %s", s->tmp,
                           strerror(errno));
    *size = e->bytes;
    *alloc = *size;
    bool ok = kvl_write_encoded(fd, e, 0, fail);
    if (ok)
        kvl_make_room(fd, *size, 1, alloc,
                      s->prealloc); /* when the disk has it */
    if (!ok || fdatasync(fd) != 0) {
        snprintf(msg, msglen, "cannot write %.300s: %s", s->tmp,
                 strerror(errno));
        close(fd);
        unlink(s->tmp);
        return -1;
    }
    return fd;
}

/* The temporary file (fd, its records' size and its room) renamed over
 * the log, which it replaces. */
static bool install(kv_log *s, int fd, uint64_t size, uint64_t alloc, char *msg,
                    size_t msglen)
{
    if (rename(s->tmp, s->path) != 0 || !kvl_fsync_dir(s->dir)) {
        snprintf(msg, msglen, "cannot rename %.200s to %.200s: %s", s->tmp,
                 s->path, strerror(errno));
        close(fd);
        unlink(s->tmp);
        return false;
    }
    if (s->fd >= 0)
        close(s->fd);
    s->fd = fd;
    s->size = size;
    s->alloc = alloc;
    return true;
}

/* ------------------------------------------------------------ rewriting */

/* The log rewriter: the snapshot into the temporary file. */
static void run_rewriter(void *arg)
{
    rewriting *rw = arg;
    kv_log *s = rw->s;
    mutex_lock(&s->mu);
    while (s->hold_rewrite)
        mutex_wait(&s->cv, &s->mu);
    mutex_unlock(&s->mu);
    rw->fd = write_tmp(s, &rw->snap, rw->fail, &rw->size, &rw->alloc, rw->msg,
                       sizeof rw->msg);
    mutex_lock(&s->mu);
    rw->done = true;
    uv_cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
}

/* Starts a rewrite with one record per key, from the store as the log
 * has it now (a batch boundary: every record written is committed, and
 * those waiting will go after the snapshot). The log writer. */
static void rewrite_start(kv_log *s, int fail)
{
    OWNER_ASSERT(&s->writer_owner);
    size_t n, bytes;
    bool oom;
    kv_write *snap = kv_mem_snapshot(s->mem, &n, &bytes, &oom);
    rewriting *rw = calloc(1, sizeof *rw);
    bool ok = rw != NULL && !oom && kvl_encode_all(snap, &rw->snap);
    while (snap != NULL) {
        kv_write *w = snap;
        snap = w->next;
        kv_write_free(w);
    }
    if (ok) {
        rw->s = s;
        rw->fail = fail;
        ok = uv_thread_create(&rw->thread, run_rewriter, rw) == 0;
    }
    if (!ok) { /* the log goes on growing; the next batch tries again */
        if (rw != NULL)
            kvl_encoded_free(&rw->snap);
        free(rw);
        return;
    }
    s->rw = rw;
}

/* Keeps a copy of a batch's records for the rewrite in flight. False
 * when memory runs out (the rewrite is then dropped). The log writer. */
static bool rewrite_keep(rewriting *rw, const encoded *e)
{
    OWNER_ASSERT(&rw->s->writer_owner);
    for (size_t i = 0; i < e->n; i++) {
        if (rw->tail_len + e->len[i] > rw->tail_cap) {
            size_t cap = 2 * (rw->tail_len + e->len[i]);
            uint8_t *t = realloc(rw->tail, cap);
            if (t == NULL)
                return false;
            rw->tail = t;
            rw->tail_cap = cap;
        }
        memcpy(rw->tail + rw->tail_len, e->b[i], e->len[i]);
        rw->tail_len += e->len[i];
    }
    return true;
}

/* Ends the rewrite in flight, once its thread is done: the records
 * appended meanwhile go after the snapshot, and the file replaces the log
 * (or, when anything failed, the log goes on as it was). The log writer. */
static void rewrite_end(kv_log *s, bool keep)
{
    OWNER_ASSERT(&s->writer_owner);
    rewriting *rw = s->rw;
    s->rw = NULL;
    uv_thread_join(&rw->thread);
    bool ok = keep && rw->fd >= 0;
    uint64_t size = rw->size;
    if (ok) {
        kvl_make_room(rw->fd, size, rw->tail_len, &rw->alloc, s->prealloc);
        ok = kvl_write_all(rw->fd, rw->tail, rw->tail_len, size)
             && fdatasync(rw->fd) == 0;
        if (!ok)
            snprintf(rw->msg, sizeof rw->msg, "cannot write %.300s: %s", s->tmp,
                     strerror(errno));
        size += rw->tail_len;
        if (rw->alloc < size)
            rw->alloc = size;
    }
    if (ok && install(s, rw->fd, size, rw->alloc, rw->msg, sizeof rw->msg)) {
        s->ws.rewrites++;
    } else if (keep) {
        if (!ok && rw->fd >= 0) {
            close(rw->fd);
            unlink(s->tmp);
        }
        log_msg("sequences", "error",
                "the sequence log was not rewritten (it goes on growing): %s",
                rw->msg[0] ? rw->msg : "out of memory");
    } else if (rw->fd >= 0) {
        close(rw->fd);
        unlink(s->tmp);
    }
    kvl_encoded_free(&rw->snap);
    free(rw->tail);
    free(rw);
}

/* ------------------------------------------------------------ writing */

/* Opens the log for appending when no log is open (the disk had no room
 * for one at the start): false with errno. */
static bool reopen(kv_log *s)
{
    if (s->fd >= 0)
        return true;
    int fd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return false;
    struct stat st;
    if (fstat(fd, &st) != 0 || st.st_size != 0) {
        close(fd); /* a log appeared under it: not ours to append to */
        errno = EEXIST;
        return false;
    }
    s->fd = fd;
    s->size = s->alloc = 0;
    return true;
}

/* Undoes a batch that went in in part: the log keeps no torn record
 * before good ones (and no room after them: the next batch allocates
 * it again). */
static void undo_batch(kv_log *s, uint64_t start)
{
    if (ftruncate(s->fd, (off_t)start) != 0)
        s->broken = true;
    s->size = s->alloc = start;
}

/* Writes a batch and flushes it as the mode says: true when every
 * record in it is durable. The log writer, no lock held. */
static bool write_batch(kv_log *s, const encoded *e, int fail, int fail_sync,
                        char *why, size_t whylen)
{
    OWNER_ASSERT(&s->writer_owner);
    if (s->broken)
        return msg_fail(why, whylen,
                        "the log %.300s is damaged by an earlier failed write; "
                        "restart tallyd",
                        s->path);
    if (!reopen(s))
        return msg_fail(why, whylen, "cannot open the sequence log %.300s: %s",
                        s->path, strerror(errno));
    uint64_t start = s->size, t0 = now_ns();
    kvl_make_room(s->fd, s->size, e->bytes, &s->alloc,
                  s->prealloc); /* when there is room */
    if (!kvl_write_encoded(s->fd, e, s->size, fail)) {
        snprintf(why, whylen, "cannot write the sequence log %.300s: %s",
                 s->path, strerror(errno));
        undo_batch(s, start);
        return false;
    }
    s->size += e->bytes;
    if (s->alloc < s->size)
        s->alloc = s->size;
    if (s->mode == KV_FSYNC_EVERYSEC && !s->sync_failed) {
        s->dirty = true;
        return true;
    }
    if (fail_sync || fdatasync(s->fd) != 0) {
        int err = fail_sync ? fail_sync : errno;
        if (s->sync_failed)
            snprintf(why, whylen,
                     "the sequence log %.200s could not be flushed (%s); "
                     "chunks are refused until a flush succeeds (%.100s)",
                     s->path, strerror(err), s->sync_why);
        else
            snprintf(why, whylen, "cannot flush the sequence log %.300s: %s",
                     s->path, strerror(err));
        s->ws.flush_failures++;
        undo_batch(s, start);
        return false;
    }
    s->ws.flushes++;
    s->ws.flush_ns += now_ns() - t0;
    if (s->sync_failed) {
        s->sync_failed = false;
        log_msg("sequences", "info",
                "the sequence log %.300s flushes again; chunks are taken "
                "again",
                s->path);
    }
    return true;
}

/* everysec's flush of the second's records. A failure is logged and
 * counted, and the batches after it are flushed before their answers
 * until a flush succeeds. The log writer. */
static void sync_second(kv_log *s, int fail_sync)
{
    OWNER_ASSERT(&s->writer_owner);
    uint64_t t0 = now_ns();
    s->dirty = false;
    s->last_sync = t0;
    if (!fail_sync && s->fd >= 0 && fdatasync(s->fd) == 0) {
        s->ws.flushes++;
        s->ws.flush_ns += now_ns() - t0;
        if (s->sync_failed)
            log_msg("sequences", "info",
                    "the sequence log %.300s flushes again; chunks are "
                    "taken again",
                    s->path);
        s->sync_failed = false;
        return;
    }
    int err = fail_sync ? fail_sync : errno;
    s->ws.flush_failures++;
    if (!s->sync_failed)
        log_msg("sequences", "error",
                "the once-a-second flush of the sequence log %.300s failed "
                "(%s): the chunks answered in the second before it may be "
                "lost with the machine, and chunks are refused (503) until a "
                "flush succeeds",
                s->path, strerror(err));
    snprintf(s->sync_why, sizeof s->sync_why,
             "the once-a-second flush failed: %s", strerror(err));
    s->sync_failed = true;
}

/* One batch: written, flushed, its writes committed to the store (and
 * so answered) in order, and the rewrite driven. The log writer, no lock
 * held; stop: the last. */
static void run_batch(kv_log *s, kv_write *batch, bool stop, bool rewritten,
                      int fail, int fail_sync)
{
    OWNER_ASSERT(&s->writer_owner);
    char why[512] = "";
    bool ok = true;
    encoded e = {0};
    if (batch != NULL) {
        ok = kvl_encode_all(batch, &e);
        if (!ok)
            snprintf(why, sizeof why, "out of memory writing the sequence log");
        ok = ok && write_batch(s, &e, fail, fail_sync, why, sizeof why);
        if (ok && s->rw != NULL && !rewrite_keep(s->rw, &e))
            rewrite_end(s, false);
    }
    if (s->dirty && (stop || now_ns() - s->last_sync >= 1000000000u))
        sync_second(s, fail_sync);
    kvl_encoded_free(&e);
    for (kv_write *w = batch; w != NULL; w = w->next) {
        s->ws.records++;
        s->ws.failures += !ok;
    }
    /* the counters before the answers: a client that has its answer
     * sees them */
    mutex_lock(&s->mu);
    s->ws.bytes = s->size;
    s->stats = s->ws;
    mutex_unlock(&s->mu);
    for (kv_write *w = batch, *next; w != NULL; w = next) {
        next = w->next;
        kv_mem_commit(s->mem, w, ok, why);
    }
    if (s->rw != NULL && (rewritten || stop)) { /* stop: it ends first */
        rewrite_end(s, true);
    } else if (s->rw == NULL && s->size > s->rewrite_min) {
        kv_stats st;
        s->mem->ops->stats(s->mem, &st);
        if (s->size > 2 * (uint64_t)st.bytes)
            rewrite_start(s, fail);
    }
}

/* The batch waiting, taken, with the faults it meets. Under mu. */
static kv_write *take_batch(kv_log *s, int *fail, int *fail_sync)
{
    LOCK_HELD(&s->mu);
    kv_write *batch = s->head;
    s->head = s->tail = NULL;
    *fail = s->fail_errno;
    *fail_sync = s->fail_sync_errno;
    if (s->ws.records < s->fail_after)
        *fail = *fail_sync = 0;
    return batch;
}

static void run_writer(void *arg)
{
    kv_log *s = arg;
    loop_owner_set(&s->writer_owner);
    mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stop && !(s->rw && s->rw->done)) {
            if (!s->dirty) {
                mutex_wait(&s->cv, &s->mu);
                continue;
            }
            uint64_t since = now_ns() - s->last_sync;
            if (since >= 1000000000u)
                break;
            mutex_timedwait(&s->cv, &s->mu, 1000000000u - since);
        }
        int fail, fail_sync;
        kv_write *batch = take_batch(s, &fail, &fail_sync);
        bool stop = s->stop, rewritten = s->rw != NULL && s->rw->done;
        mutex_unlock(&s->mu);
        run_batch(s, batch, stop, rewritten, fail, fail_sync);
        mutex_lock(&s->mu);
        if (stop && s->head == NULL && s->rw == NULL)
            break;
    }
    mutex_unlock(&s->mu);
}

/* The store's journal: a write it took, queued for the writer. Under the
 * store's lock, so the queue's order is the store's. */
static void journal_append(void *self, kv_write *w)
{
    kv_log *s = self;
    mutex_lock(&s->mu);
    fifo_push(&s->head, &s->tail, w);
    uv_cond_broadcast(&s->cv); /* the writer, not a held rewriter */
    mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------ the ops */

static bool l_get(kv *k, const uint8_t *key, size_t keylen, uint64_t delay_ms,
                  uint64_t deadline_ns, kv_done done, void *ctx)
{
    kv *m = log_of(k)->mem;
    return m->ops->get(m, key, keylen, delay_ms, deadline_ns, done, ctx);
}

static bool l_put(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                  const uint8_t *rec, size_t len, uint64_t ttl_ms,
                  unsigned flags, size_t weight, uint64_t deadline_ns,
                  kv_done done, void *ctx)
{
    kv *m = log_of(k)->mem;
    return m->ops->put(m, key, keylen, expect, rec, len, ttl_ms, flags, weight,
                       deadline_ns, done, ctx);
}

static bool l_touch(kv *k, const uint8_t *key, size_t keylen, kv_version expect,
                    uint64_t ttl_ms, uint64_t deadline_ns, kv_done done,
                    void *ctx)
{
    kv *m = log_of(k)->mem;
    return m->ops->touch(m, key, keylen, expect, ttl_ms, deadline_ns, done,
                         ctx);
}

static void l_stats(kv *k, kv_stats *out)
{
    kv_log *s = log_of(k);
    s->mem->ops->stats(s->mem, out);
    out->durability =
        s->mode == KV_FSYNC_ALWAYS ? KV_DURABLE_POWER : KV_DURABLE_CRASH;
}

static void l_sweep(kv *k)
{
    kv *m = log_of(k)->mem;
    m->ops->sweep(m);
}

static void l_render(kv *k, textbuf *o)
{
    kv_log *s = log_of(k);
    mutex_lock(&s->mu);
    log_stats st = s->stats;
    mutex_unlock(&s->mu);
    metrics_one(o, "tally_sequence_log_bytes", "gauge",
                "Bytes in the sequence log (--state-dir) now.", "%" PRIu64,
                st.bytes);
    metrics_one(o, "tally_sequence_log_records_total", "counter",
                "Records written to the sequence log (one per applied chunk).",
                "%" PRIu64, st.records);
    metrics_one(o, "tally_sequence_log_flushes_total", "counter",
                "fdatasync calls on the sequence log (each shared by the "
                "chunks that finished together).",
                "%" PRIu64, st.flushes);
    metrics_one(o, "tally_sequence_log_flush_seconds_total", "counter",
                "Time in those flushes.", "%.9f", (double)st.flush_ns / 1e9);
    metrics_one(o, "tally_sequence_log_failures_total", "counter",
                "Records that could not be written or flushed (their chunks "
                "answered 503).",
                "%" PRIu64, st.failures);
    metrics_one(o, "tally_sequence_log_rewrites_total", "counter",
                "Times the log was rewritten with one record per live "
                "sequence.",
                "%" PRIu64, st.rewrites);
    metrics_one(o, "tally_sequence_log_flush_failures_total", "counter",
                "fdatasync calls on the sequence log that failed (with "
                "everysec, the chunks after one are refused until a flush "
                "succeeds).",
                "%" PRIu64, st.flush_failures);
}

/* Flushes and closes the log and stops the writer: every record taken
 * has been answered when it returns. */
static void l_flush(kv *k)
{
    kv_log *s = log_of(k);
    if (s->closed)
        return;
    s->closed = true;
    mutex_lock(&s->mu);
    s->stop = true;
    uv_cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
    if (s->running) {
        uv_thread_join(&s->writer);
    } else { /* manual: the last batches here */
        loop_owner_set(&s->writer_owner);
        for (;;) {
            int fail, fail_sync;
            mutex_lock(&s->mu);
            bool more = s->head != NULL || s->rw != NULL;
            kv_write *batch = more ? take_batch(s, &fail, &fail_sync) : NULL;
            mutex_unlock(&s->mu);
            if (!more)
                break;
            run_batch(s, batch, true, false, fail, fail_sync);
        }
        if (s->dirty)
            sync_second(s, 0);
    }
    if (s->fd >= 0) {
        if (ftruncate(s->fd, (off_t)s->size) != 0) /* the room, cut off */
            log_msg("sequences", "warn",
                    "the sequence log %.300s keeps its room after the "
                    "records: %s",
                    s->path, strerror(errno));
        fdatasync(s->fd);
        close(s->fd);
        s->fd = -1;
    }
}

static void l_close(kv *k)
{
    if (k == NULL)
        return;
    kv_log *s = log_of(k);
    l_flush(k);
    if (s->mem != NULL)
        s->mem->ops->close(s->mem);
    if (s->lock >= 0)
        close(s->lock); /* the file stays: its pid is stale, its lock gone */
    uv_cond_destroy(&s->cv);
    mutex_destroy(&s->mu);
    free(s);
}

/* ------------------------------------------------------------ the start */

typedef struct {
    kv_log *s;
    kv_log_upgrade upgrade;
    void *user;
    bool legacy; /* an older tallyd's records were read */
    char why[200];
} replaying;

/* One record of the log, into the store (kv_log_decode's each). */
static bool replay_one(void *user, kv_write *w, bool legacy)
{
    replaying *r = user;
    bool ok = true, applied;
    if (legacy) {
        size_t len;
        const uint8_t *p = kv_val_bytes(w->val, &len);
        ok = r->upgrade != NULL && r->upgrade(r->user, p, len, w);
        if (!ok)
            snprintf(r->why, sizeof r->why, "%s",
                     r->upgrade != NULL ? "an older tallyd's record this "
                                          "tallyd cannot read"
                                        : "an older tallyd's record");
        if (ok && w->op != KV_W_PUT) {
            kv_val_unref(w->val);
            w->val = NULL;
        }
        r->legacy = true;
    }
    if (ok && !kv_mem_replay(r->s->mem, w, legacy, &applied)) {
        snprintf(r->why, sizeof r->why,
                 "more sequences, or larger, than this server's limits hold "
                 "(--max-sequences, --sequence-max-bytes)");
        ok = false;
    }
    kv_write_free(w);
    return ok;
}

/* Reads the log back into the store; false with a message naming the
 * file (and the offset where it is damaged). *end: where its records
 * end, *filelen: the file's size. */
static bool replay(kv_log *s, const kv_log_options *o, uint64_t *end,
                   uint64_t *filelen, char *msg, size_t msglen)
{
    char old[4200];
    snprintf(old, sizeof old, "%s/sequences.state", s->dir);
    if (access(old, F_OK) == 0) { /* an older tallyd's drain */
        return msg_fail(
            msg, msglen,
            "%.300s is an older tallyd's drain file, which this tallyd "
            "does not read: start that tallyd once more on %.300s (it "
            "moves its sequences into sequences.log), or remove the "
            "file to start without them",
            old, s->dir);
    }
    uint8_t *buf;
    size_t len;
    if (!kvl_read_log(s->path, &buf, &len, msg, msglen))
        return false;
    replaying r = {s, o->upgrade, o->upgrade_user, false, ""};
    char err[256];
    size_t at = 0;
    bool ok = buf == NULL
              || kv_log_decode(buf, len, replay_one, &r, &at, &s->torn, err,
                               sizeof err);
    free(buf);
    *filelen = len;
    *end = at;
    if (!ok)
        return msg_fail(
            msg, msglen,
            "%.300s is not a log this tallyd can take: %s%s%s; tallyd "
            "does not start (move it away to start without it)",
            s->path, err, r.why[0] ? ": " : "", r.why);
    if (s->torn > 0)
        log_msg("sequences", "warn",
                "%s: its last %zu bytes were a record cut short by a crash "
                "(never answered): dropped",
                s->path, s->torn);
    return true;
}

/* The log fresh: one record per key, the writer's file. When the disk
 * has no room for it, the log there goes on (its torn end zeroed, its
 * room kept), and a log that cannot even be opened is tried again by
 * each batch. */
static void fresh_log(kv_log *s, uint64_t end, int fail)
{
    char msg[512] = "";
    size_t n, bytes;
    bool oom;
    kv_write *snap = kv_mem_snapshot(s->mem, &n, &bytes, &oom);
    encoded e = {0};
    bool ok = !oom && kvl_encode_all(snap, &e);
    while (snap != NULL) {
        kv_write *w = snap;
        snap = w->next;
        kv_write_free(w);
    }
    uint64_t size, alloc;
    int fd = ok ? write_tmp(s, &e, fail, &size, &alloc, msg, sizeof msg) : -1;
    kvl_encoded_free(&e);
    if (fd >= 0 && install(s, fd, size, alloc, msg, sizeof msg))
        return;
    log_msg("sequences", "warn",
            "the sequence log could not be written afresh (%s): tallyd goes "
            "on with %s as it is, and refuses the chunks it cannot log "
            "(503) until the disk has room",
            msg[0] ? msg : "out of memory", s->path);
    int lfd = open(s->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    struct stat st;
    if (lfd < 0 || fstat(lfd, &st) != 0) {
        if (lfd >= 0)
            close(lfd);
        return; /* each batch tries again */
    }
    uint64_t at = end, filelen = (uint64_t)st.st_size;
    static const uint8_t zero[4096];
    for (uint64_t z = at; z < at + s->torn && z < filelen; z += sizeof zero) {
        size_t k =
            filelen - z < sizeof zero ? (size_t)(filelen - z) : sizeof zero;
        if (!kvl_write_all(lfd, zero, k, z))
            break; /* the torn bytes stay: a later record follows them */
    }
    s->fd = lfd;
    s->size = at;
    s->alloc = filelen > at ? filelen : at;
}

kv *kv_log_open(const kv_log_options *o, char *msg, size_t msglen)
{
    static const kv_ops ops = {
        .get = l_get,
        .put = l_put,
        .touch = l_touch,
        .stats = l_stats,
        .sweep = l_sweep,
        .render_metrics = l_render,
        .flush = l_flush,
        .close = l_close,
    };
    if (access(o->dir, W_OK | X_OK) != 0)
        return msg_fail_as(
            NULL, msg, msglen,
            "--state-dir %s: %s (every applied chunk of a sequence is "
            "logged there)",
            o->dir, strerror(errno));
    kv_log *s = calloc(1, sizeof *s);
    if (s == NULL)
        return msg_fail_as(NULL, msg, msglen, "out of memory");
    s->base.ops = &ops;
    s->base.local = true;
    s->mode = o->fsync;
    s->fd = -1;
    s->manual = o->manual;
    s->rewrite_min = REWRITE_MIN;
    s->prealloc = o->prealloc ? o->prealloc : PREALLOC;
    s->last_sync = now_ns();
    snprintf(s->dir, sizeof s->dir, "%s", o->dir);
    snprintf(s->path, sizeof s->path, "%s/sequences.log", o->dir);
    snprintf(s->tmp, sizeof s->tmp, "%s/sequences.log.tmp", o->dir);
    if (mutex_init(&s->mu) != 0 || uv_cond_init(&s->cv) != 0) {
        snprintf(msg, msglen, "cannot start the log's writer");
        free(s);
        return NULL;
    }
    s->lock = kvl_lock_dir(o->dir, msg, msglen);
    s->mem = s->lock >= 0 ? kv_mem_new(&o->mem) : NULL;
    if (s->lock >= 0 && s->mem == NULL)
        snprintf(msg, msglen, "out of memory");
    uint64_t end = 0, filelen = 0;
    if (s->mem == NULL || !replay(s, o, &end, &filelen, msg, msglen)) {
        if (s->mem != NULL)
            s->mem->ops->close(s->mem);
        s->mem = NULL;
        l_close(&s->base);
        return NULL;
    }
    s->loaded_expired = kv_mem_expire_now(s->mem);
    (void)filelen;
    fresh_log(s, end, o->faults.at_start);
    kv_journal j = {journal_append, s};
    kv_mem_set_journal(s->mem, &j);
    if (o->faults.err != 0 || o->faults.sync) {
        s->fail_errno = o->faults.sync ? 0 : o->faults.err;
        s->fail_sync_errno = o->faults.sync ? EIO : 0;
        s->fail_after = o->faults.after;
    }
    if (!s->manual) {
        if (uv_thread_create(&s->writer, run_writer, s) != 0) {
            snprintf(msg, msglen, "cannot start the log's writer thread");
            l_close(&s->base);
            return NULL;
        }
        s->running = true;
    } else {
        loop_owner_set(&s->writer_owner);
    }
    return &s->base;
}

void kv_log_loaded(kv *k, size_t *expired, size_t *torn)
{
    *expired = log_of(k)->loaded_expired;
    *torn = log_of(k)->torn;
}

/* ------------------------------------------------------------ testing */

bool kv_log_waiting(kv *k)
{
    kv_log *s = log_of(k);
    mutex_lock(&s->mu);
    bool any = s->head != NULL;
    mutex_unlock(&s->mu);
    return any;
}

void kv_log_step(kv *k)
{
    kv_log *s = log_of(k);
    mutex_lock(&s->mu);
    int fail, fail_sync;
    kv_write *batch = take_batch(s, &fail, &fail_sync);
    bool rewritten = s->rw != NULL && s->rw->done;
    mutex_unlock(&s->mu);
    run_batch(s, batch, false, rewritten, fail, fail_sync);
}

void kv_log_crash(kv *k, size_t keep)
{
    kv_log *s = log_of(k);
    kv_write *w = s->head;
    for (; w != NULL && keep > 0 && s->fd >= 0; w = w->next, keep--) {
        size_t len;
        uint8_t *b = kv_log_encode(w, &len);
        if (b != NULL && kvl_write_all(s->fd, b, len, s->size))
            s->size += len;
        free(b);
    }
    while (s->head != NULL) {
        w = s->head;
        s->head = w->next;
        kv_write_free(w);
    }
    if (s->rw != NULL) {
        uv_thread_join(&s->rw->thread);
        if (s->rw->fd >= 0)
            close(s->rw->fd);
        kvl_encoded_free(&s->rw->snap);
        free(s->rw->tail);
        free(s->rw);
    }
    if (s->fd >= 0)
        close(s->fd);
    s->mem->ops->close(s->mem);
    if (s->lock >= 0)
        close(s->lock);
    uv_cond_destroy(&s->cv);
    mutex_destroy(&s->mu);
    free(s);
}

void kv_log_fail_writes(kv *k, int err, int sync_err, uint64_t after)
{
    kv_log *s = log_of(k);
    mutex_lock(&s->mu);
    s->fail_errno = err;
    s->fail_sync_errno = sync_err;
    s->fail_after = after;
    mutex_unlock(&s->mu);
}

void kv_log_test_rewrites(kv *k, uint64_t min_bytes, bool hold)
{
    kv_log *s = log_of(k);
    mutex_lock(&s->mu);
    s->rewrite_min = min_bytes;
    s->hold_rewrite = hold;
    uv_cond_broadcast(&s->cv);
    mutex_unlock(&s->mu);
}
