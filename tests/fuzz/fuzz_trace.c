/*
 * fuzz_trace.c - the W3C traceparent parser (core/trace.h), and what else
 * takes a caller's bytes on the way to a span: tracestate, the trace
 * settings body (protocol/trace_settings.h) and the OTLP encoder
 * (telemetry/otlp.h).
 *
 * Input: a header value. Properties: a value that parses has the form the
 * parser claims (it is written back, with the caller's span id, as the
 * same 55 bytes, for version 00 and for the first 55 bytes of a later
 * version); one that does not parse leaves the context as it was; a
 * request's context never has an all-zero trace or span id, and it
 * continues the caller's trace exactly when the value parses. The same
 * bytes as a tracestate are kept whole or not at all, and only when
 * printable ASCII; as a settings body, they change the settings only when
 * taken, to a ratio in (0, 1]; as a request's path, request id and
 * tracestate, they encode to spans that decode again with every string
 * valid UTF-8.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzlib.h"
#include "otlp.h"
#include "otlp_trace.pb-c.h"
#include "trace.h"
#include "trace_settings.h"
#include "tx_utf8.h"

static bool zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data;
    trace_ctx t, before;
    memset(&t, 0xAB, sizeof t);
    before = t;
    bool ok = trace_parse(v, size, &t);
    if (!ok) {
        FUZZ_CHECK(memcmp(&t, &before, sizeof t) == 0,
                   "a refused value changed the context");
    } else {
        FUZZ_CHECK(size >= TRACE_PARENT_LEN, "parsed %zu bytes", size);
        memcpy(t.span_id, t.parent_id, sizeof t.span_id);
        char out[TRACE_PARENT_LEN + 1];
        trace_format(&t, out);
        FUZZ_CHECK(memcmp(out + 2, v + 2, TRACE_PARENT_LEN - 2) == 0,
                   "%.55s parsed, but writes back as %s", v, out);
        FUZZ_CHECK(!zero(t.trace_id, 16) && !zero(t.parent_id, 8),
                   "an all-zero id parsed");
    }
    trace_ctx r;
    trace_begin(&r, v, size, NULL);
    FUZZ_CHECK(r.continued == ok, "continued %d, parsed %d", r.continued, ok);
    FUZZ_CHECK(!zero(r.trace_id, 16) && !zero(r.span_id, 8),
               "a request got an all-zero id");
    if (ok)
        FUZZ_CHECK(memcmp(r.trace_id, t.trace_id, 16) == 0
                       && memcmp(r.parent_id, t.parent_id, 8) == 0,
                   "the caller's trace was not continued");

    char state[TRACE_STATE_MAX + 1];
    trace_state_copy(v, size, state);
    size_t sl = strlen(state);
    FUZZ_CHECK(sl == 0 || (sl == size && memcmp(state, v, size) == 0),
               "tracestate kept in part");
    for (size_t i = 0; i < sl; i++)
        FUZZ_CHECK(state[i] >= 0x20 && state[i] < 0x7f, "kept a control byte");

    trace_setting ts = {true, 0.5}, def = {true, 1.0}, was = ts;
    char msg[512];
    if (trace_settings_update(data, size, &ts, &def, msg, sizeof msg))
        FUZZ_CHECK(ts.ratio > 0 && ts.ratio <= 1, "ratio %g", ts.ratio);
    else
        FUZZ_CHECK(memcmp(&ts, &was, sizeof ts) == 0 && msg[0] != '\0',
                   "a refused body changed the settings, or said nothing");

    trace_record rec;
    memset(&rec, 0, sizeof rec);
    rec.ctx = r;
    memcpy(rec.trace_state, state, sl + 1);
    size_t n = size < sizeof rec.path - 1 ? size : sizeof rec.path - 1;
    memcpy(rec.path, v, n); /* NUL bytes end it early, as in a C string */
    memcpy(rec.request_id, v, size < sizeof rec.request_id - 1
                                  ? size : sizeof rec.request_id - 1);
    snprintf(rec.method, sizeof rec.method, "POST");
    snprintf(rec.route, sizeof rec.route, "/v1/cumsum");
    rec.t0 = 1000, rec.body = 2000, rec.handler = 3000, rec.reply = 9000;
    rec.done = 10000, rec.parse_ns = 500, rec.render_ns = 700;
    rec.work.enqueued_ns = 4000, rec.work.started_ns = 5000;
    rec.work.finished_ns = 8000, rec.work.device = rec.path;
    rec.work.batch = 1;
    rec.status = size % 600;
    static otlp_encoder *enc;
    if (enc == NULL)
        enc = otlp_encoder_new(1);
    const uint8_t *out;
    size_t len, spans;
    FUZZ_CHECK(enc != NULL
                   && otlp_encode(enc, &rec, 1, "tally", "0", 20000, 10000,
                                  &out, &len, &spans),
               "encoding failed");
    Tally__Otlp__ExportTraceServiceRequest *q =
        tally__otlp__export_trace_service_request__unpack(NULL, len, out);
    FUZZ_CHECK(q != NULL && q->n_resource_spans == 1, "spans do not decode");
    Tally__Otlp__ScopeSpans *ss = q->resource_spans[0]->scope_spans[0];
    FUZZ_CHECK(ss->n_spans == spans && spans >= 6, "%zu spans, said %zu",
               ss->n_spans, spans);
    for (size_t i = 0; i < ss->n_spans; i++) {
        Tally__Otlp__Span *sp = ss->spans[i];
        fuzz_utf8("a span's name", sp->name, strlen(sp->name));
        fuzz_utf8("a trace_state", sp->trace_state, strlen(sp->trace_state));
        for (size_t k = 0; k < sp->n_attributes; k++) {
            Tally__Otlp__AnyValue *av = sp->attributes[k]->value;
            if (av->value_case == TALLY__OTLP__ANY_VALUE__VALUE_STRING_VALUE)
                fuzz_utf8("an attribute", av->string_value,
                          strlen(av->string_value));
        }
    }
    tally__otlp__export_trace_service_request__free_unpacked(q, NULL);
    return 0;
}
