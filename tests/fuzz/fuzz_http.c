/*
 * fuzz_http.c - whole requests through the real daemon: libmicrohttpd, the
 * transport (bodies, Content-Encoding, routing, tokens), every handler and
 * codec, dispatch and the host backend, in one process.
 *
 * Two daemons run in the harness, on the host backend, both with
 * --allow-shared-memory and CORS for http://app.example:3000: an open one and one that requires the bearer
 * token "fuzz-token"; the first byte picks one. The rest is a request in a loose form that mutates well:
 *
 *     METHOD PATH?QUERY\n
 *     Header: value\n ...
 *     \n
 *     body
 *
 * The harness writes it as HTTP/1.1 with Host, Connection: close and the
 * body's Content-Length (so framing headers of the input are dropped), on
 * a socket pair handed to libmicrohttpd, and reads the answer to its end.
 *
 * Properties of every answer: it comes, within 10 s; its status is below
 * 500 (the daemon has no reason to fail on any input); a JSON body is
 * valid UTF-8 JSON, with a string "error" for a 4xx; an .npy body is an
 * .npy file whose data fills it; raw tensors fill their Tensor-Shape; a
 * KServe binary answer's header is JSON announcing the bytes after it.
 */
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "api.h"
#include "auth.h"
#include "fuzzd.h"
#include "http.h"
#include "log.h"
#include "numtext.h"
#include "tx_npy.h"

/* One daemon, composed as tallyd.c composes it. */
typedef struct {
    tallyd_server s;
    http_transport t;
    api_state app;
    eng_engine *engine;
} fuzz_daemon;

static fuzz_daemon servers[2];

static void start(fuzz_daemon *d, bool tokens)
{
    tallyd_server *s = &d->s;
    static char token_path[] = "/tmp/tally-fuzz-tokens-XXXXXX";
    char *argv[] = {"fuzz_http",
                    "--listen=127.0.0.1:0",
                    "--device=host",
                    "--workers=1",
                    "--http-threads=1",
                    "--access-log=off",
                    "--max-body-bytes=1MiB",
                    "--warmup=false",
                    "--allow-shared-memory",
                    "--cors-origins=http://app.example:3000",
                    NULL,
                    NULL};
    int argc = 10;
    if (tokens) {
        int fd = mkstemp(token_path);
        FUZZ_CHECK(fd >= 0 && write(fd, "fuzz-token\n", 11) == 11,
                   "token file");
        close(fd);
        static char flag[64];
        snprintf(flag, sizeof flag, "--auth-token-file=%s", token_path);
        argv[argc++] = flag;
    }
    fuzz_daemon_start(s, &d->app, &d->engine, argc, argv);
    char msg[1024];
    if (tokens) {
        d->t.auth = auth_load(s->cfg.auth_token_file, msg, sizeof msg);
        FUZZ_CHECK(d->t.auth != NULL, "%s", msg);
        unlink(token_path);
    }
    FUZZ_CHECK(http_start(&d->t, s, &api_routes, msg, sizeof msg), "%s", msg);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    numtext_init();
    /* libmicrohttpd warns that TCP options fail on the socket pairs: the
     * daemons' log goes nowhere, and properties speak for themselves */
    int null = open("/dev/null", O_WRONLY);
    FUZZ_CHECK(null >= 0, "/dev/null");
    log_to(null);
    start(&servers[0], false);
    start(&servers[1], true);
    return 0;
}

/* ------------------------------------------------------------------------
 * Building the request and reading the answer.
 */
