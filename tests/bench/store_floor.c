/*
 * store_floor.c - what one write to Redis adds to a request at
 * concurrency 1 at the least, with nothing of tally's in the way: the
 * smallest server that does a chunk's work through --state-store.
 *
 * A server thread runs one epoll loop with two sockets (blocking: a
 * write waits until the peer reads), a client's and Redis's. Each request is BYTES bytes; the answer is BYTES bytes. In
 * the "plain" rounds the server answers as soon as the request is in.
 * In the "store" rounds it first sends tally's write script (EVALSHA
 * SHA, the compare-and-set of server/sched/state_redis.c, on one key
 * whose version advances by one a request, a 131-byte record) on the
 * same loop, and answers once Redis's reply is in: no thread hop, no
 * copy beyond the socket's, so the difference between the two is the
 * script's round trip plus whatever a loop that sleeps through it costs
 * on this machine. A client thread sends the requests one at a time
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
 * Threading: main() runs the client; serve() is the one other thread.
 */
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
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RECORD 131
#define TTL_MS "600000"

static size_t bytes = 64;
static int redis_port, listen_fd;
static const char *sha;
static atomic_int store_mode;
static char key[64]; /* one a run: tally-store-floor:PID:TIME */ /* set by the client between rounds */

static uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            die("write");
        p += w;
        n -= (size_t)w;
    }
}

/* RESP for EVALSHA SHA 1 key expect ttl put value (version + record). */
static size_t command(char *out, size_t cap, uint64_t version)
{
    char expect[24] = "", value[24 + RECORD];
    version %= 1000000000000000ull; /* 16 digits */
    if (version > 0)
        snprintf(expect, sizeof expect, "%016llu", (unsigned long long)version);
    snprintf(value, sizeof value, "%016llu", (unsigned long long)version + 1);
    memset(value + 16, 'r', RECORD);
    const char *argv[] = {"EVALSHA", sha, "1", key, expect, TTL_MS, "put", value};
    size_t argl[] = {7, strlen(sha), 1, strlen(key), strlen(expect), strlen(TTL_MS), 3,
                     16 + RECORD};
    size_t n = (size_t)snprintf(out, cap, "*8\r\n");
    for (int i = 0; i < 8; i++) {
        n += (size_t)snprintf(out + n, cap - n, "$%zu\r\n", argl[i]);
        memcpy(out + n, argv[i], argl[i]);
        n += argl[i];
        memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    return n;
}

/* The server: one loop, the client's socket and Redis's. */
static void *serve(void *arg)
{
    (void)arg;
    int c = accept(listen_fd, NULL, NULL), one = 1;
    if (c < 0)
        die("accept");
    setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    int r = connect_to(redis_port);
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
                    write_all(c, ans, bytes);
                    continue;
                }
                write_all(r, cmd, command(cmd, sizeof cmd, version));
            } else {
                ssize_t n = read(r, reply + rgot, sizeof reply - 1 - rgot);
                if (n <= 0)
                    die("read from Redis");
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
                write_all(c, ans, bytes);
            }
        }
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
    if (argc < 3) {
        fprintf(stderr, "usage: store_floor PORT SHA [BYTES [N [ROUNDS]]]\n");
        return 2;
    }
    redis_port = atoi(argv[1]);
    sha = argv[2];
    if (argc > 3)
        bytes = (size_t)strtoull(argv[3], NULL, 10);
    int n = argc > 4 ? atoi(argv[4]) : 5000, rounds = argc > 5 ? atoi(argv[5]) : 4;
    if (strlen(sha) != 40 || bytes == 0 || bytes > (64u << 20) || n < 1 || rounds < 1
        || rounds > 64) {
        fprintf(stderr, "store_floor: a 40-digit SHA, 1 byte to 64 MiB, N and ROUNDS >= 1\n");
        return 2;
    }
    snprintf(key, sizeof key, "tally-store-floor:%ld:%llu", (long)getpid(),
             (unsigned long long)now_ns());
    listen_fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(listen_fd, 1) != 0
        || getsockname(listen_fd, (struct sockaddr *)&a, &al) != 0)
        die("listen");
    pthread_t t;
    pthread_create(&t, NULL, serve, NULL);
    int fd = connect_to(ntohs(a.sin_port));
    char *buf = malloc(bytes);
    double *us = malloc((size_t)n * sizeof *us), p50[2][64], added[64];
    memset(buf, 'q', bytes);
    for (int round = 0; round < rounds; round++) {
        for (int mode = 0; mode < 2; mode++) {
            store_mode = mode; /* the server reads it after our request */
            for (int i = -n / 10; i < n; i++) { /* a tenth as warm-up */
                uint64_t t0 = now_ns();
                write_all(fd, buf, bytes);
                for (size_t got = 0; got < bytes;) {
                    ssize_t k = read(fd, buf + got, bytes - got);
                    if (k <= 0)
                        die("read");
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
    printf("{\"bytes\": %zu, \"n\": %d, \"rounds\": %d, \"plain_p50_us\": %.1f, "
           "\"store_p50_us\": %.1f, \"added_us\": %.1f}\n",
           bytes, n, rounds, median(p50[0], rounds), median(p50[1], rounds),
           median(added, rounds));
    return 0;
}
