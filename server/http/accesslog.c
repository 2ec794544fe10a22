/*
 * accesslog.c - which finished requests get an access line, and the line
 * (see accesslog.h).
 *
 * The cap counts lines per wall-clock second of now_ns(): the first
 * request of a new second (or the loop's tick) swaps the counters, and
 * whoever swaps writes the warning for the second that ended. Two threads
 * that race across the boundary may let a line or two more through; the
 * cap bounds volume, not an exact count.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "accesslog.h"
#include "log.h"

#define NS 1000000000ull

struct http_accesslog {
    tallyd_access_mode mode;
    uint64_t slow_ns;     /* 0: none is slow */
    unsigned max_per_s;   /* 0: no cap */
    atomic_ullong *total; /* the metric for lines left out */
    atomic_ullong second; /* now_ns() / NS of the counters below */
    atomic_uint lines;    /* written this second */
    atomic_ullong dropped; /* left out this second */
};

http_accesslog *http_accesslog_new(tallyd_server *s, atomic_ullong *dropped)
{
    http_accesslog *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->mode = s->cfg.access_mode;
    a->slow_ns = (uint64_t)s->cfg.slow_request_ms * 1000000u;
    a->max_per_s = s->cfg.access_log_max_per_s;
    a->total = dropped;
    return a;
}

void http_accesslog_free(http_accesslog *a)
{
    free(a);
}

/* Starts a new second if `sec` is one; the thread that does so reports
 * what the old one left out. */
static void roll(http_accesslog *a, uint64_t sec)
{
    unsigned long long was =
        atomic_load_explicit(&a->second, memory_order_relaxed);
    if (sec <= was
        || !atomic_compare_exchange_strong(&a->second, &was, sec))
        return;
    atomic_store_explicit(&a->lines, 0, memory_order_relaxed);
    unsigned long long left = atomic_exchange(&a->dropped, 0);
    if (left > 0)
        log_msg("http", "warn",
                "access log: %llu lines over --access-log-max-per-s=%u left "
                "out in one second (tally_access_log_dropped_total counts "
                "them all)",
                left, a->max_per_s);
}

void http_accesslog_tick(http_accesslog *a, uint64_t now)
{
    if (a != NULL && a->mode == TALLYD_ACCESS_ERRORS && a->max_per_s > 0)
        roll(a, now / NS);
}

/* Whether r's line is wanted, and room for it this second. */
static bool wanted(http_accesslog *a, const request *r, uint64_t total_ns)
{
    if (a->mode == TALLYD_ACCESS_ALL)
        return true;
    if (a->mode == TALLYD_ACCESS_OFF)
        return false;
    if (r->status < 400 && (a->slow_ns == 0 || total_ns < a->slow_ns))
        return false;
    if (a->max_per_s == 0)
        return true;
    roll(a, now_ns() / NS);
    if (atomic_fetch_add_explicit(&a->lines, 1, memory_order_relaxed)
        < a->max_per_s)
        return true;
    atomic_fetch_add_explicit(&a->dropped, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(a->total, 1, memory_order_relaxed);
    return false;
}

/* Microseconds between two stamps, 0 when either is missing. */
static uint64_t span_us(uint64_t from, uint64_t to)
{
    return from != 0 && to > from ? (to - from) / 1000 : 0;
}

/* One JSON line per request, formatted by hand: with --access-log=all this
 * runs for every request, so it avoids building a JSON object. The steps:
 * recv (headers to the end of the body), decode (Content-Encoding), parse
 * (the handler, up to its scan), queue, compute, render (writing the
 * answer), send (the reply queued to the last byte handed to the socket),
 * of which gzip. */
void http_accesslog_request(http_accesslog *a, request *r, uint64_t done_ns,
                            int terminated)
{
    uint64_t total_ns = done_ns > r->t0_ns ? done_ns - r->t0_ns : 0;
    if (a == NULL || !wanted(a, r, total_ns))
        return;
    char ts[40], path[512], extra[128] = "", trace[33];
    log_stamp(ts, sizeof ts);
    trace_id_hex(&r->trace, trace);
    log_escape(r->path, path, sizeof path);
    size_t n = 0;
    if (r->err != STATUS_OK)
        n += (size_t)snprintf(extra, sizeof extra, ",\"error\":\"%s\"",
                              status_name(r->err));
    if (terminated != 0 && n < sizeof extra)
        n += (size_t)snprintf(extra + n, sizeof extra - n,
                              ",\"terminated\":%d", terminated);
    if (a->mode == TALLYD_ACCESS_ERRORS && r->status < 400 && n < sizeof extra)
        snprintf(extra + n, sizeof extra - n, ",\"slow\":true");
    char line[1280];
    int len = snprintf(
        line, sizeof line,
        "{\"ts\":\"%s\",\"module\":\"http\",\"level\":\"info\","
        "\"method\":\"%s\",\"path\":\"%s\",\"status\":%d,\"bytes_in\":%zu,"
        "\"bytes_out\":%zu,\"recv_us\":%" PRIu64 ",\"decode_us\":%" PRIu64
        ",\"parse_us\":%" PRIu64 ",\"queue_us\":%" PRIu64
        ",\"compute_us\":%" PRIu64 ",\"render_us\":%" PRIu64
        ",\"send_us\":%" PRIu64 ",\"gzip_us\":%" PRIu64 ",\"total_us\":%" PRIu64
        ",\"request_id\":\"%s\",\"trace_id\":\"%s\"%s}",
        ts, r->method, path, r->status, r->body_len, r->bytes_out,
        span_us(r->t0_ns, r->body_ns), r->decode_ns / 1000, r->parse_ns / 1000,
        r->queue_ns / 1000, r->compute_ns / 1000, r->render_ns / 1000,
        span_us(r->reply_ns, done_ns), r->gzip_ns / 1000,
        span_us(r->t0_ns, done_ns), r->id, trace, extra);
    if (len > 0)
        log_access(line,
                   (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
}
