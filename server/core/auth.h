/*
 * auth.h - bearer tokens: the set a server accepts, read from a file, and
 * the check of a request's Authorization header against it.
 *
 * The token file holds one token a line. Blank lines and lines that start
 * with '#' are skipped, and spaces, tabs and a CR around a token are
 * trimmed. A token is RFC 6750's b64token: letters, digits and - . _ ~ + /
 * followed by any number of '='; at most 4096 tokens of at most 512 bytes
 * each, in a file of at most 1 MiB. A file with no token in it is refused:
 * a server that accepted none would lock everyone out while looking
 * protected.
 *
 * Checking is constant-time in what the client sent: each presented token
 * is compared with every token of the set, all bytes of each, so neither
 * which token matched nor how much of one did shows in the time taken.
 * (The time does depend on the lengths of the server's own tokens.)
 *
 * Threading: auth_check() runs on the HTTP threads and the loop thread
 * (gRPC), concurrently;
 * auth_reload() on any one thread (the loop thread, on SIGHUP) swaps
 * the set under a write lock, so a check sees the old set or the new one,
 * never a mix.
 */
#ifndef TALLY_AUTH_H
#define TALLY_AUTH_H

#include <stddef.h>

typedef struct auth_tokens auth_tokens;

/* What a check found. */
typedef enum {
    AUTH_OK,      /* a token of the set */
    AUTH_MISSING, /* no Authorization header, or not a Bearer one */
    AUTH_INVALID  /* a Bearer token that is not in the set */
} auth_result;

/* Reads the token file at path. Returns a new set (free with
 * auth_free()), or NULL with a message naming the file, and the line
 * where it is at fault. */
auth_tokens *auth_load(const char *path, char *msg, size_t msglen);

/* Reads path again and, when it is good, replaces a's tokens with its
 * own; otherwise a keeps the tokens it had. Returns the number of tokens
 * now in force, or 0 with a message when the file was refused. */
size_t auth_reload(auth_tokens *a, const char *path, char *msg,
                        size_t msglen);

/* Who a request is, decided once, by its door at its headers: the
 * bearer token the server accepted, or "" (n 0) where no token was asked
 * for (a server without --auth-token-file, a route left open), so that
 * everyone alike is one caller. Borrowed from the request's Authorization
 * value: valid while the request is. What is the caller's (its
 * shared-memory regions: shm.h) is keyed by it. */
typedef struct {
    const char *p;
    size_t n;
} auth_caller;

/* The caller of a request that was asked for no token. */
#define AUTH_ANYONE ((auth_caller){"", 0})

/* Checks the value of an Authorization header (NULL when there was
 * none). On AUTH_OK, *who (when not NULL) is the token's caller. */
auth_result auth_check(auth_tokens *a, const char *authorization,
                       auth_caller *who);

/* The number of tokens in force. */
size_t auth_count(auth_tokens *a);

/* Frees a; NULL is a no-op. No check may be running. */
void auth_free(auth_tokens *a);

#endif
