/*
 * trace.c - Triton's trace extension: GET and POST /v2/trace/setting (and
 * the per-model route, which shares the one setting), changing which new
 * traces are sampled while tallyd runs (trace_settings.h says how Triton's
 * settings map onto tally's ratio). Protected like /metrics when tokens
 * are on. With tracing off (no OTLP endpoint) a GET says OFF and a POST is
 * refused: there is nothing to send spans to.
 */
#include <string.h>

#include "api.h"
#include "reply.h"

void api_trace_start(api_state *a, tallyd_server *s, otlp_exporter *e)
{
    double r = trace_sampler_ratio(&s->sampler);
    a->traces = e;
    a->trace.on = r > 0;
    a->trace.ratio = r > 0 ? r : 1.0;
    a->trace_default = a->trace;
}

void api_trace_setting(request *r)
{
    api_state *a = r->s->app;
    char msg[512];
    trace_setting now = {false, 1.0};
    if (strcmp(r->method, "POST") == 0) {
        if (a->traces == NULL) {
            http_error(r, STATUS_FORBIDDEN,
                       "tracing is off on this server: start tallyd with "
                       "--otlp-endpoint (or OTEL_EXPORTER_OTLP_ENDPOINT) to "
                       "send spans to a collector");
            return;
        }
        uv_mutex_lock(&a->trace_mu);
        bool ok = trace_settings_update(http_body(r), r->body_len, &a->trace,
                                    &a->trace_default, msg, sizeof msg);
        now = a->trace;
        if (ok)
            trace_sampler_set(&r->s->sampler, now.on ? now.ratio : 0);
        uv_mutex_unlock(&a->trace_mu);
        if (!ok) {
            http_error(r,
                       r->body_len > TRACE_JSON_BODY_MAX ? STATUS_TOO_LARGE
                                                         : STATUS_INVALID,
                       "%s", msg);
            return;
        }
    } else if (a->traces != NULL) {
        uv_mutex_lock(&a->trace_mu);
        now = a->trace;
        uv_mutex_unlock(&a->trace_mu);
    }
    char *text = trace_settings_render(&now);
    if (text == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory");
        return;
    }
    http_reply_buffer(r, 200, "application/json", text, strlen(text));
}
