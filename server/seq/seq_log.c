/*
 * seq_log.c - the sequences' append-only log (seq_log.h).
 *
 * The writer keeps, per live sequence, a copy of its latest record (a
 * map from the id), which is all a rewrite needs: it never reads the
 * table, whose carries belong to the chunks that hold their turns.
 *
 * The file is allocated ahead of its records, PREALLOC bytes at a time
 * (fallocate, or zeros where the filesystem has no fallocate), and the
 * records are written into that room: an append that grew the file would
 * change its size, and every fdatasync would then wait for the
 * filesystem's journal as well as the data. PostgreSQL allocates its WAL
 * segments ahead for the same reason; fdatasync into allocated room is
 * the quicker (BENCHMARKS.md, "Durable running sums", measured with
 * tests/bench/fsync_latency.c). The room reads as zeros, and a reader
 * takes the
 * first record boundary with nothing but zeros after it for the log's
 * end; a clean close cuts the room off again.
 */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>
#include <uv.h>

#include "clock.h"
#include "log.h"
#include "loop_owner.h"
#include "seq_log.h"
#include "seq_map.h"

#define REC_MAGIC 0x524c5354u /* "TSLR" */
#define REC_HEAD 16
#define REWRITE_MIN ((uint64_t)64 << 20)
#define PREALLOC ((uint64_t)4 << 20)

bool seq_fsync_parse(const char *text, seq_fsync *out)
{
    if (strcmp(text, "always") == 0)
        *out = SEQ_FSYNC_ALWAYS;
    else if (strcmp(text, "everysec") == 0)
        *out = SEQ_FSYNC_EVERYSEC;
    else
        return false;
    return true;
}

static uint32_t fnv32(const uint8_t *b, size_t n)
{
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x01000193u;
    }
    return h;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
           | (uint32_t)p[3] << 24;
}

/* A whole record, header and payload, malloc'd; NULL when out of memory. */
static uint8_t *encode(const seq_file_entry *x, size_t *len)
{
    size_t plen;
    uint8_t *p = seq_file_encode(x, 1, &plen);
    if (p == NULL || plen > UINT32_MAX - REC_HEAD) {
        free(p);
        return NULL;
    }
    uint8_t *b = malloc(REC_HEAD + plen);
    if (b == NULL) {
        free(p);
        return NULL;
    }
    put32(b, REC_MAGIC);
    put32(b + 4, (uint32_t)plen);
    put32(b + 8, 0); /* the state is the payload's */
    put32(b + 12, fnv32(b, 12));
    memcpy(b + REC_HEAD, p, plen);
    free(p);
    *len = REC_HEAD + plen;
    return b;
}

/* ------------------------------------------------------------ reading */

/* Whether b[at..len) is all zeros: the room allocated ahead of the
 * records (nothing, when at == len). */
static bool zeros(const uint8_t *b, size_t at, size_t len)
{
    for (; at < len; at++)
        if (b[at] != 0)
            return false;
    return true;
}

/* The bytes of b[0..len) up to the last one that is not zero. */
static size_t used(const uint8_t *b, size_t len)
{
    while (len > 0 && b[len - 1] == 0)
        len--;
    return len;
}

