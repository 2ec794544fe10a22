/*
 * reply.c - the response bodies: what a response sends, how it is
 * compressed on the way out, and what it frees afterwards.
 *
 * A reply is a "source": a few segments of bytes (a header and the tensor
 * data, say, or the pieces of a rendered text) and optionally a stream
 * that produces text as libmicrohttpd asks for it. Bodies of known length
 * go out with a Content-Length, gzipped at once (libdeflate) when the
 * client accepts it; streams go out chunked, through a callback, and
 * gzipped as they go (zlib).
 */
#include <jansson.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "content_coding.h"
#include "reply.h"
#include "tx_utf8.h"
#include "zalloc.h"

/* Responses smaller than this are never gzipped; those of known length up
 * to GZIP_WHOLE_MAX are gzipped at once (the HTTP thread is taken for
 * about 4 ms a MiB of JSON: a few hundred ms at the most), larger ones
 * and streams as they go out. */
#define GZIP_MIN 1024
#define GZIP_WHOLE_MAX ((size_t)64 << 20)
#define STREAM_BLOCK (64 * 1024)

/* A body of several segments up to this size is copied into one buffer:
 * libmicrohttpd sends a buffer's body with the headers in one sendmsg,
 * but an iovec's in a later pass of its own, after the connections
 * before it. A client then wakes twice an answer, and through a shared
 * store the two parts of a small answer left tens of microseconds apart
 * (docs/performance.md). Above it the copy costs more than the send. */
#define JOIN_MAX ((size_t)16 << 10)

typedef struct {
    const uint8_t *seg[HTTP_MAX_PIECES];
    size_t seglen[HTTP_MAX_PIECES];
    int nseg, cur;
    size_t off;
    http_body_read read; /* a streamed body after the segments, or NULL */
    void *state;
    void (*state_free)(void *state);

    gzip_stream *gz;
    uint8_t *raw;
    size_t raw_len, raw_off;
    bool raw_final;

    /* the request's bytes_out and gzip_ns, while it is alive */
    size_t *count;
    uint64_t *gzip_ns;

    /* owned */
    char *head;
    uint8_t *body; /* both eng_buffer_alloc'd */
    void *text;
    uint8_t *zipped; /* malloc'd */
    uint8_t *joined; /* malloc'd: the segments, copied together */
    void *ctx;
    void (*ctx_free)(void *);
} reply_src;

static void src_free(void *cls)
{
    reply_src *s = cls;
    if (s == NULL)
        return;
    if (s->state_free != NULL)
        s->state_free(s->state);
    gzip_stream_free(s->gz);
    free(s->raw);
    free(s->head);
    eng_buffer_free(s->body);
    eng_buffer_free(s->text);
    free(s->zipped);
    free(s->joined);
    if (s->ctx_free != NULL)
        s->ctx_free(s->ctx);
    free(s);
}

/* The uncompressed bytes, segments first, then the stream; fewer than max
 * only at the end. */
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
    while (n < max && s->read != NULL) {
        size_t got = s->read(s->state, (char *)buf + n, max - n);
        if (got == 0)
            break;
        n += got;
    }
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
    uint64_t t = now_ns();
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
        if (outn > 0 || done)
            *s->gzip_ns += now_ns() - t;
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

/* Replaces s's segments (total bytes) with their gzip encoding, made at
 * once; false (s untouched) when memory runs out. */
static bool gzip_segments(reply_src *s, size_t total)
{
    const uint8_t *in = s->seg[0];
    uint8_t *joined = NULL;
    if (s->nseg > 1) { /* libdeflate takes one buffer */
        joined = malloc(total);
        if (joined == NULL)
            return false;
        size_t at = 0;
        for (int i = 0; i < s->nseg; i++) {
            memcpy(joined + at, s->seg[i], s->seglen[i]);
            at += s->seglen[i];
        }
        in = joined;
    }
    uint8_t *z;
    size_t zlen;
    bool ok = gzip_whole(in, total, &z, &zlen);
    free(joined);
    if (!ok)
        return false;
    s->zipped = z;
    s->seg[0] = z;
    s->seglen[0] = zlen;
    s->nseg = 1;
    return true;
}

/* Makes r->response from a source whose total length is `total`, or
 * SIZE_MAX when only a stream knows it. */
