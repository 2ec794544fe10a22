/*
 * session.c - the gRPC door's nghttp2 session glue (grpc_int.h): the only file
 * that includes nghttp2.h.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nghttp2/nghttp2.h>

#include "buffer.h"
#include "clock.h"
#include "content_coding.h"
#include "grpc_int.h"

static ssize_t send_cb(nghttp2_session *h2, const uint8_t *data, size_t len,
                       int flags, void *user)
{
    grpc_conn *c = user;
    (void)h2;
    (void)flags;
    if (c->close_pending)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (c->queued + (c->b ? c->b->bytes : 0) >= WRITE_HIGH
        || (c->tls != NULL && !grpc_tls_ready(c->tls)))
        return NGHTTP2_ERR_WOULDBLOCK; /* later: on_written, on_read */
    if (!h2_add_copy(c, data, len) || c->close_pending)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    return (ssize_t)len;
}

#define NV(n, v)                                                               \
    {                                                                          \
        (uint8_t *)(n), (uint8_t *)(v), sizeof(n) - 1, strlen(v),             \
            NGHTTP2_NV_FLAG_NONE                                               \
    }

/* Ends the stream with a failure: with no message before it, a status
 * alone (Trailers-Only), resetting a stream whose client is still
 * sending; after messages, trailers once the answer being sent is out
 * (answers not begun are dropped, their calls gone). */
void h2_stream_fail(gstream *st, status_code code, const char *msg)
{
    grpc_conn *c = st->conn;
    if (list_empty(&st->calls) && !st->final_set)
        h2_count_stream_failure(st, code);
    st->pre.got = 0;
    if (st->response_started) {
        if (st->final_set)
            return;
        st->final_set = true;
        st->final = code;
        st->rejected = true;
        snprintf(st->final_msg, sizeof st->final_msg, "%s", msg);
        for (list_node *n = list_first(&st->calls), *next; n != NULL;
             n = next) {
            next = list_next(&st->calls, n);
            grpc_call *k = container_of(n, grpc_call, link);
            if (k->sent == 0) {
                h2_fifo_remove(st, k);
                k->st = NULL;
                if (k->rec.err == STATUS_OK && !k->answered)
                    k->rec.err = code;
                atomic_store(&k->gone, true);
                h2_call_maybe_free(k);
            }
        }
        eng_buffer_free(st->buf);
        st->buf = NULL;
        if (st->reserved) {
            h2_unreserve(c->t, st->reserved);
            st->reserved = 0;
        }
        h2_stream_respond(st);
        return;
    }
    char num[8], enc[1024], tp[TRACE_PARENT_LEN + 1];
    snprintf(num, sizeof num, "%d", status_grpc(code));
    grpc_message_encode(msg, enc, sizeof enc);
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
        h2_unreserve(c->t, st->reserved);
        st->reserved = 0;
    }
    for (list_node *n = list_first(&st->calls); n != NULL;
         n = list_next(&st->calls, n)) {
        grpc_call *call = container_of(n, grpc_call, link);
        if (call->rec.err == STATUS_OK && !call->answered)
            call->rec.err = code;
    }
    h2_detach_calls(st, true);
}

