/*
 * test_http.c - server/http/'s request, body and reply on their own: a
 * libmicrohttpd daemon started here with a handler of the test's own (no
 * router, no API, not http.c's glue), libcurl as the client, and a raw
 * socket where curl would not send what a bad client sends.
 *
 *   request.c  the request id (X-Request-Id when sane, a fresh one else),
 *              headers, query parameters and the unknown-parameter message;
 *   body.c     --max-body-bytes before a byte is read and as bytes come,
 *              --max-buffered-bytes taken as bytes come and given back,
 *              gzip and deflate bodies decoded, a bomb refused;
 *   reply.c    buffers, pieces, static data and streams, gzipped when the
 *              client accepts it; errors as valid UTF-8 JSON, with
 *              Retry-After when a retry may succeed;
 *   admit.c    connections a client and in all, counted through a small
 *              table;
 *   counters.c the door's lines of the metrics text;
 *   router.c   a table of the test's matched as a reference matcher
 *              would, first row first, Allow the union of the methods.
 *
 * Bodies are random (check_rand(), its seed printed) and compared byte by
 * byte.
 *
 * Threading: the cases run on the main thread; the handler runs on
 * libmicrohttpd's one polling thread.
 */
#include <arpa/inet.h>
#include <curl/curl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "admit.h"
#include "body.h"
#include "buffer.h"
#include "check.h"
#include "content_coding.h"
#include "counters.h"
#include "http.h"
#include "reply.h"
#include "request.h"
#include "router.h"
#include "textbuf.h"

#define MAX_BODY ((size_t)1 << 20)
#define MAX_BUFFERED ((size_t)1536 << 10)

static tallyd_server srv;
static http_routes routes;
static http_transport tr;
static struct MHD_Daemon *mhd;
static unsigned port;

/* ------------------------------------------------------------------------
 * The server side: the handler, on libmicrohttpd's thread.
 */

/* What http.c's send step does: the extra headers, the id, queued. */
static enum MHD_Result send_reply(request *r)
{
    if (r->response == NULL)
        return MHD_NO;
    for (int i = 0; i < r->nextra; i++)
        MHD_add_response_header(r->response, r->extra_headers[i][0],
                                r->extra_headers[i][1]);
    MHD_add_response_header(r->response, "X-Request-Id", r->id);
    enum MHD_Result rc =
        MHD_queue_response(r->conn, (unsigned)r->rec.status, r->response);
    MHD_destroy_response(r->response);
    r->response = NULL;
    return rc;
}

typedef struct {
    size_t left, at;
} counter_stream;

/* The stream's byte at offset k: text that is neither constant nor
 * periodic in any block size the reply may read in. */
static char stream_byte(size_t k)
{
    return (char)('a' + (k * 7 + k / 1000 + k / 65537) % 26);
}

/* left bytes in all, from offset at, as much as max a call. */
static size_t stream_read(void *state, char *buf, size_t max)
{
    counter_stream *c = state;
    size_t n = max < c->left ? max : c->left;
    for (size_t i = 0; i < n; i++)
        buf[i] = stream_byte(c->at + i);
    c->at += n;
    c->left -= n;
    return n;
}

