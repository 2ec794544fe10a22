/*
 * exporter.c - the OTLP/HTTP span exporter (exporter.h): a ring of
 * records under a mutex, and a thread that drains it with libcurl.
 */
#include <curl/curl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "clock.h"
#include "errors.h"
#include "exporter.h"
#include "log.h"
#include "loop_owner.h"
#include "metrics.h"
#include "otlp.h"

struct otlp_exporter {
    trace_sink sink; /* first: the transports' handle */
    otlp_options o;
    char *url, *service, *version;
    uv_thread_t thread;
    uv_mutex_t mu;
    uv_cond_t cv;
    trace_record *ring; /* queue_max records */
    size_t head, count;
    bool stopping;
    otlp_encoder *enc; /* the thread's */
    CURL *curl;
    struct curl_slist *headers;
    char curl_err[CURL_ERROR_SIZE];
    /* counters: spans, but requests for dropped */
    atomic_ullong exported, failed, dropped, batches, batch_failures;
    bool logged_failure; /* one log line per run of failures */
    loop_owner self; /* the span exporter: post, send_some, drain */
};

static void submit(trace_sink *k, const trace_record *rec)
{
    otlp_exporter *e = (otlp_exporter *)k;
    uv_mutex_lock(&e->mu);
    if (e->count == e->o.queue_max || e->stopping) {
        uv_mutex_unlock(&e->mu);
        atomic_fetch_add(&e->dropped, 1);
        return;
    }
    e->ring[(e->head + e->count) % e->o.queue_max] = *rec;
    e->count++;
    bool full = e->count >= e->o.batch_max;
    uv_mutex_unlock(&e->mu);
    if (full)
        uv_cond_signal(&e->cv);
}

static size_t discard(char *p, size_t size, size_t n, void *ctx)
{
    (void)p;
    (void)ctx;
    return size * n;
}

/* POSTs one batch; true when the collector took it (2xx). */
static bool post(otlp_exporter *e, const trace_record *recs, size_t n,
                 size_t *spans)
{
    OWNER_ASSERT(&e->self);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t wall = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    uint64_t mono = now_ns();
    const uint8_t *body;
    size_t len;
    if (!otlp_encode(e->enc, recs, n, e->service, e->version, wall, mono,
                     &body, &len, spans)) {
        *spans = n; /* at least */
        return false;
    }
    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDS, (const char *)body);
    curl_easy_setopt(e->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    CURLcode rc = curl_easy_perform(e->curl);
    long code = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(e->curl, CURLINFO_RESPONSE_CODE, &code);
    bool ok = rc == CURLE_OK && code >= 200 && code < 300;
    if (!ok && !e->logged_failure) {
        if (rc != CURLE_OK)
            log_msg("trace", "warn", "cannot send spans to %s: %s", e->url,
                    e->curl_err[0] ? e->curl_err : curl_easy_strerror(rc));
        else
            log_msg("trace", "warn", "the collector at %s answered %ld",
                    e->url, code);
    } else if (ok && e->logged_failure) {
        log_msg("trace", "info", "spans reach %s again", e->url);
    }
    e->logged_failure = !ok;
    return ok;
}

/* Takes up to a batch and sends it: how many requests' records it took (0
 * when nothing was queued), and in *sent (may be NULL) whether the
 * collector took them. */
static size_t send_some(otlp_exporter *e, trace_record *batch, bool *sent)
{
    OWNER_ASSERT(&e->self);
    uv_mutex_lock(&e->mu);
    size_t n = e->count < e->o.batch_max ? e->count : e->o.batch_max;
    for (size_t i = 0; i < n; i++)
        batch[i] = e->ring[(e->head + i) % e->o.queue_max];
    e->head = (e->head + n) % e->o.queue_max;
    e->count -= n;
    uv_mutex_unlock(&e->mu);
    if (n == 0)
        return 0;
    size_t spans;
    bool ok = post(e, batch, n, &spans);
    if (sent != NULL)
        *sent = ok;
    atomic_fetch_add(&e->batches, 1);
    if (ok) {
        atomic_fetch_add(&e->exported, spans);
    } else {
        atomic_fetch_add(&e->failed, spans);
        atomic_fetch_add(&e->batch_failures, 1);
    }
    return n;
}

/* At the stop: what is left, in batches, for at most one POST's timeout
 * in all and until a batch fails, so that a collector that is down or
 * black-holed cannot hold up the exit (a service manager's stop timeout
 * is 30-90 s; eight batches at 10 s each would pass it). What is not sent
 * is counted as dropped, and the log says how many were lost. */
static void drain(otlp_exporter *e, trace_record *batch)
{
    OWNER_ASSERT(&e->self);
    uint64_t until = now_ns() + (uint64_t)e->o.timeout_ms * 1000000u;
    bool ok = true;
    size_t lost = 0, n;
    while (ok && now_ns() < until && (n = send_some(e, batch, &ok)) > 0)
        if (!ok)
            lost += n;
    uv_mutex_lock(&e->mu);
    size_t left = e->count;
    e->count = 0;
    uv_mutex_unlock(&e->mu);
    atomic_fetch_add(&e->dropped, left);
    if (lost + left > 0)
        log_msg("trace", "warn",
                "stopping: %zu requests' spans not sent to %s (%zu failed, "
                "%zu dropped)",
                lost + left, e->url, lost, left);
}

