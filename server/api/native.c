/*
 * native.c - POST /v1/cumsum: a tensor as JSON, .npy or raw bytes.
 * DirectML's operator description, in JSON or with a DML-Operator header,
 * goes on to dml.c.
 *
 * Each format is validated and parsed with its codec, then the scan is
 * handed to the scheduler (submit.h). The tensor bytes of a raw or .npy
 * body are scanned where they arrived, and the reply sends them from
 * there; JSON is parsed into a new buffer, and the reply streams text from
 * it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "buffer.h"
#include "native.h"
#include "npy.h"
#include "reply.h"
#include "submit_http.h"

/* The media type of Content-Type, lower-cased, without parameters. */
static void media_type(request *r, char *buf, size_t len)
{
    const char *ct = http_header(r, "Content-Type");
    buf[0] = '\0';
    if (ct == NULL)
        return;
    while (*ct == ' ')
        ct++;
    size_t n = 0;
    while (ct[n] != '\0' && ct[n] != ';' && ct[n] != ' ' && n + 1 < len) {
        buf[n] = (char)(ct[n] >= 'A' && ct[n] <= 'Z' ? ct[n] + 32 : ct[n]);
        n++;
    }
    buf[n] = '\0';
}

/* The scan's and the sequence's parameters from the query string. */
static bool query_params(request *r, scan_params *p, seq_params *q, char *msg,
                         size_t msglen)
{
    static const char *const seq_names[] = {"sequence_id", "sequence_start",
                                            "sequence_end", "sequence_chunk"};
    const char *v;
    memset(p, 0, sizeof *p);
    memset(q, 0, sizeof *q);
    for (size_t i = 0; i < sizeof seq_names / sizeof *seq_names; i++) {
        bool ok;
        if ((v = http_query(r, seq_names[i])) != NULL
            && seq_query_param(seq_names[i], v, q, &ok, msg, msglen) && !ok)
            return false;
    }
    if (!seq_params_check(q, msg, msglen))
        return false;
    if ((v = http_query(r, "axis")) != NULL) {
        if (!parse_int_text("axis", v, &p->axis, msg, msglen))
            return false;
        p->has_axis = true;
    }
    if ((v = http_query(r, "exclusive")) != NULL) {
        if (!parse_bool_text("exclusive", v, &p->exclusive, msg, msglen))
            return false;
        p->has_exclusive = true;
    }
    if ((v = http_query(r, "reverse")) != NULL) {
        if (!parse_bool_text("reverse", v, &p->reverse, msg, msglen))
            return false;
        p->has_reverse = true;
    }
    if ((v = http_query(r, "direction")) != NULL) {
        if (!parse_direction_text("direction", v, &p->decreasing, msg, msglen))
            return false;
        p->has_direction = true;
    }
    return true;
}

static void add_tensor_headers(request *r, const eng_scan_desc *d)
{
    char shape[ENG_MAX_RANK * 21];
    shape_to_text(d->shape, d->rank, shape, sizeof shape);
    http_add_header(r, "Tensor-Dtype", tx_dtype_name(d->dtype));
    http_add_header(r, "Tensor-Shape", shape);
}

/* A numbered chunk's answer says which chunk it answers. */
static void add_chunk_header(request *r, const seq_params *q)
{
    char n[24];
    if (!q->has_chunk)
        return;
    snprintf(n, sizeof n, "%llu", (unsigned long long)q->chunk);
    http_add_header(r, "Sequence-Chunk", n);
}

/* JSON */
typedef struct {
    native_request req;
} json_ctx;

static void json_ctx_free(void *p)
{
    json_ctx *c = p;
    eng_buffer_free(c->req.data);
    free(c);
}

static void finish_json(request *r)
{
    json_ctx *c = r->ctx;
    json_writer w;
    if (!native_json_writer(&w, &c->req.desc, c->req.data)) {
        http_error(r, STATUS_NOMEM, "out of memory writing the response");
        return;
    }
    add_chunk_header(r, &c->req.seq);
    api_reply_json(r, 200, &w);
}

