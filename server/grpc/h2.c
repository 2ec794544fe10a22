/*
 * h2.c - gRPC over HTTP/2: nghttp2 sessions on libuv sockets (grpc.h).
 *
 * Objects and who owns them (all on the loop thread):
 *   conn    one TCP connection and its nghttp2 session; in t->conns until
 *           its handle has closed.
 *   stream  one HTTP/2 stream (one RPC): its headers, the message being
 *           assembled, and the FIFO of its calls; nghttp2's stream user
 *           data, freed in on_stream_close (or when the conn goes).
 *   call    one request message and its answer. Alive while it is in its
 *           stream's FIFO (until its answer's last byte is handed to a
 *           write), while suspended (a job holds it), and while a write
 *           that points into its answer is in flight. When the stream
 *           goes first, the call is detached (st = NULL, gone = true) and
 *           lives on until the other two let go.
 *
 * Writes: nghttp2_session_send() runs with a send callback that copies
 * frame bytes (headers, settings, frame headers) into a batch, and a
 * send_data callback (NGHTTP2_DATA_FLAG_NO_COPY) that adds pointers into
 * the calls' answers to the batch: a tensor goes from where it was
 * scanned to the socket in one writev, never copied. Each batch is one
 * uv_write holding references on the calls it points into.
 */
#include <inttypes.h>
#include <nghttp2/nghttp2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buffer.h"
#include "clock.h"
#include "config.h"
#include "encoding.h"
#include "grpc.h"
#include "trace.h"
#include "grpc_tls.h"
#include "log.h"

#define FIRST_BUFFER ((size_t)256 * 1024)
#define MAX_HEADER_LIST 16384
#define STREAM_WINDOW (8 << 20)
#define CONN_WINDOW (64 << 20)
#define WRITE_HIGH ((size_t)8 << 20) /* queued bytes before sends wait */
#define READ_BUFFER 65536
#define BATCH_PIECES 64
#define BATCH_CALLS 32

typedef struct gstream gstream;

struct grpc_call {
    grpc_transport *t;
    gstream *st; /* NULL once detached */
    trace_ctx trace; /* its stream's, for the access line */
    char *tracestate; /* its stream's (taken), or NULL */
    const grpc_method *m;
    uint8_t *buf; /* the message's buffer (eng_buffer), msg inside it */
    uint8_t *msg;
    size_t len, reserved;
    void *work;
    void (*work_free)(void *);
    grpc_handler on_resume;
    atomic_bool gone;
    bool suspended, in_fifo, answered, counted;
    bool busy; /* a handler runs with it: not to be freed */
    unsigned writes; /* in-flight batches pointing into the answer */
    int64_t timeout_ms;
    uint8_t prefix[5];
    uint8_t *head;
    size_t head_len;
    const uint8_t *tail;
    size_t tail_len, total, sent;
    status_code status;
    uint64_t t0_ns, parse_ns, queue_ns, compute_ns;
    /* for its spans: when the message was whole, the handler began and
     * the answer was queued; what its job did */
    uint64_t whole_ns, handler_ns, reply_ns;
    trace_work ran;
    grpc_call *next;        /* in the stream's FIFO */
    grpc_call *next_resume; /* in t->resumed */
};

struct gstream {
    grpc_conn *conn;
    int32_t id;
    const grpc_method *m;
    gstream *prev, *next; /* in conn->streams */
    /* headers */
    size_t header_bytes;
    bool post, grpc_ct;
    char path[256];
    char auth[1100];
    bool has_auth;
    trace_ctx trace; /* W3C trace context: traceparent, continued, or new */
    char *tracestate; /* malloc'd, when the call sent one; or NULL */
    int64_t timeout_ms;
    int encoding; /* encoding.h's, 0: identity */
    bool bad_encoding, bad_timeout;
    /* state */
    bool accepted, rejected, remote_closed, response_started, deferred,
        final_set, got_message;
    status_code final;
    char final_msg[512];
    uint64_t opened_ns, msg_started_ns;
    /* the message being assembled */
    uint8_t pre[5];
    size_t pre_got;
    bool compressed;
    size_t want; /* the message's length */
    uint8_t *buf;
    size_t lead, cap, got, reserved;
    /* calls, in arrival order */
    grpc_call *head, *tail;
};

typedef struct {
    bool copy;
    size_t off; /* copy: offset in the batch's copy buffer */
    const uint8_t *p;
    size_t len;
} piece;

typedef struct batch {
    uv_write_t req;
    grpc_conn *conn;
    uint8_t *copy;
    size_t copy_len, copy_cap;
    piece pieces[BATCH_PIECES];
    unsigned npieces;
    grpc_call *calls[BATCH_CALLS];
    unsigned ncalls;
    size_t bytes;
    uv_buf_t bufs[BATCH_PIECES];
} batch;

struct grpc_conn {
    grpc_transport *t;
    uv_tcp_t tcp;
    nghttp2_session *h2;
    grpc_conn *prev, *next;
    gstream *streams;
    batch *b;
    uint8_t *rbuf;
    grpc_tls_session *tls; /* NULL: h2c */
    uint8_t *plain;        /* decrypted bytes, with TLS */
    size_t queued; /* bytes in in-flight writes */
    unsigned writes;
    bool closing, notice_sent, goaway_sent;
    uint64_t last_active_ns;
};

static void conn_pump(grpc_conn *c);
static void conn_close(grpc_conn *c);
static void call_maybe_free(grpc_call *call);

/* ------------------------------------------------------------ budget */

static bool reserve(grpc_transport *t, size_t n)
{
    tallyd_server *s = t->s;
    unsigned long long cur =
        atomic_load_explicit(&s->buffered_bytes, memory_order_relaxed);
    do {
        if (n > s->cfg.max_buffered_bytes
            || cur > s->cfg.max_buffered_bytes - n)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &s->buffered_bytes, &cur, cur + n, memory_order_relaxed,
        memory_order_relaxed));
    return true;
}

static void unreserve(grpc_transport *t, size_t n)
{
    atomic_fetch_sub_explicit(&t->s->buffered_bytes, n, memory_order_relaxed);
}

/* ------------------------------------------------------------ writes */

static batch *conn_batch(grpc_conn *c)
{
    if (c->b == NULL) {
        c->b = calloc(1, sizeof *c->b);
        if (c->b != NULL)
            c->b->conn = c;
    }
    return c->b;
}

/* A batch is out (or failed): its calls let go of it. */
static void batch_done(batch *b)
{
    grpc_conn *c = b->conn;
    for (unsigned i = 0; i < b->ncalls; i++) {
        b->calls[i]->writes--;
        call_maybe_free(b->calls[i]);
    }
    atomic_fetch_add_explicit(&c->t->c.bytes_out, b->bytes,
                              memory_order_relaxed);
    free(b->copy);
    free(b);
}

static void on_written(uv_write_t *req, int status)
{
    batch *b = req->data;
    grpc_conn *c = b->conn;
    c->writes--;
    c->queued -= b->bytes;
    batch_done(b);
    if (status < 0) {
        conn_close(c);
        return;
    }
    conn_pump(c);
}

typedef struct {
    uv_write_t req;
    grpc_conn *conn;
    uint8_t *buf;
    size_t len;
} raw_write;

static void on_raw_written(uv_write_t *req, int status)
{
    raw_write *w = req->data;
    grpc_conn *c = w->conn;
    c->writes--;
    c->queued -= w->len;
    free(w->buf);
    free(w);
    if (status < 0) {
        conn_close(c);
        return;
    }
    conn_pump(c);
}

/* With TLS: the ciphertext waiting in the session goes to the socket
 * (at once when it takes it all, else through a write request). */
