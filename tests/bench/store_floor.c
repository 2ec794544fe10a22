/*
 * store_floor.c - what one write to Redis adds to a request at
 * concurrency 1 at the least, with nothing of tally's in the way: the
 * smallest server that does a chunk's work through --state-store.
 *
 * A server thread runs one epoll loop with two sockets (blocking: a
 * write waits until the peer reads), a client's and Redis's. Each request is
 * BYTES bytes; the answer is BYTES bytes. In the "plain" rounds the server
 * answers as soon as the request is in. In the "store" rounds it first sends
 * tally's write script (EVALSHA SHA, the compare-and-set of
 * server/redis/redis_store.c, on one key whose version advances by one a
 * request, a 131-byte record) on the same loop, and answers once Redis's reply
 * is in: no thread hop, no copy beyond the socket's, so the difference between
 * the two is the script's round trip plus whatever a loop that sleeps through
 * it costs on this machine. A client thread sends the requests one at a time
 * (blocking sockets), as perf_analyzer does at concurrency 1.
 *
 *   store_floor PORT SHA [BYTES [N [ROUNDS]]]
 *      PORT: Redis's on 127.0.0.1; SHA: the script's, loaded already
 *      (SCRIPT LOAD); BYTES: 64 by default; N: 5000 requests a round;
 *      ROUNDS: 4 pairs, plain then store.
 *
 * Prints one JSON object: the median of each kind's per-round p50s in
 * microseconds ("plain_p50_us", "store_p50_us"), and their difference
 * per round ("added_us": the median of the rounds' differences).
 *
 *   store_floor serve LISTEN_PORT REDIS_PORT SHA|- LOOPS [suspend]
 *      the same work for perf_analyzer at any concurrency (serve_main()
 *      below): a KServe v2 server for its sequence mode over REST binary.
 *      With "suspend", a chunk's socket leaves the epoll set while its
 *      write is at Redis, as libmicrohttpd's suspended requests do.
 *
 * Threading: main() runs the client; serve() is the one other thread.
 * The serve mode's threads are described where it begins.
 */
#define _GNU_SOURCE /* memmem, accept4 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "floor.h"

static size_t bytes = 64;
static int redis_port, listen_fd;
static const char *sha;
static atomic_int store_mode;
/* one a run, tally-store-floor:PID:TIME, set by the client */
static char key[64];

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The server: one loop, the client's socket and Redis's. */
static void *serve(void *arg)
{
    (void)arg;
    int c = accept(listen_fd, NULL, NULL), one = 1;
    if (c < 0)
        floor_die("accept");
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int r = floor_connect(redis_port);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = c};
    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev);
    ev.data.fd = r;
    epoll_ctl(ep, EPOLL_CTL_ADD, r, &ev);
    char *req = malloc(bytes), *ans = malloc(bytes), cmd[512], reply[256];
    memset(ans, 'a', bytes);
    size_t got = 0, rgot = 0;
    uint64_t version = 0;
    for (;;) {
        struct epoll_event e[2];
        int k = epoll_wait(ep, e, 2, -1);
        if (k < 0 && errno == EINTR)
            continue;
        for (int i = 0; i < k; i++) {
            if (e[i].data.fd == c) {
                ssize_t n = read(c, req + got, bytes - got);
                if (n <= 0)
                    return NULL; /* the client is done */
                got += (size_t)n;
                if (got < bytes)
                    continue;
                got = 0;
                if (!store_mode) {
                    floor_write_all(c, ans, bytes);
                    continue;
                }
                floor_write_all(r, cmd,
                                floor_evalsha(cmd, sizeof cmd, sha, key,
                                              version % 1000000000000000ull,
                                              NULL, 0, 0));
            } else {
                ssize_t n = read(r, reply + rgot, sizeof reply - 1 - rgot);
                if (n <= 0)
                    floor_die("read from Redis");
                rgot += (size_t)n;
                reply[rgot] = '\0';
                if (strstr(reply, "\r\n") == NULL)
                    continue;
                if (strcmp(reply, ":1\r\n") != 0) {
                    fprintf(stderr, "store_floor: Redis answered %s", reply);
                    exit(1);
                }
                rgot = 0;
                version++;
                floor_write_all(c, ans, bytes);
            }
        }
    }
}

