/*
 * floor.c - what the bench's smallest servers share (floor.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floor.h"

void floor_die(const char *what)
{
    perror(what);
    exit(1);
}

void floor_grow(void *bufp, size_t *cap, size_t need)
{
    char **buf = bufp;
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    if ((*buf = realloc(*buf, c)) == NULL)
        floor_die("realloc");
    *cap = c;
}

void floor_write_all(int fd, const void *p, size_t n)
{
    for (size_t off = 0; off < n;) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            floor_die("write");
        off += (size_t)w;
    }
}

int floor_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0)
        floor_die("connect");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

int floor_listen(int port, int *bound)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0
        || listen(fd, 128) != 0
        || getsockname(fd, (struct sockaddr *)&a, &al) != 0)
        floor_die("listen");
    *bound = ntohs(a.sin_port);
    return fd;
}

size_t floor_evalsha(char *out, size_t cap, const char *sha, const char *key,
                     uint64_t version, const void *carry, size_t carrylen,
                     int del)
{
    /* tallyd's version: 16 digits, then a 16-hex-digit incarnation */
    char expect[40] = "", value[40 + FLOOR_RECORD];
    if (version > 0)
        snprintf(expect, sizeof expect, "%016llu%016x", (unsigned long long)version,
                 0x7a11u);
    snprintf(value, sizeof value, "%016llu%016x", (unsigned long long)version + 1,
             0x7a11u);
    memset(value + 32, 'r', FLOOR_RECORD);
    if (carrylen > FLOOR_RECORD)
        carrylen = FLOOR_RECORD;
    if (carrylen > 0)
        memcpy(value + 32, carry, carrylen);
    const char *argv[] = {
        "EVALSHA",           sha,  "1", key, expect, FLOOR_TTL_MS,
        del ? "del" : "put", value};
    size_t argl[] = {7,
                     strlen(sha),
                     1,
                     strlen(key),
                     strlen(expect),
                     strlen(FLOOR_TTL_MS),
                     3,
                     del ? 0 : 32 + FLOOR_RECORD};
    size_t n = (size_t)snprintf(out, cap, "*8\r\n");
    for (int i = 0; i < 8; i++) {
        n += (size_t)snprintf(out + n, cap - n, "$%zu\r\n", argl[i]);
        if (n + argl[i] + 2 > cap) {
            fprintf(stderr, "floor_evalsha: a command over %zu bytes\n", cap);
            exit(1);
        }
        memcpy(out + n, argv[i], argl[i]);
        n += argl[i];
        memcpy(out + n, "\r\n", 2);
        n += 2;
    }
    return n;
}