static void native_json(request *r)
{
    char msg[512];
    static const char *const none[] = {NULL};
    if (!http_query_known(r, none, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID,
                   "%s: with a JSON body, axis, exclusive, reverse, "
                   "direction and the sequence parameters are members of "
                   "the JSON object",
                   msg);
        return;
    }
    json_ctx *c = http_ctx_new(r, sizeof *c, json_ctx_free);
    if (c == NULL)
        return;
    eng_err e =
        native_parse_json((const char *)http_body(r), r->body_len,
                          r->s->cfg.max_body_bytes, &c->req, msg, sizeof msg);
    if (e != ENG_E_OK) {
        if (c->req.dml)
            api_dml_json(r); /* which takes r's context for its own */
        else
            http_error(r, status_from_eng(e), "%s", msg);
        return;
    }
    submit_scan(r, &c->req.desc, c->req.data, &c->req.seq, -1, SUBMIT_TEXT,
                    finish_json);
}

/* .npy */
typedef struct {
    eng_scan_desc desc;
    void *data; /* in the body, or `copy` */
    void *copy; /* the C-order copy of a Fortran-order array */
    size_t bytes;
    seq_params seq;
} npy_ctx;

static void npy_ctx_free(void *p)
{
    npy_ctx *c = p;
    eng_buffer_free(c->copy);
    free(c);
}

static void finish_npy(request *r)
{
    npy_ctx *c = r->ctx;
    uint8_t *head = malloc(TX_NPY_WRITE_MAX);
    if (head == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory writing the response");
        return;
    }
    size_t hlen =
        tx_npy_write_header(c->desc.dtype, c->desc.shape, c->desc.rank, head);
    add_tensor_headers(r, &c->desc);
    add_chunk_header(r, &c->seq);
    http_reply_parts(r, 200, "application/x-npy", (char *)head, hlen, c->data,
                     c->bytes);
}

