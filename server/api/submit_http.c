/*
 * submit_http.c - the REST door's side of the adapter (submit.h): the
 * X-Timeout-Ms header, suspend and resume through http.h, and the answer
 * written by the handler's finish function (submit_http.h).
 *
 * A queued job lives in an `http_work` record attached to its request as
 * the request's `work`, so it is freed with the request, never before:
 * the request holds a reference for the job (taken by http_suspend) until
 * the job's done callback resumes it.
 */
#include <stdlib.h>

#include "api.h"
#include "clock.h"
#include "peer.h"
#include "reply.h"
#include "submit_http.h"
#include "zalloc.h"

typedef struct {
    submit_work w; /* first: the adapter hands it back */
    http_handler finish;
} http_work;

static request *req_of(void *req)
{
    return req;
}

static bool door_suspend(void *req, bool (*push)(submit_work *w),
                         submit_work *w);

static void door_resume(void *req)
{
    http_resume(req_of(req));
}

/* The probe, on a worker or the tick: the client's socket has hung up. */
static bool door_gone(const submit_work *w)
{
    return peer_gone(w->j.watch_fd);
}

/* Runs finish, timing it as the render step (less the gzip it may do,
 * which the transport times apart). Its end is the reply's stamp: the
 * transport queues the reply as this returns, on the same thread. */
static void door_answer(void *req)
{
    request *r = req_of(req);
    http_work *hw = r->work;
    uint64_t t = now_ns(), gzip = r->rec.gzip_ns;
    hw->finish(r);
    r->rec.reply = now_ns();
    r->rec.render_ns = r->rec.reply - t - (r->rec.gzip_ns - gzip);
}

static void door_fail(void *req, status_code st, const char *msg)
{
    http_error(req_of(req), st, "%s", msg);
}

/* Not answered: dropped from the queue, or its result discarded when the
 * job had already run. */
static void door_cancelled(void *req)
{
    request *r = req_of(req);
    r->rec.err = STATUS_CANCELLED;
    http_discard(r);
}

static const submit_door rest_door = {
    door_suspend, door_resume, door_gone,
    door_answer,  door_fail,   door_cancelled,
};

/* The continuation, on an HTTP thread once the request is resumed. */
static void after_job(request *r)
{
    OWNER_ASSERT(http_request_owner(r));
    http_work *hw = r->work;
    /* libmicrohttpd may have found the client gone first */
    submit_finish(&hw->w, http_client_left(r));
}

typedef struct {
    bool (*push)(submit_work *w);
    submit_work *w;
} push_arg;

static bool start_push(void *arg)
{
    push_arg *a = arg;
    return a->push(a->w);
}

static bool door_suspend(void *req, bool (*push)(submit_work *w),
                         submit_work *w)
{
    push_arg a = {push, w};
    return http_suspend(req_of(req), after_job, start_push, &a);
}

static void submit(request *r, const eng_scan_desc *desc, const eng_view *iv,
                   const void *in, const eng_view *ov, void *out,
                   const seq_params *seq, int64_t protocol_ms,
                   submit_from from, http_handler finish)
{
    http_work *hw = zalloc(sizeof *hw);
    if (hw == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory queueing the job");
        return;
    }
    hw->finish = finish;
    r->work = hw;
    r->work_free = free;
    submit_req q = {.desc = *desc,
                     .in = in,
                     .out = out,
                     .iv = iv,
                     .ov = ov,
                     .seq = seq,
                     .watch_fd = http_client_fd(r),
                     .trace = &r->trace,
                     .near = http_loop_data(r),
                     .rec = &r->rec,
                     .transport_ms = r->timeout_ms,
                     .protocol_ms = protocol_ms,
                     .from = from,
                     .handler_ns = r->rec.handler};
    submit_start(&hw->w, &rest_door, r, r->s, r->s->app->sched,
                 r->s->app->seqs, &q);
}

void submit_scan(request *r, const eng_scan_desc *desc, void *inout,
                 const seq_params *seq, int64_t timeout_ms, submit_from from,
                 http_handler finish)
{
    submit(r, desc, NULL, inout, NULL, inout, seq, timeout_ms, from, finish);
}

void submit_scan_to(request *r, const eng_scan_desc *desc, const void *in,
                    void *out, const seq_params *seq, int64_t timeout_ms,
                    submit_from from, http_handler finish)
{
    submit(r, desc, NULL, in, NULL, out, seq, timeout_ms, from, finish);
}

void submit_strided(request *r, const eng_scan_desc *desc, const eng_view *iv,
                    const void *in, const eng_view *ov, void *out,
                    int64_t timeout_ms, submit_from from, http_handler finish)
{
    submit(r, desc, iv, in, ov, out, NULL, timeout_ms, from, finish);
}
