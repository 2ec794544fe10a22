/*
 * http.c - the request lifecycle on libmicrohttpd.
 *
 * libmicrohttpd calls on_access() several times per request: once with the
 * headers, once per piece of the body, once when the body is complete, and
 * once more after a suspended connection is resumed. The request's `state`
 * field says which of these it is in. The body is collected into a buffer
 * sized from Content-Length (checked against --max-body-bytes before
 * anything is read: a 413 then goes out without reading the body) or grown
 * up to that cap for chunked uploads.
 *
 * Suspend/resume: a handler that needs the device calls http_submit(),
 * which pushes the job and suspends the connection while holding the
 * request's mutex; the job's completion takes the same mutex and resumes
 * the connection only if it was suspended. So a worker can never resume a
 * connection that is not suspended yet, which libmicrohttpd forbids.
 *
 * Lifetime: a request holds one reference for the connection and one per
 * queued job; it is freed when both are gone (on_completed, or the job's
 * completion, whichever is last).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "buffer.h"
#include "encoding.h"
#include "http.h"
#include "log.h"
#include "native.h"

enum { RQ_READING, RQ_QUEUED, RQ_RESUMED, RQ_REPLIED };

/* The request state lives apart from the struct in http.h, which handlers
 * see: they have no business with it. */
typedef struct {
    request r;
    int state;
} request_box;

#define STATE(r) (((request_box *)(r))->state)

/* Responses smaller than this are never gzipped. */
#define GZIP_MIN 1024
/* JSON tensors up to this many elements are rendered into one buffer (with
 * a Content-Length); larger ones are streamed. */
#define JSON_INLINE_MAX 4096
#define STREAM_BLOCK (64 * 1024)

/* ------------------------------------------------------------------------
 * Requests.
 */
/* splitmix64's finaliser: a bijection, so distinct counters give distinct
 * ids, and consecutive ones look unrelated. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Generated request ids start from a random point, so that the logs of
 * several replicas, or of one daemon across restarts, do not share ids. */
static void seed_request_ids(tally_server *s)
{
    uint64_t seed = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f == NULL || fread(&seed, sizeof seed, 1, f) != 1)
        seed = now_ns() ^ ((uint64_t)getpid() << 32);
    if (f != NULL)
        fclose(f);
    atomic_store(&s->next_id, seed);
}

static request *request_new(tally_server *s, struct MHD_Connection *conn,
                            const char *url, const char *method)
{
    request_box *box = calloc(1, sizeof *box);
    if (box == NULL)
        return NULL;
    request *r = &box->r;
    r->s = s;
    r->conn = conn;
    r->t0_ns = now_ns();
    snprintf(r->method, sizeof r->method, "%s", method);
    r->path = strdup(url);
    if (r->path == NULL) {
        free(box);
        return NULL;
    }
    r->metric_route = ROUTE_OTHER;
    r->status = 500;
    uv_mutex_init(&r->mu);
    atomic_init(&r->refs, 1);
    box->state = RQ_READING;

    /* the id: X-Request-Id when it is a sane token, else a fresh one */
    const char *given =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    bool ok = given != NULL && given[0] != '\0' && strlen(given) < sizeof r->id;
    for (const char *p = given; ok && *p != '\0'; p++)
        ok = *p > 0x20 && *p < 0x7f && *p != '"' && *p != '\\';
    if (ok)
        snprintf(r->id, sizeof r->id, "%s", given);
    else
        snprintf(r->id, sizeof r->id, "%016llx",
                 (unsigned long long)mix64(atomic_fetch_add(&s->next_id, 1)));
    atomic_fetch_add(&s->metrics.inflight, 1);
    return r;
}

static void request_release(request *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (r->ctx_free != NULL)
        r->ctx_free(r->ctx);
    tally_buffer_free(r->body);
    free(r->path);
    for (int i = 0; i < r->nextra; i++) {
        free(r->extra_headers[i][0]);
        free(r->extra_headers[i][1]);
    }
    if (r->response != NULL)
        MHD_destroy_response(r->response);
    uv_mutex_destroy(&r->mu);
    free((request_box *)r);
}