static void answer(request *r)
{
    char msg[512];
    const char *ce = http_header(r, "Content-Encoding");
    status_code st = http_body_finish(r, ce, msg, sizeof msg);
    if (st != STATUS_OK) {
        http_error(r, st, "%s", msg);
        return;
    }
    if (strcmp(r->path, "/echo") == 0) {
        /* the head, then the body where it lies: the reply takes it over */
        char *head = strdup("echo:");
        http_reply_parts(r, 200, "application/octet-stream", head,
                         head ? strlen(head) : 0, http_body(r), r->body_len);
    } else if (strcmp(r->path, "/id") == 0) {
        char *text = strdup(r->id);
        http_reply_buffer(r, 200, "text/plain", text, text ? strlen(text) : 0);
    } else if (strcmp(r->path, "/header") == 0) {
        const char *v = http_header(r, "X-Test");
        char *text = strdup(v ? v : "(none)");
        http_reply_buffer(r, 200, "text/plain", text, text ? strlen(text) : 0);
    } else if (strcmp(r->path, "/query") == 0) {
        static const char *const known[] = {"axis", "exclusive", NULL};
        if (!http_query_known(r, known, msg, sizeof msg)) {
            http_error(r, STATUS_INVALID, "%s", msg);
            return;
        }
        const char *axis = http_query(r, "axis");
        char *text = strdup(axis ? axis : "(none)");
        http_reply_buffer(r, 200, "text/plain", text, text ? strlen(text) : 0);
    } else if (strcmp(r->path, "/error") == 0) {
        const char *code = http_query(r, "code");
        /* a message with bytes of no valid UTF-8 sequence, a quote and a
         * control character: the body must still be valid JSON */
        http_error(r,
                   code && strcmp(code, "queue_full") == 0 ? STATUS_QUEUE_FULL
                                                           : STATUS_INVALID,
                   "bad \xff\xfe \"name\" \x01 caf\xc3\xa9");
    } else if (strcmp(r->path, "/pieces") == 0) {
        char *buf = eng_buffer_alloc(64);
        if (buf == NULL)
            return;
        memcpy(buf, "0123456789abcdef", 16);
        http_piece p[3] = {{buf + 10, 6}, {buf, 3}, {buf + 5, 0}};
        http_reply_pieces(r, 201, "text/plain", buf, p, 3);
    } else if (strcmp(r->path, "/static") == 0) {
        static const char text[] = "{\"static\": true}";
        http_add_header(r, "X-Extra", "yes");
        http_reply_static(r, 200, "application/json", text, sizeof text - 1);
    } else if (strcmp(r->path, "/stream") == 0) {
        counter_stream *c = malloc(sizeof *c);
        if (c != NULL) {
            c->left = 300000;
            c->at = 0;
        }
        http_reply_stream(r, 200, "text/plain", stream_read, c, free);
    } else if (strcmp(r->path, "/big") == 0) {
        size_t n = 200000;
        char *text = malloc(n);
        for (size_t i = 0; text != NULL && i < n; i++)
            text[i] = "tally "[i % 6];
        http_reply_buffer(r, 200, "text/plain", text, text ? n : 0);
    } else {
        http_error(r, STATUS_NOT_FOUND, "no %s", r->path);
    }
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn,
                                  const char *url, const char *method,
                                  const char *version, const char *data,
                                  size_t *size, void **con_cls)
{
    (void)cls;
    (void)version;
    request *r = *con_cls;
    char msg[512];
    if (r == NULL) { /* the headers */
        r = request_new(&tr, conn, url, method);
        if (r == NULL)
            return MHD_NO;
        *con_cls = r;
        /* as the transport decides it */
        r->accepts_gzip = encoding_accepts_gzip(
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept-Encoding"));
        status_code st = http_body_begin(
            r, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length"),
            msg, sizeof msg);
        if (st != STATUS_OK) { /* answered before a byte of the body */
            http_error(r, st, "%s", msg);
            r->state = 1;
            return send_reply(r);
        }
        return MHD_YES;
    }
    if (r->state != 0) { /* answered early: the rest is dropped */
        *size = 0;
        return MHD_YES;
    }
    if (*size > 0) {
        http_body_append(r, data, *size);
        *size = 0;
        return MHD_YES;
    }
    answer(r);
    r->state = 1;
    return send_reply(r);
}

static void on_completed(void *cls, struct MHD_Connection *conn,
                         void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)conn;
    (void)toe;
    if (*con_cls != NULL)
        request_release(*con_cls);
    *con_cls = NULL;
}

static bool start(void)
{
    memset(&srv, 0, sizeof srv);
    srv.cfg.max_body_bytes = MAX_BODY;
    srv.cfg.max_buffered_bytes = MAX_BUFFERED;
    request_seed_ids(&srv);
    static const char *const labels[] = {"test", "other"};
    routes.labels = labels;
    routes.nlabels = 2;
    routes.unmatched = 1;
    tr.s = &srv;
    tr.routes = &routes;
    mhd = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL
                               | MHD_USE_ERROR_LOG,
                           0, NULL, NULL, on_request, NULL,
                           MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
                           MHD_OPTION_END);
    if (mhd == NULL)
        return false;
    const union MHD_DaemonInfo *di =
        MHD_get_daemon_info(mhd, MHD_DAEMON_INFO_BIND_PORT);
    port = di != NULL ? di->port : 0;
    return port != 0;
}

