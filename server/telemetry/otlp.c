/*
 * otlp.c - finished requests as OTLP spans (otlp.h), through protobuf-c.
 *
 * One batch's messages live in a few arrays allocated together and freed
 * once the request is packed: spans, their attributes and values, and
 * the pointer arrays protobuf-c wants.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "otlp.h"
#include "otlp_trace.pb-c.h"
#include "tx_utf8.h"

#define ATTRS_PER_RECORD 16 /* attributes of one record's spans, at most */

typedef Tally__Otlp__Span span;
typedef Tally__Otlp__KeyValue kv;
typedef Tally__Otlp__AnyValue anyv;

/* The arrays one batch's messages live in. */
typedef struct {
    span *spans;
    span **span_ptrs;
    kv *kvs;
    kv **kv_ptrs;
    anyv *vals;
    Tally__Otlp__Status *statuses;
    uint8_t (*ids)[8]; /* the children's span ids */
    char (*names)[2 * sizeof ((trace_record *)0)->route + 16];
    Tally__Otlp__Span__Link *links, **link_ptrs;
    size_t nspans, nkvs, nids, nlinks;
    uint64_t wall, mono;
} arena;

static uint64_t unix_ns(const arena *a, uint64_t t)
{
    return a->wall - (a->mono - t); /* t is never after mono */
}

static kv *attr(arena *a, span *sp, const char *key)
{
    kv *k = &a->kvs[a->nkvs];
    anyv *v = &a->vals[a->nkvs];
    a->kv_ptrs[a->nkvs] = k;
    a->nkvs++;
    tally__otlp__key_value__init(k);
    tally__otlp__any_value__init(v);
    k->key = (char *)key;
    k->value = v;
    if (sp->attributes == NULL)
        sp->attributes = &a->kv_ptrs[a->nkvs - 1];
    sp->n_attributes++;
    return k;
}

static void attr_str(arena *a, span *sp, const char *key, const char *v)
{
    if (tx_utf8_valid(v, strlen(v)) != strlen(v))
        v = "\xEF\xBF\xBD"; /* U+FFFD: protobuf's strings are UTF-8 */
    kv *k = attr(a, sp, key);
    k->value->value_case = TALLY__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
    k->value->string_value = (char *)v;
}

static void attr_int(arena *a, span *sp, const char *key, int64_t v)
{
    kv *k = attr(a, sp, key);
    k->value->value_case = TALLY__OTLP__ANY_VALUE__VALUE_INT_VALUE;
    k->value->int_value = v;
}

/* A span of rec's trace: the request's own (parent NULL) or a child of
 * it, from start to end (stamps). */
static span *add_span(arena *a, const trace_record *rec, const char *name,
                      bool own, uint64_t start, uint64_t end)
{
    span *sp = &a->spans[a->nspans];
    a->span_ptrs[a->nspans] = sp;
    a->nspans++;
    tally__otlp__span__init(sp);
    sp->trace_id.data = (uint8_t *)rec->ctx.trace_id;
    sp->trace_id.len = 16;
    sp->trace_state = (char *)rec->trace_state; /* the caller's (printable
                                                  * ASCII), or "" */
    if (own) {
        sp->span_id.data = (uint8_t *)rec->ctx.span_id;
        sp->kind = TALLY__OTLP__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
        if (rec->ctx.continued) {
            sp->parent_span_id.data = (uint8_t *)rec->ctx.parent_id;
            sp->parent_span_id.len = 8;
        }
    } else {
        uint8_t *id = a->ids[a->nids++];
        trace_span_id(id);
        sp->span_id.data = id;
        sp->kind = TALLY__OTLP__SPAN__SPAN_KIND__SPAN_KIND_INTERNAL;
        sp->parent_span_id.data = (uint8_t *)rec->ctx.span_id;
        sp->parent_span_id.len = 8;
    }
    sp->span_id.len = 8;
    sp->name = (char *)name;
    sp->start_time_unix_nano = unix_ns(a, start);
    sp->end_time_unix_nano = unix_ns(a, end < start ? start : end);
    sp->flags = rec->ctx.flags;
    return sp;
}

/* gRPC codes that are the server's fault (the RPC conventions). */
static bool grpc_server_error(int code)
{
    return code == 2 || code == 4 || code == 12 || code == 13 || code == 14
           || code == 15;
}

