/*
 * router.h - a route table: method and path pattern to handler.
 *
 * A pattern is a path of literal segments and {parameters}, such as
 * "/v2/models/{model}/versions/{version}/infer". A parameter matches any
 * one segment; the table's check_param() decides whether its text names
 * something that exists. Matching a request gives:
 *   - the handler of the first row whose pattern and method match (a GET
 *     row serves HEAD too);
 *   - 405, when some row's pattern matches but none of their methods does:
 *     Allow lists those rows' methods, in table order;
 *   - 404, when no pattern matches: with check_param's message when a
 *     parameter on the way was refused ("unknown model"), else "no route".
 * The table is the only place a route is written down; the transport knows
 * nothing of what the routes do.
 *
 * Threading: a table is read-only once built; matching is reentrant (each
 * thread keeps its own last match).
 */
#ifndef TALLY_HTTP_ROUTER_H
#define TALLY_HTTP_ROUTER_H

#include <stdbool.h>
#include <stddef.h>

#include "request.h"

struct mailbox;

/* Who may use a route when the server requires bearer tokens (auth.h):
 * everyone with a token, or, for the routes that probes and scrapers
 * call, whatever --auth-health and --auth-metrics say. */
typedef enum {
    HTTP_ACCESS_TOKEN,  /* a token, always */
    HTTP_ACCESS_HEALTH, /* a token with --auth-health, else anyone */
    HTTP_ACCESS_METRICS /* a token with --auth-metrics, else anyone */
} http_access;

typedef struct {
    const char *method;  /* "GET" (serves HEAD too), "POST", ... */
    const char *pattern; /* "/v1/cumsum", "/v2/models/{model}/infer" */
    http_handler handler;
    unsigned label;     /* what /metrics counts it under: labels[label] */
    http_access access; /* who may call it when tokens are required */
    /* Runs on an HTTP thread when a request of this route has ended
     * (answered, failed or abandoned), after the transport has counted
     * it: the API's own accounting (Triton's statistics). NULL: none. */
    req_ended_fn ended;
} http_route;

typedef struct http_routes {
    const http_route *rows;
    size_t nrows;
    /* Whether the text of parameter `name` names something that exists;
     * when not, writes why into msg (the 404's message). NULL: any text
     * matches. Both strings are not NUL-terminated. The same text gets
     * the same answer for the table's life: a thread reuses its last
     * match (router.c). */
    bool (*check_param)(const char *name, size_t nlen, const char *value,
                        size_t vlen, char *msg, size_t msglen);
    /* The names /metrics labels requests with (route="native"): a row's
     * label indexes them, and requests no row matches count under
     * `unmatched`. */
    const char *const *labels;
    unsigned nlabels, unmatched;
    /* The routes' own state on each loop of the door (NULL: none):
     * loop_open runs on the loop's thread before it serves, given the
     * loop's mailbox (core/mailbox.h, on which its state may take a
     * receiver of its own), loop_close there first thing when it stops;
     * a handler finds it with http_loop_data(). */
    void *(*loop_open)(tallyd_server *s, struct mailbox *mb);
    void (*loop_close)(tallyd_server *s, void *data);
} http_routes;

typedef struct {
    http_handler handler; /* NULL when status is 404 or 405 */
    const char *pattern;  /* the row's (the table's); NULL for a 404 */
    unsigned label;       /* the table's unmatched when no pattern did */
    /* the row's; for a 405, the first row whose pattern matched */
    req_ended_fn ended;
    http_access access;   /* the matched row's */
    int status;           /* 200, 404 or 405 */
    char allow[64];       /* for 405: "GET, HEAD", "POST", ... */
    char msg[256];        /* for 404 and 405 */
} http_match;

/* Matches method and path (without the query string) against t. */
void http_route_match(const http_routes *t, const char *method,
                      const char *path, http_match *m);

#endif