/* ------------------------------------------------------------------------
 * The client side.
 */

typedef struct {
    long status;
    uint8_t *body;
    size_t len;
    char headers[4096];
    size_t hlen;
} reply;

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
    reply *a = arg;
    uint8_t *b = realloc(a->body, a->len + size * n + 1);
    if (b == NULL)
        return 0;
    memcpy(b + a->len, p, size * n);
    a->body = b;
    a->len += size * n;
    a->body[a->len] = '\0';
    return size * n;
}

static size_t on_header(char *p, size_t size, size_t n, void *arg)
{
    reply *a = arg;
    size_t take = size * n;
    if (take > sizeof a->headers - 1 - a->hlen)
        take = sizeof a->headers - 1 - a->hlen;
    memcpy(a->headers + a->hlen, p, take);
    a->hlen += take;
    a->headers[a->hlen] = '\0';
    return size * n;
}

typedef struct {
    const uint8_t *data;
    size_t len, at;
} upload;

static size_t on_upload(char *p, size_t size, size_t n, void *arg)
{
    upload *u = arg;
    size_t take = size * n;
    if (take > u->len - u->at)
        take = u->len - u->at;
    memcpy(p, u->data + u->at, take);
    u->at += take;
    return take;
}

/* One request: a POST of body (len bytes; chunked when `chunked`) or a
 * GET when body is NULL, with extra header lines; gzip accepted (and
 * decoded by curl) when `gzip`. */
static reply fetch(const char *path, const uint8_t *body, size_t len,
                   bool chunked, const char *const *headers, bool gzip)
{
    reply a;
    memset(&a, 0, sizeof a);
    CURL *c = curl_easy_init();
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u%s", port, path);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &a);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, &a);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    if (gzip)
        curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, "gzip");
    struct curl_slist *h = NULL;
    for (const char *const *p = headers; p != NULL && *p != NULL; p++)
        h = curl_slist_append(h, *p);
    upload u = {body, len, 0};
    if (body != NULL) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_upload);
        curl_easy_setopt(c, CURLOPT_READDATA, &u);
        if (chunked)
            h = curl_slist_append(h, "Transfer-Encoding: chunked");
        else
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
        h = curl_slist_append(h, "Expect:");
    }
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &a.status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    return a;
}

/* The value of header name in a reply ("" when absent). */
static const char *header_of(const reply *a, const char *name, char *out,
                             size_t outlen)
{
    out[0] = '\0';
    size_t n = strlen(name);
    for (const char *p = a->headers; *p != '\0';) {
        const char *eol = strstr(p, "\r\n");
        if (eol == NULL)
            break;
        if ((size_t)(eol - p) > n + 1 && strncasecmp(p, name, n) == 0 && p[n] == ':') {
            const char *v = p + n + 1;
            while (*v == ' ')
                v++;
            snprintf(out, outlen, "%.*s", (int)(eol - v), v);
            return out;
        }
        p = eol + 2;
    }
    return out;
}

/* The body deflated as a gzip or zlib stream (gz), malloc'd. */
static uint8_t *deflated(const uint8_t *b, size_t n, bool gz, size_t *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 6, Z_DEFLATED, gz ? 31 : 15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&z, n);
    uint8_t *o = malloc(cap);
    z.next_in = (uint8_t *)b;
    z.avail_in = (uInt)n;
    z.next_out = o;
    z.avail_out = (uInt)cap;
    int rc = o ? deflate(&z, Z_FINISH) : Z_MEM_ERROR;
    *out = z.total_out;
    deflateEnd(&z);
    if (rc != Z_STREAM_END) {
        free(o);
        return NULL;
    }
    return o;
}

static void free_reply(reply *a)
{
    free(a->body);
    a->body = NULL;
}

/* Waits until libmicrohttpd has ended every request (the budget is given
 * back when the request is released, after its response went out). */
static size_t buffered_settled(void)
{
    size_t b = 0;
    for (int i = 0; i < 200; i++) {
        b = atomic_load(&srv.buffered_bytes);
        if (b == 0)
            break;
        struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
    }
    return b;
}

/* ------------------------------------------------------------------------
 * The cases.
 */