typedef struct {
    char *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->n + n + 1 > b->cap) {
        b->cap = (b->n + n + 1) * 2;
        b->p = realloc(b->p, b->cap);
        FUZZ_CHECK(b->p != NULL, "out of memory");
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void puts_(buf *b, const char *s)
{
    put(b, s, strlen(s));
}

/* Copies line[0..n) without CR, LF and NUL (which would break framing). */
static void put_line(buf *b, const char *line, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (line[i] != '\r' && line[i] != '\n' && line[i] != '\0')
            put(b, &line[i], 1);
}

static bool framing_header(const char *line, size_t n)
{
    static const char *const names[] = {"content-length", "transfer-encoding",
                                        "connection", "host"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t k = strlen(names[i]);
        if (n > k && line[k] == ':' && strncasecmp(line, names[i], k) == 0)
            return true;
    }
    return false;
}

/* The request line: a method of token characters (POST when there is
 * none), then a target that starts with '/' and holds no space or control
 * character, so that libmicrohttpd hands the request on (it may close a
 * connection whose request line it cannot read, without an answer). */
static void request_line(buf *req, const char *in, const char *end, bool *head)
{
    const char *sp = memchr(in, ' ', (size_t)(end - in));
    const char *m = in, *t = sp ? sp + 1 : in;
    size_t mlen = sp ? (size_t)(sp - in) : 0;
    bool token = mlen > 0 && mlen <= 16;
    for (size_t i = 0; token && i < mlen; i++)
        token = (m[i] >= 'A' && m[i] <= 'Z') || (m[i] >= 'a' && m[i] <= 'z');
    if (token)
        put(req, m, mlen);
    else
        puts_(req, "POST");
    *head = token && mlen == 4 && memcmp(m, "HEAD", 4) == 0;
    puts_(req, " ");
    if (t == end || *t != '/')
        puts_(req, "/");
    for (; t < end; t++)
        if ((unsigned char)*t > 0x20 && *t != 0x7f)
            put(req, t, 1);
}

static void build(const char *in, size_t len, buf *req, bool *head)
{
    const char *end = in + len, *nl = memchr(in, '\n', len);
    request_line(req, in, nl ? nl : end, head);
    puts_(req, " HTTP/1.1\r\nHost: fuzz\r\nConnection: close\r\n");
    const char *p = nl ? nl + 1 : end, *body = end;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (e == NULL)
            e = end;
        if (e == p) { /* the blank line: the body follows */
            body = e + 1 < end ? e + 1 : end;
            break;
        }
        /* the line as it will be sent; one that starts with white space
         * would continue the one before (obs-fold), Connection: close
         * included */
        buf line = {0};
        put_line(&line, p, (size_t)(e - p));
        if (line.n > 0 && line.p[0] != ' ' && line.p[0] != '\t'
            && !framing_header(line.p, line.n)) {
            put(req, line.p, line.n);
            puts_(req, "\r\n");
        }
        free(line.p);
        p = e + 1;
    }
    char cl[64];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n\r\n",
             (size_t)(end - body));
    puts_(req, cl);
    put(req, body, (size_t)(end - body));
}

static const char *header(const char *head, const char *name, size_t *len);

/* Whether ans holds a whole answer: its headers, and the body its
 * Content-Length or chunked encoding says (none for HEAD). A connection
 * whose answer went out before its body was read may stay open after
 * Connection: close, so the end of the stream is not waited for. */
static bool complete(const buf *ans, bool head_only)
{
    if (ans->n == 0)
        return false;
    const char *sep = strstr(ans->p, "\r\n\r\n");
    if (sep == NULL)
        return false;
    size_t hlen = (size_t)(sep - ans->p) + 4, n;
    if (head_only)
        return true;
    char *head = fuzz_text((const uint8_t *)ans->p, hlen);
    const char *cl = header(head, "Content-Length", &n);
    const char *te = header(head, "Transfer-Encoding", &n);
    bool done = false;
    if (cl != NULL)
        done = ans->n - hlen >= (size_t)strtoull(cl, NULL, 10);
    else if (te != NULL)
        done = ans->n >= hlen + 5
               && memcmp(ans->p + ans->n - 5, "0\r\n\r\n", 5) == 0;
    free(head);
    return done;
}

/* For a hang: every thread's stack, from gdb when it is there, into
 * fuzz_http-hang.txt beside the crash inputs. */
static void dump_threads(void)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "gdb -batch -p %d -ex 'thread apply all bt 40' "
             "> fuzz_http-hang.txt 2>&1",
             (int)getpid());
    int rc = system(cmd);
    fprintf(stderr, "threads at the hang: fuzz_http-hang.txt (gdb: %d)\n", rc);
}

