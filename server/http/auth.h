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
 * Threading: http_auth_check() runs on HTTP threads, concurrently;
 * http_auth_reload() on any one thread (the loop thread, on SIGHUP) swaps
 * the set under a write lock, so a check sees the old set or the new one,
 * never a mix.
 */
#ifndef TALLY_HTTP_AUTH_H
#define TALLY_HTTP_AUTH_H

#include <stdbool.h>
#include <stddef.h>

typedef struct http_auth http_auth;

/* What a check found. */
typedef enum {
    HTTP_AUTH_OK,      /* a token of the set */
    HTTP_AUTH_MISSING, /* no Authorization header, or not a Bearer one */
    HTTP_AUTH_INVALID  /* a Bearer token that is not in the set */
} http_auth_result;

/* Reads the token file at path. Returns a new set (free with
 * http_auth_free()), or NULL with a message naming the file, and the line
 * where it is at fault. */
http_auth *http_auth_load(const char *path, char *msg, size_t msglen);

/* Reads path again and, when it is good, replaces a's tokens with its
 * own; otherwise a keeps the tokens it had. Returns the number of tokens
 * now in force, or 0 with a message when the file was refused. */
size_t http_auth_reload(http_auth *a, const char *path, char *msg,
                        size_t msglen);

/* Checks the value of an Authorization header (NULL when there was
 * none). */
http_auth_result http_auth_check(http_auth *a, const char *authorization);

/* The number of tokens in force. */
size_t http_auth_count(http_auth *a);

/* Frees a; NULL is a no-op. No check may be running. */
void http_auth_free(http_auth *a);

#endif
