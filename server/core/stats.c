/*
 * stats.c - Triton-style inference statistics.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "stats.h"
#include "textbuf.h"

static void add(stats_duration *d, uint64_t ns)
{
    d->count++;
    d->ns += ns;
}

void stats_init(model_stats *m)
{
    memset(&m->v, 0, sizeof m->v);
    uv_mutex_init(&m->mu);
}

void stats_request(model_stats *m, bool ok, uint64_t total_ns,
                   uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns,
                   uint64_t output_ns)
{
    uint64_t ms = 0;
    if (ok)
        ms = (uint64_t)wall_coarse_ms(); /* Triton's last_inference */
    uv_mutex_lock(&m->mu);
    stats_view *v = &m->v;
    if (!ok) {
        add(&v->fail, total_ns);
    } else {
        v->last_inference_ms = ms;
        v->inference_count++;
        add(&v->success, total_ns);
        add(&v->queue, queue_ns);
        add(&v->compute_input, input_ns);
        add(&v->compute_infer, infer_ns);
        add(&v->compute_output, output_ns);
    }
    uv_mutex_unlock(&m->mu);
}

void stats_execution(model_stats *m, unsigned batch, uint64_t input_ns,
                     uint64_t infer_ns, uint64_t output_ns)
{
    unsigned b = batch > STATS_MAX_BATCH ? STATS_MAX_BATCH : batch;
    uv_mutex_lock(&m->mu);
    stats_view *v = &m->v;
    v->execution_count++;
    add(&v->batch[b].compute_input, input_ns);
    add(&v->batch[b].compute_infer, infer_ns);
    add(&v->batch[b].compute_output, output_ns);
    uv_mutex_unlock(&m->mu);
}

void stats_snapshot(model_stats *m, stats_view *out)
{
    uv_mutex_lock(&m->mu);
    *out = m->v;
    uv_mutex_unlock(&m->mu);
}

static void duration(textbuf *o, const char *name, const stats_duration *d,
                     bool comma)
{
    textbuf_put(o, "\"%s\":{\"count\":%llu,\"ns\":%llu}%s", name,
                (unsigned long long)d->count, (unsigned long long)d->ns,
                comma ? "," : "");
}

char *stats_render(model_stats *ms, const char *name, const char *version,
                   size_t *len)
{
    stats_view *m = malloc(sizeof *m); /* 3 KB: off the stack */
    if (m == NULL)
        return NULL;
    stats_snapshot(ms, m);
    textbuf o;
    textbuf_init(&o, 1024);
    static stats_duration zero;
    textbuf_put(&o,
                "{\"model_stats\":[{\"name\":\"%s\",\"version\":\"%s\","
                "\"last_inference\":%llu,\"inference_count\":%llu,"
                "\"execution_count\":%llu,\"inference_stats\":{",
                name, version, (unsigned long long)m->last_inference_ms,
                (unsigned long long)m->inference_count,
                (unsigned long long)m->execution_count);
    duration(&o, "success", &m->success, true);
    duration(&o, "fail", &m->fail, true);
    duration(&o, "queue", &m->queue, true);
    duration(&o, "compute_input", &m->compute_input, true);
    duration(&o, "compute_infer", &m->compute_infer, true);
    duration(&o, "compute_output", &m->compute_output, true);
    duration(&o, "cache_hit", &zero, true); /* tally caches no answers */
    duration(&o, "cache_miss", &zero, false);
    textbuf_put(&o, "},\"batch_stats\":[");
    bool first = true;
    for (unsigned b = 1; b <= STATS_MAX_BATCH; b++) {
        if (m->batch[b].compute_infer.count == 0)
            continue;
        textbuf_put(&o, "%s{\"batch_size\":%u,", first ? "" : ",", b);
        duration(&o, "compute_input", &m->batch[b].compute_input, true);
        duration(&o, "compute_infer", &m->batch[b].compute_infer, true);
        duration(&o, "compute_output", &m->batch[b].compute_output, false);
        textbuf_put(&o, "}");
        first = false;
    }
    textbuf_put(&o, "]}]}");
    free(m);
    return textbuf_take(&o, len);
}
