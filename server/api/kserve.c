/*
 * kserve.c - POST /v2/models/cumsum[/versions/1]/infer: KServe v2 (the
 * Open Inference Protocol), as JSON or with the binary extension.
 *
 * A binary tensor is scanned where it arrived in the body, and the binary
 * reply sends it from there; a JSON tensor is parsed into a new buffer.
 */
#include <stdlib.h>

#include "api.h"
#include "digits.h"
#include "kserve_json.h"
#include "reply.h"
#include "scan_params.h"
#include "submit_http.h"

typedef struct {
    kserve_request req;
    api_shm_hold shm; /* x's and y's regions, when they lie in some */
} infer_ctx;

static void infer_ctx_free(void *p)
{
    infer_ctx *c = p;
    api_shm_free(&c->shm); /* after the job: the request outlives it */
    kserve_request_free(&c->req);
    free(c);
}

static void finish_infer(request *r)
{
    infer_ctx *c = r->ctx;
    char msg[512];
    status_code st = api_shm_done(&c->shm, msg, sizeof msg);
    if (st != STATUS_OK) {
        http_error(r, st, "%s", msg);
        return;
    }
    if (c->req.y_shm.set) { /* y is in its region: no data here */
        size_t len;
        char *text = kserve_shm_output_json(&c->req, &len);
        if (text == NULL)
            http_error(r, STATUS_NOMEM, "out of memory writing the response");
        else
            http_reply_buffer(r, 200, "application/json", text, len);
        return;
    }
    if (c->req.binary_output) {
        size_t hlen;
        char *head = kserve_binary_header(&c->req, &hlen);
        if (head == NULL) {
            http_error(r, STATUS_NOMEM, "out of memory writing the response");
            return;
        }
        char num[21];
        int d = digits_count(hlen);
        digits_write(num, d, hlen);
        num[d] = '\0';
        http_add_header(r, "Inference-Header-Content-Length", num);
        http_reply_parts(r, 200, "application/octet-stream", head, hlen,
                         c->req.data, c->req.bytes);
        return;
    }
    json_writer w;
    if (!kserve_json_writer(&w, &c->req, c->req.data)) {
        http_error(r, STATUS_NOMEM, "out of memory writing the response");
        return;
    }
    api_reply_json(r, 200, &w);
}

void api_infer(request *r)
{
    char msg[512];
    static const char *const none[] = {NULL};
    if (!http_query_known(r, none, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s", msg);
        return;
    }
    size_t hlen = SIZE_MAX;
    const char *h = http_header(r, "Inference-Header-Content-Length");
    if (h != NULL) {
        int64_t v;
        if (!parse_int_text("Inference-Header-Content-Length", h, &v, msg,
                            sizeof msg)
            || v < 0) {
            http_error(r, STATUS_INVALID,
                       "Inference-Header-Content-Length must be a "
                       "non-negative integer, not \"%.32s\"",
                       h);
            return;
        }
        hlen = (size_t)v;
    }
    infer_ctx *c = http_ctx_new(r, sizeof *c, infer_ctx_free);
    if (c == NULL)
        return;
    eng_err e =
        kserve_parse(http_body(r), r->body_len, hlen, r->s->cfg.max_body_bytes,
                     &c->req, msg, sizeof msg);
    if (e != ENG_E_OK) {
        http_error(r, status_from_eng(e), "%s", msg);
        return;
    }
    int64_t timeout_ms = submit_protocol_ms(c->req.has_timeout,
                                            c->req.timeout_us);
    submit_from from = c->req.data_owned ? SUBMIT_TEXT : SUBMIT_BYTES;
    if (!c->req.x_shm.set && !c->req.y_shm.set) {
        submit_scan(r, &c->req.desc, c->req.data, &c->req.seq, timeout_ms,
                    from,
                    finish_infer);
        return;
    }
    const void *in;
    void *out;
    status_code st = api_shm_place(&c->req, r->s->app->shm, r->caller,
                                   r->s->cfg.max_body_bytes, &in, &out,
                                   &c->shm, msg, sizeof msg);
    if (st != STATUS_OK) {
        http_error(r, st, "%s", msg);
        return;
    }
    submit_scan_to(r, &c->req.desc, in, out, &c->req.seq, timeout_ms,
                   SUBMIT_BYTES,
                   finish_infer);
}
