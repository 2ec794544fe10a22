/*
 * seq_store.c - the sequences' append-only log (seq_store.h).
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
 * segments ahead for the same reason. Measured here (ext4, 64-byte
 * records, tests/bench/fsync_latency.c): fdatasync's median 178-242 us
 * after an append, 144-162 us into allocated room, the lower with two
 * busy cores beside it. The room reads as zeros, and a reader takes the
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
#include "seq_store.h"

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
static uint8_t *encode(const seq_file_entry *x, int how, size_t *len)
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
    put32(b + 8, (uint32_t)how);
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
                    bool (*each)(void *user, seq_file_entry *e, int how),
                    void *user, size_t *torn, char *msg, size_t msglen)
{
    size_t at = 0;
    *torn = 0;
    (void)max_entries;
    while (at < len) {
        size_t left = len - at;
        const uint8_t *h = b + at;
        if (h[0] == 0 && zeros(b, at, len))
            return true; /* the room allocated ahead: the end */
        if (left < REC_HEAD) { /* a header cut short: torn */
            *torn = used(b, len) - at;
            return true;
        }
        if (get32(h) != REC_MAGIC || get32(h + 12) != fnv32(h, 12)
            || get32(h + 8) > SEQ_REC_GONE) {
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
            snprintf(msg, msglen, "a damaged record at byte %zu: %s", at,
                     err);
            return false;
        }
        bool ok = each(user, e, how);
        seq_file_free(e, n);
        if (!ok) {
            snprintf(msg, msglen, "the record at byte %zu cannot be taken",
                     at);
            return false;
        }
        at += REC_HEAD + plen;
    }
    return true;
}

/* ------------------------------------------------------------ the map */

typedef struct latest latest;
struct latest {
    latest *next;
    uint8_t *key; /* kind byte, then the id's bytes */
    size_t key_len;
    uint8_t *rec;
    size_t rec_len;
};

typedef struct {
    latest **b;
    size_t nb, n, bytes;
} latest_map;

static size_t id_key(const seq_params *id, uint8_t *key)
{
    key[0] = id->is_string;
    if (id->is_string) {
        memcpy(key + 1, id->str, id->len);
        return 1 + id->len;
    }
    memcpy(key + 1, &id->num, sizeof id->num);
    return 1 + sizeof id->num;
}

static size_t key_hash(const uint8_t *k, size_t n)
{
    uint32_t h = fnv32(k, n);
    return (size_t)h;
}

static latest **map_find(latest_map *m, const uint8_t *k, size_t n)
{
    latest **p = &m->b[key_hash(k, n) & (m->nb - 1)];
    while (*p != NULL
           && ((*p)->key_len != n || memcmp((*p)->key, k, n) != 0))
        p = &(*p)->next;
    return p;
}

static void latest_free(latest *l)
{
    free(l->key);
    free(l->rec);
    free(l);
}

/* Sets (rec: taken) or removes (rec NULL) the id's latest record. False
 * when out of memory (the map is unchanged; rec is freed). */
static bool map_set(latest_map *m, const uint8_t *k, size_t n, uint8_t *rec,
                    size_t rec_len)
{
    if (m->nb == 0 || m->n >= m->nb) {
        size_t nb = m->nb ? 2 * m->nb : 64;
        latest **b = calloc(nb, sizeof *b);
        if (b == NULL) {
            free(rec);
            return false;
        }
        for (size_t i = 0; i < m->nb; i++)
            for (latest *l = m->b[i], *next; l != NULL; l = next) {
                next = l->next;
                latest **at = &b[key_hash(l->key, l->key_len) & (nb - 1)];
                l->next = *at;
                *at = l;
            }
        free(m->b);
        m->b = b;
        m->nb = nb;
    }
    latest **p = map_find(m, k, n);
    if (rec == NULL) {
        if (*p != NULL) {
            latest *l = *p;
            *p = l->next;
            m->bytes -= l->rec_len;
            m->n--;
            latest_free(l);
        }
        return true;
    }
    if (*p != NULL) {
        m->bytes -= (*p)->rec_len;
        free((*p)->rec);
        (*p)->rec = rec;
        (*p)->rec_len = rec_len;
        m->bytes += rec_len;
        return true;
    }
    latest *l = calloc(1, sizeof *l);
    uint8_t *key = malloc(n);
    if (l == NULL || key == NULL) {
        free(l);
        free(key);
        free(rec);
        return false;
    }
    memcpy(key, k, n);
    l->key = key;
    l->key_len = n;
    l->rec = rec;
    l->rec_len = rec_len;
    l->next = *p;
    *p = l;
    m->n++;
    m->bytes += rec_len;
    return true;
}

