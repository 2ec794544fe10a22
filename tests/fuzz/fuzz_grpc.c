/*
 * fuzz_grpc.c - a whole gRPC connection's bytes through the real daemon:
 * nghttp2, the gRPC transport (framing, limits, compression, tokens), the
 * service's handlers, the protobuf codecs, the scheduler and the host
 * backend, in one process, on one libuv loop as in tallyd.
 *
 * The input is what a client sends after HTTP/2's connection preface
 * (which the harness writes first): frames, HPACK blocks and gRPC
 * messages, mutated. The harness hands one end of a socket pair to the
 * transport (grpc_adopt), writes the input, half-closes, and runs the loop
 * until the server has closed the connection and nothing is in flight; a
 * stream the server keeps open (a health Watch waits for a change) makes
 * the harness leave, as a client would, after 500 ms of quiet: the tick
 * that tallyd runs (api_health_tick) then lets its Watch go.
 *
 * Properties:
 *   - it ends within 10 s;
 *   - the server's bytes are well-formed HTTP/2 frames, and its header
 *     blocks decode (nghttp2's own HPACK inflater);
 *   - every grpc-status is a code tally's status table uses, never
 *     UNKNOWN (2) or INTERNAL (13): no input is a reason to fail inside;
 *     every grpc-message is printable ASCII and percent-encoding;
 *   - a stream's DATA is whole length-prefixed messages; a message that
 *     parses as a ModelInferResponse with an output has exactly the
 *     output's bytes in raw_output_contents;
 *   - afterwards no call is in flight and no buffered byte is left
 *     reserved (--max-buffered-bytes' budget is whole again).
 */
#include <errno.h>
#include <fcntl.h>
#include <nghttp2/nghttp2.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "api.h"
#include "fuzzd.h"
#include "grpc.h"
#include "grpc_service.pb-c.h"
#include "log.h"
#include "numtext.h"

static tallyd_server server;
static api_state app;
static grpc_door door; /* one loop: the transport is door.t[0] */
#define transport (door.t[0])
static eng_engine *engine;
static uv_loop_t loop;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    numtext_init();
    int null = open("/dev/null", O_WRONLY);
    FUZZ_CHECK(null >= 0, "/dev/null");
    log_to(null);
    char *args[] = {"fuzz_grpc",
                    "--listen=127.0.0.1:0",
                    "--grpc-listen=127.0.0.1:0",
                    "--device=host",
                    "--workers=1",
                    "--access-log=off",
                    "--max-body-bytes=1MiB",
                    "--max-buffered-bytes=64MiB",
                    "--inline-max-elements=64",
                    "--grpc-max-streams=16",
                    "--warmup=false",
                    NULL};
    fuzz_daemon_start(&server, &app, &engine, 11, args);
    char msg[1024];
    tallyd_server *s = &server;
    uv_loop_init(&loop);
    FUZZ_CHECK(grpc_door_start(&door, s, &loop, 1, &api_grpc_service, NULL,
                               msg, sizeof msg),
               "%s", msg);
    app.grpc = &door;
    return 0;
}