static void tls_flush(grpc_conn *c)
{
    size_t len = 0;
    uint8_t *buf = grpc_tls_output(c->tls, &len);
    if (buf == NULL)
        return;
    atomic_fetch_add_explicit(&c->t->c.bytes_out, len, memory_order_relaxed);
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    int wrote = c->writes == 0 ? uv_try_write((uv_stream_t *)&c->tcp, &b, 1)
                               : UV_EAGAIN;
    if (wrote == (int)len) {
        free(buf);
        return;
    }
    if (wrote < 0 && wrote != UV_EAGAIN) {
        free(buf);
        conn_close(c);
        return;
    }
    raw_write *w = malloc(sizeof *w);
    if (w == NULL) {
        free(buf);
        conn_close(c);
        return;
    }
    size_t skip = wrote > 0 ? (size_t)wrote : 0;
    w->conn = c;
    w->buf = buf;
    w->len = len;
    w->req.data = w;
    b = uv_buf_init((char *)buf + skip, (unsigned)(len - skip));
    c->writes++;
    c->queued += len;
    if (uv_write(&w->req, (uv_stream_t *)&c->tcp, &b, 1, on_raw_written) != 0) {
        c->writes--;
        c->queued -= len;
        free(buf);
        free(w);
        conn_close(c);
    }
}

/* Writes the batch being built: as much as the socket takes at once
 * (uv_try_write: no write request, no poll for writability, which is
 * most answers), the rest through uv_write. May run inside nghttp2's
 * callbacks, so it never calls back into the session. */
static void batch_flush(grpc_conn *c)
{
    batch *b = c->b;
    if (b == NULL || b->npieces == 0)
        return;
    if (c->tls != NULL && !grpc_tls_ready(c->tls))
        return; /* kept until the handshake is done (on_read pumps) */
    c->b = NULL;
    if (c->tls != NULL) { /* encrypted: the session copies every byte */
        bool ok = true;
        for (unsigned i = 0; i < b->npieces && ok; i++) {
            const piece *p = &b->pieces[i];
            ok = grpc_tls_write(c->tls, p->copy ? b->copy + p->off : p->p,
                                p->len);
        }
        batch_done(b);
        if (!ok) {
            conn_close(c);
            return;
        }
        tls_flush(c);
        return;
    }
    for (unsigned i = 0; i < b->npieces; i++) {
        const piece *p = &b->pieces[i];
        b->bufs[i] = uv_buf_init(
            (char *)(p->copy ? b->copy + p->off : p->p), (unsigned)p->len);
    }
    uv_buf_t *bufs = b->bufs;
    unsigned n = b->npieces;
    int wrote = c->writes == 0
                    ? uv_try_write((uv_stream_t *)&c->tcp, bufs, n)
                    : UV_EAGAIN; /* keep the order of queued writes */
    if (wrote > 0) {
        size_t left = (size_t)wrote;
        while (n > 0 && left >= bufs->len) {
            left -= bufs->len;
            bufs++;
            n--;
        }
        if (n == 0) {
            batch_done(b);
            return;
        }
        bufs->base += left;
        bufs->len -= left;
    } else if (wrote != UV_EAGAIN && wrote != UV_ENOSYS) {
        batch_done(b);
        conn_close(c);
        return;
    }
    b->req.data = b;
    c->writes++;
    c->queued += b->bytes;
    if (uv_write(&b->req, (uv_stream_t *)&c->tcp, bufs, n, on_written) != 0) {
        c->writes--;
        c->queued -= b->bytes;
        batch_done(b);
        conn_close(c);
    }
}

/* Room for one more piece (and a call); flushes a full batch first. */
static batch *batch_room(grpc_conn *c, bool with_call)
{
    batch *b = conn_batch(c);
    if (b != NULL
        && (b->npieces == BATCH_PIECES
            || (with_call && b->ncalls == BATCH_CALLS))) {
        batch_flush(c);
        b = conn_batch(c);
    }
    return b;
}

static bool add_copy(grpc_conn *c, const uint8_t *data, size_t len)
{
    batch *b = conn_batch(c);
    if (b == NULL)
        return false;
    if (b->copy_len + len > b->copy_cap) {
        size_t cap = b->copy_cap ? b->copy_cap : 4096;
        while (cap < b->copy_len + len)
            cap *= 2;
        uint8_t *nc = realloc(b->copy, cap);
        if (nc == NULL)
            return false;
        b->copy = nc;
        b->copy_cap = cap;
    }
    piece *last = b->npieces ? &b->pieces[b->npieces - 1] : NULL;
    if (last != NULL && last->copy && last->off + last->len == b->copy_len) {
        last->len += len;
    } else {
        b = batch_room(c, false);
        if (b == NULL)
            return false;
        if (b != c->b || b->copy_cap < b->copy_len + len)
            return add_copy(c, data, len); /* a fresh batch */
        b->pieces[b->npieces++] = (piece){true, b->copy_len, NULL, len};
    }
    memcpy(b->copy + b->copy_len, data, len);
    b->copy_len += len;
    b->bytes += len;
    return true;
}

static bool add_borrowed(grpc_conn *c, const uint8_t *p, size_t len,
                         grpc_call *call)
{
    if (len == 0)
        return true;
    batch *b = batch_room(c, true);
    if (b == NULL)
        return false;
    b->pieces[b->npieces++] = (piece){false, 0, p, len};
    b->bytes += len;
    if (b->ncalls == 0 || b->calls[b->ncalls - 1] != call) {
        b->calls[b->ncalls++] = call;
        call->writes++;
    }
    return true;
}

