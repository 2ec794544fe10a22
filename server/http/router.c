/*
 * router.c - matching a request against the route table.
 *
 * Tables are a dozen rows, so each request walks every row: a pattern is
 * compared segment by segment with the path, without copying either.
 */
#include <stdio.h>
#include <string.h>

#include "router.h"

/* The segment of `s` that starts at *p (after its '/'): sets *seg and *len
 * and moves *p past it. False when s has no more segments. */
static bool next_segment(const char **p, const char **seg, size_t *len)
{
    if (**p != '/')
        return false;
    const char *start = *p + 1;
    const char *end = strchr(start, '/');
    if (end == NULL)
        end = start + strlen(start);
    *seg = start;
    *len = (size_t)(end - start);
    *p = end;
    return true;
}

/* Whether path matches pattern. A parameter that check_param refuses ends
 * the match; its message goes into refused (when that is still empty). */
static bool match_pattern(const http_routes *t, const char *pattern,
                          const char *path, char *refused, size_t refusedlen)
{
    const char *pp = pattern, *sp = path;
    for (;;) {
        const char *pseg, *sseg;
        size_t plen, slen;
        bool pmore = next_segment(&pp, &pseg, &plen);
        bool smore = next_segment(&sp, &sseg, &slen);
        if (!pmore || !smore)
            return !pmore && !smore && *sp == '\0' && *pp == '\0';
        if (plen >= 2 && pseg[0] == '{' && pseg[plen - 1] == '}') {
            char why[256];
            if (t->check_param != NULL
                && !t->check_param(pseg + 1, plen - 2, sseg, slen, why,
                                   sizeof why)) {
                if (refused[0] == '\0')
                    snprintf(refused, refusedlen, "%s", why);
                return false;
            }
        } else if (plen != slen || memcmp(pseg, sseg, plen) != 0) {
            return false;
        }
    }
}

static bool method_serves(const char *row, const char *method)
{
    return strcmp(row, method) == 0
           || (strcmp(row, "GET") == 0 && strcmp(method, "HEAD") == 0);
}

/* Appends a method (and HEAD after GET) to Allow. */
static void allow_add(char *allow, size_t len, const char *method)
{
    size_t n = strlen(allow);
    snprintf(allow + n, len - n, "%s%s%s", n ? ", " : "", method,
             strcmp(method, "GET") == 0 ? ", HEAD" : "");
}

void http_route_match(const http_routes *t, const char *method,
                      const char *path, http_match *m)
{
    memset(m, 0, sizeof *m);
    m->label = t->unmatched;
    m->ended = NULL;
    char refused[sizeof m->msg] = "";
    const http_route *first = NULL;
    const char *methods[8]; /* in Allow so far */
    size_t nlisted = 0;
    for (size_t i = 0; i < t->nrows; i++) {
        const http_route *row = &t->rows[i];
        if (!match_pattern(t, row->pattern, path, refused, sizeof refused))
            continue;
        if (method_serves(row->method, method)) {
            m->handler = row->handler;
            m->pattern = row->pattern;
            m->label = row->label;
            m->ended = row->ended;
            m->access = row->access;
            m->status = 200;
            return;
        }
        if (first == NULL)
            first = row;
        bool listed = false; /* by an earlier row of the same path */
        for (size_t k = 0; k < nlisted && !listed; k++)
            listed = strcmp(methods[k], row->method) == 0;
        if (!listed && nlisted < sizeof methods / sizeof methods[0]) {
            methods[nlisted++] = row->method;
            allow_add(m->allow, sizeof m->allow, row->method);
        }
    }
    if (first != NULL) {
        m->pattern = first->pattern;
        m->label = first->label; /* counted under its route, as */
        m->ended = first->ended; /* the route's own requests are */
        m->status = 405;
        snprintf(m->msg, sizeof m->msg, "%s is not allowed on %s (use %s)",
                 method, path, m->allow);
        return;
    }
    m->status = 404;
    if (refused[0] != '\0')
        snprintf(m->msg, sizeof m->msg, "%s", refused);
    else
        snprintf(m->msg, sizeof m->msg,
                 "no route %s %s (see proto/openapi.yaml)", method, path);
}
