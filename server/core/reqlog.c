/*
 * reqlog.c - the end of every request (reqlog.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "reqlog.h"
#include "server.h"
#include "tx_utf8.h"

#define NS 1000000000ull

void reqlog_init(reqlog *a, const tallyd_config *cfg)
{
    memset(a, 0, sizeof *a);
    a->mode = cfg->access_log;
    a->slow_ns = (uint64_t)cfg->slow_request_ms * 1000000u;
    a->max_per_s = cfg->access_log_max_per_s;
}

/* Starts a new second if `sec` is one; the thread that does so reports
 * what the old one left out. */
static void roll(reqlog *a, uint64_t sec)
{
    unsigned long long was =
        atomic_load_explicit(&a->second, memory_order_relaxed);
    if (sec <= was || !atomic_compare_exchange_strong(&a->second, &was, sec))
        return;
    atomic_store_explicit(&a->lines, 0, memory_order_relaxed);
    unsigned long long left = atomic_exchange(&a->dropped, 0);
    if (left > 0)
        log_msg("access", "warn",
                "access log: %llu lines over --access-log-max-per-s=%u left "
                "out in one second (tally_access_log_dropped_total counts "
                "them all)",
                left, a->max_per_s);
}

void reqlog_tick(reqlog *a, uint64_t now)
{
    if (a->mode == TALLYD_ACCESS_ERRORS && a->max_per_s > 0)
        roll(a, now / NS);
}

/* Whether rec's line is wanted, and room for it this second. */
static bool wanted(reqlog *a, metrics *m, const req_record *rec,
                   uint64_t total_ns)
{
    if (a->mode == TALLYD_ACCESS_ALL)
        return true;
    if (a->mode == TALLYD_ACCESS_OFF)
        return false;
    if (!rec->failed && (a->slow_ns == 0 || total_ns < a->slow_ns))
        return false;
    if (a->max_per_s == 0)
        return true;
    roll(a, now_ns() / NS);
    if (atomic_fetch_add_explicit(&a->lines, 1, memory_order_relaxed)
        < a->max_per_s)
        return true;
    counter_add(&a->dropped, 1);
    counter_add(&m->access_log_dropped, 1);
    return false;
}

/* Microseconds between two stamps, 0 when either is missing. */
static uint64_t span_us(uint64_t from, uint64_t to)
{
    return from != 0 && to > from ? (to - from) / 1000 : 0;
}

/* One JSON line per request, formatted by hand: with --access-log=all
 * this runs for every request, so it avoids building a JSON object. The
 * steps: recv (arrival to the whole body or message), decode (content
 * coding), parse (the handler, up to its scan), queue, compute, render
 * (writing the answer), send (the answer queued to its last byte handed
 * to the socket), of which gzip. The door's status: REST's HTTP status,
 * with the failure's name as "error"; gRPC's code as "grpc_status", with
 * its name as "status". */