typedef struct {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *s, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 4096;
        b->p = realloc(b->p, b->cap);
        FUZZ_CHECK(b->p != NULL, "out of memory");
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

/* Runs the connection: writes the preface and the input, half-closes,
 * and collects what the server sends until it closes. */
static void exchange(const uint8_t *data, size_t size, buf *ans)
{
    static const char preface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
    buf req = {0};
    put(&req, preface, sizeof preface - 1);
    put(&req, data, size);
    int fds[2];
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0, "socketpair");
    fcntl(fds[0], F_SETFL, O_NONBLOCK);
    grpc_adopt(&transport, fds[1]);
    size_t sent = 0;
    bool shut = false, eof = false, left = false;
    uint64_t t0 = now_ns(), quiet = t0;
    while (!eof || grpc_open_connections(&transport) > 0
           || atomic_load(&server.inflight) > 0) {
        FUZZ_CHECK(now_ns() - t0 < 10000000000ull,
                   "no end within 10 s (%zu of %zu bytes sent, %zu "
                   "received, %lld in flight)",
                   sent, req.n, ans->n,
                   (long long)atomic_load(&server.inflight));
        if (sent < req.n) {
            ssize_t w = send(fds[0], req.p + sent, req.n - sent,
                             MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w > 0)
                sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
                sent = req.n; /* the server closed: it is done reading */
        } else if (!shut) {
            shutdown(fds[0], SHUT_WR);
            shut = true;
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        api_health_tick(&app, &server);
        for (; !left;) {
            uint8_t chunk[65536];
            ssize_t r = recv(fds[0], chunk, sizeof chunk, MSG_DONTWAIT);
            if (r > 0) {
                put(ans, chunk, (size_t)r);
                quiet = now_ns();
                continue;
            }
            if (r == 0)
                eof = true;
            break;
        }
        if (!left && shut && !eof && now_ns() - quiet > 500000000u) {
            close(fds[0]); /* the client leaves an open stream */
            left = eof = true;
        }
        if (!left && (!eof || atomic_load(&server.inflight) > 0)) {
            struct pollfd p = {fds[0], POLLIN, 0};
            poll(&p, 1, 1);
        }
    }
    if (!left)
        close(fds[0]);
    free(req.p);
}

/* ------------------------------------------------------------------------
 * Checking what the server said.
 */
typedef struct {
    int32_t id;
    buf data;
    bool ended; /* its trailers came */
} stream_data;

static bool status_used(int code)
{
    static const int used[] = {0, 1, 3, 4, 5, 6, 7, 8, 12, 14, 16};
    for (size_t i = 0; i < sizeof used / sizeof used[0]; i++)
        if (used[i] == code)
            return true;
    return false;
}

static void check_header(const nghttp2_nv *nv)
{
    if (nv->namelen == 11 && memcmp(nv->name, "grpc-status", 11) == 0) {
        FUZZ_CHECK(nv->valuelen >= 1 && nv->valuelen <= 2, "grpc-status %.*s",
                   (int)nv->valuelen, nv->value);
        int code = 0;
        for (size_t i = 0; i < nv->valuelen; i++) {
            FUZZ_CHECK(nv->value[i] >= '0' && nv->value[i] <= '9',
                       "grpc-status %.*s", (int)nv->valuelen, nv->value);
            code = code * 10 + (nv->value[i] - '0');
        }
        FUZZ_CHECK(status_used(code),
                   "grpc-status %d (UNKNOWN or INTERNAL, "
                   "or a code tally never means)",
                   code);
    }
    if (nv->namelen == 12 && memcmp(nv->name, "grpc-message", 12) == 0)
        for (size_t i = 0; i < nv->valuelen; i++) {
            uint8_t ch = nv->value[i];
            FUZZ_CHECK(ch >= 0x20 && ch <= 0x7e, "grpc-message byte %u", ch);
            if (ch == '%')
                FUZZ_CHECK(i + 2 < nv->valuelen, "a cut percent-encoding");
        }
}

/* One gRPC response message. */
static void check_message(const uint8_t *m, size_t len)
{
    Inference__ModelInferResponse *r =
        inference__model_infer_response__unpack(NULL, len, m);
    if (r == NULL)
        return; /* another method's answer */
    if (r->n_outputs == 1 && r->n_raw_output_contents == 1
        && r->outputs[0]->datatype[0] != '\0') {
        int dt = tx_dtype_parse(r->outputs[0]->datatype,
                                strlen(r->outputs[0]->datatype));
        FUZZ_CHECK(dt >= 0, "answer datatype %s", r->outputs[0]->datatype);
        uint64_t n = tx_dtype_size((tx_dtype)dt);
        for (size_t d = 0; d < r->outputs[0]->n_shape; d++)
            n *= (uint64_t)r->outputs[0]->shape[d];
        FUZZ_CHECK(n == r->raw_output_contents[0].len,
                   "the answer's raw_output_contents has %zu bytes, its "
                   "shape and datatype need %llu",
                   r->raw_output_contents[0].len, (unsigned long long)n);
    }
    inference__model_infer_response__free_unpacked(r, NULL);
}

/* A stream's DATA: whole length-prefixed messages once it has ended (a
 * stream the connection's end cut may stop anywhere). */
static void check_stream(const buf *d, bool ended)
{
    size_t at = 0;
    while (at < d->n) {
        if (!ended && (d->n - at < 5))
            return;
        FUZZ_CHECK(d->n - at >= 5, "a cut message prefix");
        FUZZ_CHECK(d->p[at] == 0, "a compressed answer (tally sends none)");
        size_t len = (size_t)d->p[at + 1] << 24 | (size_t)d->p[at + 2] << 16
                     | (size_t)d->p[at + 3] << 8 | d->p[at + 4];
        if (!ended && d->n - at - 5 < len)
            return;
        FUZZ_CHECK(d->n - at - 5 >= len, "a cut message");
        check_message(d->p + at + 5, len);
        at += 5 + len;
    }
}

static void check(const buf *ans)
{
    nghttp2_hd_inflater *inf;
    FUZZ_CHECK(nghttp2_hd_inflate_new(&inf) == 0, "inflater");
    stream_data streams[64];
    size_t nstreams = 0;
    size_t at = 0;
    while (at + 9 <= ans->n) {
        const uint8_t *h = ans->p + at;
        size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
        uint8_t type = h[3], flags = h[4];
        int32_t id = (int32_t)((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16
                               | (uint32_t)h[7] << 8 | h[8])
                     & 0x7fffffff;
        if (at + 9 + len > ans->n)
            break; /* the connection ended mid-frame: a reset, allowed */
        const uint8_t *p = h + 9;
        size_t si = 0;
        while (si < nstreams && streams[si].id != id)
            si++;
        if (si == nstreams && nstreams < 64 && id != 0) {
            streams[nstreams] = (stream_data){id, {0}, false};
            nstreams++;
        }
        if (type == NGHTTP2_HEADERS && si < nstreams
            && (flags & NGHTTP2_FLAG_END_STREAM))
            streams[si].ended = true;
        if (type == NGHTTP2_HEADERS) {
            /* tally sends no padding, no priority, no CONTINUATION */
            FUZZ_CHECK(flags & NGHTTP2_FLAG_END_HEADERS, "HEADERS split");
            size_t left = len;
            for (;;) {
                nghttp2_nv nv;
                int fl = 0;
                ssize_t r = nghttp2_hd_inflate_hd2(inf, &nv, &fl, p, left, 1);
                FUZZ_CHECK(r >= 0, "a header block that does not decode");
                p += r;
                left -= (size_t)r;
                if (fl & NGHTTP2_HD_INFLATE_EMIT)
                    check_header(&nv);
                if (fl & NGHTTP2_HD_INFLATE_FINAL) {
                    nghttp2_hd_inflate_end_headers(inf);
                    break;
                }
                if (r == 0 && left == 0)
                    break;
            }
        } else if (type == NGHTTP2_DATA && si < nstreams) {
            put(&streams[si].data, p, len);
        }
        at += 9 + len;
    }
    nghttp2_hd_inflate_del(inf);
    for (size_t i = 0; i < nstreams; i++) {
        check_stream(&streams[i].data, streams[i].ended);
        free(streams[i].data.p);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    buf ans = {0};
    exchange(data, size, &ans);
    check(&ans);
    free(ans.p);
    FUZZ_CHECK(atomic_load(&server.inflight) == 0, "calls left in flight");
    FUZZ_CHECK(atomic_load(&server.buffered_bytes) == 0,
               "%llu bytes of --max-buffered-bytes still reserved",
               (unsigned long long)atomic_load(&server.buffered_bytes));
    log_flush();
    return 0;
}
