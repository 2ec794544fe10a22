/*
 * dml.c - POST /v1/cumsum in DirectML's words (protocol/dml.h): the operator
 * description with strided buffer tensors.
 *
 *   JSON    application/json with an "InputTensor" member: the description
 *           and "data", the input buffer's elements in memory order. The
 *           answer is {"OutputTensor": {...}, "data": [...]}.
 *   binary  application/octet-stream with the description (no "data") in
 *           the DML-Operator header and the input buffer's bytes as the
 *           body. The answer is the output buffer's bytes, and the echoed
 *           OutputTensor in the DML-Output-Tensor header.
 *
 * The input is scanned where it lies (the parsed JSON buffer, or the body)
 * into a new output buffer that starts zeroed, so that bytes no element
 * addresses answer 0.
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "buffer.h"
#include "submit_http.h"
#include "dml.h"
#include "reply.h"

typedef struct {
    dml_request q;
    void *out;
    size_t out_bytes;
} dml_ctx;

static void dml_ctx_free(void *p)
{
    dml_ctx *c = p;
    eng_buffer_free(c->q.data);
    eng_buffer_free(c->out);
    free(c);
}

/* A zeroed output buffer of `bytes` for c. */
static bool attach(request *r, dml_ctx *c, size_t bytes)
{
    c->out_bytes = bytes;
    c->out = eng_buffer_alloc(bytes ? bytes : 1);
    if (c->out == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory for %zu bytes of output",
                   bytes);
        return false;
    }
    memset(c->out, 0, bytes);
    c->q.ov.bytes = bytes;
    return true;
}

static void finish_json(request *r)
{
    dml_ctx *c = r->ctx;
    json_writer w;
    if (!dml_json_writer(&w, &c->q, c->out)) {
        http_error(r, STATUS_NOMEM, "out of memory writing the response");
        return;
    }
    api_reply_json(r, 200, &w);
}

void api_dml_json(request *r)
{
    char msg[512];
    dml_ctx *c = http_ctx_new(r, sizeof *c, dml_ctx_free);
    if (c == NULL)
        return;
    eng_err e =
        dml_parse((const char *)http_body(r), r->body_len,
                  r->s->cfg.max_body_bytes, true, &c->q, msg, sizeof msg);
    if (e != ENG_E_OK) {
        http_error(r, status_from_eng(e), "%s", msg);
        return;
    }
    /* the JSON answer lists the addressed span only */
    size_t bytes = (size_t)c->q.out.span * tx_dtype_size(c->q.out.dtype);
    if (!attach(r, c, bytes))
        return;
    submit_strided(r, &c->q.desc, &c->q.iv, c->q.data, &c->q.ov,
                            c->out, -1, SUBMIT_TEXT, finish_json);
}

static void finish_binary(request *r)
{
    dml_ctx *c = r->ctx;
    char *echo = NULL;
    size_t elen = 0;
    if (!dml_append_output(&echo, &elen, &c->q)
        || !json_append(&echo, &elen, "", 1)) {
        free(echo);
        http_error(r, STATUS_NOMEM, "out of memory writing the response");
        return;
    }
    http_add_header(r, "DML-Output-Tensor", echo);
    free(echo);
    http_reply_parts(r, 200, "application/octet-stream", NULL, 0, c->out,
                     c->out_bytes);
}

void api_dml_binary(request *r, const char *header)
{
    char msg[512];
    static const char *const none[] = {NULL};
    if (!http_query_known(r, none, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID,
                   "%s: with a DML-Operator header, the header describes "
                   "the whole operator",
                   msg);
        return;
    }
    dml_ctx *c = http_ctx_new(r, sizeof *c, dml_ctx_free);
    if (c == NULL)
        return;
    char hmsg[480];
    eng_err e = dml_parse(header, strlen(header), r->s->cfg.max_body_bytes,
                          false, &c->q, hmsg, sizeof hmsg);
    if (e != ENG_E_OK) {
        http_error(r, status_from_eng(e), "DML-Operator header: %s", hmsg);
        return;
    }
    if (!dml_check_body(&c->q, r->body_len, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s", msg);
        return;
    }
    c->q.iv.bytes = r->body_len;
    if (!attach(r, c, (size_t)c->q.out.total_bytes))
        return;
    submit_strided(r, &c->q.desc, &c->q.iv, http_body(r), &c->q.ov,
                            c->out, -1, SUBMIT_BYTES, finish_binary);
}