const char *http_header(request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *http_query(request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

typedef struct {
    const char *const *allowed;
    const char *unknown;
} query_check;

static enum MHD_Result check_arg(void *cls, enum MHD_ValueKind kind,
                                 const char *key, const char *value)
{
    (void)kind;
    (void)value;
    query_check *q = cls;
    for (const char *const *a = q->allowed; *a != NULL; a++)
        if (strcmp(*a, key) == 0)
            return MHD_YES;
    q->unknown = key;
    return MHD_NO;
}

bool http_query_known(request *r, const char *const *allowed, char *msg,
                      size_t msglen)
{
    query_check q = {allowed, NULL};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, check_arg, &q);
    if (q.unknown == NULL)
        return true;
    size_t n = (size_t)snprintf(
        msg, msglen, "unknown query parameter \"%.40s\" (known:", q.unknown);
    for (const char *const *a = allowed; *a != NULL && n < msglen; a++)
        n += (size_t)snprintf(msg + n, msglen - n, " %s", *a);
    if (n < msglen)
        snprintf(msg + n, msglen - n, ")");
    return false;
}

void http_add_header(request *r, const char *name, const char *value)
{
    if (r->nextra >= 8)
        return;
    char *n = strdup(name), *v = strdup(value);
    if (n == NULL || v == NULL) {
        free(n);
        free(v);
        return;
    }
    r->extra_headers[r->nextra][0] = n;
    r->extra_headers[r->nextra][1] = v;
    r->nextra++;
}

/* ------------------------------------------------------------------------
 * Reply sources: what a response sends, and what it frees afterwards.
 */
typedef struct {
    const uint8_t *seg[2];
    size_t seglen[2];
    int nseg, cur;
    size_t off;
    bool has_writer;
    json_writer w;

    gzip_stream *gz;
    uint8_t *raw;
    size_t raw_len, raw_off;
    bool raw_final;

    size_t *count; /* the request's bytes_out, while it is alive */

    /* owned */
    char *head;
    uint8_t *body;
    void *ctx;
    void (*ctx_free)(void *);
} reply_src;

static void src_free(void *cls)
{
    reply_src *s = cls;
    if (s == NULL)
        return;
    if (s->has_writer)
        json_writer_free(&s->w);
    gzip_stream_free(s->gz);
    free(s->raw);
    free(s->head);
    tally_buffer_free(s->body);
    if (s->ctx_free != NULL)
        s->ctx_free(s->ctx);
    free(s);
}

/* The uncompressed bytes, segments first, then the writer. */
static size_t src_raw(reply_src *s, uint8_t *buf, size_t max)
{
    size_t n = 0;
    while (n < max && s->cur < s->nseg) {
        size_t take = s->seglen[s->cur] - s->off;
        if (take > max - n)
            take = max - n;
        memcpy(buf + n, s->seg[s->cur] + s->off, take);
        n += take;
        s->off += take;
        if (s->off == s->seglen[s->cur]) {
            s->cur++;
            s->off = 0;
        }
    }
    if (n < max && s->has_writer)
        n += json_writer_read(&s->w, (char *)buf + n, max - n);
    return n;
}

static ssize_t src_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    reply_src *s = cls;
    if (s->gz == NULL) {
        size_t n = src_raw(s, (uint8_t *)buf, max);
        if (n == 0)
            return MHD_CONTENT_READER_END_OF_STREAM;
        *s->count += n;
        return (ssize_t)n;
    }
    for (;;) {
        if (s->raw_off == s->raw_len && !s->raw_final) {
            s->raw_len = src_raw(s, s->raw, STREAM_BLOCK);
            s->raw_off = 0;
            s->raw_final = s->raw_len < STREAM_BLOCK;
        }
        size_t in = s->raw_len - s->raw_off, outn = max;
        bool done = gzip_stream_run(s->gz, s->raw + s->raw_off, &in,
                                    s->raw_final, (uint8_t *)buf, &outn);
        s->raw_off += in;
        if (outn > 0) {
            *s->count += outn;
            return (ssize_t)outn;
        }
        if (done)
            return MHD_CONTENT_READER_END_OF_STREAM;
    }
}

/* Hands the request's body and context over to the reply. */
static void take_memory(request *r, reply_src *s)
{
    s->body = r->body;
    s->ctx = r->ctx;
    s->ctx_free = r->ctx_free;
    r->body = NULL;
    r->ctx = NULL;
    r->ctx_free = NULL;
}