static ssize_t send_cb(nghttp2_session *h2, const uint8_t *data, size_t len,
                       int flags, void *user)
{
    grpc_conn *c = user;
    (void)h2;
    (void)flags;
    if (c->queued + (c->b ? c->b->bytes : 0) >= WRITE_HIGH
        || (c->tls != NULL && !grpc_tls_ready(c->tls)))
        return NGHTTP2_ERR_WOULDBLOCK; /* later: on_written, on_read */
    if (!add_copy(c, data, len))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

/* ------------------------------------------------------------ calls */

/* Whether a call's access line is wanted: every call with
 * --access-log=all; failures with =errors, at most
 * --access-log-max-per-s a second (the rest counted, not written), so that
 * a client sending garbage cannot flood the log. Loop thread. */
static bool access_wanted(grpc_transport *t, bool failed)
{
    const tallyd_config *cfg = &t->s->cfg;
    if (cfg->access_mode == TALLYD_ACCESS_ALL)
        return true;
    if (cfg->access_mode == TALLYD_ACCESS_OFF || !failed)
        return false;
    if (cfg->access_log_max_per_s == 0)
        return true;
    uint64_t second = now_ns() / 1000000000u;
    if (second != t->log_second) {
        t->log_second = second;
        t->log_lines = 0;
    }
    if (t->log_lines < cfg->access_log_max_per_s) {
        t->log_lines++;
        return true;
    }
    atomic_fetch_add_explicit(&t->c.access_log_dropped, 1,
                              memory_order_relaxed);
    return false;
}

/* A sampled call's record, for its spans (trace.h). */
static void submit_trace(trace_sink *k, const grpc_call *call, int code,
                         uint64_t done)
{
    trace_record rec;
    memset(&rec, 0, sizeof rec);
    rec.ctx = call->trace;
    if (call->tracestate != NULL && (call->trace.flags & TRACE_SAMPLED)
        && call->trace.continued)
        snprintf(rec.trace_state, sizeof rec.trace_state, "%s",
                 call->tracestate);
    rec.grpc = true;
    snprintf(rec.method, sizeof rec.method, "POST");
    snprintf(rec.route, sizeof rec.route, "%s/%s", call->t->svc->service,
             call->m->name);
    snprintf(rec.path, sizeof rec.path, "/%s", rec.route);
    rec.status = code;
    rec.bytes_in = call->len;
    rec.bytes_out = call->total;
    rec.t0 = call->t0_ns;
    rec.body = call->whole_ns;
    rec.handler = call->handler_ns;
    rec.reply = call->reply_ns;
    rec.done = done;
    rec.parse_ns = call->parse_ns;
    rec.work = call->ran;
    k->submit(k, &rec);
}

static void call_account(grpc_call *call)
{
    if (call->counted)
        return;
    call->counted = true;
    grpc_transport *t = call->t;
    tallyd_server *s = t->s;
    uint64_t now = now_ns(), total = now - call->t0_ns;
    if (atomic_load(&call->gone) && call->status == STATUS_OK)
        call->status = STATUS_CANCELLED;
    int code = status_grpc(call->status);
    metrics_request(&s->metrics, METRIC_GRPC, call->m->label, code,
                    call->status, total, call->total);
    if (call->m->ended != NULL)
        call->m->ended(call, call->status == STATUS_OK, total);
    if (access_wanted(t, call->status != STATUS_OK)) {
        char ts[40], line[560], trace[33];
        log_stamp(ts, sizeof ts);
        trace_id_hex(&call->trace, trace);
        int n = snprintf(
            line, sizeof line,
            "{\"ts\":\"%s\",\"module\":\"grpc\",\"level\":\"info\","
            "\"method\":\"%s\",\"grpc_status\":%d,\"status\":\"%s\","
            "\"bytes_in\":%zu,\"bytes_out\":%zu,\"parse_us\":%" PRIu64
            ",\"queue_us\":%" PRIu64 ",\"compute_us\":%" PRIu64
            ",\"total_us\":%" PRIu64 ",\"trace_id\":\"%s\"}",
            ts, call->m->name, code, status_name(call->status), call->len,
            call->total, call->parse_ns / 1000, call->queue_ns / 1000,
            call->compute_ns / 1000, total / 1000, trace);
        if (n > 0)
            log_access(line, (size_t)n < sizeof line ? (size_t)n
                                                     : sizeof line - 1);
    }
    if (s->traces != NULL && (call->trace.flags & TRACE_SAMPLED))
        submit_trace(s->traces, call, code, now);
    atomic_store(&s->last_done_ns, now);
    atomic_fetch_sub(&s->inflight, 1);
}

static void call_maybe_free(grpc_call *call)
{
    if (call->in_fifo || call->suspended || call->writes > 0 || call->busy)
        return;
    call_account(call);
    if (call->work_free != NULL)
        call->work_free(call->work);
    eng_buffer_free(call->buf);
    if (call->reserved)
        unreserve(call->t, call->reserved);
    free(call->head);
    free(call->tracestate);
    free(call);
}

/* Takes call out of its stream's FIFO. */
static void fifo_remove(gstream *st, grpc_call *call)
{
    grpc_call **pp = &st->head, *prev = NULL;
    while (*pp != NULL && *pp != call) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (*pp == NULL)
        return;
    *pp = call->next;
    if (st->tail == call)
        st->tail = prev;
    call->next = NULL;
    call->in_fifo = false;
    call->st = NULL; /* the stream may close before the call is freed */
}

/* The stream is going (closed, reset, or its connection lost): every call
 * still in it is detached and marked gone. */
static void detach_calls(gstream *st, bool gone)
{
    while (st->head != NULL) {
        grpc_call *call = st->head;
        st->head = call->next;
        call->next = NULL;
        call->in_fifo = false;
        call->st = NULL;
        if (gone && !(call->answered && call->sent == call->total))
            atomic_store(&call->gone, true);
        call_maybe_free(call);
    }
    st->tail = NULL;
}

/* ------------------------------------------------------------ streams */

static void stream_free(gstream *st)
{
    grpc_conn *c = st->conn;
    detach_calls(st, true);
    if (st->prev != NULL)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next != NULL)
        st->next->prev = st->prev;
    eng_buffer_free(st->buf);
    if (st->reserved)
        unreserve(c->t, st->reserved);
    free(st->tracestate);
    free(st);
}

/* grpc-message: percent-encoded outside printable ASCII (and '%'). */
static void percent_encode(const char *in, char *out, size_t outlen)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)in;
         *p != '\0' && n + 4 < outlen; p++) {
        if (*p >= 0x20 && *p <= 0x7e && *p != '%') {
            out[n++] = (char)*p;
        } else {
            out[n++] = '%';
            out[n++] = hex[*p >> 4];
            out[n++] = hex[*p & 15];
        }
    }
    out[n] = '\0';
}

#define NV(n, v)                                                               \
    {                                                                          \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),             \
            NGHTTP2_NV_FLAG_NONE                                               \
    }

/* A failure no call carries (refused before its message was whole):
 * counted and logged here. */
static void count_stream_failure(gstream *st, status_code code)
{
    grpc_transport *t = st->conn->t;
    tallyd_server *s = t->s;
    uint64_t total = now_ns() - st->opened_ns;
    unsigned label = st->m ? st->m->label : t->svc->other_label;
    metrics_request(&s->metrics, METRIC_GRPC, label, status_grpc(code), code,
                    total, 0);
    if (access_wanted(t, true)) {
        char ts[40], path[300], line[650], trace[33];
        log_stamp(ts, sizeof ts);
        log_escape(st->path, path, sizeof path);
        trace_id_hex(&st->trace, trace);
        int n = snprintf(line, sizeof line,
                         "{\"ts\":\"%s\",\"module\":\"grpc\",\"level\":"
                         "\"info\",\"path\":\"%s\",\"grpc_status\":%d,"
                         "\"status\":\"%s\",\"total_us\":%" PRIu64
                         ",\"trace_id\":\"%s\"}",
                         ts, path, status_grpc(code), status_name(code),
                         total / 1000, trace);
        if (n > 0)
            log_access(line, (size_t)n < sizeof line ? (size_t)n
                                                     : sizeof line - 1);
    }
}

static void stream_respond(gstream *st);

/* Ends the stream with a failure: with no message before it, a status
 * alone (Trailers-Only), resetting a stream whose client is still
 * sending; after messages, trailers once the answer being sent is out
 * (answers not begun are dropped, their calls gone). */
static void stream_fail(gstream *st, status_code code, const char *msg)
{
    grpc_conn *c = st->conn;
    if (st->head == NULL && !st->final_set)
        count_stream_failure(st, code);
    st->pre_got = 0;
    if (st->response_started) {
        if (st->final_set)
            return;
        st->final_set = true;
        st->final = code;
        st->rejected = true;
        snprintf(st->final_msg, sizeof st->final_msg, "%s", msg);
        for (grpc_call *k = st->head, *next; k != NULL; k = next) {
            next = k->next;
            if (k->sent == 0) {
                fifo_remove(st, k);
                k->st = NULL;
                if (k->status == STATUS_OK && !k->answered)
                    k->status = code;
                atomic_store(&k->gone, true);
                call_maybe_free(k);
            }
        }
        eng_buffer_free(st->buf);
        st->buf = NULL;
        if (st->reserved) {
            unreserve(c->t, st->reserved);
            st->reserved = 0;
        }
        stream_respond(st);
        return;
    }
    char num[8], enc[1024], tp[TRACE_PARENT_LEN + 1];
    snprintf(num, sizeof num, "%d", status_grpc(code));
    percent_encode(msg, enc, sizeof enc);
    trace_format(&st->trace, tp);
    nghttp2_nv h[] = {NV(":status", "200"),
                      NV("content-type", "application/grpc"),
                      NV("grpc-status", num), NV("grpc-message", enc),
                      NV("traceparent", tp)};
    st->rejected = true;
    st->response_started = true;
    st->final_set = true;
    st->final = code;
    /* a client still sending is reset once this has gone
     * (on_frame_send): nghttp2 sends RST_STREAM ahead of queued HEADERS,
     * and a client that sees the reset first reports INTERNAL */
    nghttp2_submit_response(c->h2, st->id, h, 5, NULL);
    /* the partial message is dropped */
    eng_buffer_free(st->buf);
    st->buf = NULL;
    if (st->reserved) {
        unreserve(c->t, st->reserved);
        st->reserved = 0;
    }
    for (grpc_call *call = st->head; call != NULL; call = call->next)
        if (call->status == STATUS_OK && !call->answered)
            call->status = code;
    detach_calls(st, true);
}