/* Sends req on a fresh connection to s and reads the whole answer. */
static void exchange(fuzz_daemon *d, const buf *req, buf *ans, bool head_only)
{
    tallyd_server *s = &d->s;
    int fds[2];
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
    http_adopt(&d->t, fds[1]); /* its first loop adds it */
    size_t sent = 0;
    for (;;) {
        struct pollfd p = {fds[0], POLLIN | (sent < req->n ? POLLOUT : 0), 0};
        /* libFuzzer's timeout watchdog sends signals: EINTR is no hang */
        int rc = poll(&p, 1, 10000);
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc == 0)
            dump_threads();
        FUZZ_CHECK(rc > 0,
                   "no answer within 10 s (poll: %s; %zu of %zu bytes sent, "
                   "%zu received; %lld connections open, %lld requests in "
                   "flight, %zu queued) to: %.*s",
                   rc < 0 ? strerror(errno) : "timeout", sent, req->n, ans->n,
                   http_open_connections(&d->t),
                   (long long)atomic_load(&s->inflight),
                   sched_queue_depth(d->app.sched),
                   (int)(req->n > 400 ? 400 : req->n),
                   req->p);
        if ((p.revents & POLLOUT) && sent < req->n) {
            ssize_t w = send(fds[0], req->p + sent, req->n - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
            else
                sent = req->n; /* the server stopped reading: it answered */
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            char chunk[65536];
            ssize_t r = recv(fds[0], chunk, sizeof chunk, MSG_DONTWAIT);
            if (r > 0)
                put(ans, chunk, (size_t)r);
            else if (r == 0 || (p.revents & (POLLHUP | POLLERR)))
                break;
            if (complete(ans, head_only))
                break;
        }
    }
    close(fds[0]);
}

/* ------------------------------------------------------------------------
 * Checking the answer.
 */
static const char *header(const char *head, const char *name, size_t *len)
{
    size_t k = strlen(name);
    for (const char *p = strstr(head, "\r\n"); p != NULL;
         p = strstr(p + 2, "\r\n")) {
        const char *l = p + 2;
        if (strncasecmp(l, name, k) == 0 && l[k] == ':') {
            const char *v = l + k + 1;
            while (*v == ' ')
                v++;
            const char *e = strstr(v, "\r\n");
            *len = e ? (size_t)(e - v) : strlen(v);
            return v;
        }
    }
    return NULL;
}

static bool header_is(const char *head, const char *name, const char *value)
{
    size_t n;
    const char *v = header(head, name, &n);
    return v != NULL && n >= strlen(value)
           && strncasecmp(v, value, strlen(value)) == 0;
}

static void dechunk(buf *b)
{
    buf out = {0};
    const char *p = b->p, *end = b->p + b->n;
    for (;;) {
        char *e;
        unsigned long long n = strtoull(p, &e, 16);
        const char *nl = strstr(e, "\r\n");
        FUZZ_CHECK(nl != NULL && e != p, "bad chunked encoding");
        p = nl + 2;
        if (n == 0)
            break;
        FUZZ_CHECK(n <= (unsigned long long)(end - p), "a chunk past the end");
        put(&out, p, n);
        p += n + 2;
    }
    free(b->p);
    *b = out;
}

static void gunzip(buf *b)
{
    z_stream z = {0};
    FUZZ_CHECK(inflateInit2(&z, 16 + MAX_WBITS) == Z_OK, "inflateInit2");
    buf out = {0};
    z.next_in = (Bytef *)b->p;
    z.avail_in = (uInt)b->n;
    int rc;
    do {
        char chunk[65536];
        z.next_out = (Bytef *)chunk;
        z.avail_out = sizeof chunk;
        rc = inflate(&z, Z_NO_FLUSH);
        FUZZ_CHECK(rc == Z_OK || rc == Z_STREAM_END,
                   "a gzipped answer that "
                   "does not inflate (%d)",
                   rc);
        put(&out, chunk, sizeof chunk - z.avail_out);
    } while (rc != Z_STREAM_END);
    inflateEnd(&z);
    free(b->p);
    *b = out;
}

