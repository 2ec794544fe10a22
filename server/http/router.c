/*
 * router.c - matching a request against the route table.
 *
 * Tables are a few dozen rows, so each request walks every row: the path
 * is split into segments once, and each pattern compared with them
 * segment by segment, without copying either; and a thread keeps its last
 * match, for the next request to the same path.
 */
#include <stdio.h>
#include <string.h>

#include "router.h"

/* A path's segments, split once a request: each '/' starts one ("/"
 * is one empty segment, "/v2/" two). No pattern has as many as
 * PATH_SEGS_MAX, so a path with more matches none. */
#define PATH_SEGS_MAX 16
typedef struct {
    const char *at;
    size_t len;
} segment;

/* The number of path's segments, or -1 when it does not start with '/'
 * or has more than PATH_SEGS_MAX. */
static int split_path(const char *path, segment *seg)
{
    if (*path != '/')
        return -1;
    int n = 0;
    const char *p = path;
    while (*p == '/') {
        if (n == PATH_SEGS_MAX)
            return -1;
        const char *start = ++p;
        while (*p != '\0' && *p != '/')
            p++;
        seg[n].at = start;
        seg[n].len = (size_t)(p - start);
        n++;
    }
    return n;
}

/* Whether the path split into seg[0..n) matches pattern, compared as
 * they are read (most rows differ from the path early). A parameter that
 * check_param refuses ends the match; its message goes into refused
 * (when that is still empty). */
static bool match_pattern(const http_routes *t, const char *pattern,
                          const segment *seg, int n, char *refused,
                          size_t refusedlen)
{
    const char *pp = pattern;
    int i = 0;
    for (; *pp == '/'; i++) {
        if (i == n)
            return false;
        const char *q = pp + 1, *a = seg[i].at, *end = a + seg[i].len;
        const char *pend = q;
        if (*q == '{') /* a parameter, when "{name}" is the whole segment */
            while (*pend != '\0' && *pend != '/')
                pend++;
        if (pend - q >= 2 && pend[-1] == '}') {
            char why[256];
            if (t->check_param != NULL
                && !t->check_param(q + 1, (size_t)(pend - q - 2), a,
                                   seg[i].len, why, sizeof why)) {
                if (refused[0] == '\0')
                    snprintf(refused, refusedlen, "%s", why);
                return false;
            }
            q = pend;
        } else {
            while (a < end && *q == *a) {
                q++;
                a++;
            }
            if (a != end || (*q != '/' && *q != '\0'))
                return false;
        }
        pp = q;
    }
    return *pp == '\0' && i == n;
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

/* The last row this thread matched, and what to: a connection asks for
 * the same route again and again. Keyed by the table and its rows too,
 * so that a table made elsewhere at the same address is not taken for
 * it; only a match is kept, and only a path that fits. */
static _Thread_local struct {
    const http_routes *t;
    const http_route *rows, *row;
    size_t nrows;
    char method[8], path[128];
} last;

static void matched(http_match *m, const http_route *row)
{
    m->handler = row->handler;
    m->pattern = row->pattern;
    m->label = row->label;
    m->ended = row->ended;
    m->access = row->access;
    m->status = 200;
}

static void remember(const http_routes *t, const char *method,
                     const char *path, const http_route *row)
{
    size_t mn = strlen(method), pn = strlen(path);
    if (mn >= sizeof last.method || pn >= sizeof last.path)
        return;
    last.t = t;
    last.rows = t->rows;
    last.nrows = t->nrows;
    last.row = row;
    memcpy(last.method, method, mn + 1);
    memcpy(last.path, path, pn + 1);
}

void http_route_match(const http_routes *t, const char *method,
                      const char *path, http_match *m)
{
    m->handler = NULL;
    m->pattern = NULL;
    m->label = t->unmatched;
    m->ended = NULL;
    m->access = HTTP_ACCESS_TOKEN;
    m->allow[0] = m->msg[0] = '\0';
    if (last.t == t && last.rows == t->rows && last.nrows == t->nrows
        && strcmp(last.path, path) == 0 && strcmp(last.method, method) == 0) {
        matched(m, last.row);
        return;
    }
    char refused[sizeof m->msg];
    refused[0] = '\0';
    const http_route *first = NULL;
    const char *methods[8]; /* in Allow so far */
    size_t nlisted = 0;
    segment seg[PATH_SEGS_MAX];
    int nseg = split_path(path, seg);
    for (size_t i = 0; i < t->nrows && nseg >= 0; i++) {
        const http_route *row = &t->rows[i];
        if (!match_pattern(t, row->pattern, seg, nseg, refused,
                           sizeof refused))
            continue;
        if (method_serves(row->method, method)) {
            matched(m, row);
            remember(t, method, path, row);
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