/* Whether the stream has said all it will: its trailers may go. */
static bool stream_finished(const gstream *st)
{
    if (st->head != NULL)
        return false;
    if (st->final_set)
        return true;
    if (!st->m->streaming)
        return st->got_message;
    return st->remote_closed;
}

static ssize_t read_cb(nghttp2_session *h2, int32_t id, uint8_t *buf,
                       size_t length, uint32_t *flags,
                       nghttp2_data_source *source, void *user)
{
    gstream *st = source->ptr;
    (void)buf;
    (void)user;
    grpc_call *call = st->head;
    if (call != NULL && call->answered) {
        size_t left = call->total - call->sent;
        *flags |= NGHTTP2_DATA_FLAG_NO_COPY;
        return (ssize_t)(left < length ? left : length);
    }
    if (stream_finished(st)) {
        status_code code = st->final_set ? st->final : STATUS_OK;
        char num[8], enc[1024];
        snprintf(num, sizeof num, "%d", status_grpc(code));
        *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
        if (code == STATUS_OK || st->final_msg[0] == '\0') {
            nghttp2_nv tr[] = {NV("grpc-status", num)};
            nghttp2_submit_trailer(h2, id, tr, 1);
        } else {
            percent_encode(st->final_msg, enc, sizeof enc);
            nghttp2_nv tr[] = {NV("grpc-status", num),
                               NV("grpc-message", enc)};
            nghttp2_submit_trailer(h2, id, tr, 2);
        }
        return 0;
    }
    st->deferred = true;
    return NGHTTP2_ERR_DEFERRED;
}

static int send_data_cb(nghttp2_session *h2, nghttp2_frame *frame,
                        const uint8_t *framehd, size_t length,
                        nghttp2_data_source *source, void *user)
{
    grpc_conn *c = user;
    gstream *st = source->ptr;
    grpc_call *call = st->head;
    (void)h2;
    (void)frame;
    if (c->queued + (c->b ? c->b->bytes : 0) >= WRITE_HIGH
        || (c->tls != NULL && !grpc_tls_ready(c->tls)))
        return NGHTTP2_ERR_WOULDBLOCK; /* later: on_written, on_read */
    if (!add_copy(c, framehd, 9))
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    while (length > 0 && call != NULL) {
        /* the answer: prefix, head, tail */
        size_t at = call->sent, n;
        const uint8_t *p;
        if (at < 5) {
            p = call->prefix + at;
            n = 5 - at;
        } else if (at < 5 + call->head_len) {
            p = call->head + (at - 5);
            n = 5 + call->head_len - at;
        } else {
            p = call->tail + (at - 5 - call->head_len);
            n = call->total - at;
        }
        if (n > length)
            n = length;
        if (!add_borrowed(c, p, n, call))
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        call->sent += n;
        length -= n;
        if (call->sent == call->total) {
            fifo_remove(st, call);
            call_maybe_free(call);
            break;
        }
    }
    return 0;
}

static ssize_t read_length_cb(nghttp2_session *h2, uint8_t frame_type,
                              int32_t id, int32_t session_window,
                              int32_t stream_window, uint32_t max_frame,
                              void *user)
{
    (void)h2;
    (void)frame_type;
    (void)id;
    (void)user;
    ssize_t n = (ssize_t)max_frame;
    if (session_window < n)
        n = session_window;
    if (stream_window < n)
        n = stream_window;
    return n > 0 ? n : 1;
}

/* The answer of the call at the head may go: starts the response, or
 * wakes its deferred data. */
static void stream_respond(gstream *st)
{
    grpc_conn *c = st->conn;
    if (c->closing)
        return;
    if (!st->response_started) {
        st->response_started = true;
        char tp[TRACE_PARENT_LEN + 1];
        trace_format(&st->trace, tp);
        nghttp2_nv h[] = {NV(":status", "200"),
                          NV("content-type", "application/grpc"),
                          NV("grpc-accept-encoding", "identity,deflate,gzip"),
                          NV("traceparent", tp)};
        nghttp2_data_provider dp = {.source.ptr = st, .read_callback = read_cb};
        nghttp2_submit_response(c->h2, st->id, h, 4, &dp);
    } else if (st->deferred) {
        st->deferred = false;
        nghttp2_session_resume_data(c->h2, st->id);
    }
}

/* --------------------------------------------------- receiving a call */

static const grpc_method *find_method(grpc_transport *t, const char *path)
{
    size_t sl = strlen(t->svc->service);
    if (path[0] != '/' || strncmp(path + 1, t->svc->service, sl) != 0
        || path[1 + sl] != '/')
        return NULL;
    for (unsigned i = 0; i < t->svc->n; i++)
        if (strcmp(path + 2 + sl, t->svc->methods[i].name) == 0)
            return &t->svc->methods[i];
    return NULL;
}

/* grpc-timeout: 1 to 8 digits and a unit (H M S m u n). */
static bool parse_timeout(const char *v, size_t n, int64_t *ms)
{
    if (n < 2 || n > 9)
        return false;
    uint64_t x = 0;
    for (size_t i = 0; i + 1 < n; i++) {
        if (v[i] < '0' || v[i] > '9')
            return false;
        x = x * 10 + (uint64_t)(v[i] - '0');
    }
    uint64_t ns;
    switch (v[n - 1]) {
    case 'H': ns = x * 3600000000000ull; break;
    case 'M': ns = x * 60000000000ull; break;
    case 'S': ns = x * 1000000000ull; break;
    case 'm': ns = x * 1000000ull; break;
    case 'u': ns = x * 1000ull; break;
    case 'n': ns = x; break;
    default: return false;
    }
    /* at most 99999999 hours fits in 64 bits of ns? no: cap instead */
    if (v[n - 1] == 'H' && x > 2562047)
        ns = UINT64_MAX;
    *ms = ns == UINT64_MAX || ns > ((uint64_t)1 << 53) ? -1
                                                       : (int64_t)((ns + 999999) / 1000000);
    if (*ms == 0)
        *ms = 1; /* "0n": already due; 0 would mean no deadline */
    return true;
}

static void stream_headers_done(gstream *st)
{
    grpc_transport *t = st->conn->t;
    char msg[400];
    if (!st->post) {
        stream_fail(st, STATUS_METHOD, "gRPC calls are POST requests");
        return;
    }
    st->m = find_method(t, st->path);
    if (st->m == NULL || st->m->handler == NULL) {
        snprintf(msg, sizeof msg,
                 "%s: this server does not implement the method %.200s",
                 st->m ? "UNIMPLEMENTED" : "unknown method", st->path);
        stream_fail(st, STATUS_METHOD, msg);
        return;
    }
    if (!st->grpc_ct) {
        stream_fail(st, STATUS_MEDIA_TYPE,
                          "content-type must be application/grpc");
        return;
    }
    if (t->auth != NULL && !st->m->open) {
        auth_result a = auth_check(t->auth, st->has_auth ? st->auth : NULL);
        if (a != AUTH_OK) {
            stream_fail(st, STATUS_UNAUTHORIZED,
                              a == AUTH_MISSING
                                  ? "a bearer token is required: send "
                                    "\"authorization: Bearer <token>\" "
                                    "metadata"
                                  : "the bearer token is not valid");
            return;
        }
    }
    if (st->bad_timeout) {
        stream_fail(st, STATUS_INVALID,
                          "grpc-timeout must be 1 to 8 digits and a unit "
                          "(H, M, S, m, u, n)");
        return;
    }
    if (st->bad_encoding) {
        stream_fail(st, STATUS_ENCODING,
                          "grpc-encoding must be identity, gzip or deflate");
        return;
    }
    st->accepted = true;
}

static void stream_call(gstream *st, grpc_call *call);

