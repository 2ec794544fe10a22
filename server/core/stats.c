/*
 * stats.c - Triton-style inference statistics.
 */
#include <time.h>

#include "stats.h"
#include "textbuf.h"

static void add(stats_duration *d, uint64_t ns)
{
    atomic_fetch_add_explicit(&d->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->ns, ns, memory_order_relaxed);
}

void stats_request(model_stats *m, bool ok, uint64_t total_ns,
                   uint64_t queue_ns, uint64_t input_ns, uint64_t infer_ns,
                   uint64_t output_ns)
{
    if (!ok) {
        add(&m->fail, total_ns);
        return;
    }
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    atomic_store_explicit(&m->last_inference_ms,
                          (uint64_t)t.tv_sec * 1000u
                              + (uint64_t)t.tv_nsec / 1000000u,
                          memory_order_relaxed);
    atomic_fetch_add_explicit(&m->inference_count, 1, memory_order_relaxed);
    add(&m->success, total_ns);
    add(&m->queue, queue_ns);
    add(&m->compute_input, input_ns);
    add(&m->compute_infer, infer_ns);
    add(&m->compute_output, output_ns);
}

void stats_execution(model_stats *m, unsigned batch, uint64_t input_ns,
                     uint64_t infer_ns, uint64_t output_ns)
{
    unsigned b = batch > STATS_MAX_BATCH ? STATS_MAX_BATCH : batch;
    atomic_fetch_add_explicit(&m->execution_count, 1, memory_order_relaxed);
    add(&m->batch[b].compute_input, input_ns);
    add(&m->batch[b].compute_infer, infer_ns);
    add(&m->batch[b].compute_output, output_ns);
}

static unsigned long long load(atomic_ullong *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static void duration(textbuf *o, const char *name, stats_duration *d,
                     bool comma)
{
    textbuf_put(o, "\"%s\":{\"count\":%llu,\"ns\":%llu}%s", name,
                load(&d->count), load(&d->ns), comma ? "," : "");
}

char *stats_render(model_stats *m, const char *name, const char *version,
                   size_t *len)
{
    textbuf o;
    textbuf_init(&o, 1024);
    static stats_duration zero;
    textbuf_put(&o,
                "{\"model_stats\":[{\"name\":\"%s\",\"version\":\"%s\","
                "\"last_inference\":%llu,\"inference_count\":%llu,"
                "\"execution_count\":%llu,\"inference_stats\":{",
                name, version, load(&m->last_inference_ms),
                load(&m->inference_count), load(&m->execution_count));
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
        if (load(&m->batch[b].compute_infer.count) == 0)
            continue;
        textbuf_put(&o, "%s{\"batch_size\":%u,", first ? "" : ",", b);
        duration(&o, "compute_input", &m->batch[b].compute_input, true);
        duration(&o, "compute_infer", &m->batch[b].compute_infer, true);
        duration(&o, "compute_output", &m->batch[b].compute_output, false);
        textbuf_put(&o, "}");
        first = false;
    }
    textbuf_put(&o, "]}]}");
    return textbuf_take(&o, len);
}