static void request_ids(void)
{
    static const char *const sane[] = {"X-Request-Id: order-17/a", NULL};
    reply a = fetch("/id", NULL, 0, false, sane, false);
    CHECK(a.status == 200 && a.body && strcmp((char *)a.body, "order-17/a") == 0,
          "a sane X-Request-Id is the id: %ld %s", a.status, a.body);
    free_reply(&a);
    static const char *const bad[] = {"X-Request-Id: has space\"", NULL};
    reply b = fetch("/id", NULL, 0, false, bad, false);
    reply c = fetch("/id", NULL, 0, false, NULL, false);
    CHECK(b.status == 200 && b.len == 16 && c.len == 16
              && strspn((char *)b.body, "0123456789abcdef") == 16
              && strcmp((char *)b.body, (char *)c.body) != 0,
          "otherwise a fresh one, different each time: %s %s", b.body, c.body);
    char h[128];
    CHECK(strcmp(header_of(&c, "X-Request-Id", h, sizeof h), (char *)c.body) == 0,
          "the reply carries it: %s", h);
    free_reply(&b);
    free_reply(&c);
}

static void headers_and_query(void)
{
    static const char *const hs[] = {"X-Test: value 1", NULL};
    reply a = fetch("/header", NULL, 0, false, hs, false);
    CHECK(a.status == 200 && strcmp((char *)a.body, "value 1") == 0, "header: %s",
          a.body);
    free_reply(&a);
    a = fetch("/query?axis=-2&exclusive=1", NULL, 0, false, NULL, false);
    CHECK(a.status == 200 && strcmp((char *)a.body, "-2") == 0, "query: %s", a.body);
    free_reply(&a);
    a = fetch("/query?axis=0&revrse=1", NULL, 0, false, NULL, false);
    CHECK(a.status == 400 && strstr((char *)a.body, "\\\"revrse\\\"")
              && strstr((char *)a.body, "axis exclusive"),
          "an unknown parameter is named, with the known ones: %s", a.body);
    free_reply(&a);
}

static void bodies(void)
{
    /* sizes around the first buffer (256 KiB less its header) and past it */
    static const size_t sizes[] = {0, 1, 4096, (256 << 10) - 128,
                                   (256 << 10) - 127, 700000};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        for (int chunked = 0; chunked < 2; chunked++) {
            size_t n = sizes[k];
            uint8_t *b = malloc(n + 1);
            for (size_t i = 0; i < n; i++)
                b[i] = (uint8_t)check_rand();
            reply a = fetch("/echo", b, n, chunked, NULL, false);
            CHECK(a.status == 200 && a.len == n + 5 && memcmp(a.body, "echo:", 5) == 0
                      && memcmp(a.body + 5, b, n) == 0,
                  "%zu bytes%s: %ld, %zu back", n, chunked ? " chunked" : "", a.status,
                  a.len);
            free_reply(&a);
            free(b);
        }
    }
    CHECK(buffered_settled() == 0, "every byte of the budget given back: %zu",
          (size_t)atomic_load(&srv.buffered_bytes));
}

static void body_limits(void)
{
    /* announced over --max-body-bytes: 413 before a byte is read */
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
    static const char head[] = "POST /echo HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 999999999999\r\n\r\n";
    CHECK(write(fd, head, sizeof head - 1) == (ssize_t)sizeof head - 1, "write");
    char got[2048];
    size_t n = 0;
    for (ssize_t r; n < sizeof got - 1 && (r = read(fd, got + n, sizeof got - 1 - n)) > 0;)
        n += (size_t)r;
    got[n] = '\0';
    close(fd);
    CHECK(strncmp(got, "HTTP/1.1 413", 12) == 0 && strstr(got, "--max-body-bytes"),
          "a 413 at the headers: %.200s", got);

    /* chunked past it: refused once the bytes pass the limit */
    size_t big = MAX_BODY + 1;
    uint8_t *b = calloc(1, big);
    reply a = fetch("/echo", b, big, true, NULL, false);
    CHECK(a.status == 413 && strstr((char *)a.body, "--max-body-bytes"),
          "a chunked body past the limit: %ld %s", a.status, a.body);
    free_reply(&a);

    /* within --max-body-bytes but past what --max-buffered-bytes has
     * left while another request holds most of it: 503, Retry-After */
    fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "connect");
    static const char held[] = "POST /echo HTTP/1.1\r\nHost: x\r\n"
                               "Content-Length: 1048576\r\n\r\n";
    size_t part = 900000;
    CHECK(write(fd, held, sizeof held - 1) == (ssize_t)sizeof held - 1
              && write(fd, b, part) == (ssize_t)part,
          "a body left unfinished");
    for (int i = 0; i < 200 && atomic_load(&srv.buffered_bytes) < ((size_t)1 << 20); i++) {
        struct timespec ten_ms = {0, 10000000};
        nanosleep(&ten_ms, NULL);
    }
    CHECK(atomic_load(&srv.buffered_bytes) == ((size_t)1 << 20),
          "the unfinished body holds its announced length: %zu",
          (size_t)atomic_load(&srv.buffered_bytes));
    a = fetch("/echo", b, (size_t)1 << 20, false, NULL, false);
    char h[64];
    CHECK(a.status == 503 && strstr((char *)a.body, "--max-buffered-bytes")
              && strcmp(header_of(&a, "Retry-After", h, sizeof h), "1") == 0,
          "past the budget: %ld %s", a.status, a.body);
    free_reply(&a);
    close(fd);
    free(b);
    CHECK(buffered_settled() == 0, "the budget given back: %zu",
          (size_t)atomic_load(&srv.buffered_bytes));
}

