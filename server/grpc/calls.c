/*
 * calls.c - the gRPC door's streams and calls (grpc_int.h): a message becoming
 * a call, the handler API (grpc.h's grpc_call_*), and a call's end.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "clock.h"
#include "grpc_int.h"
#include "reqlog.h"

/* The call's record from its message on (grpc_int.h): what the method
 * and its stream say of it, and its first two stamps. */
static void record_begin(grpc_call *call, uint64_t t0)
{
    snprintf(call->route, sizeof call->route, "%s/%s", call->svc->service,
             call->m->name);
    snprintf(call->path, sizeof call->path, "/%s", call->route);
    req_record *rec = &call->rec;
    rec->door = METRIC_GRPC;
    rec->label = call->m->label;
    rec->ended = call->m->ended;
    rec->method = call->m->name;
    rec->path = call->path;
    rec->route = call->route;
    rec->trace = &call->trace;
    /* the caller's tracestate goes on only with its own sampled trace */
    if (call->tracestate != NULL && (call->trace.flags & TRACE_SAMPLED)
        && call->trace.continued)
        rec->tracestate = call->tracestate;
    rec->t0 = t0;
    rec->body = now_ns();
    rec->in_flight = true;
}

/* The call's end: its record, for the metrics, the statistics, the
 * access log and its spans (reqlog.h). */
static void call_account(grpc_call *call)
{
    if (call->counted)
        return;
    call->counted = true;
    req_record *rec = &call->rec;
    if (atomic_load(&call->gone) && rec->err == STATUS_OK)
        rec->err = STATUS_CANCELLED;
    rec->status = status_grpc(rec->err);
    rec->failed = rec->err != STATUS_OK;
    rec->bytes_in = call->len;
    rec->bytes_out = call->total;
    rec->done = now_ns();
    req_end(call->t->s, rec);
}

void h2_call_maybe_free(grpc_call *call)
{
    if (list_linked(&call->link) || call->suspended || call->writes > 0
        || call->busy)
        return;
    call_account(call);
    if (call->work_free != NULL)
        call->work_free(call->work);
    eng_buffer_free(call->buf);
    if (call->reserved)
        h2_unreserve(call->t, call->reserved);
    free(call->head);
    free(call->tracestate);
    free(call);
}

/* Takes call out of its stream's FIFO. */
void h2_fifo_remove(gstream *st, grpc_call *call)
{
    if (!list_linked(&call->link))
        return;
    INVARIANT(call->st == st);
    list_remove(&call->link);
    call->st = NULL; /* the stream may close before the call is freed */
}

/* The stream is going (closed, reset, or its connection lost): every call
 * still in it is detached and marked gone. */
void h2_detach_calls(gstream *st, bool gone)
{
    for (grpc_call *call; (call = h2_first_call(st)) != NULL;) {
        list_remove(&call->link);
        call->st = NULL;
        if (gone && !(call->answered && call->sent == call->total))
            atomic_store(&call->gone, true);
        h2_call_maybe_free(call);
    }
}

void h2_stream_free(gstream *st)
{
    grpc_conn *c = st->conn;
    h2_detach_calls(st, true);
    list_remove(&st->link);
    eng_buffer_free(st->buf);
    if (st->reserved)
        h2_unreserve(c->t, st->reserved);
    free(st->tracestate);
    free(st);
}

/* A failure no call carries (refused before its message was whole):
 * counted and logged here, as a request of its own. */
void h2_count_stream_failure(gstream *st, status_code code)
{
    grpc_transport *t = st->conn->t;
    req_record rec = {
        .door = METRIC_GRPC,
        .label = st->m ? st->m->label : t->svc->other_label,
        .status = status_grpc(code),
        .err = code,
        .failed = true,
        .method = st->m ? st->m->name : "",
        .path = st->path,
        .route = st->path[0] == '/' ? st->path + 1 : st->path,
        .trace = &st->trace,
        .t0 = st->opened_ns,
        .done = now_ns(),
    };
    req_end(t->s, &rec);
}

/* The method /<service>/<method> names, of any service in the chain. */
static const grpc_method *find_method(grpc_transport *t, const char *path,
                                      const grpc_service **svc)
{
    if (path[0] != '/')
        return NULL;
    for (const grpc_service *v = t->svc; v != NULL; v = v->next) {
        size_t sl = strlen(v->service);
        if (strncmp(path + 1, v->service, sl) != 0 || path[1 + sl] != '/')
            continue;
        for (unsigned i = 0; i < v->n; i++)
            if (strcmp(path + 2 + sl, v->methods[i].name) == 0) {
                *svc = v;
                return &v->methods[i];
            }
    }
    return NULL;
}