/*
 * The "serve" mode: the same work at concurrency 16, driven by the same
 * perf_analyzer command as tallyd. The smallest KServe v2 server that
 * perf_analyzer's sequence mode over REST binary accepts: the four GETs
 * it asks (the model's metadata and config, the server's, statistics:
 * fixed answers) and POST .../infer with a binary tensor, float32 [N].
 * Each chunk's running sum is kept in a table by sequence id. In memory
 * (SHA "-") the chunk is answered at once. Otherwise its new state goes
 * to Redis first, by tally's write script on the loop's own connection
 * (version compare-and-set, PX, "del" at the sequence's end, as tallyd
 * sends it), and the answer leaves once Redis said 1: the carry is not
 * advanced before that. Several chunks' commands leave in one write at
 * the end of a turn, and one read takes several replies, as hiredis does.
 *
 * Threads: main() accepts and hands each connection to a loop, round
 * robin (epoll_ctl from main() is the only call that crosses threads);
 * LOOPS loop threads each own their connections and one Redis
 * connection. The sequence table is shared, under one mutex.
 *
 * A chunk whose sequence has one in flight waits its turn: perf_analyzer
 * sends one chunk of a sequence at a time, but ends its sequences at a
 * window's end while their last chunk may still be out. It assumes the
 * rest of what perf_analyzer does: sequence ids below SEQ_MAX, no
 * pipelining. Anything else, or any reply but 1 from Redis, stops it
 * with a message.
 */
#define SEQ_MAX (1u << 20)
#define CHUNK_MAX (64u << 20)

struct seq {
    uint64_t version; /* Redis's: 0 none */
    float carry;
    int busy;
};

struct conn {
    int fd;
    char *in, *out;
    size_t inlen, incap, outlen, outoff, outcap;
    int waiting, closing, parked;
    /* the chunk waiting for Redis */
    uint32_t sid;
    float carry;
    int end;
};

struct loop {
    int ep, rfd;
    char *rout, rin[4096];
    size_t routlen, routcap, rinlen;
    struct conn **fifo; /* chunks in Redis's order */
    size_t head, count, cap;
    struct conn *parked[256]; /* chunks whose sequence has one in flight */
    int nparked;
    pthread_t thread;
};

static struct seq *seqs;
static pthread_mutex_t seq_lock = PTHREAD_MUTEX_INITIALIZER;
/* serve's "suspend": a chunk's socket leaves the loop's epoll set while
 * its write is at Redis, and comes back after its answer, with a read
 * that finds nothing: the three calls libmicrohttpd makes (0.9.75 and
 * 1.0) around a suspended and resumed request in its epoll mode */
static int suspend;
static char prefix[64];

static void put(struct conn *c, const void *p, size_t n)
{
    floor_grow(&c->out, &c->outcap, c->outlen + n);
    memcpy(c->out + c->outlen, p, n);
    c->outlen += n;
}

static void flush_conn(struct loop *l, struct conn *c)
{
    while (c->outoff < c->outlen) {
        ssize_t w = write(c->fd, c->out + c->outoff, c->outlen - c->outoff);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && errno == EAGAIN) {
            struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT,
                                     .data.ptr = c};
            epoll_ctl(l->ep, EPOLL_CTL_MOD, c->fd, &ev);
            return;
        }
        if (w <= 0) {
            c->closing = 1; /* the client left: its bytes are dropped */
            c->outoff = c->outlen;
            break;
        }
        c->outoff += (size_t)w;
    }
    c->outoff = c->outlen = 0;
}