/* Makes r->response from a source whose total length is `total`, or
 * SIZE_MAX when only a stream knows it. */
static void respond(request *r, int status, const char *type, reply_src *s,
                    size_t total)
{
    s->count = &r->bytes_out;
    struct MHD_Response *resp = NULL;
    bool gzip = r->accepts_gzip && (total == SIZE_MAX || total >= GZIP_MIN);
    if (gzip) {
        s->gz = gzip_stream_new();
        s->raw = malloc(STREAM_BLOCK);
        if (s->gz == NULL || s->raw == NULL) {
            gzip_stream_free(s->gz);
            free(s->raw);
            s->gz = NULL;
            s->raw = NULL;
            gzip = false;
        }
    }
    if (gzip || (s->has_writer && total == SIZE_MAX)) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
                                                 src_read, s, src_free);
    } else if (!s->has_writer) {
        struct MHD_IoVec iov[2];
        for (int i = 0; i < s->nseg; i++) {
            iov[i].iov_base = s->seg[i];
            iov[i].iov_len = s->seglen[i];
        }
        resp =
            MHD_create_response_from_iovec(iov, (unsigned)s->nseg, src_free, s);
        r->bytes_out = total;
    } else {
        resp = MHD_create_response_from_callback(total, STREAM_BLOCK, src_read,
                                                 s, src_free);
    }
    if (resp == NULL) {
        src_free(s);
        r->status = 500;
        return;
    }
    if (gzip)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, "gzip");
    if (total == SIZE_MAX || total >= GZIP_MIN)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (r->response != NULL)
        MHD_destroy_response(r->response);
    r->response = resp;
    r->status = status;
}

void http_reply_buffer(request *r, int status, const char *type, char *buf,
                       size_t len)
{
    reply_src *s = calloc(1, sizeof *s);
    if (s == NULL) {
        free(buf);
        r->status = 500;
        return;
    }
    s->head = buf;
    s->seg[0] = (const uint8_t *)buf;
    s->seglen[0] = len;
    s->nseg = len ? 1 : 0;
    respond(r, status, type, s, len);
}

void http_reply_parts(request *r, int status, const char *type, char *head,
                      size_t head_len, const void *data, size_t data_len)
{
    reply_src *s = calloc(1, sizeof *s);
    if (s == NULL) {
        free(head);
        r->status = 500;
        return;
    }
    take_memory(r, s);
    s->head = head;
    if (head_len) {
        s->seg[s->nseg] = (const uint8_t *)head;
        s->seglen[s->nseg++] = head_len;
    }
    if (data_len) {
        s->seg[s->nseg] = data;
        s->seglen[s->nseg++] = data_len;
    }
    respond(r, status, type, s, head_len + data_len);
}

void http_reply_json(request *r, int status, json_writer *w)
{
    reply_src *s = calloc(1, sizeof *s);
    if (s == NULL) {
        json_writer_free(w);
        r->status = 500;
        return;
    }
    take_memory(r, s);
    s->has_writer = true;
    s->w = *w;
    memset(w, 0, sizeof *w);
    size_t total = SIZE_MAX;
    if (s->w.count <= JSON_INLINE_MAX) {
        /* small: render now, so that it goes out with a Content-Length */
        size_t cap =
            s->w.prefix_len + s->w.suffix_len + (size_t)s->w.count * 42 + 16;
        char *buf = malloc(cap);
        if (buf != NULL) {
            size_t n = json_writer_read(&s->w, buf, cap);
            json_writer_free(&s->w);
            s->has_writer = false;
            free(s->head);
            s->head = buf;
            s->seg[0] = (const uint8_t *)buf;
            s->seglen[0] = n;
            s->nseg = 1;
            total = n;
        }
    }
    respond(r, status, "application/json", s, total);
}

void http_error(request *r, tally_err e, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *j = json_pack("{s:s}", "error", msg);
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    r->err = e == TALLY_E_OK ? TALLY_E_INVALID : e;
    int status = tally_err_http_status(r->err);
    if (text == NULL) {
        r->status = 500;
        return;
    }
    if (r->err == TALLY_E_QUEUE_FULL || r->err == TALLY_E_DRAINING)
        http_add_header(r, "Retry-After", "1");
    http_reply_buffer(r, status, "application/json", text, strlen(text));
}

