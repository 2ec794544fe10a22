/*
 * seq_logged.c - the sequences in memory with the log (seq_logged.h):
 * the memory backend, its journal the log, and the start that replays
 * the log into it.
 *
 * The backend's ops are the memory backend's, but for its durability
 * (a chunk ends once its record is durable), its metrics (the log's
 * beside the sequences'), its close (the log flushed and closed) and its
 * free (the lock let go).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "seq_logged.h"
#include "seq_memory.h"

typedef struct {
    seq_backend base;
    seq_backend *mem;
    seq_log *log; /* NULL once closed */
    int lock;
    char dir[4096];
} seq_logged;

static seq_logged *logged_of(seq_backend *b)
{
    return (seq_logged *)b;
}

/* ------------------------------------------------------------- the ops */

static status_code logged_admit(seq_backend *b, const seq_params *p,
                                const eng_scan_desc *d, const eng_lines *l,
                                const void *in, seq_slot *s, bool *wait,
                                char *msg, size_t msglen)
{
    seq_backend *m = logged_of(b)->mem;
    return m->ops->admit(m, p, d, l, in, s, wait, msg, msglen);
}

static bool logged_arm(seq_backend *b, seq_slot *s)
{
    seq_backend *m = logged_of(b)->mem;
    return m->ops->arm(m, s);
}

static status_code logged_finish(seq_backend *b, seq_slot *s, bool ok,
                                 void *out, bool *later, char *msg,
                                 size_t msglen)
{
    seq_backend *m = logged_of(b)->mem;
    return m->ops->finish(m, s, ok, out, later, msg, msglen);
}

static void logged_sweep(seq_backend *b)
{
    seq_backend *m = logged_of(b)->mem;
    m->ops->sweep(m);
}

static bool logged_freeze(seq_backend *b, uint64_t wait_ms)
{
    seq_backend *m = logged_of(b)->mem;
    return m->ops->freeze(m, wait_ms);
}

static void logged_counts(seq_backend *b, seq_counts *out)
{
    seq_backend *m = logged_of(b)->mem;
    m->ops->counts(m, out);
}

static void logged_render(seq_backend *b, textbuf *o)
{
    seq_logged *g = logged_of(b);
    if (g->log == NULL)
        return;
    seq_log_stats st;
    seq_log_get_stats(g->log, &st);
    textbuf_put(o,
                "# HELP tally_sequence_log_bytes Bytes in the sequence log "
                "(--state-dir) now.\n"
                "# TYPE tally_sequence_log_bytes gauge\n"
                "tally_sequence_log_bytes %" PRIu64 "\n"
                "# HELP tally_sequence_log_records_total Records written to "
                "the sequence log (one per applied chunk).\n"
                "# TYPE tally_sequence_log_records_total counter\n"
                "tally_sequence_log_records_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_flushes_total fdatasync calls on "
                "the sequence log (each shared by the chunks that finished "
                "together).\n"
                "# TYPE tally_sequence_log_flushes_total counter\n"
                "tally_sequence_log_flushes_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_flush_seconds_total Time in those "
                "flushes.\n"
                "# TYPE tally_sequence_log_flush_seconds_total counter\n"
                "tally_sequence_log_flush_seconds_total %.9f\n"
                "# HELP tally_sequence_log_failures_total Records that could "
                "not be written or flushed (their chunks answered 503).\n"
                "# TYPE tally_sequence_log_failures_total counter\n"
                "tally_sequence_log_failures_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_rewrites_total Times the log was "
                "rewritten with one record per live sequence.\n"
                "# TYPE tally_sequence_log_rewrites_total counter\n"
                "tally_sequence_log_rewrites_total %" PRIu64 "\n"
                "# HELP tally_sequence_log_flush_failures_total fdatasync "
                "calls on the sequence log that failed (with everysec, the "
                "chunks after one are refused until a flush succeeds).\n"
                "# TYPE tally_sequence_log_flush_failures_total counter\n"
                "tally_sequence_log_flush_failures_total %" PRIu64 "\n",
                st.bytes, st.records, st.flushes, (double)st.flush_ns / 1e9,
                st.failures, st.rewrites, st.flush_failures);
}

/* How many sequences m holds (live, or ended and kept for a repeat). */
static size_t live_count(seq_backend *m)
{
    seq_counts c;
    m->ops->counts(m, &c);
    return c.live;
}

static void logged_close(seq_backend *b)
{
    seq_logged *g = logged_of(b);
    if (g->log == NULL)
        return;
    size_t live = live_count(g->mem);
    seq_log_close(g->log); /* every applied chunk is in it, flushed */
    g->log = NULL;
    log_msg("sequences", "info", "%zu live sequences kept in %s", live, g->dir);
}

static void logged_free(seq_backend *b)
{
    seq_logged *g = logged_of(b);
    logged_close(b);
    g->mem->ops->free(g->mem);
    seq_log_unlock(g->lock);
    free(g);
}

static bool journal_append(void *self, const seq_file_entry *x,
                           seq_journal_done done, void *ctx)
{
    seq_logged *g = self; /* its log is open before any chunk */
    return seq_log_append(g->log, x, done, ctx);
}

/* ------------------------------------------------------------ the start */

/* One record of the log, into memory (seq_log_decode's each). */
static bool restore_one(void *user, seq_file_entry *e)
{
    char msg[256];
    if (seq_memory_restore(user, e, msg, sizeof msg))
        return true;
    log_msg("sequences", "error", "%s", msg);
    return false;
}