bool seq_log_decode(const uint8_t *b, size_t len, size_t max_entries,
                    size_t max_bytes,
                    bool (*each)(void *user, seq_file_entry *e), void *user,
                    size_t *torn, char *msg, size_t msglen)
{
    size_t at = 0;
    *torn = 0;
    (void)max_entries;
    while (at < len) {
        size_t left = len - at;
        const uint8_t *h = b + at;
        if (h[0] == 0 && zeros(b, at, len))
            return true;       /* the room allocated ahead: the end */
        if (left < REC_HEAD) { /* a header cut short: torn */
            *torn = used(b, len) - at;
            return true;
        }
        if (get32(h) != REC_MAGIC || get32(h + 12) != fnv32(h, 12)
            || get32(h + 8) > SEQ_GONE) {
            if (zeros(b, at + REC_HEAD, len)) { /* a header written in part */
                *torn = used(b, len) - at;
                return true;
            }
            snprintf(msg, msglen,
                     "a damaged record header at byte %zu (%zu bytes follow)",
                     at, left);
            return false;
        }
        uint32_t plen = get32(h + 4);
        int how = (int)get32(h + 8);
        if ((size_t)plen > left - REC_HEAD) { /* its payload cut short */
            *torn = used(b, len) - at;
            return true;
        }
        seq_file_entry *e;
        size_t n;
        char err[256];
        if (!seq_file_decode(h + REC_HEAD, plen, 1, max_bytes, &e, &n, err,
                             sizeof err)
            || n != 1) {
            if (n != 1 && err[0] == '\0')
                snprintf(err, sizeof err, "%zu sequences in one record", n);
            if (zeros(b, at + REC_HEAD + plen, len)) { /* the last: torn */
                *torn = used(b, len) - at;
                return true;
            }
            snprintf(msg, msglen, "a damaged record at byte %zu: %s", at, err);
            return false;
        }
        if (e->state == SEQ_LIVE) /* an older log's: its header says */
            e->state = how;
        bool ok = each(user, e);
        seq_file_free(e, n);
        if (!ok) {
            snprintf(msg, msglen, "the record at byte %zu cannot be taken", at);
            return false;
        }
        at += REC_HEAD + plen;
    }
    return true;
}

/* ------------------------------------------------------------ the map */

/* The latest record of a sequence, in the writer's map (seq_map.h). */
typedef struct {
    seq_map_node node;
    uint8_t *rec;
    size_t rec_len;
} latest;

typedef struct {
    seq_map m;
    size_t bytes; /* the records' */
} latest_map;

static latest *latest_of(seq_map_node *n)
{
    return (latest *)((char *)n - offsetof(latest, node));
}

/* Sets (rec: taken) or removes (rec NULL) the latest record of key's
 * sequence. False when out of memory (the map is unchanged; rec is
 * freed). */
static bool map_set(latest_map *m, const seq_map_node *key, uint8_t *rec,
                    size_t rec_len)
{
    seq_map_node *n = seq_map_find_key(&m->m, key);
    latest *l = n != NULL ? latest_of(n) : NULL;
    if (l != NULL) {
        m->bytes -= l->rec_len;
        free(l->rec);
        if (rec == NULL) {
            seq_map_remove(&m->m, &l->node);
            free(l);
            return true;
        }
        l->rec = rec;
        l->rec_len = rec_len;
        m->bytes += rec_len;
        return true;
    }
    if (rec == NULL)
        return true;
    l = malloc(sizeof *l);
    if (l == NULL) {
        free(rec);
        return false;
    }
    l->node = *key;
    l->rec = rec;
    l->rec_len = rec_len;
    seq_map_add(&m->m, &l->node);
    m->bytes += rec_len;
    return true;
}

static void latest_free(seq_map_node *n, void *user)
{
    (void)user;
    latest *l = latest_of(n);
    free(l->rec);
    free(l);
}

static void map_free(latest_map *m)
{
    seq_map_each(&m->m, latest_free, NULL);
    seq_map_free(&m->m);
    m->bytes = 0;
}

/* ------------------------------------------------------------ writing */

typedef struct item item;
struct item {
    item *next;
    uint8_t *rec;
    size_t len;
    bool keep;        /* the rewrite keeps it: live, or ended and numbered */
    seq_map_node key; /* its sequence's */
    seq_log_done done;
    void *ctx;
};

