/*
 * cors.c - the allowed origins, and the answer to an Origin (cors.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cors.h"
#include "errors.h"

#define MAX_ORIGINS 64
#define MAX_ORIGIN 256

struct http_cors {
    bool any;
    size_t n;
    char *origin[MAX_ORIGINS];
};

void http_cors_free(http_cors *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->n; i++)
        free(c->origin[i]);
    free(c);
}

/* scheme://host[:port]: a scheme of letters, digits, + - ., a host of
 * letters, digits, - . and [ ] : (IPv6), no path, query or user. */
static bool origin_ok(const char *s, size_t n)
{
    const char *sep = NULL;
    for (size_t i = 0; i + 2 < n; i++)
        if (s[i] == ':' && s[i + 1] == '/' && s[i + 2] == '/') {
            sep = s + i;
            break;
        }
    if (sep == NULL || sep == s)
        return false;
    for (const char *p = s; p < sep; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '+' || *p == '-'
              || *p == '.'))
            return false;
    const char *h = sep + 3, *end = s + n;
    if (h == end)
        return false;
    for (const char *p = h; p < end; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')
              || (*p >= '0' && *p <= '9') || *p == '-' || *p == '.'
              || *p == ':' || *p == '[' || *p == ']'))
            return false;
    return true;
}

bool http_cors_parse(const char *list, http_cors **out, char *msg,
                     size_t msglen)
{
    *out = NULL;
    if (list == NULL || list[0] == '\0')
        return true;
    http_cors *c = calloc(1, sizeof *c);
    if (c == NULL)
        return msg_fail(msg, msglen, "out of memory");
    const char *p = list;
    while (*p != '\0') {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '\0')
            break;
        size_t n = strcspn(p, ", ");
        if (n == 1 && *p == '*') {
            c->any = true;
        } else if (n > MAX_ORIGIN || !origin_ok(p, n)) {
            snprintf(msg, msglen,
                     "cors-origins: \"%.*s\" is not an origin such as "
                     "https://app.example.com or http://localhost:3000 "
                     "(scheme, host and port; no path), nor *",
                     n > 80 ? 80 : (int)n, p);
            http_cors_free(c);
            return false;
        } else if (c->n == MAX_ORIGINS) {
            snprintf(msg, msglen, "cors-origins: more than %d origins",
                     MAX_ORIGINS);
            http_cors_free(c);
            return false;
        } else if ((c->origin[c->n] = strndup(p, n)) == NULL) {
            snprintf(msg, msglen, "out of memory");
            http_cors_free(c);
            return false;
        } else {
            c->n++;
        }
        p += n;
    }
    if (!c->any && c->n == 0) {
        http_cors_free(c);
        return true;
    }
    *out = c;
    return true;
}

const char *http_cors_allow(const http_cors *c, const char *origin)
{
    if (c == NULL || origin == NULL || origin[0] == '\0')
        return NULL;
    if (c->any)
        return "*";
    /* schemes and hosts compare without case; browsers send them lower */
    for (size_t i = 0; i < c->n; i++)
        if (strcasecmp(c->origin[i], origin) == 0)
            return origin;
    return NULL;
}