static void native_npy(request *r)
{
    char msg[512];
    static const char *const allowed[] = {
        "axis",        "exclusive",      "reverse",      "direction",
        "dtype",       "sequence_id",    "sequence_start", "sequence_end",
        "sequence_chunk", NULL};
    if (!http_query_known(r, allowed, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s", msg);
        return;
    }
    const char *dt = http_query(r, "dtype");
    bool bf16 = false;
    if (dt != NULL) {
        int t = tx_dtype_parse(dt, strlen(dt));
        if (t != TX_BFLOAT16) {
            http_error(r, STATUS_DTYPE,
                       "dtype=%.32s: a .npy file names its own dtype; the "
                       "dtype parameter only reads a 2-byte array as "
                       "bfloat16 (dtype=bfloat16)",
                       dt);
            return;
        }
        bf16 = true;
    }
    tx_npy_header h;
    eng_err e = npy_parse(http_body(r), r->body_len, bf16, &h, msg, sizeof msg);
    if (e != ENG_E_OK) {
        http_error(r, status_from_eng(e), "%s", msg);
        return;
    }
    scan_params p;
    npy_ctx *c = http_ctx_new(r, sizeof *c, npy_ctx_free);
    if (c == NULL)
        return;
    c->desc.dtype = h.dtype;
    c->desc.rank = h.rank;
    memcpy(c->desc.shape, h.shape, sizeof h.shape);
    if (!query_params(r, &p, &c->seq, msg, sizeof msg)
        || !scan_params_apply(&p, &c->desc, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s", msg);
        return;
    }
    size_t size = tx_dtype_size(h.dtype);
    size_t count = h.data_bytes / size;
    c->bytes = h.data_bytes;
    /* numpy pads headers so that data starts 64-byte aligned; a file that
     * does not gets its data slid down over its header (a new header is
     * written for the reply) */
    c->data = r->body + h.data_offset / 128 * 128;
    if (h.data_offset % 128 != 0)
        memmove(c->data, r->body + h.data_offset, h.data_bytes);
    if (h.big_endian)
        tx_npy_byteswap(c->data, count, size);
    if (h.fortran_order && h.rank > 1 && count > 0) {
        c->copy = eng_buffer_alloc(h.data_bytes);
        if (c->copy == NULL) {
            http_error(r, STATUS_NOMEM,
                       "out of memory reordering a Fortran-order array");
            return;
        }
        tx_npy_fortran_to_c(c->data, c->copy, size, h.shape, h.rank);
        c->data = c->copy;
    }
    submit_scan(r, &c->desc, c->data, &c->seq, -1, SUBMIT_BYTES, finish_npy);
}

/* raw bytes */
typedef struct {
    eng_scan_desc desc;
    seq_params seq;
} raw_ctx;

static void finish_raw(request *r)
{
    raw_ctx *c = r->ctx;
    add_tensor_headers(r, &c->desc);
    add_chunk_header(r, &c->seq);
    http_reply_parts(r, 200, "application/octet-stream", NULL, 0, http_body(r),
                     r->body_len);
}

static void native_raw(request *r)
{
    char msg[512];
    static const char *const allowed[] = {
        "axis",        "exclusive",      "reverse",      "direction",
        "dtype",       "shape",          "sequence_id", "sequence_start",
        "sequence_end", "sequence_chunk", NULL};
    if (!http_query_known(r, allowed, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s", msg);
        return;
    }
    const char *dt = http_query(r, "dtype"), *sh = http_query(r, "shape");
    if (dt == NULL || sh == NULL) {
        http_error(r, STATUS_INVALID,
                   "a raw body needs dtype and shape in the query string, "
                   "such as ?dtype=float32&shape=3,4");
        return;
    }
    raw_ctx *c = http_ctx_new(r, sizeof *c, free);
    if (c == NULL)
        return;
    int t = tx_dtype_parse(dt, strlen(dt));
    if (t < 0) {
        http_error(r, STATUS_DTYPE,
                   "unknown dtype \"%.32s\" (expected one of %s)", dt,
                   tx_dtype_list());
        return;
    }
    c->desc.dtype = (tx_dtype)t;
    scan_params p;
    if (!parse_shape_text("shape", sh, c->desc.shape, &c->desc.rank, msg,
                          sizeof msg)
        || !query_params(r, &p, &c->seq, msg, sizeof msg)
        || !scan_params_apply(&p, &c->desc, msg, sizeof msg)) {
        http_error(r, STATUS_INVALID, "%s", msg);
        return;
    }
    eng_lines l;
    eng_err e = eng_lines_from_desc(&c->desc, &l, msg, sizeof msg);
    if (e != ENG_E_OK) {
        http_error(r, status_from_eng(e), "%s", msg);
        return;
    }
    if (l.bytes != r->body_len) {
        http_error(r, STATUS_INVALID,
                   "the body has %zu bytes, but %s with shape [%s] takes %zu",
                   r->body_len, tx_dtype_name(c->desc.dtype), sh, l.bytes);
        return;
    }
    submit_scan(r, &c->desc, http_body(r), &c->seq, -1, SUBMIT_BYTES,
                finish_raw);
}

/* `curl -d '{...}'` sends a JSON object as application/x-www-form-urlencoded:
 * a body whose first byte (after whitespace) opens an object is read as
 * JSON; anything else is refused as the form it claims to be. */
static void native_form(request *r, const char *type)
{
    size_t i = 0;
    while (i < r->body_len
           && (r->body[i] == ' ' || r->body[i] == '\t' || r->body[i] == '\n'
               || r->body[i] == '\r'))
        i++;
    if (i < r->body_len && r->body[i] == '{') {
        native_json(r);
        return;
    }
    http_error(r, STATUS_MEDIA_TYPE,
               "Content-Type %s is read as JSON only when the body is a JSON "
               "object (as curl -d '{\"data\": [1, 2, 3]}' sends it); form "
               "fields are not supported: POST /v1/cumsum takes "
               "application/json, application/x-npy or "
               "application/octet-stream",
               type);
}

void api_native(request *r)
{
    char type[64];
    media_type(r, type, sizeof type);
    if (strcmp(type, "application/json") == 0)
        native_json(r);
    else if (strcmp(type, "application/x-www-form-urlencoded") == 0)
        native_form(r, type);
    else if (strcmp(type, "application/x-npy") == 0
             || strcmp(type, "application/npy") == 0)
        native_npy(r);
    else if (strcmp(type, "application/octet-stream") == 0
             && http_header(r, "DML-Operator") != NULL)
        api_dml_binary(r, http_header(r, "DML-Operator"));
    else if (strcmp(type, "application/octet-stream") == 0)
        native_raw(r);
    else
        http_error(r, STATUS_MEDIA_TYPE,
                   "%s%s%s: POST /v1/cumsum takes application/json, "
                   "application/x-npy or application/octet-stream",
                   type[0] ? "Content-Type " : "no Content-Type",
                   type[0] ? type : "", type[0] ? " is not supported" : "");
}