static void respond(request *r, int status, const char *type, reply_src *s,
                    size_t total)
{
    s->count = &r->rec.bytes_out;
    s->gzip_ns = &r->rec.gzip_ns;
    struct MHD_Response *resp = NULL;
    bool gzip = r->accepts_gzip && (total == SIZE_MAX || total >= GZIP_MIN);
    bool zipped = false; /* gzipped whole, here */
    if (gzip && s->read == NULL && total <= GZIP_WHOLE_MAX) {
        uint64_t t = now_ns();
        zipped = gzip_segments(s, total);
        r->rec.gzip_ns += now_ns() - t;
        if (zipped)
            total = s->seglen[0];
    }
    if (gzip && !zipped) {
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
    if ((gzip && !zipped) || s->read != NULL) {
        resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, STREAM_BLOCK,
                                                 src_read, s, src_free);
    } else if (s->nseg == 1
               || (total <= JOIN_MAX
                   && (s->joined = malloc(total ? total : 1)) != NULL)) {
        const uint8_t *body = s->seg[0];
        if (s->joined != NULL) {
            size_t off = 0;
            for (int i = 0; i < s->nseg; i++) {
                memcpy(s->joined + off, s->seg[i], s->seglen[i]);
                off += s->seglen[i];
            }
            body = s->joined;
        }
        /* libmicrohttpd only reads it */
        resp = MHD_create_response_from_buffer_with_free_callback_cls(
            total, (void *)body, src_free, s);
        r->rec.bytes_out = total;
    } else {
        struct MHD_IoVec iov[HTTP_MAX_PIECES];
        for (int i = 0; i < s->nseg; i++) {
            iov[i].iov_base = s->seg[i];
            iov[i].iov_len = s->seglen[i];
        }
        resp =
            MHD_create_response_from_iovec(iov, (unsigned)s->nseg, src_free, s);
        r->rec.bytes_out = total;
    }
    if (resp == NULL) {
        src_free(s);
        r->rec.status = 500;
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
    r->rec.status = status;
}

void http_reply_buffer(request *r, int status, const char *type, char *buf,
                       size_t len)
{
    reply_src *s = zalloc(sizeof *s);
    if (s == NULL) {
        free(buf);
        r->rec.status = 500;
        return;
    }
    s->head = buf;
    s->seg[0] = (const uint8_t *)buf;
    s->seglen[0] = len;
    s->nseg = len ? 1 : 0;
    respond(r, status, type, s, len);
}

void http_reply_static(request *r, int status, const char *type,
                       const void *data, size_t len)
{
    reply_src *s = zalloc(sizeof *s);
    if (s == NULL) {
        r->rec.status = 500;
        return;
    }
    s->seg[0] = data;
    s->seglen[0] = len;
    s->nseg = len ? 1 : 0;
    respond(r, status, type, s, len);
}

void http_reply_parts(request *r, int status, const char *type, char *head,
                      size_t head_len, const void *data, size_t data_len)
{
    reply_src *s = zalloc(sizeof *s);
    if (s == NULL) {
        free(head);
        r->rec.status = 500;
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

void http_reply_pieces(request *r, int status, const char *type, void *buf,
                       const http_piece *pieces, int n)
{
    reply_src *s = zalloc(sizeof *s);
    if (s == NULL || n > HTTP_MAX_PIECES) {
        free(s);
        eng_buffer_free(buf);
        r->rec.status = 500;
        return;
    }
    s->text = buf;
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (pieces[i].len == 0)
            continue;
        s->seg[s->nseg] = pieces[i].base;
        s->seglen[s->nseg++] = pieces[i].len;
        total += pieces[i].len;
    }
    respond(r, status, type, s, total);
}

void http_reply_stream(request *r, int status, const char *type,
                       http_body_read read, void *state,
                       void (*state_free)(void *state))
{
    reply_src *s = zalloc(sizeof *s);
    if (s == NULL) {
        if (state_free != NULL)
            state_free(state);
        r->rec.status = 500;
        return;
    }
    take_memory(r, s);
    s->read = read;
    s->state = state;
    s->state_free = state_free;
    respond(r, status, type, s, SIZE_MAX);
}

char *http_error_text(const char *msg)
{
    /* messages quote what clients sent (paths, names, types), which may
     * be any bytes; JSON takes only UTF-8, so other bytes are named */
    char safe[4096];
    tx_utf8_escape(msg, strlen(msg), safe, sizeof safe);
    json_t *j = json_pack("{s:s}", "error", safe);
    char *text = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    return text;
}

void *http_ctx_new(request *r, size_t size, void (*free_fn)(void *))
{
    if (r->ctx_free != NULL)
        r->ctx_free(r->ctx);
    r->ctx = zalloc(size);
    r->ctx_free = r->ctx != NULL ? free_fn : NULL;
    if (r->ctx == NULL)
        http_error(r, STATUS_NOMEM, "out of memory");
    return r->ctx;
}

void http_error(request *r, status_code e, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char *text = http_error_text(msg);
    r->rec.err = e == STATUS_OK ? STATUS_INVALID : e;
    int status = status_http(r->rec.err);
    if (text == NULL) {
        r->rec.status = 500;
        return;
    }
    if (status_retry_later(r->rec.err))
        http_add_header(r, "Retry-After", "1");
    http_reply_buffer(r, status, "application/json", text, strlen(text));
}