/* Whether the stream has said all it will: its trailers may go. */
static bool stream_finished(const gstream *st)
{
    if (!list_empty(&st->calls))
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
    grpc_call *call = h2_first_call(st);
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
            grpc_message_encode(st->final_msg, enc, sizeof enc);
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
    grpc_call *call = h2_first_call(st);
    (void)h2;
    (void)frame;
    if (c->close_pending)
        return NGHTTP2_ERR_CALLBACK_FAILURE;
    if (c->queued + (c->b ? c->b->bytes : 0) >= WRITE_HIGH
        || (c->tls != NULL && !grpc_tls_ready(c->tls)))
        return NGHTTP2_ERR_WOULDBLOCK; /* later: on_written, on_read */
    /* a full batch is written as this adds to it; a write that fails
     * there leaves the connection close_pending, its calls intact */
    if (!h2_add_copy(c, framehd, 9) || c->close_pending)
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
        if (!h2_add_borrowed(c, p, n, call) || c->close_pending)
            return NGHTTP2_ERR_CALLBACK_FAILURE;
        call->sent += n;
        length -= n;
        if (call->sent == call->total) {
            h2_fifo_remove(st, call);
            h2_call_maybe_free(call);
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
void h2_stream_respond(gstream *st)
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
    list_init(&st->calls);
    st->id = frame->hd.stream_id;
    st->timeout_ms = -1;
    st->caller = AUTH_ANYONE; /* until the headers' check */
    st->opened_ns = now_ns();
    trace_begin(&st->trace, NULL, 0, &c->t->s->sampler); /* until a traceparent comes */
    list_push_front(&c->streams, &st->link);
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
        st->bad_timeout = !grpc_timeout_parse((const char *)v, valuelen, &st->timeout_ms);
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
        counter_add(&c->t->c.resets_received, 1);
    if (frame->hd.stream_id == 0)
        return 0;
    gstream *st = nghttp2_session_get_stream_user_data(h2, frame->hd.stream_id);
    if (st == NULL)
        return 0;
    if (frame->hd.type == NGHTTP2_HEADERS
        && frame->headers.cat == NGHTTP2_HCAT_REQUEST
        && (frame->hd.flags & NGHTTP2_FLAG_END_HEADERS))
        h2_stream_headers_done(st);
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA)
        && (frame->hd.flags & NGHTTP2_FLAG_END_STREAM)) {
        st->remote_closed = true;
        if (st->rejected)
            return 0;
        if (st->pre.got != 0) {
            h2_stream_fail(st, STATUS_INVALID,
                              "the stream ended inside a message");
        } else if (!st->m->streaming && !st->got_message) {
            h2_stream_fail(st, STATUS_INVALID,
                              "the call ended without a request message");
        } else if (stream_finished(st)) {
            h2_stream_respond(st); /* the trailers may go */
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
        counter_add(&c->t->c.abuse_closed, 1);
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
    h2_stream_data(st, data, len);
    return 0;
}

static int on_stream_close(nghttp2_session *h2, int32_t id, uint32_t error,
                           void *user)
{
    (void)user;
    (void)error;
    gstream *st = nghttp2_session_get_stream_user_data(h2, id);
    if (st != NULL)
        h2_stream_free(st);
    return 0;
}

static nghttp2_session_callbacks *callbacks;
static nghttp2_option *options;

bool h2_callbacks_init(void)
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

/* nghttp2_session_send() with c marked as inside the session: a close
 * asked for by its callbacks waits (grpc_int.h, close_pending). */
static int session_send(grpc_conn *c)
{
    c->in_session++;
    int rv = nghttp2_session_send(c->h2);
    c->in_session--;
    return rv;
}

bool h2_session_input(grpc_conn *c, const uint8_t *data, size_t n)
{
    c->in_session++;
    ssize_t rv = nghttp2_session_mem_recv(c->h2, data, n);
    c->in_session--;
    if (c->close_pending)
        return false;
    if (rv >= 0)
        return true;
    if (rv != NGHTTP2_ERR_BAD_CLIENT_MAGIC) {
        nghttp2_session_terminate_session(c->h2,
                                          rv == NGHTTP2_ERR_FLOODED
                                              ? NGHTTP2_ENHANCE_YOUR_CALM
                                              : NGHTTP2_PROTOCOL_ERROR);
        if (session_send(c) == 0 && !c->close_pending)
            h2_batch_flush(c);
    }
    return false;
}

bool h2_session_open(grpc_conn *c)
{
    if (nghttp2_session_server_new2(&c->h2, callbacks, c, options) != 0) {
        c->h2 = NULL;
        return false;
    }
    nghttp2_settings_entry iv[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, c->t->s->cfg.grpc_max_streams},
        {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, STREAM_WINDOW},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, MAX_HEADER_LIST},
    };
    nghttp2_submit_settings(c->h2, NGHTTP2_FLAG_NONE, iv, 3);
    nghttp2_session_set_local_window_size(c->h2, NGHTTP2_FLAG_NONE, 0,
                                          CONN_WINDOW);
    return true;
}

void h2_session_close(grpc_conn *c)
{
    nghttp2_session_del(c->h2); /* NULL: nothing */
    c->h2 = NULL;
}

bool h2_session_send(grpc_conn *c)
{
    return session_send(c) == 0 && !c->close_pending;
}

bool h2_session_wants_read(grpc_conn *c)
{
    return nghttp2_session_want_read(c->h2) != 0;
}

bool h2_session_wants_write(grpc_conn *c)
{
    return nghttp2_session_want_write(c->h2) != 0;
}

void h2_session_notice(grpc_conn *c)
{
    nghttp2_submit_shutdown_notice(c->h2);
}

void h2_session_goaway(grpc_conn *c)
{
    nghttp2_submit_goaway(c->h2, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(c->h2),
                          NGHTTP2_NO_ERROR, NULL, 0);
}