/* A whole message has arrived in st->buf: it becomes a call. */
static void stream_message(gstream *st)
{
    grpc_conn *c = st->conn;
    grpc_transport *t = c->t;
    tallyd_server *s = t->s;
    if (!st->m->streaming && st->got_message) {
        stream_fail(st, STATUS_INVALID,
                          "a unary call sent more than one message");
        return;
    }
    st->got_message = true;
    grpc_call *call = calloc(1, sizeof *call);
    if (call == NULL) {
        stream_fail(st, STATUS_NOMEM, "out of memory");
        return;
    }
    call->t = t;
    call->st = st;
    call->trace = st->trace;
    call->tracestate = st->tracestate;
    st->tracestate = NULL;
    call->m = st->m;
    call->buf = st->buf;
    call->msg = st->buf + st->lead;
    call->len = st->want;
    call->reserved = st->reserved;
    call->timeout_ms = st->timeout_ms;
    call->t0_ns = st->msg_started_ns;
    call->whole_ns = now_ns();
    st->buf = NULL;
    st->reserved = 0;
    st->pre_got = 0;
    atomic_fetch_add(&s->inflight, 1);
    atomic_fetch_add_explicit(&t->c.calls, 1, memory_order_relaxed);
    call->in_fifo = true;
    if (st->tail != NULL)
        st->tail->next = call;
    else
        st->head = call;
    st->tail = call;
    call->busy = true;
    stream_call(st, call);
    call->busy = false;
    if (!call->answered && !call->suspended && call->st != NULL)
        grpc_call_fail(call, STATUS_LAUNCH, "the handler gave no answer");
    call_maybe_free(call);
}

/* Decodes the call's message when it came compressed, and runs the
 * method's handler. */
static void stream_call(gstream *st, grpc_call *call)
{
    grpc_transport *t = st->conn->t;
    tallyd_server *s = t->s;
    if (st->compressed) {
        uint8_t *out;
        size_t outlen;
        char msg[256];
        status_code e =
            encoding_decode(st->encoding, call->msg, call->len,
                            s->cfg.max_body_bytes, &out, &outlen, msg,
                            sizeof msg);
        if (e != STATUS_OK) {
            grpc_call_fail(call, e, "%s", msg);
            return;
        }
        size_t more = outlen;
        uint8_t *aligned = NULL;
        if (!reserve(t, more)) {
            free(out);
            grpc_call_fail(call, STATUS_NOMEM,
                           "the server holds too many messages now "
                           "(--max-buffered-bytes); retry after a moment");
            return;
        }
        /* decoded into malloc'd memory: into an aligned tensor buffer,
         * as REST's body is (one copy) */
        aligned = eng_buffer_alloc(outlen);
        if (aligned == NULL) {
            free(out);
            unreserve(t, more);
            grpc_call_fail(call, STATUS_NOMEM, "out of memory");
            return;
        }
        memcpy(aligned, out, outlen);
        free(out);
        eng_buffer_free(call->buf);
        unreserve(t, call->reserved);
        call->reserved = more;
        call->buf = call->msg = aligned;
        call->len = outlen;
    }
    atomic_fetch_add_explicit(&s->metrics.bytes_in, call->len,
                              memory_order_relaxed);
    call->handler_ns = now_ns();
    st->m->handler(call);
}

/* Message bytes for st: the 5-byte prefix, then the message, into a
 * buffer sized by what has come. */
static void stream_data(gstream *st, const uint8_t *data, size_t len)
{
    grpc_conn *c = st->conn;
    grpc_transport *t = c->t;
    size_t max = t->s->cfg.max_body_bytes;
    while (len > 0 && !st->rejected) {
        if (st->pre_got < 5) {
            if (st->pre_got == 0 && st->buf == NULL)
                st->msg_started_ns = now_ns();
            size_t n = 5 - st->pre_got < len ? 5 - st->pre_got : len;
            memcpy(st->pre + st->pre_got, data, n);
            st->pre_got += n;
            data += n;
            len -= n;
            if (st->pre_got < 5)
                return;
            st->compressed = st->pre[0] & 1;
            st->want = (size_t)st->pre[1] << 24 | (size_t)st->pre[2] << 16
                       | (size_t)st->pre[3] << 8 | st->pre[4];
            if (st->pre[0] > 1) {
                stream_fail(st, STATUS_INVALID,
                                  "bad gRPC message prefix");
                return;
            }
            if (st->compressed && st->encoding == 0) {
                stream_fail(st, STATUS_ENCODING,
                                  "a compressed message without a "
                                  "grpc-encoding");
                return;
            }
            if (st->want > max) {
                char msg[200];
                snprintf(msg, sizeof msg,
                         "the message is %zu bytes, more than the %zu this "
                         "server accepts (--max-body-bytes)",
                         st->want, max);
                stream_fail(st, STATUS_TOO_LARGE, msg);
                return;
            }
            st->cap = st->want < FIRST_BUFFER ? st->want : FIRST_BUFFER;
            st->lead = 0;
            st->got = 0;
            if (!reserve(t, st->cap + 128)) {
                stream_fail(st, STATUS_NOMEM,
                                  "the server holds too many messages now "
                                  "(--max-buffered-bytes); retry after a "
                                  "moment");
                return;
            }
            st->reserved = st->cap + 128;
            st->buf = eng_buffer_alloc(st->cap);
            if (st->buf == NULL) {
                stream_fail(st, STATUS_NOMEM, "out of memory");
                return;
            }
        }
        if (st->got == st->cap && st->got < st->want) {
            /* the first buffer is full: room for the whole message,
             * placed so that its bulk lands on a 128-byte boundary */
            size_t off = st->m->bulk_offset
                             ? st->m->bulk_offset(st->buf + st->lead, st->got)
                             : SIZE_MAX;
            size_t lead = off == SIZE_MAX ? 0 : (128 - off % 128) % 128;
            if (!reserve(t, st->want - st->cap)) {
                stream_fail(st, STATUS_NOMEM,
                                  "the server holds too many messages now "
                                  "(--max-buffered-bytes); retry after a "
                                  "moment");
                return;
            }
            st->reserved += st->want - st->cap;
            uint8_t *nb = eng_buffer_alloc(st->want + lead);
            if (nb == NULL) {
                stream_fail(st, STATUS_NOMEM, "out of memory");
                return;
            }
            memcpy(nb + lead, st->buf + st->lead, st->got);
            eng_buffer_free(st->buf);
            st->buf = nb;
            st->lead = lead;
            st->cap = st->want;
        }
        size_t n = st->cap - st->got < len ? st->cap - st->got : len;
        memcpy(st->buf + st->lead + st->got, data, n);
        st->got += n;
        data += n;
        len -= n;
        if (st->got == st->want)
            stream_message(st);
    }
}

/* ------------------------------------------------ nghttp2's callbacks */