static void add_record(arena *a, const trace_record *rec, size_t i)
{
    char *name = a->names[i];
    const char *route = rec->route[0] ? rec->route : NULL;
    if (rec->grpc)
        snprintf(name, sizeof a->names[i], "%s", rec->route);
    else if (route != NULL)
        snprintf(name, sizeof a->names[i], "%s %s", rec->method, route);
    else
        snprintf(name, sizeof a->names[i], "%s", rec->method);
    span *own = add_span(a, rec, name, true, rec->t0, rec->done);
    if (rec->grpc) {
        /* rpc.service and rpc.method: the route split at its last slash;
         * the service's text goes after the span's name, in the same
         * buffer, which outlives the packing */
        const char *slash = strrchr(rec->route, '/');
        size_t sn = slash ? (size_t)(slash - rec->route) : 0;
        char *svc = name + strlen(name) + 1;
        snprintf(svc, sizeof a->names[i] - (size_t)(svc - name), "%.*s",
                 (int)sn, rec->route);
        attr_str(a, own, "rpc.system", "grpc");
        attr_str(a, own, "rpc.service", svc);
        attr_str(a, own, "rpc.method", slash ? slash + 1 : rec->route);
        attr_int(a, own, "rpc.grpc.status_code", rec->status);
    } else {
        attr_str(a, own, "http.request.method", rec->method);
        if (route != NULL)
            attr_str(a, own, "http.route", route);
        attr_str(a, own, "url.path", rec->path);
        attr_int(a, own, "http.response.status_code", rec->status);
        attr_str(a, own, "network.protocol.name", "http");
    }
    if (rec->grpc) {
        attr_int(a, own, "tally.message.bytes_in", (int64_t)rec->bytes_in);
        attr_int(a, own, "tally.message.bytes_out", (int64_t)rec->bytes_out);
    } else {
        attr_int(a, own, "http.request.body.size", (int64_t)rec->bytes_in);
        attr_int(a, own, "http.response.body.size", (int64_t)rec->bytes_out);
        attr_str(a, own, "tally.request_id", rec->request_id);
    }
    if (rec->work.sequence_id[0] != '\0')
        attr_str(a, own, "tally.sequence_id", rec->work.sequence_id);
    bool error = rec->grpc ? grpc_server_error(rec->status) : rec->status >= 500;
    if (error) {
        Tally__Otlp__Status *st = &a->statuses[i];
        tally__otlp__status__init(st);
        st->code = TALLY__OTLP__STATUS__STATUS_CODE__STATUS_CODE_ERROR;
        own->status = st;
    }

    /* the steps, each where it happened */
    if (rec->body > rec->t0)
        add_span(a, rec, "receive", false, rec->t0, rec->body);
    if (rec->decode_ns > 0 && rec->body > 0)
        add_span(a, rec, "decode", false, rec->body,
                 rec->body + rec->decode_ns);
    if (rec->handler > 0)
        add_span(a, rec, "parse", false, rec->handler,
                 rec->handler + rec->parse_ns);
    const trace_work *w = &rec->work;
    if (w->enqueued_ns > 0 && w->started_ns > w->enqueued_ns)
        add_span(a, rec, "queue", false, w->enqueued_ns, w->started_ns);
    if (w->started_ns > 0 && w->finished_ns >= w->started_ns) {
        span *c = add_span(a, rec, "compute", false, w->started_ns,
                           w->finished_ns);
        attr_str(a, c, "tally.device", w->device ? w->device : "");
        if (w->placement != NULL) /* why there: scheduler.h */
            attr_str(a, c, "tally.placement", w->placement);
        attr_int(a, c, "tally.batch_size", w->batch);
        attr_int(a, c, "tally.elements", (int64_t)w->elements);
        if (w->links.n > 0) { /* the batch's other sampled requests */
            c->n_links = w->links.n;
            c->links = &a->link_ptrs[a->nlinks];
            for (unsigned k = 0; k < w->links.n; k++) {
                Tally__Otlp__Span__Link *l = &a->links[a->nlinks];
                tally__otlp__span__link__init(l);
                l->trace_id.data = (uint8_t *)w->links.l[k].trace_id;
                l->trace_id.len = 16;
                l->span_id.data = (uint8_t *)w->links.l[k].span_id;
                l->span_id.len = 8;
                l->flags = TRACE_SAMPLED;
                a->link_ptrs[a->nlinks++] = l;
            }
            c->dropped_links_count = w->links.dropped;
        }
    }
    if (rec->reply > 0 && rec->render_ns > 0 && rec->reply >= rec->render_ns)
        add_span(a, rec, "render", false, rec->reply - rec->render_ns,
                 rec->reply);
    if (rec->reply > 0 && rec->done > rec->reply)
        add_span(a, rec, "send", false, rec->reply, rec->done);
}

struct otlp_encoder {
    arena a;     /* sized for max records, reused */
    size_t max;
    uint8_t *out; /* the last encoding, reused */
    size_t cap;
};