static void check(const buf *ans, bool head_only)
{
    FUZZ_CHECK(ans->n >= 12 && memcmp(ans->p, "HTTP/1.1 ", 9) == 0,
               "no status line: %.*s", (int)(ans->n > 200 ? 200 : ans->n),
               ans->p);
    int status = atoi(ans->p + 9);
    const char *sep = strstr(ans->p, "\r\n\r\n");
    FUZZ_CHECK(sep != NULL, "no end of the headers");
    size_t hlen = (size_t)(sep - ans->p);
    char *head = fuzz_text((const uint8_t *)ans->p, hlen);
    buf body = {0};
    put(&body, sep + 4, ans->n - hlen - 4);
    FUZZ_CHECK(status >= 200 && status < 500, "status %d: %.*s", status,
               (int)(ans->n > 600 ? 600 : ans->n), ans->p);
    if (header_is(head, "Transfer-Encoding", "chunked"))
        dechunk(&body);
    if (header_is(head, "Content-Encoding", "gzip") && body.n > 0)
        gunzip(&body);
    size_t n;
    const char *cl = header(head, "Content-Length", &n);
    if (cl != NULL && !head_only
        && !header_is(head, "Content-Encoding", "gzip"))
        FUZZ_CHECK((size_t)strtoull(cl, NULL, 10) == body.n,
                   "Content-Length %.*s, %zu bytes came", (int)n, cl, body.n);
    if (head_only || body.n == 0) {
        /* nothing to look at */
    } else if (header_is(head, "Content-Type", "application/json")) {
        fuzz_json("the answer", body.p, body.n, status >= 400 ? "error" : NULL);
    } else if (header_is(head, "Content-Type", "application/x-npy")) {
        tx_npy_header h;
        char msg[256];
        FUZZ_CHECK(
            tx_npy_parse((uint8_t *)body.p, body.n, false, &h, msg, sizeof msg)
                    == TX_NPY_OK
                && body.n - h.data_offset == h.data_bytes,
            "an .npy answer that is not one: %s", msg);
    } else if (header_is(head, "Content-Type", "application/octet-stream")) {
        const char *ih = header(head, "Inference-Header-Content-Length", &n);
        const char *shape = header(head, "Tensor-Shape", &n);
        if (ih != NULL) {
            size_t jl = (size_t)strtoull(ih, NULL, 10);
            FUZZ_CHECK(jl <= body.n,
                       "the KServe header is longer than the body");
            fuzz_json("the KServe binary header", body.p, jl, "model_name");
            char want[64];
            snprintf(want, sizeof want, "\"binary_data_size\":%zu}",
                     body.n - jl);
            char *j = fuzz_text((uint8_t *)body.p, jl);
            FUZZ_CHECK(strstr(j, want) != NULL,
                       "the header does not announce "
                       "the %zu bytes after it: %s",
                       body.n - jl, j);
            free(j);
        } else if (shape != NULL) {
            size_t dl;
            const char *dt = header(head, "Tensor-Dtype", &dl);
            FUZZ_CHECK(dt != NULL, "Tensor-Shape without Tensor-Dtype");
            int t = tx_dtype_parse(dt, dl);
            FUZZ_CHECK(t >= 0, "Tensor-Dtype %.*s", (int)dl, dt);
            unsigned long long count = 1;
            for (const char *p = shape; p < shape + n;) {
                char *e;
                count *= strtoull(p, &e, 10);
                p = e + 1;
            }
            FUZZ_CHECK(count * tx_dtype_size((tx_dtype)t) == body.n,
                       "Tensor-Shape %.*s of %.*s, %zu bytes", (int)n, shape,
                       (int)dl, dt, body.n);
        } else {
            const char *echo = header(head, "DML-Output-Tensor", &n);
            FUZZ_CHECK(echo != NULL, "a binary answer that says nothing of "
                                     "itself");
            fuzz_json("DML-Output-Tensor", echo, n, NULL);
        }
    } else {
        fuzz_utf8("the answer", body.p, body.n);
    }
    free(body.p);
    free(head);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    fuzz_daemon *s = &servers[data[0] & 1];
    buf req = {0}, ans = {0};
    bool head_only;
    build((const char *)data + 1, size - 1, &req, &head_only);
    exchange(s, &req, &ans, head_only);
    check(&ans, head_only);
    free(req.p);
    free(ans.p);
    log_flush();
    return 0;
}