static void answer(struct conn *c, const char *status, const char *type,
                   const char *extra, const char *body, size_t len,
                   const void *tail, size_t taillen)
{
    char head[256];
    int n = snprintf(
        head, sizeof head,
        "HTTP/1.1 %s\r\nContent-Type: %s\r\n%sContent-Length: %zu\r\n\r\n",
        status, type, extra, len + taillen);
    put(c, head, (size_t)n);
    put(c, body, len);
    if (taillen > 0)
        put(c, tail, taillen);
}

/* A header's value in [p, end), case-insensitive name; -1 if absent. */
static long long header(const char *p, const char *end, const char *name)
{
    size_t k = strlen(name);
    for (const char *q = p; q + k + 1 < end; q++) {
        if ((q == p || q[-1] == '\n') && strncasecmp(q, name, k) == 0
            && q[k] == ':') {
            char *e;
            errno = 0;
            long long v = strtoll(q + k + 1, &e, 10);
            return errno || e == q + k + 1 || v < 0 ? -1 : v;
        }
    }
    return -1;
}

/* The number after "name": in the JSON header, or -1. */
static long long json_num(const char *json, const char *name)
{
    const char *q = strstr(json, name);
    if (q == NULL)
        return -1;
    q += strlen(name);
    char *e;
    errno = 0;
    long long v = strtoll(q, &e, 10);
    return errno || e == q ? -1 : v;
}

/* Answered chunks: perf_analyzer takes the model's version from the
 * statistics whose queue count grew over a window. */
static atomic_ullong answered;

static const char STATS[] =
    "{\"model_stats\":[{\"name\":\"cumsum\",\"version\":\"1\",\"last_"
    "inference\":0,"
    "\"inference_count\":%llu,\"execution_count\":%llu,\"inference_stats\":{"
    "\"success\":{"
    "\"count\":%llu,\"ns\":0},\"fail\":{\"count\":0,\"ns\":0},\"queue\":{"
    "\"count\":%llu,"
    "\"ns\":0},\"compute_input\":{\"count\":%llu,\"ns\":0},\"compute_infer\":{"
    "\"count\":"
    "%llu,\"ns\":0},\"compute_output\":{\"count\":%llu,\"ns\":0},\"cache_hit\":"
    "{\"count\":"
    "0,\"ns\":0},\"cache_miss\":{\"count\":0,\"ns\":0}},\"batch_stats\":[]}]}";

static const char *GETS[][2] = {
    {"/v2/models/cumsum", "{\"name\":\"cumsum\",\"versions\":[\"1\"],"
                          "\"platform\":\"floor\",\"inputs\":[{\"name\":"
                          "\"x\",\"datatype\":\"FP32\",\"shape\":[-1]}],"
                          "\"outputs\":[{\"name\":\"y\",\"datatype\":"
                          "\"FP32\",\"shape\":[-1]}]}"},
    {"/v2/models/cumsum/config",
     "{\"name\":\"cumsum\",\"platform\":\"floor\",\"backend\":\"floor\",\"max_"
     "batch_size\":0,"
     "\"input\":[{\"name\":\"x\",\"data_type\":\"TYPE_FP32\",\"dims\":[-1]}],"
     "\"output\":[{"
     "\"name\":\"y\",\"data_type\":\"TYPE_FP32\",\"dims\":[-1]}],\"sequence_"
     "batching\":{"
     "\"max_sequence_idle_microseconds\":60000000}}"},
    {"/v2", "{\"name\":\"floor\",\"version\":\"0\",\"extensions\":[\"binary_"
            "tensor_data\","
            "\"model_configuration\",\"statistics\",\"sequence\"]}"},
};

static void fail(const char *what)
{
    fprintf(stderr, "store_floor serve: %s\n", what);
    exit(1);
}

/* The chunk in body (json header hlen bytes, then the floats): scanned,
 * answered into c->out; its sequence's state taken (busy) until Redis
 * answers. 0 if another chunk of its sequence is in flight: it waits. */
