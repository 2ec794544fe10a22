/*
 * request.c - the request object: creation, ids, references, and the
 * header and query accessors handlers use.
 */
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "body.h"
#include "buffer.h"
#include "http.h"
#include "zalloc.h"

/* splitmix64's finaliser: a bijection, so distinct counters give distinct
 * ids, and consecutive ones look unrelated. */
static uint64_t mix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void request_seed_ids(tallyd_server *s)
{
    uint64_t seed = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (f == NULL || fread(&seed, sizeof seed, 1, f) != 1)
        seed = now_ns() ^ ((uint64_t)getpid() << 32);
    if (f != NULL)
        fclose(f);
    atomic_store(&s->next_id, seed);
}

request *request_new(http_transport *t, struct MHD_Connection *conn,
                     const char *url, const char *method)
{
    tallyd_server *s = t->s;
    size_t un = strlen(url); /* within libmicrohttpd's connection memory */
    request *r = zalloc(sizeof *r + un + 1);
    if (r == NULL)
        return NULL;
    r->s = s;
    r->conn = conn;
    r->rec.t0 = now_ns();
    size_t mn = strnlen(method, sizeof r->method - 1);
    memcpy(r->method, method, mn); /* zeroed: ends with '\0' */
    memcpy(r->path_buf, url, un + 1);
    r->path = r->path_buf;
    r->t = t;
    r->rec.label = t->routes->unmatched;
    r->rec.status = 500;
    uv_mutex_init(&r->mu);
    atomic_init(&r->refs, 1);
    r->timeout_ms = -1;
    r->caller = AUTH_ANYONE;

    /* the id: X-Request-Id when it is a sane token, else a fresh one */
    const char *given =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    size_t gn = given != NULL ? strnlen(given, sizeof r->id) : 0;
    bool ok = gn > 0 && gn < sizeof r->id;
    for (const char *p = given; ok && *p != '\0'; p++)
        ok = *p > 0x20 && *p < 0x7f && *p != '"' && *p != '\\';
    if (ok) {
        memcpy(r->id, given, gn);
    } else {
        uint64_t v = mix64(atomic_fetch_add(&s->next_id, 1));
        for (int i = 15; i >= 0; i--, v >>= 4)
            r->id[i] = "0123456789abcdef"[v & 15];
        r->id[16] = '\0';
    }
    const char *tp =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "traceparent");
    trace_begin(&r->trace, tp, tp ? strlen(tp) : 0, &s->sampler);
    if (r->trace.continued && (r->trace.flags & TRACE_SAMPLED)) {
        const char *ts =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "tracestate");
        if (ts != NULL)
            r->tracestate = strdup(ts); /* NULL when memory runs out */
    }
    r->rec.door = METRIC_HTTP;
    r->rec.method = r->method;
    r->rec.path = r->path;
    r->rec.request_id = r->id;
    r->rec.trace = &r->trace;
    r->rec.tracestate = r->tracestate;
    atomic_fetch_add(&s->inflight, 1);
    return r;
}

uint8_t *http_body(request *r)
{
    static _Alignas(128) uint8_t empty[128];
    return r->body != NULL ? r->body : empty;
}

void request_release(request *r)
{
    if (atomic_fetch_sub(&r->refs, 1) != 1)
        return;
    if (r->work_free != NULL)
        r->work_free(r->work);
    if (r->ctx_free != NULL)
        r->ctx_free(r->ctx);
    http_body_release(r);
    eng_buffer_free(r->body);
    free(r->tracestate);
    for (int i = 0; i < r->nextra; i++) {
        free(r->extra_headers[i][0]);
        free(r->extra_headers[i][1]);
    }
    free(r->extra_headers);
    if (r->response != NULL)
        MHD_destroy_response(r->response);
    uv_mutex_destroy(&r->mu);
    free(r);
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
    if (r->nextra >= HTTP_EXTRA_MAX)
        return;
    if (r->extra_headers == NULL
        && (r->extra_headers =
                malloc(HTTP_EXTRA_MAX * sizeof *r->extra_headers))
               == NULL)
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
