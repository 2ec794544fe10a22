/*
 * redis_url.h - a Redis URL: redis://[[user]:password@]host[:port][/db],
 * parsed, written back without its password, and quoted in messages
 * with whatever may be a password cut out (redis_url.c).
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_REDIS_URL_H
#define TALLY_REDIS_URL_H

#include <stdbool.h>
#include <stddef.h>

/* redis://[[user]:password@]host[:port][/db] */
typedef struct {
    char host[256];
    unsigned port;      /* 6379 when the URL has none */
    unsigned db;        /* 0 when the URL has none */
    char user[128];     /* empty: the default user */
    char password[256]; /* empty: no AUTH */
} redis_url;

/* Parses a URL of the form above (host: a name, an IPv4 address or an
 * IPv6 one in brackets; port 1-65535; db 0-15, Redis's default number
 * of databases). False with a message that quotes the URL without its
 * password. */
bool redis_url_parse(const char *text, redis_url *out, char *msg,
                     size_t msglen);

/* The URL without its password ("redis://user:***@host:port/db" when it
 * has one), for messages and logs. */
void redis_url_text(const redis_url *u, char *out, size_t len);

#endif
