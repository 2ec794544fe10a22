/*
 * ops.c - the operational routes: health and readiness, server and model
 * metadata, the Triton-style model config, and Prometheus metrics.
 */
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "http.h"
#include "kserve_json.h"
#include "reply.h"

static void reply_owned_json(request *r, int status, char *text)
{
    if (text == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory");
        return;
    }
    http_reply_buffer(r, status, "application/json", text, strlen(text));
}

static char *copy_text(const char *s)
{
    return strdup(s);
}

void api_server_metadata(request *r)
{
    api_state *a = r->s->app;
    reply_owned_json(r, 200, kserve_server_metadata(r->s->version,
                                                    a->shm != NULL,
                                                    seq_enabled(a->seqs)));
}

void api_health_live(request *r)
{
    reply_owned_json(r, 200, copy_text("{\"live\":true}"));
}

/* Ready while not draining. A server whose devices are still building
 * their kernels, or have failed, stays ready, since the host backend
 * answers in their place, and says so: how many devices are in the pool,
 * how many are on their way to it, and whether the host runs every job. */
void api_health_ready(request *r)
{
    tallyd_server *s = r->s;
    if (atomic_load(&s->draining)) {
        reply_owned_json(r, 503,
                         copy_text("{\"ready\":false,\"error\":\"the "
                                   "server is shutting down\"}"));
        return;
    }
    sched_pool p = sched_devices(api_sched(r));
    if (p.up == p.devices) {
        reply_owned_json(r, 200, copy_text("{\"ready\":true}"));
        return;
    }
    const char *why =
        p.on_host ? "every device has failed; the host backend runs every job"
        : p.compiling > 0
            ? "devices are building their kernels; the host backend runs "
              "their jobs until they join the pool"
            : "failed devices have left the pool";
    char text[320];
    snprintf(text, sizeof text,
             "{\"ready\":true,\"devices\":%u,\"devices_up\":%u,"
             "\"devices_compiling\":%u,\"degraded\":\"%s\"}",
             p.devices, p.up, p.compiling, why);
    reply_owned_json(r, 200, copy_text(text));
}

void api_model_metadata(request *r)
{
    reply_owned_json(r, 200, kserve_model_metadata());
}

void api_model_ready(request *r)
{
    bool draining = atomic_load(&r->s->draining);
    reply_owned_json(r, draining ? 503 : 200,
                     copy_text(draining
                                   ? "{\"name\":\"cumsum\",\"ready\":false}"
                                   : "{\"name\":\"cumsum\",\"ready\":true}"));
}

void api_model_config(request *r)
{
    reply_owned_json(r, 200, kserve_model_config(api_sequence_idle_us(r->s)));
}

/* GET /v2/models[/cumsum[/versions/1]]/stats: Triton's statistics
 * extension */
void api_model_stats(request *r)
{
    size_t len;
    char *text = stats_render(&r->s->stats, KSERVE_MODEL, KSERVE_VERSION, &len);
    if (text == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory");
        return;
    }
    http_reply_buffer(r, 200, "application/json", text, len);
}

/* GET /metrics */
void api_metrics(request *r)
{
    tallyd_server *s = r->s;
    size_t len;
    textbuf o;
    textbuf_init(&o, 8192);
    /* section by section: the requests', the transport's, the
     * scheduler's */
    metrics_render(&s->metrics, s->device, s->version,
                   atomic_load(&s->inflight), &o);
    http_render_metrics(r->t, &o);
    api_state *a = s->app;
    if (a->grpc != NULL)
        grpc_door_render_metrics(a->grpc, &o);
    sched_render_metrics(api_sched(r), &o);
    if (seq_enabled(a->seqs))
        seq_render_metrics(a->seqs, &o);
    if (a->traces != NULL)
        otlp_exporter_render_metrics(a->traces, &o);
    if (a->shm != NULL) {
        unsigned regions;
        uint64_t bytes;
        shm_counts(a->shm, &regions, &bytes);
        metrics_one(&o, "tally_shm_regions", "gauge",
                    "System shared-memory regions registered.", "%u", regions);
        metrics_one(&o, "tally_shm_bytes", "gauge",
                    "Bytes of shared memory mapped (regions registered, and "
                    "unregistered ones a job still holds).",
                    "%llu", (unsigned long long)bytes);
    }
    char *text = textbuf_take(&o, &len);
    if (text == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory");
        return;
    }
    http_reply_buffer(r, 200, "text/plain; version=0.0.4; charset=utf-8", text,
                      len);
}