/* ------------------------------------------------------------------------
 * Jobs.
 */
static void on_job_done(job *j)
{
    request *r = j->user;
    tally_server *s = r->s;
    if (j->started_ns != 0) {
        metrics_observe(&s->metrics.queue, j->started_ns - j->enqueued_ns);
        metrics_observe(&s->metrics.compute, j->finished_ns - j->started_ns);
    } else {
        metrics_observe(&s->metrics.queue, now_ns() - j->enqueued_ns);
    }
    uv_mutex_lock(&r->mu);
    r->job_done = true;
    bool resume = r->suspended;
    r->suspended = false;
    uv_mutex_unlock(&r->mu);
    if (resume)
        MHD_resume_connection(r->conn);
    request_release(r);
}

static int64_t header_timeout_ms(request *r, char *msg, size_t msglen,
                                 bool *bad)
{
    const char *h = http_header(r, "X-Timeout-Ms");
    *bad = false;
    if (h == NULL)
        return -1;
    int64_t v;
    if (!parse_int_text("X-Timeout-Ms", h, &v, msg, msglen) || v < 0) {
        if (v < 0)
            snprintf(msg, msglen, "X-Timeout-Ms cannot be negative");
        *bad = true;
        return -1;
    }
    return v;
}

void http_submit(request *r, const tally_scan_desc *desc, void *inout,
                 int64_t timeout_ms, handler_fn finish)
{
    tally_server *s = r->s;
    char msg[256];
    job *j = &r->job;
    memset(j, 0, sizeof *j);
    tally_err e = tally_lines_from_desc(desc, &j->lines, msg, sizeof msg);
    if (e != TALLY_E_OK) {
        http_error(r, e, "%s", msg);
        return;
    }
    if (timeout_ms < 0) {
        bool bad;
        timeout_ms = header_timeout_ms(r, msg, sizeof msg, &bad);
        if (bad) {
            http_error(r, TALLY_E_INVALID, "%s", msg);
            return;
        }
    }
    if (timeout_ms < 0)
        timeout_ms = s->cfg.timeout_ms;
    j->desc = *desc;
    j->in = inout;
    j->out = inout;
    j->enqueued_ns = now_ns();
    j->deadline_ns =
        timeout_ms > 0 ? j->enqueued_ns + (uint64_t)timeout_ms * 1000000u : 0;
    j->done = on_job_done;
    j->user = r;
    r->finish = finish;

    /* Tiny tensors: summing them here is cheaper than the hand-off to a
     * worker and back (let alone a device launch). */
    if (j->lines.elements <= s->cfg.inline_max) {
        j->started_ns = now_ns();
        j->err = tally_scan_inline(desc, inout, inout, j->msg, sizeof j->msg);
        j->finished_ns = now_ns();
        metrics_observe(&s->metrics.queue, 0);
        metrics_observe(&s->metrics.compute, j->finished_ns - j->started_ns);
        if (!http_job_failed(r))
            finish(r);
        return;
    }

    atomic_fetch_add(&r->refs, 1); /* the job's */
    uv_mutex_lock(&r->mu);
    bool ok = queue_push(&s->queue, j);
    if (ok) {
        STATE(r) = RQ_QUEUED;
        r->queued = true;
        MHD_suspend_connection(r->conn);
        r->suspended = true;
    }
    uv_mutex_unlock(&r->mu);
    if (!ok) {
        atomic_fetch_sub(&r->refs, 1);
        if (atomic_load(&s->draining))
            http_error(r, TALLY_E_DRAINING, "the server is shutting down");
        else
            http_error(r, TALLY_E_QUEUE_FULL,
                       "the queue is full (%u jobs wait); retry after a "
                       "moment",
                       s->cfg.queue_depth);
    }
}