static int infer(struct loop *l, struct conn *c, char *body, size_t len,
                 size_t hlen)
{
    if (hlen > len || (len - hlen) % 4 != 0)
        fail("a body that is not a JSON header and float32s");
    char save = body[hlen];
    body[hlen] = '\0';
    long long sid = json_num(body, "\"sequence_id\":");
    int start = strstr(body, "\"sequence_start\":true") != NULL;
    int end = strstr(body, "\"sequence_end\":true") != NULL;
    char id[64] = "";
    const char *q = strstr(body, "\"id\":\"");
    if (q != NULL) {
        q += 6;
        size_t k = 0;
        while (q[k] != '"' && q[k] != '\0' && k < sizeof id - 1)
            k++;
        memcpy(id, q, k);
        id[k] = '\0';
    }
    body[hlen] = save;
    if (sid < 1 || sid >= (long long)SEQ_MAX)
        fail("a chunk without a sequence id below 2^20");
    size_t n = (len - hlen) / 4;
    char *x = body + hlen; /* not aligned: memcpy */
    float acc;
    pthread_mutex_lock(&seq_lock);
    struct seq *s = &seqs[sid];
    if (s->busy) { /* perf_analyzer's ending of its sequences at a window's end
                    */
        pthread_mutex_unlock(&seq_lock);
        return 0;
    }
    s->busy = 1;
    acc = start ? 0.0f : s->carry;
    uint64_t version = s->version;
    pthread_mutex_unlock(&seq_lock);
    for (size_t i = 0; i < n; i++) { /* in place: the body is ours */
        float v;
        memcpy(&v, x + 4 * i, 4);
        acc += v;
        memcpy(x + 4 * i, &acc, 4);
    }
    char json[256];
    int jl = snprintf(
        json, sizeof json,
        "{\"model_name\":\"cumsum\",\"model_version\":\"1\",\"id\":\"%s\","
        "\"outputs\":[{\"name\":\"y\",\"datatype\":\"FP32\",\"shape\":[%zu],"
        "\"parameters\":{\"binary_data_size\":%zu}}]}",
        id, n, 4 * n);
    char extra[64];
    snprintf(extra, sizeof extra, "Inference-Header-Content-Length: %d\r\n",
             jl);
    answer(c, "200 OK", "application/octet-stream", extra, json, (size_t)jl, x,
           4 * n);
    c->sid = (uint32_t)sid;
    c->carry = acc;
    c->end = end;
    if (sha == NULL) {
        pthread_mutex_lock(&seq_lock);
        s->carry = end ? 0.0f : acc;
        s->busy = 0;
        pthread_mutex_unlock(&seq_lock);
        answered++;
        return 1;
    }
    /* the new state first: EVALSHA SHA 1 key expect ttl put|del value */
    char cmd[512], skey[96];
    snprintf(skey, sizeof skey, "%s:%lld", prefix, sid);
    size_t k = floor_evalsha(cmd, sizeof cmd, sha, skey, version, &acc,
                             sizeof acc, end);
    floor_grow(&l->rout, &l->routcap, l->routlen + k);
    memcpy(l->rout + l->routlen, cmd, k);
    l->routlen += k;
    if (l->count == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        struct conn **f = malloc(cap * sizeof *f);
        if (f == NULL)
            floor_die("malloc");
        for (size_t i = 0; i < l->count; i++)
            f[i] = l->fifo[(l->head + i) % l->cap];
        free(l->fifo);
        l->fifo = f;
        l->head = 0;
        l->cap = cap;
    }
    l->fifo[(l->head + l->count++) % l->cap] = c;
    c->waiting = 1;
    if (suspend)
        epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
    return 1;
}

static void drop(struct loop *l, struct conn *c)
{
    epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    free(c->in);
    free(c->out);
    free(c);
}

