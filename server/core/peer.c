/*
 * peer.c - whether clients have hung up, asked of their sockets (peer.h).
 */
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "peer.h"

size_t peers_gone(const int *fds, size_t n, bool *gone)
{
    struct pollfd stack[64], *p = n <= 64 ? stack : calloc(n, sizeof *p);
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        gone[i] = false;
    if (p == NULL)
        return 0;
    for (size_t i = 0; i < n; i++) {
        p[i].fd = fds[i]; /* a negative fd is ignored by poll */
        p[i].events = POLLIN;
        p[i].revents = 0;
    }
    if (poll(p, (nfds_t)n, 0) > 0)
        for (size_t i = 0; i < n; i++) {
            if (p[i].fd < 0 || p[i].revents == 0)
                continue;
            bool closed = (p[i].revents & (POLLHUP | POLLERR)) != 0;
            if (!closed && (p[i].revents & POLLIN) != 0) {
                /* readable: end of stream, or bytes of a next request */
                char b;
                ssize_t got = recv(p[i].fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
                closed = got == 0;
            }
            gone[i] = closed;
            count += closed;
        }
    if (p != stack)
        free(p);
    return count;
}

bool peer_gone(int fd)
{
    bool gone = false;
    return fd >= 0 && peers_gone(&fd, 1, &gone) == 1;
}