bool http_job_failed(request *r)
{
    job *j = &r->job;
    if (j->err == TALLY_E_OK)
        return false;
    if (j->err == TALLY_E_DEADLINE) {
        uint64_t waited =
            ((j->finished_ns ? j->finished_ns : now_ns()) - j->enqueued_ns)
            / 1000000u;
        http_error(r, TALLY_E_DEADLINE,
                   "the deadline of %" PRIu64 " ms expired after %" PRIu64
                   " ms %s",
                   (j->deadline_ns - j->enqueued_ns) / 1000000u, waited,
                   j->started_ns ? "(during the computation)"
                                 : "in the queue; the work was dropped");
        return true;
    }
    http_error(r, j->err, "%s", j->msg[0] ? j->msg : tally_err_text(j->err));
    return true;
}

/* ------------------------------------------------------------------------
 * libmicrohttpd callbacks.
 */
static enum MHD_Result send_reply(request *r)
{
    STATE(r) = RQ_REPLIED;
    if (r->response == NULL) {
        static const char fallback[] = "{\"error\":\"internal error\"}";
        r->response = MHD_create_response_from_buffer(
            sizeof fallback - 1, (void *)fallback, MHD_RESPMEM_PERSISTENT);
        if (r->response == NULL)
            return MHD_NO;
        MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONTENT_TYPE,
                                "application/json");
        r->status = 500;
        r->bytes_out = sizeof fallback - 1;
    }
    for (int i = 0; i < r->nextra; i++)
        MHD_add_response_header(r->response, r->extra_headers[i][0],
                                r->extra_headers[i][1]);
    MHD_add_response_header(r->response, "X-Request-Id", r->id);
    if (atomic_load(&r->s->draining))
        MHD_add_response_header(r->response, MHD_HTTP_HEADER_CONNECTION,
                                "close");
    enum MHD_Result rc =
        MHD_queue_response(r->conn, (unsigned)r->status, r->response);
    MHD_destroy_response(r->response);
    r->response = NULL;
    return rc;
}

/* Sizes the body buffer from Content-Length, or refuses it. */
static bool begin_body(request *r)
{
    tally_server *s = r->s;
    const char *cl = http_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl == NULL)
        return true; /* chunked or empty: grown as it comes */
    char *end;
    errno = 0;
    unsigned long long n = strtoull(cl, &end, 10);
    if (errno != 0 || *end != '\0')
        return true; /* libmicrohttpd rejects malformed lengths itself */
    if (n > s->cfg.max_body_bytes) {
        http_error(r, TALLY_E_TOO_LARGE,
                   "the body is %llu bytes, more than the %zu this server "
                   "accepts (--max-body-bytes)",
                   n, s->cfg.max_body_bytes);
        return false;
    }
    if (n > 0) {
        r->body = tally_buffer_alloc((size_t)n);
        if (r->body == NULL) {
            http_error(r, TALLY_E_NOMEM,
                       "out of memory for a %llu-byte body; retry later", n);
            return false;
        }
        r->body_cap = (size_t)n;
    }
    return true;
}

static void append_body(request *r, const char *data, size_t n)
{
    size_t max = r->s->cfg.max_body_bytes;
    if (r->body_too_large)
        return;
    if (n > max - r->body_len) {
        r->body_too_large = true;
        return;
    }
    if (r->body_len + n > r->body_cap) {
        size_t cap = r->body_cap ? r->body_cap : 65536;
        while (cap < r->body_len + n)
            cap = cap > max / 2 ? max : cap * 2;
        uint8_t *nb = tally_buffer_alloc(cap);
        if (nb == NULL) {
            r->body_too_large = true;
            return;
        }
        if (r->body_len)
            memcpy(nb, r->body, r->body_len);
        tally_buffer_free(r->body);
        r->body = nb;
        r->body_cap = cap;
    }
    memcpy(r->body + r->body_len, data, n);
    r->body_len += n;
}