static int on_begin_headers(nghttp2_session *h2, const nghttp2_frame *frame,
                            void *user)
{
    grpc_conn *c = user;
    if (frame->hd.type != NGHTTP2_HEADERS
        || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0;
    gstream *st = calloc(1, sizeof *st);
    if (st == NULL)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    st->conn = c;
    st->id = frame->hd.stream_id;
    st->timeout_ms = -1;
    st->opened_ns = now_ns();
    trace_begin(&st->trace, NULL, 0, &c->t->s->sampler); /* until a traceparent comes */
    st->next = c->streams;
    if (c->streams != NULL)
        c->streams->prev = st;
    c->streams = st;
    nghttp2_session_set_stream_user_data(h2, st->id, st);
    return 0;
}

static bool header_is(const uint8_t *name, size_t n, const char *want)
{
    return n == strlen(want) && memcmp(name, want, n) == 0;
}

static int on_header(nghttp2_session *h2, const nghttp2_frame *frame,
                     const uint8_t *name, size_t namelen, const uint8_t *value,
                     size_t valuelen, uint8_t flags, void *user)
{
    (void)flags;
    (void)user;
    gstream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (st == NULL || frame->headers.cat != NGHTTP2_HCAT_REQUEST)
        return 0; /* trailers from the client carry nothing tally reads */
    st->header_bytes += namelen + valuelen + 32;
    if (st->header_bytes > MAX_HEADER_LIST)
        return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE; /* resets the stream */
    const char *v = (const char *)value;
    if (header_is(name, namelen, ":method")) {
        st->post = valuelen == 4 && memcmp(v, "POST", 4) == 0;
    } else if (header_is(name, namelen, ":path")) {
        size_t n = valuelen < sizeof st->path - 1 ? valuelen
                                                  : sizeof st->path - 1;
        memcpy(st->path, v, n);
        st->path[n] = '\0';
    } else if (header_is(name, namelen, "content-type")) {
        st->grpc_ct = valuelen >= 16 && memcmp(v, "application/grpc", 16) == 0
                      && (valuelen == 16 || v[16] == '+' || v[16] == ';');
    } else if (header_is(name, namelen, "grpc-timeout")) {
        st->bad_timeout = !parse_timeout(v, valuelen, &st->timeout_ms);
    } else if (header_is(name, namelen, "grpc-encoding")) {
        char e[16];
        if (valuelen >= sizeof e) {
            st->bad_encoding = true;
        } else {
            memcpy(e, v, valuelen);
            e[valuelen] = '\0';
            int coding = strcmp(e, "identity") == 0 ? 0 : encoding_parse(e);
            st->bad_encoding = coding < 0;
            st->encoding = coding < 0 ? 0 : coding;
        }
    } else if (header_is(name, namelen, "traceparent")) {
        trace_begin(&st->trace, (const char *)v, valuelen, &st->conn->t->s->sampler);
    } else if (header_is(name, namelen, "tracestate")) {
        free(st->tracestate);
        st->tracestate = malloc(TRACE_STATE_MAX + 1);
        if (st->tracestate != NULL)
            trace_state_copy((const char *)v, valuelen, st->tracestate);
    } else if (header_is(name, namelen, "authorization")) {
        if (valuelen < sizeof st->auth) {
            memcpy(st->auth, v, valuelen);
            st->auth[valuelen] = '\0';
            st->has_auth = true;
        }
    }
    return 0;
}

static int on_frame_recv(nghttp2_session *h2, const nghttp2_frame *frame,
                         void *user)
{
    grpc_conn *c = user;
    if (frame->hd.type == NGHTTP2_RST_STREAM)
        atomic_fetch_add_explicit(&c->t->c.resets_received, 1,
                                  memory_order_relaxed);
    if (frame->hd.stream_id == 0)
        return 0;
    gstream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (st == NULL)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS
        && frame->headers.cat == NGHTTP2_HCAT_REQUEST
        && (frame->hd.flags & NGHTTP2_FLAG_END_HEADERS))
        stream_headers_done(st);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA)
        && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        st->remote_closed = true;
        if (st->rejected)
            return 0;
        if (st->pre_got != 0) {
            stream_fail(st, STATUS_INVALID,
                              "the stream ended inside a message");
        } else if (!st->m->streaming && !st->got_message) {
            stream_fail(st, STATUS_INVALID,
                              "the call ended without a request message");
        } else if (stream_finished(st)) {
            stream_respond(st); /* the trailers may go */
        }
    }
    return 0;
}

/* After a response that ended the stream while the client still sends
 * (a refusal), RST_STREAM(NO_ERROR) tells it to stop, as HTTP/2 allows. */
static int on_frame_send(nghttp2_session *h2, const nghttp2_frame *frame,
                         void *user)
{
    grpc_conn *c = user;
    /* a GOAWAY with an error: the connection ends for what the peer did
     * (a flood, rapid resets, a protocol error) */
    if (frame->hd.type == NGHTTP2_GOAWAY
        && frame->goaway.error_code != NGHTTP2_NO_ERROR)
        atomic_fetch_add_explicit(&c->t->c.abuse_closed, 1,
                                  memory_order_relaxed);
    if (frame->hd.type != NGHTTP2_HEADERS
        || !(frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
        return 0;
    gstream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (st != NULL && st->rejected && !st->remote_closed)
        nghttp2_submit_rst_stream(h2, NGHTTP2_FLAG_NONE, st->id,
                                  NGHTTP2_NO_ERROR);
    return 0;
}

static int on_data_chunk(nghttp2_session *h2, uint8_t flags, int32_t id,
                         const uint8_t *data, size_t len, void *user)
{
    (void)flags;
    (void)user;
    gstream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (st == NULL || st->rejected || !st->accepted)
        return 0;
    stream_data(st, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error,
                           void *user)
{
    (void)user;
    (void)error;
    gstream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (st != NULL)
        stream_free(st);
    return 0;
}

/* ------------------------------------------------------- connections */

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

static void conn_free(uv_handle_t *h)
{
    grpc_conn *c = h->data;
    grpc_transport *t = c->t;
    while (c->streams != NULL)
        stream_free(c->streams);
    if (c->b != NULL) { /* built, never written */
        for (unsigned i = 0; i < c->b->ncalls; i++) {
            c->b->calls[i]->writes--;
            call_maybe_free(c->b->calls[i]);
        }
        free(c->b->copy);
        free(c->b);
    }
    nghttp2_session_del(c->h2);
    grpc_tls_session_free(c->tls);
    free(c->plain);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        t->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    free(c->rbuf);
    free(c);
    atomic_fetch_sub(&t->open_connections, 1);
}

static void conn_close(grpc_conn *c)
{
    if (c->closing)
        return;
    c->closing = true;
    /* the calls go now: their jobs see them gone */
    for (gstream *st = c->streams; st != NULL; st = st->next)
        detach_calls(st, true);
    uv_read_stop((uv_stream_t *)&c->tcp);
    uv_close((uv_handle_t *)&c->tcp, conn_free);
}

static void conn_pump(grpc_conn *c)
{
    /* A send stops at WRITE_HIGH bytes built or queued; when the socket
     * took them all at once, nothing will call back: send again. */
    for (int round = 0; round < 64; round++) {
        if (c->closing)
            return;
        if (nghttp2_session_send(c->h2) != 0) {
            conn_close(c);
            return;
        }
        batch_flush(c);
        if (c->closing || c->writes > 0 || !nghttp2_session_want_write(c->h2))
            break;
    }
    if (c->closing)
        return;
    if (!nghttp2_session_want_read(c->h2) && !nghttp2_session_want_write(c->h2)
        && c->writes == 0)
        conn_close(c);
}

static void on_alloc(uv_handle_t *h, size_t hint, uv_buf_t *buf)
{
    grpc_conn *c = h->data;
    (void)hint;
    *buf = uv_buf_init((char *)c->rbuf, READ_BUFFER);
}

/* Plaintext for the session; false when the connection is to go. */
static bool session_input(grpc_conn *c, const uint8_t *data, size_t n)
{
    ssize_t rv = nghttp2_session_mem_recv(c->h2, data, n);
    if (rv >= 0)
        return true;
    if (rv != NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
        nghttp2_session_terminate_session(c->h2,
                                          rv == NGHTTP2_ERR_FLOODED
                                              ? NGHTTP2_ENHANCE_YOUR_CALM
                                              : NGHTTP2_PROTOCOL_ERROR);
        nghttp2_session_send(c->h2);
        batch_flush(c);
    }
    return false;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf)
{
    grpc_conn *c = s->data;
    if (n < 0) {
        conn_close(c);
        return;
    }
    if (n == 0)
        return;
    c->last_active_ns = now_ns();
    atomic_fetch_add_explicit(&c->t->c.bytes_in, (unsigned long long)n,
                              memory_order_relaxed);
    if (c->tls == NULL) {
        if (!session_input(c, (const uint8_t *)buf->base, (size_t)n)) {
            conn_close(c);
            return;
        }
        conn_pump(c);
        return;
    }
    if (!grpc_tls_input(c->tls, (const uint8_t *)buf->base, (size_t)n)) {
        conn_close(c);
        return;
    }
    for (;;) {
        long got = grpc_tls_read(c->tls, c->plain, READ_BUFFER);
        if (got == 0)
            break;
        if (got < 0 || !session_input(c, c->plain, (size_t)got)) {
            tls_flush(c); /* an alert, say */
            conn_close(c);
            return;
        }
        if (c->closing)
            return;
    }
    tls_flush(c); /* the handshake's own records */
    conn_pump(c);
}

/* A new connection: accepted from the listener (server != NULL), or an
 * open socket handed over (fd). */
static void conn_open(grpc_transport *t, uv_stream_t *server, int fd)
{
    grpc_conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        if (server == NULL)
            close(fd);
        return;
    }
    c->t = t;
    c->rbuf = malloc(READ_BUFFER);
    uv_tcp_init(t->loop, &c->tcp);
    c->tcp.data = c;
    atomic_fetch_add(&t->open_connections, 1);
    c->next = t->conns;
    if (t->conns != NULL)
        t->conns->prev = c;
    t->conns = c;
    if (t->tls != NULL) {
        c->tls = grpc_tls_accept(t->tls);
        c->plain = malloc(READ_BUFFER);
    }
    int rc = server != NULL ? uv_accept(server, (uv_stream_t *)&c->tcp)
                            : uv_tcp_open(&c->tcp, fd);
    if (rc != 0 || c->rbuf == NULL
        || (t->tls != NULL && (c->tls == NULL || c->plain == NULL))
        || t->quiescing
        || atomic_load(&t->open_connections)
               > (long long)t->s->cfg.max_connections
        || nghttp2_session_server_new2(&c->h2, callbacks, c, options) != 0) {
        atomic_fetch_add_explicit(&t->c.refused, 1, memory_order_relaxed);
        c->closing = true;
        uv_close((uv_handle_t *)&c->tcp, conn_free);
        return;
    }
    atomic_fetch_add_explicit(&t->c.opened, 1, memory_order_relaxed);
    c->last_active_ns = now_ns();
    uv_tcp_nodelay(&c->tcp, 1); /* fails harmlessly on a socket pair */
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, t->s->cfg.grpc_max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST},
    };
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 3);
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0,
                                          CONN_WINDOW);
    uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    conn_pump(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status >= 0)
        conn_open(server->data, server, -1);
}

