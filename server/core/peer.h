/*
 * peer.h - whether clients have hung up, asked of their sockets.
 *
 * A client that closes its connection while its request waits for a
 * device should not keep the device busy: the scheduler's tick asks the
 * sockets of every waiting job here in one call, and a front door's "has
 * the client gone?" probe (scheduler.h) asks of one.
 *
 * Threading: any thread; nothing is read from the sockets.
 */
#ifndef TALLY_PEER_H
#define TALLY_PEER_H

#include <stdbool.h>
#include <stddef.h>

/* Which of the sockets fds[0..n) the peer has closed (it sent its FIN or
 * reset the connection; bytes it sent and nobody read yet, a pipelined
 * request, do not count): gone[i]. One poll(2) for them all, not waiting.
 * Returns how many are gone. */
size_t peers_gone(const int *fds, size_t n, bool *gone);

/* The same for one socket; false for a negative fd. About a microsecond. */
bool peer_gone(int fd);

#endif