static void access_line(reqlog *a, const req_record *rec, uint64_t total_ns)
{
    char ts[40], path[512], method[64], head[160], extra[128] = "",
                                                   trace[33], id[80] = "";
    log_stamp(ts, sizeof ts);
    trace_id_hex(rec->trace, trace);
    log_escape(rec->path ? rec->path : "", path, sizeof path);
    log_escape(rec->method ? rec->method : "", method, sizeof method);
    size_t n = 0;
    if (rec->door == METRIC_GRPC) {
        snprintf(head, sizeof head, "\"grpc_status\":%d,\"status\":\"%s\"",
                 rec->status, status_name(rec->err));
    } else {
        snprintf(head, sizeof head, "\"status\":%d", rec->status);
        if (rec->err != STATUS_OK)
            n += (size_t)snprintf(extra, sizeof extra, ",\"error\":\"%s\"",
                                  status_name(rec->err));
    }
    if (rec->terminated != 0 && n < sizeof extra)
        n += (size_t)snprintf(extra + n, sizeof extra - n,
                              ",\"terminated\":%d", rec->terminated);
    if (a->mode == TALLYD_ACCESS_ERRORS && !rec->failed && n < sizeof extra)
        snprintf(extra + n, sizeof extra - n, ",\"slow\":true");
    if (rec->request_id != NULL)
        snprintf(id, sizeof id, "\"request_id\":\"%s\",", rec->request_id);
    char seq[SEQ_ID_MAX * 6 + 32] = "";
    if (rec->ran.sequence_id[0] != '\0') {
        if (rec->ran.sequence_is_string) {
            char esc[SEQ_ID_MAX * 6 + 1];
            log_escape(rec->ran.sequence_id, esc, sizeof esc);
            snprintf(seq, sizeof seq, "\"sequence_id\":\"%s\",", esc);
        } else {
            snprintf(seq, sizeof seq, "\"sequence_id\":%s,",
                     rec->ran.sequence_id);
        }
    }
    char line[1400 + sizeof seq];
    int len = snprintf(
        line, sizeof line,
        "{\"ts\":\"%s\",\"module\":\"%s\",\"level\":\"info\","
        "\"method\":\"%s\",\"path\":\"%s\",%s,\"bytes_in\":%zu,"
        "\"bytes_out\":%zu,\"recv_us\":%" PRIu64 ",\"decode_us\":%" PRIu64
        ",\"parse_us\":%" PRIu64 ",\"queue_us\":%" PRIu64
        ",\"compute_us\":%" PRIu64 ",\"render_us\":%" PRIu64
        ",\"send_us\":%" PRIu64 ",\"gzip_us\":%" PRIu64 ",\"total_us\":%" PRIu64
        ",%s%s\"trace_id\":\"%s\"%s}",
        ts, rec->door == METRIC_GRPC ? "grpc" : "http", method, path, head,
        rec->bytes_in, rec->bytes_out, span_us(rec->t0, rec->body),
        rec->decode_ns / 1000, rec->parse_ns / 1000, rec->queue_ns / 1000,
        rec->compute_ns / 1000, rec->render_ns / 1000,
        span_us(rec->reply, rec->done), rec->gzip_ns / 1000, total_ns / 1000,
        id, seq, trace, extra);
    if (len > 0)
        log_access(line,
                   (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
}

/* A sampled request's record, for its spans (trace.h). */
static void submit_trace(trace_sink *k, const req_record *rec)
{
    trace_record t;
    memset(&t, 0, sizeof t);
    t.ctx = *rec->trace;
    if (rec->tracestate != NULL)
        trace_state_copy(rec->tracestate, strlen(rec->tracestate),
                         t.trace_state);
    t.grpc = rec->door == METRIC_GRPC;
    snprintf(t.method, sizeof t.method, "%s",
             t.grpc ? "POST" : (rec->method ? rec->method : ""));
    snprintf(t.route, sizeof t.route, "%s", rec->route ? rec->route : "");
    snprintf(t.path, sizeof t.path, "%s", rec->path ? rec->path : "");
    /* what is UTF-8 of it (a cut sequence, or bytes that are not text,
     * end it) */
    t.path[tx_utf8_valid(t.path, strlen(t.path))] = '\0';
    if (rec->request_id != NULL)
        snprintf(t.request_id, sizeof t.request_id, "%s", rec->request_id);
    t.status = rec->status;
    t.bytes_in = rec->bytes_in;
    t.bytes_out = rec->bytes_out;
    t.t0 = rec->t0;
    t.body = rec->body;
    t.handler = rec->handler;
    t.reply = rec->reply;
    t.done = rec->done;
    t.decode_ns = rec->decode_ns;
    t.parse_ns = rec->parse_ns;
    t.render_ns = rec->render_ns;
    t.work = rec->ran;
    k->submit(k, &t);
}

void req_end(tallyd_server *s, const req_record *rec)
{
    uint64_t total = rec->done > rec->t0 ? rec->done - rec->t0 : 0;
    metrics_request(&s->metrics, rec->door, rec->label, rec->status, rec->err,
                    total, rec->bytes_out);
    if (rec->ended != NULL)
        rec->ended(s, rec, total);
    if (wanted(&s->reqlog, &s->metrics, rec, total))
        access_line(&s->reqlog, rec, total);
    if (s->traces != NULL && (rec->trace->flags & TRACE_SAMPLED))
        submit_trace(s->traces, rec);
    if (rec->in_flight) {
        atomic_store(&s->last_done_ns, rec->done ? rec->done : now_ns());
        atomic_fetch_sub(&s->inflight, 1);
    }
}