void grpc_adopt(grpc_transport *t, int fd)
{
    conn_open(t, NULL, fd);
}

/* ------------------------------------------------- resumes, lifecycle */

static void on_wake(uv_async_t *a)
{
    grpc_transport *t = a->data;
    uv_mutex_lock(&t->mu);
    grpc_call *list = t->resumed;
    t->resumed = NULL;
    uv_mutex_unlock(&t->mu);
    /* oldest first */
    grpc_call *rev = NULL;
    while (list != NULL) {
        grpc_call *n = list->next_resume;
        list->next_resume = rev;
        rev = list;
        list = n;
    }
    while (rev != NULL) {
        grpc_call *call = rev;
        rev = call->next_resume;
        call->suspended = false;
        grpc_conn *c = call->st ? call->st->conn : NULL;
        call->busy = true;
        call->on_resume(call);
        call->busy = false;
        if (!call->answered && !call->suspended && call->st != NULL)
            grpc_call_fail(call, STATUS_LAUNCH, "the handler gave no answer");
        call_maybe_free(call);
        if (c != NULL)
            conn_pump(c);
    }
}

static bool make_callbacks(void)
{
    if (callbacks != NULL)
        return true;
    if (nghttp2_session_callbacks_new(&callbacks) != 0
        || nghttp2_option_new(&options) != 0)
        return false;
    nghttp2_session_callbacks_set_send_callback(callbacks, send_cb);
    nghttp2_session_callbacks_set_send_data_callback(callbacks, send_data_cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks,
                                                            on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, on_header);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks,
                                                         on_frame_recv);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks,
                                                              on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_send_callback(callbacks,
                                                         on_frame_send);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks,
                                                           on_stream_close);
    nghttp2_session_callbacks_set_data_source_read_length_callback(
        callbacks, read_length_cb);
    /* floods: acks the peer leaves unread, SETTINGS entries, resets */
    nghttp2_option_set_max_outbound_ack(options, 1000);
    nghttp2_option_set_max_settings(options, 32);
    nghttp2_option_set_stream_reset_rate_limit(options, 1000, 100);
    nghttp2_option_set_max_continuations(options, 8);
    return true;
}

bool grpc_start(grpc_transport *t, tallyd_server *s, uv_loop_t *loop,
                const grpc_service *svc, auth_tokens *auth, char *msg,
                size_t msglen)
{
    memset(t, 0, sizeof *t);
    t->s = s;
    t->svc = svc;
    t->auth = auth;
    t->loop = loop;
    if (!make_callbacks()) {
        snprintf(msg, msglen, "gRPC: out of memory");
        return false;
    }
    char host[256];
    unsigned port;
    if (!tallyd_config_split_listen(s->cfg.grpc_listen, host, sizeof host,
                                    &port)) {
        snprintf(msg, msglen, "grpc-listen \"%s\" is not HOST:PORT",
                 s->cfg.grpc_listen);
        return false;
    }
    struct sockaddr_storage addr;
    if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)&addr) != 0
        && uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)&addr) != 0) {
        snprintf(msg, msglen, "grpc-listen: \"%s\" is not an IP address",
                 host);
        return false;
    }
    if (s->cfg.tls_cert[0] != '\0' || s->cfg.tls_key[0] != '\0') {
        t->tls = grpc_tls_new(s->cfg.tls_cert, s->cfg.tls_key, msg, msglen);
        if (t->tls == NULL)
            return false;
    }
    uv_tcp_init(loop, &t->listener);
    t->listener.data = t;
    int rc = uv_tcp_bind(&t->listener, (const struct sockaddr *)&addr, 0);
    if (rc == 0)
        rc = uv_listen((uv_stream_t *)&t->listener, 1024, on_connection);
    if (rc != 0) {
        snprintf(msg, msglen, "cannot listen for gRPC on %s: %s",
                 s->cfg.grpc_listen, uv_strerror(rc));
        uv_close((uv_handle_t *)&t->listener, NULL);
        grpc_tls_free(t->tls);
        t->tls = NULL;
        return false;
    }
    struct sockaddr_storage bound;
    int blen = sizeof bound;
    uv_tcp_getsockname(&t->listener, (struct sockaddr *)&bound, &blen);
    t->port = ntohs(bound.ss_family == AF_INET6
                        ? ((struct sockaddr_in6 *)&bound)->sin6_port
                        : ((struct sockaddr_in *)&bound)->sin_port);
    uv_mutex_init(&t->mu);
    uv_async_init(loop, &t->wake, on_wake);
    t->wake.data = t;
    t->listening = t->started = true;
    return true;
}

void grpc_quiesce(grpc_transport *t)
{
    if (!t->started || t->quiescing)
        return;
    t->quiescing = true;
    if (t->listening) {
        uv_close((uv_handle_t *)&t->listener, NULL);
        t->listening = false;
    }
    /* first a notice (streams the client opens meanwhile still count),
     * then, at the next sweep, the GOAWAY that names the last one */
    for (grpc_conn *c = t->conns; c != NULL; c = c->next) {
        if (c->closing)
            continue;
        nghttp2_submit_shutdown_notice(c->h2);
        c->notice_sent = true;
        conn_pump(c);
    }
}