static void encodings(void)
{
    size_t n = 300000;
    uint8_t *b = malloc(n);
    for (size_t i = 0; i < n; i++) /* compressible, not constant */
        b[i] = (uint8_t)(i % 7 == 0 ? check_rand() : 'a' + i % 5);
    for (int gz = 0; gz < 2; gz++) {
        size_t zn;
        uint8_t *z = deflated(b, n, gz, &zn);
        static const char *const hg[] = {"Content-Encoding: gzip", NULL};
        static const char *const hd[] = {"Content-Encoding: deflate", NULL};
        reply a = fetch("/echo", z, zn, false, gz ? hg : hd, false);
        CHECK(a.status == 200 && a.len == n + 5 && memcmp(a.body + 5, b, n) == 0,
              "%s body decoded: %ld %zu", gz ? "gzip" : "deflate", a.status, a.len);
        free_reply(&a);
        free(z);
    }
    static const char *const br[] = {"Content-Encoding: br", NULL};
    reply a = fetch("/echo", b, 100, false, br, false);
    CHECK(a.status == 415 && strstr((char *)a.body, "br"), "br: %ld %s", a.status,
          a.body);
    free_reply(&a);
    /* a bomb: 8 MiB of zeros in a few KiB, past --max-body-bytes decoded */
    size_t bn = (size_t)8 << 20, zn;
    uint8_t *zeros = calloc(1, bn);
    uint8_t *bomb = deflated(zeros, bn, true, &zn);
    static const char *const hg[] = {"Content-Encoding: gzip", NULL};
    a = fetch("/echo", bomb, zn, false, hg, false);
    CHECK(a.status == 413 && zn < 65536, "a bomb of %zu bytes: %ld %s", zn, a.status,
          a.body);
    free_reply(&a);
    free(bomb);
    free(zeros);
    /* bytes that are not gzip */
    a = fetch("/echo", b, 1000, false, hg, false);
    CHECK(a.status == 400, "not gzip: %ld %s", a.status, a.body);
    free_reply(&a);
    free(b);
    CHECK(buffered_settled() == 0, "the budget given back: %zu",
          (size_t)atomic_load(&srv.buffered_bytes));
}

