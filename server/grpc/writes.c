/*
 * writes.c - the gRPC door's write batch (grpc_int.h).
 *
 * nghttp2_session_send() runs with a send callback that copies frame
 * bytes (headers, settings, frame headers) into a batch, and a send_data
 * callback (NGHTTP2_DATA_FLAG_NO_COPY) that adds pointers into the
 * calls' answers to the batch: a tensor goes from where it was scanned to
 * the socket in one writev, never copied. Each batch is one uv_write
 * holding references on the calls it points into.
 */
#include <stdlib.h>
#include <string.h>

#include "grpc_int.h"

static h2_batch *conn_batch(grpc_conn *c)
{
    if (c->b == NULL) {
        c->b = calloc(1, sizeof *c->b);
        if (c->b != NULL)
            c->b->conn = c;
    }
    return c->b;
}

/* A batch is out (or failed): its calls let go of it. */
static void batch_done(h2_batch *b)
{
    grpc_conn *c = b->conn;
    for (unsigned i = 0; i < b->ncalls; i++) {
        b->calls[i]->writes--;
        h2_call_maybe_free(b->calls[i]);
    }
    counter_add(&c->t->c.bytes_out, b->bytes);
    free(b->copy);
    free(b);
}

static void on_written(uv_write_t *req, int status)
{
    h2_batch *b = req->data;
    grpc_conn *c = b->conn;
    c->writes--;
    c->queued -= b->bytes;
    batch_done(b);
    if (status < 0) {
        h2_conn_close(c);
        return;
    }
    h2_conn_pump(c);
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
        h2_conn_close(c);
        return;
    }
    h2_conn_pump(c);
}

/* With TLS: the ciphertext waiting in the session goes to the socket
 * (at once when it takes it all, else through a write request). */
void h2_tls_flush(grpc_conn *c)
{
    size_t len = 0;
    uint8_t *buf = grpc_tls_output(c->tls, &len);
    if (buf == NULL)
        return;
    counter_add(&c->t->c.bytes_out, len);
    uv_buf_t b = uv_buf_init((char *)buf, (unsigned)len);
    int wrote = c->writes == 0 ? uv_try_write((uv_stream_t *)&c->tcp, &b, 1)
                               : UV_EAGAIN;
    if (wrote == (int)len) {
        free(buf);
        return;
    }
    if (wrote < 0 && wrote != UV_EAGAIN) {
        free(buf);
        h2_conn_close(c);
        return;
    }
    raw_write *w = malloc(sizeof *w);
    if (w == NULL) {
        free(buf);
        h2_conn_close(c);
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
        h2_conn_close(c);
    }
}

/* Writes the batch being built: as much as the socket takes at once
 * (uv_try_write: no write request, no poll for writability, which is
 * most answers), the rest through uv_write. May run inside nghttp2's
 * callbacks, so it never calls back into the session. */
void h2_batch_flush(grpc_conn *c)
{
    h2_batch *b = c->b;
    if (b == NULL || b->npieces == 0)
        return;
    if (c->tls != NULL && !grpc_tls_ready(c->tls))
        return; /* kept until the handshake is done (on_read pumps) */
    c->b = NULL;
    if (c->tls != NULL) { /* encrypted: the session copies every byte */
        bool ok = true;
        for (unsigned i = 0; i < b->npieces && ok; i++) {
            const h2_piece *p = &b->pieces[i];
            ok = grpc_tls_write(c->tls, p->copy ? b->copy + p->off : p->p,
                                p->len);
        }
        batch_done(b);
        if (!ok) {
            h2_conn_close(c);
            return;
        }
        h2_tls_flush(c);
        return;
    }
    for (unsigned i = 0; i < b->npieces; i++) {
        const h2_piece *p = &b->pieces[i];
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
        h2_conn_close(c);
        return;
    }
    b->req.data = b;
    c->writes++;
    c->queued += b->bytes;
    if (uv_write(&b->req, (uv_stream_t *)&c->tcp, bufs, n, on_written) != 0) {
        c->writes--;
        c->queued -= b->bytes;
        batch_done(b);
        h2_conn_close(c);
    }
}

/* Room for one more piece (and a call); flushes a full batch first. */
static h2_batch *batch_room(grpc_conn *c, bool with_call)
{
    h2_batch *b = conn_batch(c);
    if (b != NULL
        && (b->npieces == BATCH_PIECES
            || (with_call && b->ncalls == BATCH_CALLS))) {
        h2_batch_flush(c);
        b = conn_batch(c);
    }
    return b;
}

bool h2_add_copy(grpc_conn *c, const uint8_t *data, size_t len)
{
    h2_batch *b = conn_batch(c);
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
    h2_piece *last = b->npieces ? &b->pieces[b->npieces - 1] : NULL;
    if (last != NULL && last->copy && last->off + last->len == b->copy_len) {
        last->len += len;
    } else {
        b = batch_room(c, false);
        if (b == NULL)
            return false;
        if (b != c->b || b->copy_cap < b->copy_len + len)
            return h2_add_copy(c, data, len); /* a fresh h2_batch */
        b->pieces[b->npieces++] = (h2_piece){true, b->copy_len, NULL, len};
    }
    memcpy(b->copy + b->copy_len, data, len);
    b->copy_len += len;
    b->bytes += len;
    return true;
}

bool h2_add_borrowed(grpc_conn *c, const uint8_t *p, size_t len,
                         grpc_call *call)
{
    if (len == 0)
        return true;
    h2_batch *b = batch_room(c, true);
    if (b == NULL)
        return false;
    b->pieces[b->npieces++] = (h2_piece){false, 0, p, len};
    b->bytes += len;
    if (b->ncalls == 0 || b->calls[b->ncalls - 1] != call) {
        b->calls[b->ncalls++] = call;
        call->writes++;
    }
    return true;
}