void grpc_sweep(grpc_transport *t)
{
    if (!t->started)
        return;
    tallyd_server *s = t->s;
    uint64_t now = now_ns();
    uint64_t idle = (uint64_t)s->cfg.idle_timeout_s * 1000000000u;
    uint64_t req = (uint64_t)s->cfg.request_timeout_s * 1000000000u;
    for (grpc_conn *c = t->conns, *next; c != NULL; c = next) {
        next = c->next;
        if (c->closing)
            continue;
        if (t->quiescing && !c->goaway_sent) {
            nghttp2_submit_goaway(
                c->h2, NGHTTP2_FLAG_NONE,
                nghttp2_session_get_last_proc_stream_id(c->h2),
                NGHTTP2_NO_ERROR, NULL, 0);
            c->goaway_sent = true;
            atomic_fetch_add_explicit(&t->c.goaway_sent, 1,
                                      memory_order_relaxed);
        }
        for (gstream *st = c->streams; st != NULL; st = st->next) {
            if (req == 0 || st->rejected)
                continue;
            bool partial = st->pre_got != 0;
            bool waiting = !st->m || (!st->m->streaming && !st->got_message);
            uint64_t since = partial ? st->msg_started_ns : st->opened_ns;
            if ((partial || waiting) && now - since > req)
                stream_fail(
                    st, STATUS_REQUEST_TIMEOUT,
                    "the request message did not arrive within "
                    "--request-timeout");
        }
        if (c->streams == NULL && idle != 0 && now - c->last_active_ns > idle
            && c->writes == 0) {
            nghttp2_submit_goaway(
                c->h2, NGHTTP2_FLAG_NONE,
                nghttp2_session_get_last_proc_stream_id(c->h2),
                NGHTTP2_NO_ERROR, NULL, 0);
            c->goaway_sent = true;
        }
        conn_pump(c);
    }
}

void grpc_stop(grpc_transport *t)
{
    if (!t->started)
        return;
    if (t->listening) {
        uv_close((uv_handle_t *)&t->listener, NULL);
        t->listening = false;
    }
    for (grpc_conn *c = t->conns; c != NULL; c = c->next)
        conn_close(c);
    uv_close((uv_handle_t *)&t->wake, NULL);
    t->started = false;
    /* the sessions go with their connections' handles, before the loop
     * closes; the context is freed by then (OpenSSL counts its users) */
    grpc_tls_free(t->tls);
    t->tls = NULL;
}

long long grpc_open_connections(grpc_transport *t)
{
    return atomic_load(&t->open_connections);
}

void grpc_render_metrics(grpc_transport *t, textbuf *o)
{
    grpc_counters *k = &t->c;
#define LOAD(x) ((unsigned long long)atomic_load_explicit(&(x), memory_order_relaxed))
    textbuf_put(o,
                "# HELP tally_grpc_connections_total gRPC connections "
                "accepted.\n# TYPE tally_grpc_connections_total counter\n"
                "tally_grpc_connections_total %llu\n"
                "# HELP tally_grpc_open_connections gRPC connections open "
                "now.\n# TYPE tally_grpc_open_connections gauge\n"
                "tally_grpc_open_connections %lld\n"
                "# HELP tally_grpc_connections_refused_total gRPC connections "
                "closed at once (--max-connections, draining).\n"
                "# TYPE tally_grpc_connections_refused_total counter\n"
                "tally_grpc_connections_refused_total %llu\n"
                "# HELP tally_grpc_calls_total gRPC request messages "
                "received whole.\n# TYPE tally_grpc_calls_total counter\n"
                "tally_grpc_calls_total %llu\n"
                "# HELP tally_grpc_resets_received_total RST_STREAM frames "
                "clients sent.\n# TYPE tally_grpc_resets_received_total "
                "counter\ntally_grpc_resets_received_total %llu\n"
                "# HELP tally_grpc_abuse_closed_total gRPC connections "
                "ended for floods or protocol errors.\n"
                "# TYPE tally_grpc_abuse_closed_total counter\n"
                "tally_grpc_abuse_closed_total %llu\n"
                "# HELP tally_grpc_access_log_dropped_total gRPC access "
                "lines over --access-log-max-per-s, not written.\n"
                "# TYPE tally_grpc_access_log_dropped_total counter\n"
                "tally_grpc_access_log_dropped_total %llu\n"
                "# HELP tally_grpc_received_bytes_total Bytes read from gRPC "
                "connections.\n# TYPE tally_grpc_received_bytes_total "
                "counter\ntally_grpc_received_bytes_total %llu\n"
                "# HELP tally_grpc_sent_bytes_total Bytes written to gRPC "
                "connections.\n# TYPE tally_grpc_sent_bytes_total counter\n"
                "tally_grpc_sent_bytes_total %llu\n",
                LOAD(k->opened), grpc_open_connections(t), LOAD(k->refused),
                LOAD(k->calls), LOAD(k->resets_received),
                LOAD(k->abuse_closed), LOAD(k->access_log_dropped),
                LOAD(k->bytes_in), LOAD(k->bytes_out));
#undef LOAD
}

/* ------------------------------------------------------------ call API */

uint8_t *grpc_call_message(grpc_call *c, size_t *len)
{
    *len = c->len;
    return c->msg;
}

int64_t grpc_call_timeout_ms(const grpc_call *c)
{
    return c->timeout_ms;
}

const char *grpc_call_authorization(const grpc_call *c)
{
    return c->st != NULL && c->st->has_auth ? c->st->auth : NULL;
}

const grpc_method *grpc_call_method(const grpc_call *c)
{
    return c->m;
}

void grpc_call_set_work(grpc_call *c, void *work, void (*free_fn)(void *))
{
    c->work = work;
    c->work_free = free_fn;
}

void *grpc_call_work(grpc_call *c)
{
    return c->work;
}

void grpc_call_reply(grpc_call *c, void *head, size_t head_len,
                     const void *tail, size_t tail_len)
{
    if (c->answered) {
        free(head);
        return;
    }
    c->reply_ns = now_ns();
    size_t len = head_len + tail_len;
    if (len > UINT32_MAX) {
        free(head);
        grpc_call_fail(c, STATUS_NOMEM, "the answer does not fit");
        return;
    }
    c->answered = true;
    free(c->head);
    c->head = head;
    c->head_len = head_len;
    c->tail = tail;
    c->tail_len = tail_len;
    c->prefix[0] = 0;
    c->prefix[1] = (uint8_t)(len >> 24);
    c->prefix[2] = (uint8_t)(len >> 16);
    c->prefix[3] = (uint8_t)(len >> 8);
    c->prefix[4] = (uint8_t)len;
    c->total = 5 + len;
    if (c->st != NULL && c->st->head == c)
        stream_respond(c->st);
}

void grpc_call_fail(grpc_call *c, status_code st, const char *fmt, ...)
{
    if (c->answered)
        return;
    c->answered = true;
    c->status = st;
    gstream *s = c->st;
    if (s == NULL)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    stream_fail(s, st, msg);
}

void grpc_call_suspend(grpc_call *c, grpc_handler on_resume)
{
    c->suspended = true;
    c->on_resume = on_resume;
}

void grpc_call_resume(grpc_call *c)
{
    grpc_transport *t = c->t;
    uv_mutex_lock(&t->mu);
    c->next_resume = t->resumed;
    t->resumed = c;
    uv_mutex_unlock(&t->mu);
    uv_async_send(&t->wake);
}

bool grpc_call_gone(const grpc_call *c)
{
    return atomic_load_explicit(&c->gone, memory_order_relaxed);
}

void grpc_call_unsuspend(grpc_call *c)
{
    c->suspended = false;
}

tallyd_server *grpc_call_server(const grpc_call *c)
{
    return c->t->s;
}

const trace_ctx *grpc_call_trace(const grpc_call *c)
{
    return &c->trace;
}

void grpc_call_ran(grpc_call *c, const trace_work *w)
{
    c->ran = *w;
}

void grpc_call_times(grpc_call *c, uint64_t parse_ns, uint64_t queue_ns,
                     uint64_t compute_ns)
{
    c->parse_ns = parse_ns;
    c->queue_ns = queue_ns;
    c->compute_ns = compute_ns;
}

void grpc_call_get_times(const grpc_call *c, uint64_t *parse_ns,
                         uint64_t *queue_ns, uint64_t *compute_ns)
{
    *parse_ns = c->parse_ns;
    *queue_ns = c->queue_ns;
    *compute_ns = c->compute_ns;
}

void grpc_call_set_status(grpc_call *c, status_code st)
{
    c->status = st;
}