static void run(void *arg)
{
    otlp_exporter *e = arg;
    loop_owner_set(&e->self);
    trace_record *batch = malloc(e->o.batch_max * sizeof *batch);
    if (batch == NULL) {
        log_msg("trace", "error", "out of memory: no spans are sent");
        return;
    }
    for (;;) {
        uv_mutex_lock(&e->mu);
        if (!e->stopping && e->count < e->o.batch_max)
            uv_cond_timedwait(&e->cv, &e->mu,
                              (uint64_t)e->o.interval_ms * 1000000u);
        bool stopping = e->stopping;
        uv_mutex_unlock(&e->mu);
        if (stopping) {
            drain(e, batch);
            break;
        }
        while (send_some(e, batch, NULL) > 0) {
            uv_mutex_lock(&e->mu);
            bool more = e->count >= e->o.batch_max && !e->stopping;
            uv_mutex_unlock(&e->mu);
            if (!more)
                break;
        }
    }
    free(batch);
}

otlp_exporter *otlp_exporter_start(const otlp_options *o, char *msg,
                                   size_t msglen)
{
    otlp_exporter *e = calloc(1, sizeof *e);
    if (e == NULL)
        return msg_fail_as(NULL, msg, msglen, "out of memory");
    e->sink.submit = submit;
    e->o = *o;
    if (e->o.queue_max == 0)
        e->o.queue_max = 1;
    if (e->o.batch_max == 0 || e->o.batch_max > e->o.queue_max)
        e->o.batch_max = e->o.queue_max;
    e->url = strdup(o->url);
    e->service = strdup(o->service);
    e->version = strdup(o->version);
    e->ring = calloc(e->o.queue_max, sizeof *e->ring);
    e->enc = otlp_encoder_new(e->o.batch_max);
    e->curl = curl_easy_init();
    e->headers =
        curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    if (e->url == NULL || e->service == NULL || e->version == NULL
        || e->ring == NULL || e->enc == NULL || e->curl == NULL
        || e->headers == NULL) {
        snprintf(msg, msglen, "out of memory");
        goto fail;
    }
    CURL *c = e->curl;
    if (curl_easy_setopt(c, CURLOPT_URL, e->url) != CURLE_OK
        || strncmp(e->url, "http", 4) != 0) {
        snprintf(msg, msglen,
                 "--otlp-endpoint: \"%.200s\" is not an http:// or https:// "
                 "URL",
                 e->url);
        goto fail;
    }
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, e->headers);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)e->o.timeout_ms);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long)e->o.timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, e->curl_err);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "tally-otlp");
    uv_mutex_init(&e->mu);
    uv_cond_init(&e->cv);
    if (uv_thread_create(&e->thread, run, e) != 0) {
        snprintf(msg, msglen, "cannot start the span exporter's thread");
        uv_cond_destroy(&e->cv);
        uv_mutex_destroy(&e->mu);
        goto fail;
    }
    return e;
fail:
    otlp_encoder_free(e->enc);
    curl_slist_free_all(e->headers);
    if (e->curl != NULL)
        curl_easy_cleanup(e->curl);
    free(e->ring);
    free(e->url);
    free(e->service);
    free(e->version);
    free(e);
    return NULL;
}

trace_sink *otlp_exporter_sink(otlp_exporter *e)
{
    return &e->sink;
}

void otlp_exporter_render_metrics(otlp_exporter *e, textbuf *o)
{
    uv_mutex_lock(&e->mu);
    size_t queued = e->count;
    uv_mutex_unlock(&e->mu);
    unsigned long long failures = atomic_load(&e->batch_failures);
    metrics_family(o, "tally_trace_spans_total", "counter",
                   "Spans of sampled requests, by what became of them: "
                   "exported (the collector took them) or failed (it did not "
                   "answer 2xx, or could not be reached).");
    textbuf_put(o,
                "tally_trace_spans_total{result=\"exported\"} %llu\n"
                "tally_trace_spans_total{result=\"failed\"} %llu\n",
                (unsigned long long)atomic_load(&e->exported),
                (unsigned long long)atomic_load(&e->failed));
    metrics_one(o, "tally_trace_dropped_requests_total", "counter",
                "Sampled requests whose spans were dropped unsent: the "
                "exporter's queue was full (--otlp-max-queue).",
                "%llu", (unsigned long long)atomic_load(&e->dropped));
    metrics_family(o, "tally_trace_exports_total", "counter",
                   "POSTs to the collector, and those that failed.");
    textbuf_put(o,
                "tally_trace_exports_total{result=\"ok\"} %llu\n"
                "tally_trace_exports_total{result=\"failed\"} %llu\n",
                (unsigned long long)atomic_load(&e->batches) - failures,
                failures);
    metrics_one(o, "tally_trace_queued_requests", "gauge",
                "Sampled requests waiting for the exporter.", "%zu", queued);
}

void otlp_exporter_stop(otlp_exporter *e)
{
    if (e == NULL)
        return;
    uv_mutex_lock(&e->mu);
    e->stopping = true;
    uv_mutex_unlock(&e->mu);
    uv_cond_signal(&e->cv);
    uv_thread_join(&e->thread);
    uv_cond_destroy(&e->cv);
    uv_mutex_destroy(&e->mu);
    curl_slist_free_all(e->headers);
    curl_easy_cleanup(e->curl);
    otlp_encoder_free(e->enc);
    free(e->ring);
    free(e->url);
    free(e->service);
    free(e->version);
    free(e);
}
