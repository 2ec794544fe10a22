/*
 * cors.h - Cross-Origin Resource Sharing: which web pages may call the
 * API from another origin, and the headers that tell a browser so.
 *
 * Off unless --cors-origins names origins ("https://app.example.com,
 * http://localhost:3000") or "*". For a request whose Origin is allowed,
 * every answer (errors and 401s included, so that the page can read why)
 * carries Access-Control-Allow-Origin (the origin itself, or "*"), Vary:
 * Origin and Access-Control-Expose-Headers naming tally's own response
 * headers. A preflight (OPTIONS with Access-Control-Request-Method on a
 * path that has routes) is answered 204 with the path's methods, the
 * request headers tally reads, and a max age; it needs no token, as
 * browsers send none with it, and tokens still apply to the request that
 * follows. Origins that are not allowed get no CORS header, and a
 * preflight of theirs gets the 405 it always got: the browser refuses.
 *
 * Threading: built before the transport starts, then read-only.
 */
#ifndef TALLY_HTTP_CORS_H
#define TALLY_HTTP_CORS_H

#include <stdbool.h>
#include <stddef.h>

typedef struct http_cors http_cors;

/* Parses --cors-origins: a comma-separated list of origins (scheme://host
 * with an optional :port, no path), or "*". *out is NULL for an empty
 * list (CORS off). False with a message for a malformed entry. */
bool http_cors_parse(const char *list, http_cors **out, char *msg,
                     size_t msglen);

void http_cors_free(http_cors *c);

/* What Access-Control-Allow-Origin says to a request with this Origin
 * header (NULL: none): the origin, "*", or NULL when it is not allowed.
 * Borrowed from c or origin. */
const char *http_cors_allow(const http_cors *c, const char *origin);

/* The response headers a browser may read, the request headers a
 * preflight allows, and how long it may cache the answer (seconds). */
#define HTTP_CORS_EXPOSE                                                      \
    "Inference-Header-Content-Length, Tensor-Dtype, Tensor-Shape, "            \
    "Sequence-Chunk, "                                                         \
    "DML-Output-Tensor, X-Request-Id, Retry-After, WWW-Authenticate, "            \
    "traceparent"
#define HTTP_CORS_HEADERS                                                     \
    "Authorization, Content-Type, Content-Encoding, "                          \
    "Inference-Header-Content-Length, DML-Operator, X-Timeout-Ms, "            \
    "X-Request-Id"
#define HTTP_CORS_MAX_AGE "600"

#endif