/* Parse and serve what c has read; stops at a chunk waiting for Redis. */
static void serve_conn(struct loop *l, struct conn *c)
{
    while (!c->waiting && !c->parked) {
        char *p = c->in, *hend = memmem(p, c->inlen, "\r\n\r\n", 4);
        if (hend == NULL) {
            if (c->inlen > 16384)
                fail("a request head over 16 KiB");
            break;
        }
        hend += 4;
        long long cl = header(p, hend, "Content-Length");
        if (cl < 0)
            cl = 0;
        if ((unsigned long long)cl > CHUNK_MAX)
            fail("a body over 64 MiB");
        size_t total = (size_t)(hend - p) + (size_t)cl;
        if (c->inlen < total) {
            floor_grow(&c->in, &c->incap, total);
            break;
        }
        if (strncmp(p, "GET ", 4) == 0) {
            const char *path = p + 4,
                       *sp = memchr(path, ' ', (size_t)(hend - path));
            size_t pl = sp ? (size_t)(sp - path) : 0;
            size_t i = 0, ng = sizeof GETS / sizeof GETS[0];
            while (i < ng
                   && !(strlen(GETS[i][0]) == pl
                        && memcmp(GETS[i][0], path, pl) == 0))
                i++;
            if (pl == 23 && memcmp(path, "/v2/models/cumsum/stats", 23) == 0) {
                char st[sizeof STATS + 7 * 20];
                unsigned long long k = answered;
                int sl = snprintf(st, sizeof st, STATS, k, k, k, k, k, k, k);
                answer(c, "200 OK", "application/json", "", st, (size_t)sl,
                       NULL, 0);
            } else if (i < ng)
                answer(c, "200 OK", "application/json", "", GETS[i][1],
                       strlen(GETS[i][1]), NULL, 0);
            else
                answer(c, "404 Not Found", "application/json", "",
                       "{\"error\":\"no such path\"}", 24, NULL, 0);
        } else if (strncmp(p, "POST /v2/models/cumsum/infer ", 29) == 0) {
            long long hl = header(p, hend, "Inference-Header-Content-Length");
            if (hl < 0)
                fail(
                    "an infer request without Inference-Header-Content-Length");
            if (!infer(l, c, hend, (size_t)cl, (size_t)hl)) {
                if (l->nparked == (int)(sizeof l->parked / sizeof l->parked[0]))
                    fail("over 256 chunks waiting for their sequences");
                c->parked = 1;
                l->parked[l->nparked++] = c;
                break;
            }
        } else {
            fail("a request that is neither a known GET nor POST .../infer");
        }
        memmove(c->in, c->in + total, c->inlen - total);
        c->inlen -= total;
        if (!c->waiting)
            flush_conn(l, c);
    }
}

/* Redis's replies, in order: each a chunk's state written. */
static void replies(struct loop *l)
{
    ssize_t n = read(l->rfd, l->rin + l->rinlen, sizeof l->rin - l->rinlen);
    if (n <= 0)
        fail("Redis closed the connection");
    l->rinlen += (size_t)n;
    size_t off = 0;
    for (;;) {
        char *nl = memmem(l->rin + off, l->rinlen - off, "\r\n", 2);
        if (nl == NULL)
            break;
        if (nl - (l->rin + off) != 2 || memcmp(l->rin + off, ":1", 2) != 0) {
            fprintf(stderr, "store_floor serve: Redis answered %.*s\n",
                    (int)(nl - (l->rin + off)), l->rin + off);
            exit(1);
        }
        off = (size_t)(nl - l->rin) + 2;
        if (l->count == 0)
            fail("a reply with no command");
        struct conn *c = l->fifo[l->head];
        l->head = (l->head + 1) % l->cap;
        l->count--;
        pthread_mutex_lock(&seq_lock);
        struct seq *s = &seqs[c->sid];
        s->version = c->end ? 0 : s->version + 1;
        s->carry = c->end ? 0.0f : c->carry;
        s->busy = 0;
        pthread_mutex_unlock(&seq_lock);
        c->waiting = 0;
        answered++;
        if (c->closing) {
            drop(l, c);
            continue;
        }
        if (suspend) {
            /* back in the set before the answer (the library adds it
             * after its read, the same calls): an answer the socket
             * cannot take whole then waits for writability there */
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
            epoll_ctl(l->ep, EPOLL_CTL_ADD, c->fd, &ev);
        }
        flush_conn(l, c);
        if (suspend) { /* and a read after it, as the library's */
            floor_grow(&c->in, &c->incap, c->inlen + 65536);
            ssize_t got = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
            if (got > 0)
                c->inlen += (size_t)got;
            if (got == 0) {
                drop(l, c);
                continue;
            }
        }
        serve_conn(l, c); /* a request that came in meanwhile */
    }
    memmove(l->rin, l->rin + off, l->rinlen - off);
    l->rinlen -= off;
}