static void replies(void)
{
    char h[128];
    reply a = fetch("/pieces", NULL, 0, false, NULL, false);
    CHECK(a.status == 201 && a.len == 9 && memcmp(a.body, "abcdef012", 9) == 0,
          "pieces in their order: %ld %s", a.status, a.body);
    free_reply(&a);
    a = fetch("/static", NULL, 0, false, NULL, false);
    CHECK(a.status == 200 && strcmp((char *)a.body, "{\"static\": true}") == 0
              && strcmp(header_of(&a, "X-Extra", h, sizeof h), "yes") == 0
              && strcmp(header_of(&a, "Content-Type", h, sizeof h), "application/json")
                     == 0,
          "static: %s", a.body);
    free_reply(&a);
    for (int gz = 0; gz < 2; gz++) {
        a = fetch("/big", NULL, 0, false, NULL, gz);
        bool same = a.len == 200000;
        for (size_t i = 0; same && i < a.len; i++)
            same = a.body[i] == (uint8_t)"tally "[i % 6];
        CHECK(a.status == 200 && same, "200000 bytes%s: %zu", gz ? " gzipped" : "", a.len);
        CHECK(strcmp(header_of(&a, "Content-Encoding", h, sizeof h), gz ? "gzip" : "")
                  == 0,
              "Content-Encoding \"%s\" %s gzip accepted", h, gz ? "with" : "without");
        free_reply(&a);

        a = fetch("/stream", NULL, 0, false, NULL, gz);
        size_t wn = 300000, upto = 0;
        while (upto < a.len && upto < wn && a.body[upto] == (uint8_t)stream_byte(upto))
            upto++;
        CHECK(a.status == 200 && a.len == wn && upto == wn,
              "a stream%s: %zu bytes of %zu, the same up to %zu", gz ? " gzipped" : "",
              a.len, wn, upto);
        CHECK(strcmp(header_of(&a, "Content-Encoding", h, sizeof h), gz ? "gzip" : "")
                  == 0,
              "the stream's Content-Encoding \"%s\"", h);
        free_reply(&a);
    }
}

static void errors(void)
{
    char h[64];
    for (int full = 0; full < 2; full++) {
        reply a = fetch(full ? "/error?code=queue_full" : "/error", NULL, 0, false,
                        NULL, false);
        CHECK(a.status == (full ? 503 : 400), "status %ld", a.status);
        json_error_t je;
        json_t *j = a.body ? json_loadb((char *)a.body, a.len, 0, &je) : NULL;
        const char *text = json_string_value(json_object_get(j, "error"));
        CHECK(text != NULL && strstr(text, "\"name\"") && strstr(text, "caf\xc3\xa9")
                  && strstr(text, "\\xFF\\xFE"),
              "valid JSON, its message kept and the bad bytes written as \\xNN: %s",
              a.body);
        CHECK(strcmp(header_of(&a, "Retry-After", h, sizeof h), full ? "1" : "") == 0,
              "Retry-After \"%s\" %s", h, full ? "when a retry may succeed" : "never else");
        json_decref(j);
        free_reply(&a);
    }
    char *t = http_error_text("\xc3\x28 \xed\xa0\x80 ok");
    json_error_t je;
    json_t *j = t ? json_loads(t, 0, &je) : NULL;
    CHECK(j != NULL, "overlong and surrogate bytes still make JSON: %s", t);
    json_decref(j);
    free(t);
}

/* ------------------------------------------------------------------------
 * Admission.
 */
static struct sockaddr_in v4(uint32_t a)
{
    struct sockaddr_in s = {.sin_family = AF_INET, .sin_port = htons(1)};
    s.sin_addr.s_addr = htonl(a);
    return s;
}

static void admit_limits(void)
{
    http_admit *l = http_admit_new(6, 2);
    CHECK(l != NULL, "new");
    struct sockaddr_in a = v4(0x7f000001), b = v4(0x7f000002);
    struct sockaddr_in6 c = {.sin6_family = AF_INET6};
    c.sin6_addr.s6_addr[15] = 1;
    const struct sockaddr *pa = (void *)&a, *pb = (void *)&b, *pc = (void *)&c;
    CHECK(http_admit_enter(l, pa, sizeof a) && http_admit_enter(l, pa, sizeof a),
          "two from a");
    CHECK(!http_admit_enter(l, pa, sizeof a), "a third from a is refused");
    a.sin_port = htons(9); /* another port is the same client */
    CHECK(!http_admit_enter(l, pa, sizeof a), "the port does not count");
    CHECK(http_admit_enter(l, pb, sizeof b) && http_admit_enter(l, pc, sizeof c)
              && http_admit_enter(l, pc, sizeof c),
          "b and c have their own counts");
    CHECK(http_admit_open(l) == 5, "5 open, not %u", http_admit_open(l));
    http_admit_leave(l, pa, sizeof a);
    CHECK(http_admit_enter(l, pa, sizeof a), "a has room again");
    CHECK(http_admit_enter(l, pb, sizeof b), "the sixth");
    CHECK(!http_admit_enter(l, NULL, 0), "the total caps even unknown ones");
    http_admit_free(l);

    /* many addresses through a small table: counts stay right as slots
     * are emptied and probe runs are shifted back */
    l = http_admit_new(80, 3);
    for (int round = 0; round < 3; round++) {
        uint32_t base = 0x0a000000u + (uint32_t)check_below(1000);
        for (uint32_t i = 0; i < 40; i++) {
            struct sockaddr_in x = v4(base + i * 7919u);
            CHECK(http_admit_enter(l, (void *)&x, sizeof x), "enter %u", i);
        }
        for (uint32_t i = 0; i < 40; i += 2) {
            struct sockaddr_in x = v4(base + i * 7919u);
            http_admit_leave(l, (void *)&x, sizeof x);
        }
        for (uint32_t i = 1; i < 40; i += 2) { /* still there, once each */
            struct sockaddr_in x = v4(base + i * 7919u);
            CHECK(http_admit_enter(l, (void *)&x, sizeof x)
                      && http_admit_enter(l, (void *)&x, sizeof x)
                      && !http_admit_enter(l, (void *)&x, sizeof x),
                  "round %d, address %u: 3 at most", round, i);
        }
        for (uint32_t i = 1; i < 40; i += 2)
            for (int k = 0; k < 3; k++) {
                struct sockaddr_in x = v4(base + i * 7919u);
                http_admit_leave(l, (void *)&x, sizeof x);
            }
        CHECK(http_admit_open(l) == 0, "round %d: all left, %u open", round,
              http_admit_open(l));
    }
    http_admit_free(l);
}