struct seq_log {
    char path[4096], tmp[4096], dir[4096];
    seq_fsync mode;
    int fd;
    uint64_t size;  /* the records' bytes: where the next one goes */
    uint64_t alloc; /* the file's bytes: the records and the room after */
    uv_thread_t writer;
    uv_mutex_t mu;
    uv_cond_t cv;
    item *head, *tail; /* waiting to be written */
    bool stop;
    int fail_errno, fail_sync_errno; /* testing */
    uint64_t fail_after;
    bool broken; /* a failed write could not be undone */
    /* everysec: the last once-a-second flush failed, and the records
     * written before it may not be on disk: every batch is flushed before
     * its answers (as with always) until a flush succeeds again, and one
     * that fails is refused, as Redis stops taking writes when its AOF's
     * fsync fails. The writer's. */
    bool sync_failed;
    char sync_why[300];
    latest_map map;      /* the writer's */
    seq_log_stats ws;    /* the writer's counters */
    seq_log_stats stats; /* a copy of them, under mu */
    /* A rewrite in flight (NULL: none): the log rewriter writes the
     * snapshot to the temporary file while the writer goes on appending
     * to the log, and keeps a copy of what it appends (tail), which goes
     * after the snapshot before the file takes the log's place, as
     * Redis's rewrite buffer does. */
    struct rewriting *rw;
    uint64_t rewrite_min;    /* REWRITE_MIN; testing: less */
    loop_owner writer_owner; /* the log writer, once it runs */
    bool hold_rewrite;       /* testing: the rewriter waits; under mu */
};

typedef struct rewriting {
    seq_log *s;
    uv_thread_t thread;
    uint8_t *snap; /* the live sequences' records, one after another */
    size_t snap_len;
    int fd; /* the temporary file: the snapshot, flushed */
    uint64_t size, alloc;
    int fail;
    bool ok, done; /* done: under mu */
    char msg[512];
    uint8_t *tail; /* the writer's: records appended since the snapshot */
    size_t tail_len, tail_cap;
} rewriting;