static void *loop_run(void *arg)
{
    struct loop *l = arg;
    struct epoll_event e[64];
    for (;;) {
        /* a parked chunk is tried again each turn, so the loop spins
         * while one is: for a round trip, at a window's end */
        int k = epoll_wait(l->ep, e, 64, l->nparked > 0 ? 0 : -1);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            floor_die("epoll_wait");
        for (int i = 0; i < k; i++) {
            if (e[i].data.ptr == NULL) {
                replies(l);
                continue;
            }
            struct conn *c = e[i].data.ptr;
            if (e[i].events & EPOLLOUT) {
                struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(l->ep, EPOLL_CTL_MOD, c->fd, &ev);
                flush_conn(l, c);
            }
            if (!(e[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                continue;
            floor_grow(&c->in, &c->incap, c->inlen + 65536);
            ssize_t n = read(c->fd, c->in + c->inlen, c->incap - c->inlen);
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n <= 0) {
                if (c->waiting) { /* freed when its reply comes */
                    c->closing = 1;
                    epoll_ctl(l->ep, EPOLL_CTL_DEL, c->fd, NULL);
                    continue;
                }
                for (int j = 0; j < l->nparked; j++)
                    if (l->parked[j] == c)
                        l->parked[j] = l->parked[--l->nparked];
                drop(l, c);
                continue;
            }
            c->inlen += (size_t)n;
            serve_conn(l, c);
        }
        for (int i = 0, n = l->nparked; i < n; i++) {
            struct conn *c = l->parked[0];
            memmove(l->parked, l->parked + 1,
                    (size_t)--l->nparked * sizeof *l->parked);
            c->parked = 0;
            serve_conn(l, c);
        }
        if (l->routlen > 0) { /* this turn's commands, in one write */
            floor_write_all(l->rfd, l->rout, l->routlen);
            l->routlen = 0;
        }
    }
    return NULL;
}

/* store_floor serve LISTEN REDIS_PORT SHA|- LOOPS: prints "listening
 * PORT" once it accepts, then serves until killed. */
static int serve_main(int argc, char **argv)
{
    char *e;
    long port = argc > 2 ? strtol(argv[2], &e, 10) : -1;
    long rport = argc > 3 ? strtol(argv[3], &e, 10) : -1;
    long loops = argc > 5 ? strtol(argv[5], &e, 10) : -1;
    suspend = argc == 7 && strcmp(argv[6], "suspend") == 0;
    if ((argc != 6 && !suspend) || port < 0 || port > 65535 || rport < 0
        || rport > 65535 || loops < 1 || loops > 64
        || (strcmp(argv[4], "-") != 0 && strlen(argv[4]) != 40)) {
        fprintf(stderr,
                "usage: store_floor serve LISTEN_PORT REDIS_PORT SHA|- LOOPS "
                "[suspend]\n");
        return 2;
    }
    redis_port = (int)rport;
    sha = strcmp(argv[4], "-") == 0 ? NULL : argv[4];
    snprintf(prefix, sizeof prefix, "tally-store-floor:%ld:%llu",
             (long)getpid(), (unsigned long long)now_ns());
    if ((seqs = calloc(SEQ_MAX, sizeof *seqs)) == NULL)
        floor_die("calloc");
    int bound, lfd = floor_listen((int)port, &bound), one = 1;
    struct loop *ls = calloc((size_t)loops, sizeof *ls);
    if (ls == NULL)
        floor_die("calloc");
    for (long i = 0; i < loops; i++) {
        ls[i].ep = epoll_create1(0);
        ls[i].rfd = -1;
        if (sha != NULL) {
            ls[i].rfd = floor_connect(redis_port);
            struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
            epoll_ctl(ls[i].ep, EPOLL_CTL_ADD, ls[i].rfd, &ev);
        }
        pthread_create(&ls[i].thread, NULL, loop_run, &ls[i]);
    }
    printf("listening %d\n", bound);
    fflush(stdout);
    for (unsigned long next = 0;; next++) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
        if (fd < 0 && errno == EINTR)
            continue;
        if (fd < 0)
            floor_die("accept");
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        struct conn *c = calloc(1, sizeof *c);
        if (c == NULL)
            floor_die("calloc");
        c->fd = fd;
        struct loop *l = &ls[next % (unsigned long)loops];
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        epoll_ctl(l->ep, EPOLL_CTL_ADD, fd, &ev);
    }
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "serve") == 0)
        return serve_main(argc, argv);
    if (argc < 3) {
        fprintf(stderr, "usage: store_floor PORT SHA [BYTES [N [ROUNDS]]]\n");
        return 2;
    }
    redis_port = (int)strtol(argv[1], NULL, 10);
    sha = argv[2];
    if (argc > 3)
        bytes = (size_t)strtoull(argv[3], NULL, 10);
    int n = argc > 4 ? (int)strtol(argv[4], NULL, 10) : 5000;
    int rounds = argc > 5 ? (int)strtol(argv[5], NULL, 10) : 4;
    if (strlen(sha) != 40 || bytes == 0 || bytes > (64u << 20) || n < 1
        || rounds < 1 || rounds > 64) {
        fprintf(stderr, "store_floor: a 40-digit SHA, 1 byte to 64 MiB, N and "
                        "ROUNDS >= 1\n");
        return 2;
    }
    snprintf(key, sizeof key, "tally-store-floor:%ld:%llu", (long)getpid(),
             (unsigned long long)now_ns());
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0
        || listen(listen_fd, 1) != 0
        || getsockname(listen_fd, (struct sockaddr *)&a, &al) != 0)
        floor_die("listen");
    pthread_t t;
    pthread_create(&t, NULL, serve, NULL);
    int fd = floor_connect(ntohs(a.sin_port));
    char *buf = malloc(bytes);
    double *us = malloc((size_t)n * sizeof *us), p50[2][64], added[64];
    memset(buf, 'q', bytes);
    for (int round = 0; round < rounds; round++) {
        for (int mode = 0; mode < 2; mode++) {
            store_mode = mode; /* the server reads it after our request */
            for (int i = -n / 10; i < n; i++) { /* a tenth as warm-up */
                uint64_t t0 = now_ns();
                floor_write_all(fd, buf, bytes);
                for (size_t got = 0; got < bytes;) {
                    ssize_t k = read(fd, buf + got, bytes - got);
                    if (k <= 0)
                        floor_die("read");
                    got += (size_t)k;
                }
                if (i >= 0)
                    us[i] = (double)(now_ns() - t0) / 1e3;
            }
            p50[mode][round] = median(us, n);
        }
        added[round] = p50[1][round] - p50[0][round];
    }
    close(fd);
    pthread_join(t, NULL);
    printf(
        "{\"bytes\": %zu, \"n\": %d, \"rounds\": %d, \"plain_p50_us\": %.1f, "
        "\"store_p50_us\": %.1f, \"added_us\": %.1f}\n",
        bytes, n, rounds, median(p50[0], rounds), median(p50[1], rounds),
        median(added, rounds));
    return 0;
}
