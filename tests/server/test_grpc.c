/*
 * test_grpc.c - the gRPC door's insides (server/grpc/), without nghttp2
 * or a client: the message framing, grpc-timeout and grpc-message
 * (framing.h), the write batch (writes.c) over a socket pair, and a
 * close asked for inside the session (conn.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <uv.h>

#include "check.h"
#include "framing.h"
#include "grpc_int.h"

/* ----------------------------------------------------- gRPC framing */

/* A prefix arrives in pieces of random sizes, down to one byte at a time;
 * it is whole after exactly 5 bytes, and the bytes after it are left. */
static void grpc_prefix_pieces(void)
{
    for (int round = 0; round < 200; round++) {
        uint8_t wire[9];
        uint32_t len = (uint32_t)check_rand() % 1000000u;
        wire[0] = (uint8_t)(check_rand() & 1);
        wire[1] = (uint8_t)(len >> 24);
        wire[2] = (uint8_t)(len >> 16);
        wire[3] = (uint8_t)(len >> 8);
        wire[4] = (uint8_t)len;
        memset(wire + 5, 0xAB, 4);
        grpc_prefix p = {{0}, 0};
        size_t at = 0;
        while (p.got < GRPC_PREFIX_LEN) {
            size_t piece = round % 2 ? 1 : 1 + check_rand() % 9;
            if (piece > sizeof wire - at)
                piece = sizeof wire - at;
            size_t took = grpc_prefix_feed(&p, wire + at, piece);
            CHECK(took <= piece, "took %zu of %zu", took, piece);
            at += took;
            if (took < piece)
                break;
        }
        CHECK(at == GRPC_PREFIX_LEN && p.got == GRPC_PREFIX_LEN,
              "round %d: took %zu bytes, got %zu", round, at, p.got);
        CHECK(grpc_prefix_feed(&p, wire + 5, 4) == 0, "a whole prefix took more");
        bool compressed;
        size_t n;
        char msg[200];
        CHECK(grpc_prefix_check(&p, true, 1000000, &compressed, &n, msg,
                                sizeof msg) == STATUS_OK,
              "%s", msg);
        CHECK(n == len && compressed == (wire[0] == 1),
              "round %d: length %zu (want %u), compressed %d", round, n, len,
              compressed);
    }
}

static void grpc_prefix_refusals(void)
{
    struct {
        uint8_t b[5];
        bool encoded;
        size_t max;
        status_code want;
        const char *words;
    } rows[] = {
        {{2, 0, 0, 0, 1}, true, 100, STATUS_INVALID, "prefix"},
        {{0x80, 0, 0, 0, 1}, true, 100, STATUS_INVALID, "prefix"},
        {{1, 0, 0, 0, 1}, false, 100, STATUS_ENCODING, "grpc-encoding"},
        {{0, 0, 0, 0, 101}, true, 100, STATUS_TOO_LARGE, "101 bytes"},
        {{0, 0xff, 0xff, 0xff, 0xff}, true, 100, STATUS_TOO_LARGE,
         "4294967295 bytes"},
        {{0, 0, 0, 0, 100}, true, 100, STATUS_OK, ""},
        {{1, 0, 0, 0, 0}, true, 100, STATUS_OK, ""},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        grpc_prefix p;
        memcpy(p.b, rows[i].b, 5);
        p.got = 5;
        bool compressed;
        size_t n;
        char msg[200] = "";
        status_code st = grpc_prefix_check(&p, rows[i].encoded, rows[i].max,
                                           &compressed, &n, msg, sizeof msg);
        CHECK(st == rows[i].want, "row %zu: %s, want %s", i, status_name(st),
              status_name(rows[i].want));
        CHECK(strstr(msg, rows[i].words) != NULL, "row %zu: \"%s\"", i, msg);
    }
}