/* DIR/sequences.log, whole, into *buf (malloc'd; NULL and *len 0 when
 * there is no log yet); false with a message. */
static bool read_log(const char *path, uint8_t **buf, size_t *len, char *msg,
                     size_t msglen)
{
    *buf = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT)
            return true;
        snprintf(msg, msglen, "cannot read %.300s: %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    size_t got = 0;
    if (fstat(fd, &st) == 0) {
        *len = (size_t)st.st_size;
        *buf = malloc(*len ? *len : 1);
    }
    while (*buf != NULL && got < *len) {
        ssize_t r = read(fd, *buf + got, *len - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    int e = errno;
    close(fd);
    if (*buf == NULL || got < *len) {
        snprintf(msg, msglen, "cannot read %.300s: %s", path,
                 *buf == NULL ? "out of memory" : strerror(e));
        free(*buf);
        *buf = NULL;
        return false;
    }
    return true;
}

/* Replays DIR/sequences.log into mem; false with a message naming the
 * file and the offset where it is damaged. */
static bool replay(seq_backend *mem, const char *dir, size_t max_bytes,
                   char *msg, size_t msglen)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/sequences.state", dir);
    if (access(path, F_OK) == 0) { /* an older tallyd's drain */
        snprintf(msg, msglen,
                 "%.300s is an older tallyd's drain file, which this tallyd "
                 "does not read: start that tallyd once more on %.300s (it "
                 "moves its sequences into sequences.log), or remove the "
                 "file to start without them",
                 path, dir);
        return false;
    }
    snprintf(path, sizeof path, "%s/sequences.log", dir);
    uint8_t *buf;
    size_t len, torn = 0;
    if (!read_log(path, &buf, &len, msg, msglen))
        return false;
    char err[256];
    bool ok = buf == NULL
              || seq_log_decode(buf, len, 1, max_bytes, restore_one, mem, &torn,
                                err, sizeof err);
    free(buf);
    if (!ok) {
        snprintf(msg, msglen,
                 "%.300s is not a log this tallyd can take: %s; tallyd "
                 "does not start (move it away to start without it)",
                 path, err);
        return false;
    }
    if (torn > 0)
        log_msg("sequences", "warn",
                "%s: its last %zu bytes were a record cut short by a crash "
                "(never answered): dropped",
                path, torn);
    return true;
}

/* The log, fresh: every sequence memory holds now, one record each, and
 * the writer started. */
static seq_log *fresh_log(seq_backend *mem, const char *dir, seq_fsync mode,
                          char *msg, size_t msglen)
{
    size_t n;
    bool oom;
    seq_file_entry *v = seq_memory_export(mem, &n, &oom);
    if (v == NULL && oom) {
        snprintf(msg, msglen, "out of memory loading the sequences");
        return NULL;
    }
    seq_log *log = seq_log_open(dir, mode, v, n, msg, msglen);
    free(v);
    return log;
}

seq_backend *seq_logged_open(const char *dir, seq_fsync mode,
                             const seq_options *o, const seq_log_faults *f,
                             char *msg, size_t msglen)
{
    static const seq_backend_ops ops = {
        .admit = logged_admit,
        .arm = logged_arm,
        .finish = logged_finish,
        .sweep = logged_sweep,
        .freeze = logged_freeze,
        .counts = logged_counts,
        .render_metrics = logged_render,
        .close = logged_close,
        .free = logged_free,
    };
    if (access(dir, W_OK | X_OK) != 0) {
        snprintf(msg, msglen,
                 "--state-dir %s: %s (every applied chunk of a sequence is "
                 "logged there)",
                 dir, strerror(errno));
        return NULL;
    }
    seq_logged *g = calloc(1, sizeof *g);
    if (g == NULL) {
        snprintf(msg, msglen, "out of memory");
        return NULL;
    }
    g->base.ops = &ops;
    g->base.durable = true;
    snprintf(g->dir, sizeof g->dir, "%s", dir);
    g->lock = seq_log_lock(dir, msg, msglen);
    g->mem = g->lock >= 0 ? seq_memory_new(o) : NULL;
    if (g->lock >= 0 && g->mem == NULL)
        snprintf(msg, msglen, "out of memory");
    if (g->mem != NULL) { /* before the replay: its bytes count the copy */
        seq_journal j = {journal_append, g};
        seq_memory_set_journal(g->mem, &j);
    }
    if (g->mem != NULL && replay(g->mem, dir, o->max_bytes, msg, msglen)) {
        size_t expired = seq_memory_expire_loaded(g->mem);
        g->log = fresh_log(g->mem, dir, mode, msg, msglen);
        if (g->log != NULL && (expired > 0 || live_count(g->mem) > 0))
            log_msg("sequences", "info",
                    "%zu sequences loaded from %s; %zu more had been idle "
                    "past --sequence-idle-ms and were dropped",
                    live_count(g->mem), dir, expired);
    }
    if (g->log == NULL) {
        if (g->mem != NULL)
            g->mem->ops->free(g->mem);
        seq_log_unlock(g->lock);
        free(g);
        return NULL;
    }
    if (f != NULL && (f->err != 0 || f->sync))
        seq_log_fail_writes(g->log, f->sync ? 0 : f->err, f->sync ? EIO : 0,
                            f->after);
    return &g->base;
}