/* The body is complete: decode it and run the handler. */
static void body_complete(request *r)
{
    tally_server *s = r->s;
    if (r->body_too_large) {
        http_error(r, TALLY_E_TOO_LARGE,
                   "the body is more than the %zu bytes this server accepts "
                   "(--max-body-bytes)",
                   s->cfg.max_body_bytes);
        return;
    }
    atomic_fetch_add_explicit(&s->metrics.bytes_in, r->body_len,
                              memory_order_relaxed);
    const char *ce = http_header(r, MHD_HTTP_HEADER_CONTENT_ENCODING);
    int coding = encoding_parse(ce);
    if (coding < 0) {
        http_error(r, TALLY_E_MEDIA_TYPE,
                   "Content-Encoding \"%.40s\" is not supported (gzip, "
                   "deflate and identity are)",
                   ce);
        return;
    }
    if (coding > 0 && r->body_len > 0) {
        uint8_t *plain;
        size_t plen;
        char msg[256];
        tally_err e =
            encoding_decode(coding, r->body, r->body_len, s->cfg.max_body_bytes,
                            &plain, &plen, msg, sizeof msg);
        if (e != TALLY_E_OK) {
            http_error(r, e, "%s", msg);
            return;
        }
        /* copy into an aligned buffer: tensors are used in place */
        uint8_t *aligned = tally_buffer_alloc(plen);
        if (aligned == NULL) {
            free(plain);
            http_error(r, TALLY_E_NOMEM, "out of memory decoding the body");
            return;
        }
        memcpy(aligned, plain, plen);
        free(plain);
        tally_buffer_free(r->body);
        r->body = aligned;
        r->body_len = r->body_cap = plen;
    }
    r->handler(r);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn,
                                 const char *url, const char *method,
                                 const char *version, const char *upload,
                                 size_t *upload_size, void **con_cls)
{
    (void)version;
    tally_server *s = cls;
    request *r = *con_cls;

    if (r == NULL) {
        r = request_new(s, conn, url, method);
        if (r == NULL)
            return MHD_NO;
        *con_cls = r;
        const char *ae = http_header(r, MHD_HTTP_HEADER_ACCEPT_ENCODING);
        r->accepts_gzip = encoding_accepts_gzip(ae);
        char *q = strchr(r->path, '?');
        if (q != NULL)
            *q = '\0';
        char msg[256], allow[64] = "";
        int status = 404;
        r->handler = api_route(s, method, r->path, &r->metric_route, &status,
                               msg, sizeof msg, allow, sizeof allow);
        if (r->handler == NULL) {
            if (status == 405)
                http_add_header(r, MHD_HTTP_HEADER_ALLOW, allow);
            http_error(r, status == 405 ? TALLY_E_METHOD : TALLY_E_NOT_FOUND,
                       "%s", msg);
            return send_reply(r);
        }
        if (!begin_body(r))
            return send_reply(r);
        return MHD_YES;
    }

    switch (STATE(r)) {
    case RQ_READING:
        if (*upload_size > 0) {
            append_body(r, upload, *upload_size);
            *upload_size = 0;
            return MHD_YES;
        }
        body_complete(r);
        if (STATE(r) == RQ_QUEUED)
            return MHD_YES; /* suspended until the job is done */
        return send_reply(r);
    case RQ_RESUMED:
    case RQ_QUEUED:
        /* called again after MHD_resume_connection */
        STATE(r) = RQ_RESUMED;
        if (!http_job_failed(r))
            r->finish(r);
        return send_reply(r);
    default:
        /* a reply went out before the body was read: discard the rest */
        *upload_size = 0;
        return MHD_YES;
    }
}

/* One JSON line per request, formatted by hand: this runs for every
 * request, so it avoids building a JSON object. */