/* ------------------------------------------------------------------------
 * The door's counters in the metrics text.
 */
static void counters_text(void)
{
    http_counters hc;
    memset(&hc, 0, sizeof hc);
    atomic_store(&hc.refused, 3);
    textbuf o;
    textbuf_init(&o, 256);
    http_counters_render(&hc, 5, &o);
    size_t len;
    char *t = textbuf_take(&o, &len);
    CHECK(t != NULL && strlen(t) == len, "rendered");
    if (t == NULL)
        return;
    CHECK(strstr(t, "\ntally_open_connections 5\n") != NULL
              && strstr(t, "\ntally_connections_refused_total 3\n") != NULL,
          "the counters: %s", t);
    free(t);
}

/* ------------------------------------------------------------------------
 * The router on its own (router.h): a table of the test's.
 */
static void stub(request *r)
{
    (void)r;
}

static void other_stub(request *r)
{
    (void)r;
}

static void router_rules(void)
{
    /* the matcher on its own: first match wins, Allow is the union of the
     * matching rows' methods in order, parameters match one segment */
    static const http_route rows[] = {
        {"PUT", "/a/{x}", stub, 0, HTTP_ACCESS_TOKEN, NULL},
        {"GET", "/a/{x}", other_stub, 1, HTTP_ACCESS_HEALTH, NULL},
        {"GET", "/a/b", stub, 2, HTTP_ACCESS_METRICS, NULL},
        {"POST", "/a/{x}/c", stub, 3, HTTP_ACCESS_TOKEN, NULL},
    };
    http_routes t = {.rows = rows, .nrows = 4};
    http_match m;
    http_route_match(&t, "GET", "/a/b", &m);
    CHECK(m.handler == other_stub && m.label == 1
              && m.access == HTTP_ACCESS_HEALTH,
          "the first matching row wins, with its access rule");
    http_route_match(&t, "DELETE", "/a/zz", &m);
    CHECK(m.status == 405 && strcmp(m.allow, "PUT, GET, HEAD") == 0,
          "Allow: \"%s\"", m.allow);
    http_route_match(&t, "DELETE", "/a/b", &m);
    CHECK(m.status == 405 && strcmp(m.allow, "PUT, GET, HEAD") == 0,
          "two GET rows match: Allow lists GET once: \"%s\"", m.allow);
    http_route_match(&t, "POST", "/a/q/c", &m);
    CHECK(m.status == 200 && m.label == 3, "a parameter mid-path");
    http_route_match(&t, "POST", "/a/q/r/c", &m);
    CHECK(m.status == 404, "a parameter is one segment");
    http_route_match(&t, "GET", "/a", &m);
    CHECK(m.status == 404, "a parameter is not optional");
}

/* The reference: pattern and path split at every '/' (each starts a
 * segment, empty ones too), a "{name}" segment matching any one. */