/* Writes b[0..n) at offset at; fail: the errno a test asked for. */
static bool write_all(int fd, const uint8_t *b, size_t n, uint64_t at, int fail)
{
    if (fail) {
        errno = fail;
        return false;
    }
    while (n > 0) {
        ssize_t w = pwrite(fd, b, n, (off_t)at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        b += w;
        n -= (size_t)w;
        at += (uint64_t)w;
    }
    return true;
}

/* Writes the batch's records one after another from offset at, with as
 * few system calls as it can (pwritev, WRITE_IOVS records a call), not
 * one a record. fail: as write_all's. */
#define WRITE_IOVS 64
static bool write_items(int fd, const item *batch, uint64_t at, int fail)
{
    if (fail) {
        errno = fail;
        return false;
    }
    struct iovec v[WRITE_IOVS];
    const item *i = batch;
    while (i != NULL) {
        int n = 0;
        for (; i != NULL && n < WRITE_IOVS; i = i->next)
            v[n++] = (struct iovec){.iov_base = i->rec, .iov_len = i->len};
        struct iovec *p = v;
        while (n > 0) {
            ssize_t w = pwritev(fd, p, n, (off_t)at);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                return false;
            at += (uint64_t)w;
            /* past what went in; the rest of a record cut short goes
             * in the next call */
            while (n > 0 && (size_t)w >= p->iov_len) {
                w -= (ssize_t)p->iov_len;
                p++;
                n--;
            }
            if (n > 0) {
                p->iov_base = (uint8_t *)p->iov_base + w;
                p->iov_len -= (size_t)w;
            }
        }
    }
    return true;
}

/* Room for `need` more bytes after the records: the file allocated up to
 * the next PREALLOC step past them (fallocate; zeros written where the
 * filesystem has none). *alloc is the file's size, and becomes the new
 * one. False with errno when the disk refuses. */
static bool make_room(int fd, uint64_t size, uint64_t need, uint64_t *alloc)
{
    if (size + need <= *alloc)
        return true;
    uint64_t to = (size + need + PREALLOC - 1) / PREALLOC * PREALLOC;
    if (fallocate(fd, 0, (off_t)*alloc, (off_t)(to - *alloc)) == 0) {
        *alloc = to;
        return true;
    }
    if (errno != EOPNOTSUPP && errno != ENOSYS)
        return false;
    static const uint8_t zero[65536];
    for (uint64_t at = *alloc; at < to; at += sizeof zero) {
        size_t n = to - at < sizeof zero ? (size_t)(to - at) : sizeof zero;
        if (!write_all(fd, zero, n, at, 0))
            return false;
    }
    *alloc = to;
    return true;
}

static bool fsync_dir(const char *dir)
{
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return false;
    bool ok = fsync(d) == 0;
    close(d);
    return ok;
}

/* Writes the n records to the log's temporary file, with room after
 * them, and flushes it: its descriptor, or -1 with msg. */
static int write_tmp(seq_log *s, uint8_t *const *recs, const size_t *lens,
                     size_t n, int fail, uint64_t *size, uint64_t *alloc,
                     char *msg, size_t msglen)
{
    int fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot create %.300s: %s", s->tmp,
                 strerror(errno));
        return -1;
    }
    bool ok = true;
    *size = 0;
    for (size_t i = 0; ok && i < n; i++) {
        ok = write_all(fd, recs[i], lens[i], *size, fail);
        *size += lens[i];
    }
    *alloc = *size; /* the room starts after the records */
    if (!ok || !make_room(fd, *size, 1, alloc) || fdatasync(fd) != 0) {
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
static bool install(seq_log *s, int fd, uint64_t size, uint64_t alloc,
                    char *msg, size_t msglen)
{
    if (rename(s->tmp, s->path) != 0 || !fsync_dir(s->dir)) {
        snprintf(msg, msglen, "cannot rename %.300s to %.300s: %s", s->tmp,
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
    seq_log *s = rw->s;
    uv_mutex_lock(&s->mu);
    while (s->hold_rewrite)
        uv_cond_wait(&s->cv, &s->mu);
    uv_mutex_unlock(&s->mu);
    uint8_t *recs[1] = {rw->snap};
    rw->fd = write_tmp(s, recs, &rw->snap_len, 1, rw->fail, &rw->size,
                       &rw->alloc, rw->msg, sizeof rw->msg);
    uv_mutex_lock(&s->mu);
    rw->done = true;
    uv_cond_broadcast(&s->cv);
    uv_mutex_unlock(&s->mu);
}

/* Starts a rewrite with one record per live sequence. The log writer. */
static void rewrite_start(seq_log *s, int fail)
{
    OWNER_ASSERT(&s->writer_owner);
    rewriting *rw = calloc(1, sizeof *rw);
    uint8_t *snap = malloc(s->map.bytes ? s->map.bytes : 1);
    if (rw == NULL || snap == NULL) {
        free(rw);
        free(snap);
        return; /* the log goes on growing; the next batch tries again */
    }
    for (size_t i = 0; i < s->map.m.nb; i++)
        for (seq_map_node *x = s->map.m.b[i]; x != NULL; x = x->next) {
            memcpy(snap + rw->snap_len, latest_of(x)->rec,
                   latest_of(x)->rec_len);
            rw->snap_len += latest_of(x)->rec_len;
        }
    rw->s = s;
    rw->snap = snap;
    rw->fail = fail;
    if (uv_thread_create(&rw->thread, run_rewriter, rw) != 0) {
        free(snap);
        free(rw);
        return;
    }
    s->rw = rw;
}

/* Keeps a copy of a batch's records for the rewrite in flight. False
 * when memory runs out (the rewrite is then dropped). The log writer. */
static bool rewrite_keep(rewriting *rw, const item *batch)
{
    for (const item *i = batch; i != NULL; i = i->next) {
        if (rw->tail_len + i->len > rw->tail_cap) {
            size_t cap = 2 * (rw->tail_len + i->len);
            uint8_t *t = realloc(rw->tail, cap);
            if (t == NULL)
                return false;
            rw->tail = t;
            rw->tail_cap = cap;
        }
        memcpy(rw->tail + rw->tail_len, i->rec, i->len);
        rw->tail_len += i->len;
    }
    return true;
}

/* Ends the rewrite in flight, once its thread is done: the records
 * appended meanwhile go after the snapshot, and the file replaces the log
 * (or, when anything failed, the log goes on as it was). Writer's
 * thread. */
static void rewrite_end(seq_log *s, bool keep)
{
    OWNER_ASSERT(&s->writer_owner);
    rewriting *rw = s->rw;
    s->rw = NULL;
    uv_thread_join(&rw->thread);
    bool ok = keep && rw->fd >= 0;
    uint64_t size = rw->size;
    if (ok) {
        ok = make_room(rw->fd, size, rw->tail_len, &rw->alloc)
             && write_all(rw->fd, rw->tail, rw->tail_len, size, 0)
             && fdatasync(rw->fd) == 0;
        if (!ok)
            snprintf(rw->msg, sizeof rw->msg, "cannot write %.300s: %s", s->tmp,
                     strerror(errno));
        size += rw->tail_len;
    }
    if (ok && install(s, rw->fd, size, rw->alloc, rw->msg, sizeof rw->msg))
        s->ws.rewrites++;
    else if (keep) {
        if (ok == false && rw->fd >= 0) {
            close(rw->fd);
            unlink(s->tmp);
        }
        log_msg("sequences", "error",
                "the sequence log was not rewritten (it goes on growing): "
                "%s",
                rw->msg[0] ? rw->msg : "out of memory");
    } else if (rw->fd >= 0) {
        close(rw->fd);
        unlink(s->tmp);
    }
    free(rw->snap);
    free(rw->tail);
    free(rw);
}

/* Writes a batch and flushes it as the mode says: true when every
 * record in it is durable. The log writer, no lock held. */
static bool write_batch(seq_log *s, item *batch, int fail, int fail_sync,
                        char *why, size_t whylen)
{
    OWNER_ASSERT(&s->writer_owner);
    if (s->broken) {
        snprintf(why, whylen,
                 "the log %.300s is damaged by an earlier failed "
                 "write; restart tallyd",
                 s->path);
        return false;
    }
    uint64_t start = s->size, t0 = now_ns(), need = 0;
    for (item *i = batch; i != NULL; i = i->next)
        need += i->len;
    if (!make_room(s->fd, s->size, need, &s->alloc)
        || !write_items(s->fd, batch, s->size, fail)) {
        int e = errno;
        snprintf(why, whylen, "cannot write the sequence log %.300s: %s",
                 s->path, strerror(e));
        /* undo what went in, so that the log has no torn record before
         * good ones (and no room after them: the next batch allocates it
         * again) */
        if (ftruncate(s->fd, (off_t)start) != 0)
            s->broken = true;
        s->size = s->alloc = start;
        return false;
    }
    s->size += need;
    if (s->mode == SEQ_FSYNC_ALWAYS || s->sync_failed) {
        if (fail_sync || fdatasync(s->fd) != 0) {
            int e = fail_sync ? fail_sync : errno;
            if (s->sync_failed)
                snprintf(why, whylen,
                         "the sequence log %.200s could not be flushed (%s); "
                         "chunks are refused until a flush succeeds (%.100s)",
                         s->path, strerror(e), s->sync_why);
            else
                snprintf(why, whylen,
                         "cannot flush the sequence log %.300s: %s", s->path,
                         strerror(e));
            s->ws.flush_failures++;
            if (ftruncate(s->fd, (off_t)start) != 0)
                s->broken = true;
            s->size = s->alloc = start;
            return false;
        }
        s->ws.flushes++;
        s->ws.flush_ns += now_ns() - t0;
        if (s->sync_failed) {
            s->sync_failed = false;
            log_msg("sequences", "info",
                    "the sequence log %.300s flushes again; chunks are "
                    "taken again",
                    s->path);
        }
    }
    return true;
}

/* everysec's flush of the second's records. A failure is logged and
 * counted, and the chunks after it are refused until a flush succeeds
 * (write_batch): the records written before it are on the OS's page
 * cache only, and may be lost with the machine. The log writer. */
static void sync_second(seq_log *s, int fail_sync)
{
    OWNER_ASSERT(&s->writer_owner);
    uint64_t t0 = now_ns();
    if (!fail_sync && fdatasync(s->fd) == 0) {
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
    int e = fail_sync ? fail_sync : errno;
    s->ws.flush_failures++;
    if (!s->sync_failed)
        log_msg("sequences", "error",
                "the once-a-second flush of the sequence log %.300s failed "
                "(%s): the chunks answered in the second before it may be "
                "lost with the machine, and chunks are refused (503) until a "
                "flush succeeds",
                s->path, strerror(e));
    snprintf(s->sync_why, sizeof s->sync_why,
             "the once-a-second flush failed: %s", strerror(e));
    s->sync_failed = true;
}

static void run_writer(void *arg)
{
    seq_log *s = arg;
    loop_owner_set(&s->writer_owner);
    uint64_t last_sync = now_ns();
    bool dirty = false;
    uv_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stop && !(s->rw && s->rw->done)) {
            if (dirty) {
                uint64_t since = now_ns() - last_sync;
                if (since >= 1000000000u)
                    break;
                uv_cond_timedwait(&s->cv, &s->mu, 1000000000u - since);
            } else {
                uv_cond_wait(&s->cv, &s->mu);
            }
        }
        item *batch = s->head;
        s->head = s->tail = NULL;
        bool stop = s->stop, rewritten = s->rw != NULL && s->rw->done;
        int fail = s->fail_errno, fail_sync = s->fail_sync_errno;
        if (s->ws.records < s->fail_after)
            fail = fail_sync = 0;
        uv_mutex_unlock(&s->mu);

        char why[512] = "";
        bool ok = true;
        if (batch != NULL) {
            ok = write_batch(s, batch, fail, fail_sync, why, sizeof why);
            dirty = dirty || (ok && s->mode == SEQ_FSYNC_EVERYSEC);
            if (ok && s->rw != NULL && !rewrite_keep(s->rw, batch))
                rewrite_end(s, false);
        }
        if (dirty && (stop || now_ns() - last_sync >= 1000000000u)) {
            sync_second(s, fail_sync);
            last_sync = now_ns();
            dirty = false;
        }
        for (item *i = batch; i != NULL; i = i->next) {
            s->ws.records++;
            if (ok && !i->keep) {
                free(i->rec);
                map_set(&s->map, &i->key, NULL, 0);
            } else if (ok) {
                map_set(&s->map, &i->key, i->rec, i->len);
            } else {
                free(i->rec);
                s->ws.failures++;
            }
            i->rec = NULL;
        }
        /* the counters before the answers: a client that has its answer
         * sees them */
        uv_mutex_lock(&s->mu);
        s->ws.bytes = s->size;
        s->stats = s->ws;
        uv_mutex_unlock(&s->mu);
        for (item *i = batch, *next; i != NULL; i = next) {
            next = i->next;
            i->done(i->ctx, ok, why);
            free(i);
        }
        if (s->rw != NULL && (rewritten || stop)) /* stop: it ends first */
            rewrite_end(s, true);
        else if (s->rw == NULL && s->size > s->rewrite_min
                 && s->size > 2 * (uint64_t)s->map.bytes)
            rewrite_start(s, fail);
        uv_mutex_lock(&s->mu);
        s->ws.bytes = s->size;
        s->ws.rewriting = s->rw != NULL;
        s->stats = s->ws;
        if (stop && s->head == NULL && s->rw == NULL)
            break;
    }
    uv_mutex_unlock(&s->mu);
}

int seq_log_lock(const char *dir, char *msg, size_t msglen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/tallyd.lock", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot open %.300s: %s", path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int e = errno;
        char pid[24] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        close(fd);
        if (e == EWOULDBLOCK)
            snprintf(msg, msglen,
                     "--state-dir %.300s is in use by another tallyd (pid "
                     "%s, holding %.300s): one tallyd per directory, or the "
                     "two would write over each other's log",
                     dir, pid[0] ? pid : "unknown", path);
        else
            snprintf(msg, msglen, "cannot lock %.300s: %s", path, strerror(e));
        return -1;
    }
    char pid[24];
    int len = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)len, 0) != len)
        log_msg("sequences", "warn", "%s: cannot write tallyd's pid: %s", path,
                strerror(errno));
    return fd;
}

