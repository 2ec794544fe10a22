/*
 * redis_url.c - Redis URLs (redis_url.h): parsed, written back without
 * the password, and quoted in messages with whatever may be a password
 * cut out.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "redis_url.h"

static bool all_digits(const char *p, size_t n)
{
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < '0' || p[i] > '9')
            return false;
    return true;
}

static unsigned long small_number(const char *p, size_t n)
{
    unsigned long v = 0;
    for (size_t i = 0; i < n && v < 1000000; i++)
        v = v * 10 + (unsigned long)(p[i] - '0');
    return v;
}

void redis_url_text(const redis_url *u, char *out, size_t len)
{
    bool v6 = strchr(u->host, ':') != NULL;
    snprintf(out, len, "redis://%s%s%s%s%s%s:%u/%u", u->user,
             u->password[0] ? ":***" : "",
             u->user[0] || u->password[0] ? "@" : "", v6 ? "[" : "", u->host,
             v6 ? "]" : "", u->port, u->db);
}

/* Whether a URL's text after "://" (with no '@') reads as only a host,
 * a port and a database: letters, digits, '.', '-', '_', a bracketed
 * IPv6 address, ':' and '/' before digits. */
static bool plain_authority(const char *p)
{
    if (*p == '[') {
        const char *end = strchr(p, ']');
        if (end == NULL)
            return false;
        p = end + 1;
    }
    for (; *p != '\0' && *p != ':' && *p != '/'; p++)
        if (!isalnum((unsigned char)*p) && *p != '.' && *p != '-' && *p != '_')
            return false;
    for (; *p != '\0'; p++)
        if (!isdigit((unsigned char)*p) && *p != ':' && *p != '/')
            return false;
    return true;
}

/* text as a message may quote it: everything before its last '@' that
 * may be a password (after the user and its ':', or, with no ':', the
 * whole part between the scheme and the '@') is "***", whatever the
 * scheme's spelling or the spaces around it; with no '@', anything but
 * a plain host, port and database ("redis://:PASS127.0.0.1", its '@'
 * forgotten) is "***" whole; a long text is cut. */
static void redis_url_shown(const char *text, char *out, size_t len)
{
    const char *at = strrchr(text, '@');
    const char *from = strstr(text, "://");
    if (at == NULL) {
        const char *auth = from != NULL ? from + 3 : text;
        if (plain_authority(auth))
            snprintf(out, len, "%.200s", text);
        else
            snprintf(out, len, "%.*s***",
                     (int)(auth - text < 40 ? auth - text : 40), text);
        return;
    }
    from = from != NULL && from < at ? from + 3 : text;
    const char *colon = memchr(from, ':', (size_t)(at - from));
    const char *keep = colon != NULL ? colon + 1 : from;
    size_t head = (size_t)(keep - text);
    snprintf(out, len, "%.*s***%.200s", (int)(head < 200 ? head : 200), text,
             at);
}

/* The user and the password before '@' (at; NULL: none) of p, the text
 * after "redis://". NULL with msg, or where the host begins. */
static const char *parse_auth(const char *p, const char *at, redis_url *out,
                              const char *shown, char *msg, size_t msglen)
{
    if (at == NULL)
        return p;
    const char *c = memchr(p, ':', (size_t)(at - p));
    if (c == NULL) { /* redis://password@host is not a form Redis uses */
        return msg_fail_as(
            NULL, msg, msglen,
            "%s: a password goes after a colon "
            "(redis://:password@host or redis://user:password@host)",
            shown);
    }
    size_t ulen = (size_t)(c - p), plen = (size_t)(at - c - 1);
    if (ulen >= sizeof out->user || plen >= sizeof out->password)
        return msg_fail_as(NULL, msg, msglen,
                           "%s: the user or the password is too long", shown);
    memcpy(out->user, p, ulen);
    memcpy(out->password, c + 1, plen);
    return at + 1;
}

/* The host (a name, or an IPv6 address in brackets) at p: NULL with
 * msg, or what follows it. */
static const char *parse_host(const char *p, redis_url *out, const char *shown,
                              char *msg, size_t msglen)
{
    const char *host = p, *host_end;
    if (*p == '[') {
        host = p + 1;
        host_end = strchr(host, ']');
        if (host_end == NULL)
            return msg_fail_as(NULL, msg, msglen,
                               "%s: an IPv6 address without its ']'", shown);
        p = host_end + 1;
    } else {
        host_end = p + strcspn(p, ":/");
        p = host_end;
    }
    size_t hlen = (size_t)(host_end - host);
    if (hlen == 0 || hlen >= sizeof out->host)
        return msg_fail_as(NULL, msg, msglen, "%s: %s", shown,
                           hlen == 0 ? "no host" : "the host name is too long");
    memcpy(out->host, host, hlen);
    return p;
}

/* ":port" and "/db", either or both, at p: false with msg. */
static bool parse_port_db(const char *p, redis_url *out, const char *shown,
                          char *msg, size_t msglen)
{
    if (*p == ':') {
        p++;
        size_t n = strcspn(p, "/");
        unsigned long port = small_number(p, n);
        if (!all_digits(p, n) || port < 1 || port > 65535)
            return msg_fail(msg, msglen, "%s: the port must be 1 to 65535",
                            shown);
        out->port = (unsigned)port;
        p += n;
    }
    if (*p == '/') {
        p++;
        size_t n = strlen(p);
        unsigned long db = small_number(p, n);
        if (n > 0 && (!all_digits(p, n) || db > 15))
            return msg_fail(msg, msglen,
                            "%s: the database must be a number, 0 to 15",
                            shown);
        out->db = n > 0 ? (unsigned)db : 0;
        p += n;
    }
    if (*p != '\0')
        return msg_fail(msg, msglen, "%s: unexpected \"%.40s\" after the host",
                        shown, p);
    return true;
}

bool redis_url_parse(const char *text, redis_url *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    out->port = 6379;
    /* what a message may quote: the URL with what may be a password cut
     * out, whatever its shape */
    char shown[600];
    redis_url_shown(text, shown, sizeof shown);
    if (strncmp(text, "redis://", 8) != 0)
        return msg_fail(
            msg, msglen,
            "\"%s\" is not a Redis URL: it must begin with redis:// "
            "(redis://[[user]:password@]host[:port][/db]; Debian's "
            "hiredis has no TLS, so rediss:// is not taken)",
            shown);
    const char *p =
        parse_auth(text + 8, strrchr(text, '@'), out, shown, msg, msglen);
    p = p != NULL ? parse_host(p, out, shown, msg, msglen) : NULL;
    return p != NULL && parse_port_db(p, out, shown, msg, msglen);
}