static int ref_split(const char *s, char seg[][8], int max)
{
    if (*s != '/')
        return -1;
    int n = 0;
    while (*s == '/') {
        const char *e = strchr(s + 1, '/');
        size_t len = e != NULL ? (size_t)(e - s - 1) : strlen(s + 1);
        if (n == max || len >= 8)
            return -1;
        memcpy(seg[n], s + 1, len);
        seg[n++][len] = '\0';
        s += 1 + len;
    }
    return n;
}

static bool ref_match(const char *pattern, const char *path)
{
    char p[8][8], q[8][8];
    int np = ref_split(pattern, p, 8), nq = ref_split(path, q, 8);
    if (np < 0 || nq != np)
        return false;
    for (int i = 0; i < np; i++)
        if (!(p[i][0] == '{' && strlen(p[i]) >= 2
              && p[i][strlen(p[i]) - 1] == '}')
            && strcmp(p[i], q[i]) != 0)
            return false;
    return true;
}

static void router_random_paths(void)
{
    /* random paths of the table's words, empty segments and near misses,
     * matched against the reference: which row, or 404 */
    static const http_route rows[] = {
        {"GET", "/", stub, 0, HTTP_ACCESS_TOKEN, NULL},
        {"GET", "/a", stub, 1, HTTP_ACCESS_TOKEN, NULL},
        {"GET", "/a/{x}", stub, 2, HTTP_ACCESS_TOKEN, NULL},
        {"GET", "/a/b/c", stub, 3, HTTP_ACCESS_TOKEN, NULL},
        {"GET", "/{y}/b/{z}/d", stub, 4, HTTP_ACCESS_TOKEN, NULL},
        {"GET", "/ab/{x/c", stub, 5, HTTP_ACCESS_TOKEN, NULL},
        {"GET", "/a/b//", stub, 6, HTTP_ACCESS_TOKEN, NULL},
    };
    http_routes t = {.rows = rows, .nrows = sizeof rows / sizeof rows[0]};
    static const char *const words[] = {"a", "b", "c", "d", "ab", "",
                                        "{x", "{x}", "bb", "x"};
    for (int k = 0; k < 20000; k++) {
        char path[64] = "";
        int n = (int)check_below(6);
        if (check_below(20) == 0)
            snprintf(path, sizeof path, "a"); /* no leading '/' */
        for (int i = 0; i < n; i++) {
            size_t at = strlen(path);
            snprintf(path + at, sizeof path - at, "/%s",
                     words[check_below(sizeof words / sizeof words[0])]);
        }
        int want = -1;
        for (size_t r = 0; r < t.nrows && want < 0; r++)
            if (ref_match(rows[r].pattern, path))
                want = (int)rows[r].label;
        http_match m;
        http_route_match(&t, "GET", path, &m);
        int got = m.status == 200 ? (int)m.label : -1;
        CHECK(got == want, "path \"%s\": row %d, the reference's %d", path,
              got, want);
        /* again (the thread's last match), and with a method no row has */
        http_route_match(&t, "GET", path, &m);
        int again = m.status == 200 ? (int)m.label : -1;
        http_route_match(&t, "PUT", path, &m);
        CHECK(again == want && m.status == (want >= 0 ? 405 : 404),
              "path \"%s\" again: row %d; PUT: %d", path, again, m.status);
        if (got != want || again != want)
            return;
    }
    char deep[64] = "";
    for (int i = 0; i < 20; i++)
        strcat(deep, "/a");
    http_match m;
    http_route_match(&t, "GET", deep, &m);
    CHECK(m.status == 404, "20 segments match no row: %d", m.status);
}

static const check_case cases[] = {
    {"request_ids", request_ids},
    {"headers_and_query", headers_and_query},
    {"bodies", bodies},
    {"body_limits", body_limits},
    {"encodings", encodings},
    {"replies", replies},
    {"errors", errors},
    {"admit_limits", admit_limits},
    {"counters_text", counters_text},
    {"router_rules", router_rules},
    {"router_random_paths", router_random_paths},
};

int main(int argc, char **argv)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    if (!start()) {
        fprintf(stderr, "test_http: libmicrohttpd did not start\n");
        return 1;
    }
    int rc = check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
    MHD_stop_daemon(mhd);
    curl_global_cleanup();
    return rc;
}