static void access_line(request *r, uint64_t total_ns,
                        enum MHD_RequestTerminationCode toe)
{
    job *j = &r->job;
    uint64_t queue_ns = 0, compute_ns = 0;
    if (j->started_ns != 0) {
        queue_ns = j->enqueued_ns ? j->started_ns - j->enqueued_ns : 0;
        compute_ns = j->finished_ns - j->started_ns;
    } else if (j->finished_ns != 0) { /* expired in the queue */
        queue_ns = j->finished_ns - j->enqueued_ns;
    }
    char ts[40], path[512], extra[96] = "";
    log_stamp(ts, sizeof ts);
    log_escape(r->path, path, sizeof path);
    int n = 0;
    if (r->err != TALLY_E_OK)
        n = snprintf(extra, sizeof extra, ",\"error\":\"%s\"",
                     tally_err_name(r->err));
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK)
        snprintf(extra + n, sizeof extra - (size_t)n, ",\"terminated\":%d",
                 (int)toe);
    char line[1024];
    int len = snprintf(
        line, sizeof line,
        "{\"ts\":\"%s\",\"module\":\"http\",\"level\":\"info\","
        "\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,\"bytes_in\":%zu,"
        "\"bytes_out\":%zu,\"queue_us\":%" PRIu64 ",\"compute_us\":%" PRIu64
        ",\"total_us\":%" PRIu64 ",\"request_id\":\"%s\"%s}",
        ts, r->method, path, r->status, r->body_len, r->bytes_out,
        queue_ns / 1000, compute_ns / 1000, total_ns / 1000, r->id, extra);
    if (len > 0)
        log_access(line,
                   (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    tally_server *s = cls;
    request *r = *con_cls;
    if (r == NULL)
        return;
    *con_cls = NULL;
    uint64_t total = now_ns() - r->t0_ns;
    if (toe != MHD_REQUEST_TERMINATED_COMPLETED_OK && STATE(r) != RQ_REPLIED)
        r->status = 499; /* the client went away first */
    metrics_request(&s->metrics, r->metric_route, r->status, r->err, total, 0,
                    r->bytes_out);
    if (s->cfg.access_log)
        access_line(r, total, toe);
    atomic_store(&s->last_done_ns, now_ns());
    atomic_fetch_sub(&s->metrics.inflight, 1);
    request_release(r);
}

/* Counts connections, so that operators (and the client's tests) can see
 * whether clients keep theirs alive. */
static void on_connection(void *cls, struct MHD_Connection *conn,
                          void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)conn;
    (void)socket_context;
    tally_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        atomic_fetch_add(&s->metrics.connections_opened, 1);
        atomic_fetch_add(&s->metrics.connections_open, 1);
    } else {
        atomic_fetch_sub(&s->metrics.connections_open, 1);
    }
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    log_msg("http", "warn", "libmicrohttpd: %s", msg);
}

tally_err http_start(tally_server *s, char *msg, size_t msglen)
{
    seed_request_ids(s);
    char host[256];
    unsigned port;
    if (!tally_config_split_listen(s->cfg.listen, host, sizeof host, &port))
        return tally_fail(msg, msglen, TALLY_E_INVALID, "bad listen address");
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai;
    char portstr[8];
    snprintf(portstr, sizeof portstr, "%u", port);
    int rc = getaddrinfo(host, portstr, &hints, &ai);
    if (rc != 0)
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "cannot resolve listen host \"%s\": %s", host,
                          gai_strerror(rc));
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL
                     | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_OptionItem opts[] = {
        {MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)on_mhd_log, NULL},
        {MHD_OPTION_SOCK_ADDR, 0, ai->ai_addr},
        {MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)on_completed, s},
        {MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)on_connection, s},
        {MHD_OPTION_CONNECTION_TIMEOUT, (intptr_t)s->cfg.idle_timeout_s, NULL},
        {MHD_OPTION_CONNECTION_LIMIT, (intptr_t)s->cfg.max_connections, NULL},
        /* 32 KiB: libmicrohttpd clears the pool for every request, so a
         * larger one slows small requests down more than it speeds large
         * uploads up */
        {MHD_OPTION_CONNECTION_MEMORY_LIMIT, 32 * 1024, NULL},
        {MHD_OPTION_LISTEN_BACKLOG_SIZE, 1024, NULL},
        {s->cfg.http_threads > 1 ? MHD_OPTION_THREAD_POOL_SIZE : MHD_OPTION_END,
         (intptr_t)s->cfg.http_threads, NULL},
        {MHD_OPTION_END, 0, NULL},
    };
    s->mhd = MHD_start_daemon(flags, (uint16_t)port, NULL, NULL, on_access, s,
                              MHD_OPTION_ARRAY, opts, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (s->mhd == NULL)
        return tally_fail(msg, msglen, TALLY_E_INVALID,
                          "cannot listen on %s (in use? see the log above)",
                          s->cfg.listen);
    const union MHD_DaemonInfo *info =
        MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info != NULL ? info->port : port;
    return TALLY_E_OK;
}

void http_quiesce(tally_server *s)
{
    if (s->mhd == NULL)
        return;
    MHD_socket fd = MHD_quiesce_daemon(s->mhd);
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

void http_stop(tally_server *s)
{
    if (s->mhd != NULL)
        MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
}