otlp_encoder *otlp_encoder_new(size_t max)
{
    otlp_encoder *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    size_t m = max ? max : 1, spans = m * OTLP_SPANS_PER_RECORD,
           kvs = m * ATTRS_PER_RECORD;
    e->max = m;
    arena *a = &e->a;
    a->spans = malloc(spans * sizeof *a->spans);
    a->span_ptrs = malloc(spans * sizeof *a->span_ptrs);
    a->kvs = malloc(kvs * sizeof *a->kvs);
    a->kv_ptrs = malloc(kvs * sizeof *a->kv_ptrs);
    a->vals = malloc(kvs * sizeof *a->vals);
    a->statuses = malloc(m * sizeof *a->statuses);
    a->ids = malloc(spans * sizeof *a->ids);
    a->names = malloc(m * sizeof *a->names);
    a->links = malloc(m * TRACE_MAX_LINKS * sizeof *a->links);
    a->link_ptrs = malloc(m * TRACE_MAX_LINKS * sizeof *a->link_ptrs);
    if (a->spans == NULL || a->span_ptrs == NULL || a->kvs == NULL
        || a->kv_ptrs == NULL || a->vals == NULL || a->statuses == NULL
        || a->ids == NULL || a->names == NULL || a->links == NULL
        || a->link_ptrs == NULL) {
        otlp_encoder_free(e);
        return NULL;
    }
    return e;
}

void otlp_encoder_free(otlp_encoder *e)
{
    if (e == NULL)
        return;
    arena *a = &e->a;
    free(a->spans);
    free(a->span_ptrs);
    free(a->kvs);
    free(a->kv_ptrs);
    free(a->vals);
    free(a->statuses);
    free(a->ids);
    free(a->names);
    free(a->links);
    free(a->link_ptrs);
    free(e->out);
    free(e);
}

bool otlp_encode(otlp_encoder *e, const trace_record *recs, size_t n,
                 const char *service, const char *version, uint64_t wall_ns,
                 uint64_t mono_ns, const uint8_t **out, size_t *len,
                 size_t *spans_out)
{
    if (n > e->max)
        n = e->max; /* the caller's contract; never past the arena */
    arena a = e->a;
    a.nspans = a.nkvs = a.nids = a.nlinks = 0;
    a.wall = wall_ns;
    a.mono = mono_ns;
    for (size_t i = 0; i < n; i++)
        add_record(&a, &recs[i], i);

    kv rattr[2];
    anyv rval[2];
    kv *rptr[2] = {&rattr[0], &rattr[1]};
    const char *rkeys[2] = {"service.name", "service.version"};
    const char *rvals[2] = {service, version};
    for (int k = 0; k < 2; k++) {
        tally__otlp__key_value__init(&rattr[k]);
        tally__otlp__any_value__init(&rval[k]);
        rattr[k].key = (char *)rkeys[k];
        rattr[k].value = &rval[k];
        rval[k].value_case = TALLY__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
        rval[k].string_value = (char *)rvals[k];
    }
    Tally__Otlp__Resource res = TALLY__OTLP__RESOURCE__INIT;
    res.n_attributes = 2;
    res.attributes = rptr;
    Tally__Otlp__InstrumentationScope scope =
        TALLY__OTLP__INSTRUMENTATION_SCOPE__INIT;
    scope.name = "tally";
    scope.version = (char *)version;
    Tally__Otlp__ScopeSpans ss = TALLY__OTLP__SCOPE_SPANS__INIT;
    ss.scope = &scope;
    ss.n_spans = a.nspans;
    ss.spans = a.span_ptrs;
    Tally__Otlp__ScopeSpans *ssp = &ss;
    Tally__Otlp__ResourceSpans rs = TALLY__OTLP__RESOURCE_SPANS__INIT;
    rs.resource = &res;
    rs.n_scope_spans = 1;
    rs.scope_spans = &ssp;
    Tally__Otlp__ResourceSpans *rsp = &rs;
    Tally__Otlp__ExportTraceServiceRequest req =
        TALLY__OTLP__EXPORT_TRACE_SERVICE_REQUEST__INIT;
    req.n_resource_spans = 1;
    req.resource_spans = &rsp;
    size_t size = tally__otlp__export_trace_service_request__get_packed_size(&req);
    if (size > e->cap) {
        uint8_t *b = realloc(e->out, size);
        if (b == NULL)
            return false;
        e->out = b;
        e->cap = size;
    }
    *len = tally__otlp__export_trace_service_request__pack(&req, e->out);
    *out = e->out;
    *spans_out = a.nspans;
    return true;
}