void h2_stream_headers_done(gstream *st)
{
    grpc_transport *t = st->conn->t;
    char msg[400];
    if (!st->post) {
        h2_stream_fail(st, STATUS_METHOD, "gRPC calls are POST requests");
        return;
    }
    st->m = find_method(t, st->path, &st->svc);
    if (st->m == NULL || st->m->handler == NULL) {
        snprintf(msg, sizeof msg,
                 "%s: this server does not implement the method %.200s",
                 st->m ? "UNIMPLEMENTED" : "unknown method", st->path);
        h2_stream_fail(st, STATUS_METHOD, msg);
        return;
    }
    if (!st->grpc_ct) {
        h2_stream_fail(st, STATUS_MEDIA_TYPE,
                       "content-type must be application/grpc");
        return;
    }
    if (t->auth != NULL && (!st->m->open || t->s->cfg.auth_health)) {
        auth_result a =
            auth_check(t->auth, st->has_auth ? st->auth : NULL, &st->caller);
        if (a != AUTH_OK) {
            h2_stream_fail(st, STATUS_UNAUTHORIZED,
                           a == AUTH_MISSING
                               ? "a bearer token is required: send "
                                 "\"authorization: Bearer <token>\" "
                                 "metadata"
                               : "the bearer token is not valid");
            return;
        }
    }
    if (st->bad_timeout) {
        h2_stream_fail(st, STATUS_INVALID,
                       "grpc-timeout must be 1 to 8 digits and a unit "
                       "(H, M, S, m, u, n)");
        return;
    }
    if (st->bad_encoding) {
        h2_stream_fail(st, STATUS_ENCODING,
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
        h2_stream_fail(st, STATUS_INVALID,
                       "a unary call sent more than one message");
        return;
    }
    st->got_message = true;
    grpc_call *call = calloc(1, sizeof *call);
    if (call == NULL) {
        h2_stream_fail(st, STATUS_NOMEM, "out of memory");
        return;
    }
    call->t = t;
    call->st = st;
    call->trace = st->trace;
    call->tracestate = st->tracestate;
    st->tracestate = NULL;
    call->m = st->m;
    call->svc = st->svc;
    call->buf = st->buf;
    call->msg = st->buf + st->lead;
    call->len = st->want;
    call->reserved = st->reserved;
    call->timeout_ms = st->timeout_ms;
    record_begin(call, st->msg_started_ns);
    st->buf = NULL;
    st->reserved = 0;
    st->pre.got = 0;
    atomic_fetch_add(&s->inflight, 1);
    counter_add(&t->c.calls, 1);
    list_push_back(&st->calls, &call->link);
    call->busy = true;
    stream_call(st, call);
    call->busy = false;
    if (!call->answered && !call->suspended && call->st != NULL)
        grpc_call_fail(call, STATUS_LAUNCH, "the handler gave no answer");
    h2_call_maybe_free(call);
}

/* Decodes the call's message when it came compressed, and runs the
 * method's handler. */
static void stream_call(gstream *st, grpc_call *call)
{
    grpc_transport *t = st->conn->t;
    tallyd_server *s = t->s;
    if (st->compressed) {
        uint8_t *out;
        size_t outlen, more;
        char msg[256];
        status_code e =
            grpc_message_decode(s, st->encoding, call->msg, call->len, &out,
                                &outlen, &more, msg, sizeof msg);
        if (e != STATUS_OK) {
            grpc_call_fail(call, e, "%s", msg);
            return;
        }
        eng_buffer_free(call->buf);
        h2_unreserve(t, call->reserved);
        call->reserved = more;
        call->buf = call->msg = out;
        call->len = outlen;
    }
    counter_add(&s->metrics.bytes_in, call->len);
    call->rec.handler = now_ns();
    st->m->handler(call);
}

/* Message bytes for st: the 5-byte prefix, then the message, into a
 * buffer sized by what has come. */
void h2_stream_data(gstream *st, const uint8_t *data, size_t len)
{
    grpc_conn *c = st->conn;
    grpc_transport *t = c->t;
    size_t max = t->s->cfg.max_body_bytes;
    while (len > 0 && !st->rejected) {
        if (st->pre.got < GRPC_PREFIX_LEN) {
            if (st->pre.got == 0 && st->buf == NULL)
                st->msg_started_ns = now_ns();
            size_t n = grpc_prefix_feed(&st->pre, data, len);
            data += n;
            len -= n;
            if (st->pre.got < GRPC_PREFIX_LEN)
                return;
            char msg[200];
            status_code e =
                grpc_prefix_check(&st->pre, st->encoding != 0, max,
                                  &st->compressed, &st->want, msg, sizeof msg);
            if (e != STATUS_OK) {
                h2_stream_fail(st, e, msg);
                return;
            }
            st->cap = st->want < FIRST_BUFFER ? st->want : FIRST_BUFFER;
            st->lead = 0;
            st->got = 0;
            if (!h2_reserve(t, st->cap + 128)) {
                h2_stream_fail(st, STATUS_NOMEM,
                               "the server holds too many messages now "
                               "(--max-buffered-bytes); retry after a "
                               "moment");
                return;
            }
            st->reserved = st->cap + 128;
            st->buf = eng_buffer_alloc(st->cap);
            if (st->buf == NULL) {
                h2_stream_fail(st, STATUS_NOMEM, "out of memory");
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
            if (!h2_reserve(t, st->want - st->cap)) {
                h2_stream_fail(st, STATUS_NOMEM,
                               "the server holds too many messages now "
                               "(--max-buffered-bytes); retry after a "
                               "moment");
                return;
            }
            st->reserved += st->want - st->cap;
            uint8_t *nb = eng_buffer_alloc(st->want + lead);
            if (nb == NULL) {
                h2_stream_fail(st, STATUS_NOMEM, "out of memory");
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

uint8_t *grpc_call_message(grpc_call *c, size_t *len)
{
    *len = c->len;
    return c->msg;
}

int64_t grpc_call_timeout_ms(const grpc_call *c)
{
    return c->timeout_ms;
}

auth_caller grpc_call_caller(const grpc_call *c)
{
    return c->st != NULL ? c->st->caller : AUTH_ANYONE;
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
    OWNER_ASSERT(grpc_call_owner(c));
    return c->work;
}

void grpc_call_reply(grpc_call *c, void *head, size_t head_len,
                     const void *tail, size_t tail_len)
{
    if (c->answered) {
        free(head);
        return;
    }
    c->rec.reply = now_ns();
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
    if (c->st != NULL && h2_first_call(c->st) == c)
        h2_stream_respond(c->st);
}

void grpc_call_fail(grpc_call *c, status_code st, const char *fmt, ...)
{
    if (c->answered)
        return;
    c->answered = true;
    c->rec.err = st;
    gstream *s = c->st;
    if (s == NULL)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    h2_stream_fail(s, st, msg);
}

void grpc_call_suspend(grpc_call *c, grpc_handler on_resume)
{
    OWNER_ASSERT(grpc_call_owner(c));
    c->suspended = true;
    c->on_resume = on_resume;
}

void grpc_call_resume(grpc_call *c)
{
    mailbox_post(&c->t->resumed, &c->resume_item);
}

bool grpc_call_gone(const grpc_call *c)
{
    return atomic_load_explicit(&c->gone, memory_order_relaxed);
}

void grpc_call_unsuspend(grpc_call *c)
{
    c->suspended = false;
}

grpc_call *grpc_call_follow(grpc_call *c, grpc_handler on_resume)
{
    OWNER_ASSERT(grpc_call_owner(c));
    gstream *st = c->st;
    if (st == NULL)
        return NULL;
    grpc_call *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    grpc_transport *t = c->t;
    f->t = t;
    f->st = st;
    f->trace = c->trace;
    f->m = c->m;
    f->svc = c->svc;
    f->timeout_ms = c->timeout_ms;
    record_begin(f, now_ns());
    f->rec.handler = f->rec.body;
    atomic_fetch_add(&t->s->inflight, 1);
    counter_add(&t->c.calls, 1);
    list_push_back(&st->calls, &f->link);
    f->suspended = true;
    f->on_resume = on_resume;
    return f;
}

tallyd_server *grpc_call_server(const grpc_call *c)
{
    return c->t->s;
}

loop_owner *grpc_call_owner(const grpc_call *c)
{
    static loop_owner none; /* a transport that never started has none */
    return c->t->mb != NULL ? &c->t->mb->owner : &none;
}

void *grpc_call_loop_data(const grpc_call *c)
{
    OWNER_ASSERT(grpc_call_owner(c));
    return c->t->loop_data;
}

const trace_ctx *grpc_call_trace(const grpc_call *c)
{
    return &c->trace;
}

req_record *grpc_call_record(grpc_call *c)
{
    OWNER_ASSERT(grpc_call_owner(c));
    return &c->rec;
}

void grpc_call_set_status(grpc_call *c, status_code st)
{
    c->rec.err = st;
}