static void grpc_timeouts(void)
{
    struct {
        const char *v;
        bool ok;
        int64_t ms;
    } rows[] = {
        {"1H", true, 3600000},       {"2M", true, 120000},
        {"3S", true, 3000},          {"50m", true, 50},
        {"1500u", true, 2},          {"1u", true, 1},
        {"999999n", true, 1},        {"1000001n", true, 2},
        {"0n", true, 1},             {"0S", true, 1},
        {"99999999n", true, 100},    {"99999999u", true, 100000},
        {"99999999m", true, 99999999},
        /* 2^53 ns is about 104 days: longer is "none" */
        {"2501H", true, 2501 * 3600000LL}, {"2502H", true, -1},
        {"99999999H", true, -1},     {"99999999M", true, -1},
        {"99999999S", true, -1},
        {"", false, 0},              {"S", false, 0},
        {"5", false, 0},             {"5s", false, 0},
        {"5x", false, 0},            {"-5S", false, 0},
        {" 5S", false, 0},           {"123456789S", false, 0},
        {"1.5S", false, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        int64_t ms = 12345;
        bool ok = grpc_timeout_parse(rows[i].v, strlen(rows[i].v), &ms);
        CHECK(ok == rows[i].ok, "\"%s\": %s", rows[i].v,
              ok ? "taken" : "refused");
        if (ok && rows[i].ok)
            CHECK(ms == rows[i].ms, "\"%s\": %lld ms, want %lld", rows[i].v,
                  (long long)ms, (long long)rows[i].ms);
    }
}

static void grpc_message_words(void)
{
    char out[64];
    grpc_message_encode("plain words: ok", out, sizeof out);
    CHECK(strcmp(out, "plain words: ok") == 0, "\"%s\"", out);
    grpc_message_encode("50% \"x\"\n\xc3\xa9", out, sizeof out);
    CHECK(strcmp(out, "50%25 \"x\"%0A%C3%A9") == 0, "\"%s\"", out);
    /* cut to fit, never inside an escape */
    for (size_t len = 1; len < 12; len++) {
        char small[12];
        grpc_message_encode("a\xff\xff\xff", small, len);
        size_t n = strlen(small);
        CHECK(n < len, "len %zu: %zu bytes", len, n);
        CHECK(n == 0 || small[0] == 'a', "len %zu: \"%s\"", len, small);
        CHECK(n == 0 || (n - 1) % 3 == 0, "len %zu: cut escape \"%s\"", len,
              small);
    }
    grpc_message_encode("anything", out, 0); /* writes nothing */
}

/* The write batch over a socket pair with a tiny send buffer: copies and
 * borrowed pieces of random sizes, in several batches, must reach the
 * peer whole and in order through partial writes and queued ones, and
 * every reference a batch took on a call must be given back. The
 * connection is marked closing, so that a finished write pumps no
 * session. */
typedef struct {
    int fd;
    uint8_t *got;
    size_t want, have;
} pair_reader;

static void read_all(void *arg)
{
    pair_reader *r = arg;
    unsigned reads = 0;
    while (r->have < r->want) {
        ssize_t n = read(r->fd, r->got + r->have, r->want - r->have);
        if (n <= 0)
            break;
        r->have += (size_t)n;
        if (++reads % 64 == 0)
            uv_sleep(1); /* a slow reader: the writer's queue fills */
    }
}

static void grpc_write_batch(void)
{
    enum { BIG = 1 << 20, MAX_OUT = 4 << 20 };
    uv_loop_t loop;
    uv_loop_init(&loop);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    int small = 4096;
    setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(sv[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    static tallyd_server srv;
    static grpc_transport t;
    static mailbox mb; /* not on the loop: nothing here posts to it */
    memset(&t, 0, sizeof t);
    t.s = &srv;
    t.loop = &loop;
    t.mb = &mb;
    grpc_conn *c = calloc(1, sizeof *c);
    grpc_call *call = calloc(1, sizeof *call);
    uint8_t *big = malloc(BIG), *want = malloc(MAX_OUT);
    pair_reader r = {sv[1], malloc(MAX_OUT), 0, 0};
    if (c == NULL || call == NULL || big == NULL || want == NULL
        || r.got == NULL)
        return;
    for (size_t i = 0; i < BIG; i++)
        big[i] = (uint8_t)check_rand();
    c->t = &t;
    c->closing = true;
    call->busy = true; /* the test's: never freed by a batch */
    CHECK(uv_tcp_init(&loop, &c->tcp) == 0
              && uv_tcp_open(&c->tcp, sv[0]) == 0,
          "the socket pair as a stream");
    size_t n = 0;
    unsigned pieces = 0;
    while (n < MAX_OUT - BIG / 4 - 4096) {
        if (check_rand() % 3 == 0) {
            uint8_t frame[4096];
            size_t len = 1 + check_rand() % sizeof frame;
            for (size_t i = 0; i < len; i++)
                frame[i] = (uint8_t)check_rand();
            CHECK(h2_add_copy(c, frame, len), "a copy");
            memcpy(want + n, frame, len);
            n += len;
        } else {
            size_t len = check_rand() % (BIG / 4);
            size_t at = check_rand() % (BIG - len);
            CHECK(h2_add_borrowed(c, big + at, len, call), "a borrowed piece");
            memcpy(want + n, big + at, len);
            n += len;
        }
        pieces++;
        if (check_rand() % 8 == 0)
            h2_batch_flush(c); /* more batches, some queued behind others */
    }
    h2_batch_flush(c);
    r.want = n;
    uv_thread_t th;
    uv_thread_create(&th, read_all, &r);
    uv_run(&loop, UV_RUN_DEFAULT); /* until the last write is done */
    uv_thread_join(&th);
    CHECK(r.have == n && memcmp(r.got, want, n) == 0,
          "%u pieces: %zu of %zu bytes arrived%s", pieces, r.have, n,
          r.have == n ? ", but not as sent" : "");
    CHECK(c->writes == 0 && c->queued == 0 && call->writes == 0,
          "left: %u writes, %zu bytes queued, %u references on the call",
          c->writes, c->queued, call->writes);
    CHECK(atomic_load(&t.c.bytes_out) == n, "bytes_out %llu, sent %zu",
          (unsigned long long)atomic_load(&t.c.bytes_out), n);
    uv_close((uv_handle_t *)&c->tcp, NULL);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    close(sv[1]);
    free(c);
    free(call);
    free(big);
    free(want);
    free(r.got);
}

/* A write that fails while a batch is built inside nghttp2's send
 * callbacks (a full batch is written as the next piece comes: on 16
 * cores, clients that went away during 64 MiB answers made it so) must
 * not close the connection there: closing detaches and frees the calls,
 * and the callback goes on with the one it is sending (tallyd aborted
 * with a double free). The close waits until the session call returns
 * (close_pending), then happens whole. */
static void grpc_close_inside_session(void)
{
    signal(SIGPIPE, SIG_IGN); /* tallyd's too */
    uv_loop_t loop;
    uv_loop_init(&loop);
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0, "socketpair");
    close(sv[1]); /* the client is gone: the next write fails */
    static tallyd_server srv;
    static grpc_transport t;
    static mailbox mb; /* not on the loop: nothing here posts to it */
    memset(&t, 0, sizeof t);
    t.s = &srv;
    t.loop = &loop;
    t.mb = &mb;
    static atomic_llong all; /* the door's count, of every loop */
    atomic_store(&all, 1);
    t.open_all = &all;
    atomic_store(&t.open_connections, 1);
    grpc_conn *c = calloc(1, sizeof *c);
    gstream *st = calloc(1, sizeof *st);
    grpc_call *call = calloc(1, sizeof *call);
    uint8_t answer[4096];
    if (c == NULL || st == NULL || call == NULL)
        return;
    memset(answer, 7, sizeof answer);
    c->t = &t;
    list_init(&t.conns);
    list_push_front(&t.conns, &c->link);
    c->tcp.data = c;
    CHECK(uv_tcp_init(&loop, &c->tcp) == 0
              && uv_tcp_open(&c->tcp, sv[0]) == 0,
          "the socket pair as a stream");
    /* one stream, sending one call's answer */
    st->conn = c;
    list_init(&c->streams);
    list_push_front(&c->streams, &st->link);
    list_init(&st->calls);
    list_push_back(&st->calls, &call->link);
    call->t = &t;
    call->st = st;
    call->counted = true; /* no server to account to */
    call->total = sizeof answer;

    c->in_session = 1; /* as inside nghttp2_session_send() */
    CHECK(h2_add_copy(c, (const uint8_t *)"frameheader", 9), "a copy");
    CHECK(h2_add_borrowed(c, answer, sizeof answer, call), "a piece");
    CHECK(call->writes == 1, "the batch holds the call: %u", call->writes);
    h2_batch_flush(c); /* the write fails: EPIPE */
    CHECK(c->close_pending && !c->closing,
          "closed inside the session (pending %d, closing %d)",
          c->close_pending, c->closing);
    CHECK(call->writes == 0 && list_linked(&call->link) && call->st == st
              && h2_first_call(st) == call,
          "the call left its stream inside the session");
    c->in_session = 0;

    /* the session call returned: its caller closes (h2_conn_pump) */
    h2_conn_close(c);
    CHECK(c->closing, "not closed after the session returned");
    uv_run(&loop, UV_RUN_DEFAULT); /* conn_free: the stream, the conn */
    CHECK(atomic_load(&t.open_connections) == 0 && atomic_load(&all) == 0
              && list_empty(&t.conns),
          "the connection was not freed: %lld open",
          (long long)atomic_load(&t.open_connections));
    uv_loop_close(&loop);
}

static const check_case cases[] = {
    {"grpc_prefix_pieces", grpc_prefix_pieces},
    {"grpc_prefix_refusals", grpc_prefix_refusals},
    {"grpc_timeouts", grpc_timeouts},
    {"grpc_message_words", grpc_message_words},
    {"grpc_write_batch", grpc_write_batch},
    {"grpc_close_inside_session", grpc_close_inside_session},
};

int main(int argc, char **argv)
{
    return check_main(argc, argv, cases, sizeof cases / sizeof cases[0]);
}