void seq_log_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* the file stays: its pid is stale, its lock gone */
}

seq_log *seq_log_open(const char *dir, seq_fsync mode, const seq_file_entry *e,
                      size_t n, char *msg, size_t msglen)
{
    seq_log *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    s->fd = -1;
    s->mode = mode;
    s->rewrite_min = REWRITE_MIN;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->path, sizeof s->path, "%s/sequences.log", dir);
    snprintf(s->tmp, sizeof s->tmp, "%s/sequences.log.tmp", dir);
    uint8_t **recs = calloc(n ? n : 1, sizeof *recs);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    bool ok = recs != NULL && lens != NULL;
    seq_map_node key;
    ok = ok && seq_map_init(&s->map.m);
    for (size_t i = 0; ok && i < n; i++) {
        recs[i] = encode(&e[i], &lens[i]);
        ok = recs[i] != NULL;
        if (ok) { /* the map keeps its own copy */
            uint8_t *c = malloc(lens[i]);
            ok = c != NULL;
            if (ok) {
                memcpy(c, recs[i], lens[i]);
                seq_key_of(&e[i].id, &key);
                ok = map_set(&s->map, &key, c, lens[i]);
            }
        }
    }
    if (!ok)
        snprintf(msg, msglen, "out of memory writing %.300s", s->path);
    else {
        uint64_t size, alloc;
        int fd = write_tmp(s, recs, lens, n, 0, &size, &alloc, msg, msglen);
        ok = fd >= 0 && install(s, fd, size, alloc, msg, msglen);
    }
    for (size_t i = 0; recs != NULL && i < n; i++)
        free(recs[i]);
    free(recs);
    free(lens);
    if (ok && (uv_mutex_init(&s->mu) != 0 || uv_cond_init(&s->cv) != 0)) {
        snprintf(msg, msglen, "cannot start the log's writer");
        ok = false;
    }
    if (ok && uv_thread_create(&s->writer, run_writer, s) != 0) {
        snprintf(msg, msglen, "cannot start the log's writer thread");
        uv_cond_destroy(&s->cv);
        uv_mutex_destroy(&s->mu);
        ok = false;
    }
    if (!ok) {
        if (s->fd >= 0)
            close(s->fd);
        map_free(&s->map);
        free(s);
        return NULL;
    }
    return s;
}