static void map_free(latest_map *m)
{
    for (size_t i = 0; i < m->nb; i++)
        for (latest *l = m->b[i], *next; l != NULL; l = next) {
            next = l->next;
            latest_free(l);
        }
    free(m->b);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------ writing */

typedef struct item item;
struct item {
    item *next;
    uint8_t *rec;
    size_t len;
    bool keep; /* the rewrite keeps it: live, or ended and numbered */
    uint8_t key[1 + SEQ_ID_MAX];
    size_t key_len;
    seq_store_done done;
    void *ctx;
};

struct seq_store {
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
    bool broken;    /* a failed write could not be undone */
    /* everysec: the last once-a-second flush failed, and the records
     * written before it may not be on disk: every batch is flushed before
     * its answers (as with always) until a flush succeeds again, and one
     * that fails is refused, as Redis stops taking writes when its AOF's
     * fsync fails. The writer's. */
    bool sync_failed;
    char sync_why[300];
    latest_map map;     /* the writer's */
    seq_store_stats ws; /* the writer's counters */
    seq_store_stats stats; /* a copy of them, under mu */
};

/* Writes b[0..n) at offset at; fail: the errno a test asked for. */
static bool write_all(int fd, const uint8_t *b, size_t n, uint64_t at,
                      int fail)
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

/* Writes the records to path's temporary file, syncs it and renames it
 * over path. The writer's thread (or the opener's, before it runs). */
static bool write_fresh(seq_store *s, uint8_t *const *recs,
                        const size_t *lens, size_t n, int fail, char *msg,
                        size_t msglen)
{
    int fd = open(s->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(msg, msglen, "cannot create %.300s: %s", s->tmp, strerror(errno));
        return false;
    }
    uint64_t size = 0;
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++) {
        ok = write_all(fd, recs[i], lens[i], size, fail);
        size += lens[i];
    }
    uint64_t alloc = size; /* the room starts after the records */
    if (!ok || !make_room(fd, size, 1, &alloc) || fdatasync(fd) != 0) {
        snprintf(msg, msglen, "cannot write %.300s: %s", s->tmp, strerror(errno));
        close(fd);
        unlink(s->tmp);
        return false;
    }
    if (rename(s->tmp, s->path) != 0 || !fsync_dir(s->dir)) {
        snprintf(msg, msglen, "cannot rename %.300s to %.300s: %s", s->tmp, s->path,
                 strerror(errno));
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

/* One record per live sequence, in place of the log. Writer's thread. */
static void rewrite(seq_store *s, int fail)
{
    size_t n = s->map.n, k = 0;
    uint8_t **recs = calloc(n ? n : 1, sizeof *recs);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    char msg[512];
    if (recs != NULL && lens != NULL) {
        for (size_t i = 0; i < s->map.nb; i++)
            for (latest *l = s->map.b[i]; l != NULL; l = l->next) {
                recs[k] = l->rec;
                lens[k++] = l->rec_len;
            }
        if (write_fresh(s, recs, lens, k, fail, msg, sizeof msg))
            s->ws.rewrites++;
        else
            log_msg("sequences", "error",
                    "the sequence log was not rewritten (it goes on "
                    "growing): %s",
                    msg);
    }
    free(recs);
    free(lens);
}

/* Writes a batch and flushes it as the mode says: true when every
 * record in it is durable. Writer's thread, no lock held. */
static bool write_batch(seq_store *s, item *batch, int fail, int fail_sync,
                        char *why, size_t whylen)
{
    if (s->broken) {
        snprintf(why, whylen, "the log %.300s is damaged by an earlier failed "
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
                snprintf(why, whylen, "cannot flush the sequence log %.300s: %s",
                         s->path, strerror(e));
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
 * cache only, and may be lost with the machine. Writer's thread. */
static void sync_second(seq_store *s, int fail_sync)
{
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
    seq_store *s = arg;
    uint64_t last_sync = now_ns();
    bool dirty = false;
    uv_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stop) {
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
        bool stop = s->stop;
        int fail = s->fail_errno, fail_sync = s->fail_sync_errno;
        if (s->ws.records < s->fail_after)
            fail = fail_sync = 0;
        uv_mutex_unlock(&s->mu);

        char why[512] = "";
        bool ok = true;
        if (batch != NULL) {
            ok = write_batch(s, batch, fail, fail_sync, why, sizeof why);
            dirty = dirty || (ok && s->mode == SEQ_FSYNC_EVERYSEC);
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
                map_set(&s->map, i->key, i->key_len, NULL, 0);
            } else if (ok) {
                map_set(&s->map, i->key, i->key_len, i->rec, i->len);
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
        if (s->size > REWRITE_MIN && s->size > 2 * (uint64_t)s->map.bytes)
            rewrite(s, fail);
        uv_mutex_lock(&s->mu);
        s->ws.bytes = s->size;
        s->stats = s->ws;
        if (stop && s->head == NULL)
            break;
    }
    uv_mutex_unlock(&s->mu);
}

int seq_store_lock(const char *dir, char *msg, size_t msglen)
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
        log_msg("sequences", "warn", "%s: cannot write tallyd's pid: %s",
                path, strerror(errno));
    return fd;
}

void seq_store_unlock(int fd)
{
    if (fd >= 0)
        close(fd); /* the file stays: its pid is stale, its lock gone */
}

seq_store *seq_store_open(const char *dir, seq_fsync mode,
                          const seq_file_entry *e, size_t n, char *msg,
                          size_t msglen)
{
    seq_store *s = calloc(1, sizeof *s);
    if (s == NULL) {
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    s->fd = -1;
    s->mode = mode;
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    snprintf(s->path, sizeof s->path, "%s/sequences.log", dir);
    snprintf(s->tmp, sizeof s->tmp, "%s/sequences.log.tmp", dir);
    uint8_t **recs = calloc(n ? n : 1, sizeof *recs);
    size_t *lens = calloc(n ? n : 1, sizeof *lens);
    bool ok = recs != NULL && lens != NULL;
    uint8_t key[1 + SEQ_ID_MAX];
    for (size_t i = 0; ok && i < n; i++) {
        recs[i] = encode(&e[i], e[i].ended ? SEQ_REC_ENDED : SEQ_REC_LIVE,
                         &lens[i]);
        ok = recs[i] != NULL;
        if (ok) { /* the map keeps its own copy */
            uint8_t *c = malloc(lens[i]);
            ok = c != NULL;
            if (ok) {
                memcpy(c, recs[i], lens[i]);
                ok = map_set(&s->map, key, id_key(&e[i].id, key), c, lens[i]);
            }
        }
    }
    if (!ok)
        snprintf(msg, msglen, "out of memory writing %.300s", s->path);
    else
        ok = write_fresh(s, recs, lens, n, 0, msg, msglen);
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

bool seq_store_append(seq_store *s, const seq_file_entry *x, int how,
                      seq_store_done done, void *ctx)
{
    item *i = calloc(1, sizeof *i);
    if (i == NULL)
        return false;
    i->rec = encode(x, how, &i->len);
    if (i->rec == NULL) {
        free(i);
        return false;
    }
    i->keep = how == SEQ_REC_LIVE || (how == SEQ_REC_ENDED && x->numbered);
    i->key_len = id_key(&x->id, i->key);
    i->done = done;
    i->ctx = ctx;
    uv_mutex_lock(&s->mu);
    if (s->tail)
        s->tail->next = i;
    else
        s->head = i;
    s->tail = i;
    uv_cond_signal(&s->cv);
    uv_mutex_unlock(&s->mu);
    return true;
}

void seq_store_fail_writes(seq_store *s, int err, int sync_err,
                           uint64_t after)
{
    uv_mutex_lock(&s->mu);
    s->fail_errno = err;
    s->fail_sync_errno = sync_err;
    s->fail_after = after;
    uv_mutex_unlock(&s->mu);
}

void seq_store_get_stats(seq_store *s, seq_store_stats *out)
{
    uv_mutex_lock(&s->mu);
    *out = s->stats;
    uv_mutex_unlock(&s->mu);
}

void seq_store_close(seq_store *s)
{
    if (s == NULL)
        return;
    uv_mutex_lock(&s->mu);
    s->stop = true;
    uv_cond_signal(&s->cv);
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