bool seq_log_append(seq_log *s, const seq_file_entry *x, seq_log_done done,
                    void *ctx)
{
    item *i = calloc(1, sizeof *i);
    if (i == NULL)
        return false;
    i->rec = encode(x, &i->len);
    if (i->rec == NULL) {
        free(i);
        return false;
    }
    i->keep = x->state == SEQ_LIVE || (x->state == SEQ_ENDED && x->numbered);
    seq_key_of(&x->id, &i->key);
    i->done = done;
    i->ctx = ctx;
    uv_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = i;
    else
        s->head = i;
    s->tail = i;
    uv_cond_broadcast(&s->cv); /* the writer, not the held rewriter */
    uv_mutex_unlock(&s->mu);
    return true;
}

void seq_log_fail_writes(seq_log *s, int err, int sync_err, uint64_t after)
{
    uv_mutex_lock(&s->mu);
    s->fail_errno = err;
    s->fail_sync_errno = sync_err;
    s->fail_after = after;
    uv_mutex_unlock(&s->mu);
}

void seq_log_test_rewrites(seq_log *s, uint64_t min_bytes, bool hold)
{
    uv_mutex_lock(&s->mu);
    s->rewrite_min = min_bytes;
    s->hold_rewrite = hold;
    uv_cond_broadcast(&s->cv);
    uv_mutex_unlock(&s->mu);
}

void seq_log_get_stats(seq_log *s, seq_log_stats *out)
{
    uv_mutex_lock(&s->mu);
    *out = s->stats;
    uv_mutex_unlock(&s->mu);
}

void seq_log_close(seq_log *s)
{
    if (s == NULL)
        return;
    uv_mutex_lock(&s->mu);
    s->stop = true;
    uv_cond_broadcast(&s->cv); /* the writer, not the held rewriter */
    uv_mutex_unlock(&s->mu);
    uv_thread_join(&s->writer);
    if (s->fd >= 0) {
        if (ftruncate(s->fd, (off_t)s->size) != 0) /* the room, cut off */
            log_msg("sequences", "warn",
                    "the sequence log %.300s keeps its room after the "
                    "records: %s",
                    s->path, strerror(errno));
        fdatasync(s->fd);
        close(s->fd);
    }
    map_free(&s->map);
    uv_cond_destroy(&s->cv);
    uv_mutex_destroy(&s->mu);
    free(s);
}
