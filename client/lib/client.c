/*
 * client.c - the tally_client handle: its servers, options and last error,
 * and the result codes' text.
 *
 * A client owns one curl multi handle, whose connection cache is what keeps
 * connections to the servers alive from one call to the next, and a small
 * pool of easy handles that are reset and reused rather than rebuilt.
 */
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "tx_utf8.h"

TALLY_API const char *tally_version(void)
{
    return TALLY_VERSION;
}

TALLY_API const char *tally_strerror(tally_code code)
{
    switch (code) {
#define TALLY_CODE_TEXT(name, num, text)                                       \
    case TALLYE_##name: return text;
        TALLY_CODES(TALLY_CODE_TEXT)
#undef TALLY_CODE_TEXT
    }
    return "unknown error";
}

TALLY_API const char *tally_code_name(tally_code code)
{
    switch (code) {
#define TALLY_CODE_NAME(name, num, text)                                       \
    case TALLYE_##name: return "TALLYE_" #name;
        TALLY_CODES(TALLY_CODE_NAME)
#undef TALLY_CODE_NAME
    }
    return "TALLYE_UNKNOWN";
}

TALLY_API void tally_free(void *p)
{
    free(p);
}

char *tc_fmt(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    /* cut short: drop a UTF-8 sequence the cut split */
    if (len > 0 && n >= 0 && (size_t)n >= len)
        buf[tx_utf8_valid(buf, strlen(buf))] = '\0';
    return buf;
}

void tc_copy(char *buf, size_t len, const char *s)
{
    snprintf(buf, len, "%s", s);
}

uint64_t tc_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* libcurl >= 7.84 initialises safely from any thread; once is enough. */
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result;

static void curl_init(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_DEFAULT);
}

TALLY_API tally_client *tally_client_new(void)
{
    pthread_once(&curl_once, curl_init);
    if (curl_init_result != CURLE_OK)
        return NULL;
    tally_client *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    c->multi = curl_multi_init();
    if (c->multi == NULL) {
        free(c);
        return NULL;
    }
    c->connect_timeout_ms = 10000;
    c->retries = 4;
    c->backoff_ms = 100;
    c->backoff_max_ms = 10000;
    c->chunk_bytes = 64L << 20;
    c->max_connections = 8;
    c->max_response_bytes = 1L << 30;
    c->rng = (uint64_t)(uintptr_t)c ^ tc_now_ms() ^ 0x9e3779b97f4a7c15ull;
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 16L);
    return c;
}

TALLY_API void tally_client_free(tally_client *c)
{
    if (c == NULL)
        return;
    for (size_t i = 0; i < c->neasies; i++)
        curl_easy_cleanup(c->easies[i]);
    free(c->easies);
    curl_multi_cleanup(c->multi);
    for (size_t i = 0; i < c->nurls; i++)
        free(c->urls[i]);
    free(c->urls);
    tc_pending_free(c);
    free(c->token_header);
    free(c->cainfo);
    free(c->user_agent);
    free(c);
}

tally_code tc_set_error(tally_client *c, tally_code code, long status,
                        const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    c->code = code;
    c->status = status;
    return code;
}

tally_code tc_ok(tally_client *c, long status)
{
    c->code = TALLYE_OK;
    c->status = status;
    c->msg[0] = '\0';
    return TALLYE_OK;
}

TALLY_API long tally_last_status(const tally_client *c)
{
    return c ? c->status : 0;
}

TALLY_API const char *tally_last_message(const tally_client *c)
{
    return c ? c->msg : "no client (NULL)";
}

/* ------------------------------------------------------------------------
 * Servers.
 */
/* Whether the URL has a non-empty `part`. */
static bool has_part(CURLU *u, CURLUPart part)
{
    char *v = NULL;
    bool has =
        curl_url_get(u, part, &v, 0) == CURLUE_OK && v != NULL && v[0] != '\0';
    curl_free(v);
    return has;
}

TALLY_API tally_code tally_add_url(tally_client *c, const char *url)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    if (url == NULL)
        return tc_set_error(c, TALLYE_ARGUMENT, 0, "the URL is NULL");
    if (strncmp(url, "http://", 7) != 0 && strncmp(url, "https://", 8) != 0)
        return tc_set_error(c, TALLYE_URL, 0,
                            "URL \"%.200s\" must start with http:// or "
                            "https://, as in http://127.0.0.1:8080",
                            url);
    CURLU *u = curl_url();
    if (u == NULL)
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    tally_code code = TALLYE_OK;
    if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK)
        code = tc_set_error(c, TALLYE_URL, 0,
                            "URL \"%.200s\" is malformed (expected "
                            "http://host:port)",
                            url);
    else if (!has_part(u, CURLUPART_HOST))
        code =
            tc_set_error(c, TALLYE_URL, 0, "URL \"%.200s\" has no host", url);
    else if (has_part(u, CURLUPART_QUERY) || has_part(u, CURLUPART_FRAGMENT))
        code = tc_set_error(c, TALLYE_URL, 0,
                            "URL \"%.200s\" has a query or fragment; give "
                            "the server's base URL only",
                            url);
    curl_url_cleanup(u);
    if (code != TALLYE_OK)
        return code;

    size_t len = strlen(url);
    while (len > 0 && url[len - 1] == '/')
        len--;
    char *copy = malloc(len + 1);
    char **urls = realloc(c->urls, (c->nurls + 1) * sizeof *urls);
    if (urls != NULL)
        c->urls = urls;
    if (copy == NULL || urls == NULL) {
        free(copy);
        return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
    }
    memcpy(copy, url, len);
    copy[len] = '\0';
    c->urls[c->nurls++] = copy;
    /* room in the connection cache for every connection to every server */
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS,
                      (long)c->nurls * c->max_connections + 4);
    return tc_ok(c, 0);
}

size_t tc_next_url(tally_client *c)
{
    size_t i = c->next_url;
    c->next_url = (c->next_url + 1) % (c->nurls ? c->nurls : 1);
    return i;
}

/* ------------------------------------------------------------------------
 * Options.
 */
typedef struct {
    tally_option opt;
    const char *name;
    long min, max;
    size_t offset; /* of the long in tally_client */
} long_option;

static const long_option long_options[] = {
    {TALLYOPT_TIMEOUT_MS, "TALLYOPT_TIMEOUT_MS", 0, 24L * 3600 * 1000,
     offsetof(tally_client, timeout_ms)},
    {TALLYOPT_CONNECT_TIMEOUT_MS, "TALLYOPT_CONNECT_TIMEOUT_MS", 1,
     3600L * 1000, offsetof(tally_client, connect_timeout_ms)},
    {TALLYOPT_RETRIES, "TALLYOPT_RETRIES", 0, 1000,
     offsetof(tally_client, retries)},
    {TALLYOPT_BACKOFF_MS, "TALLYOPT_BACKOFF_MS", 1, 3600L * 1000,
     offsetof(tally_client, backoff_ms)},
    {TALLYOPT_BACKOFF_MAX_MS, "TALLYOPT_BACKOFF_MAX_MS", 1, 3600L * 1000,
     offsetof(tally_client, backoff_max_ms)},
    {TALLYOPT_CHUNK_BYTES, "TALLYOPT_CHUNK_BYTES", 0, LONG_MAX,
     offsetof(tally_client, chunk_bytes)},
    {TALLYOPT_MAX_CONNECTIONS, "TALLYOPT_MAX_CONNECTIONS", 1, 1024,
     offsetof(tally_client, max_connections)},
    {TALLYOPT_MAX_RESPONSE_BYTES, "TALLYOPT_MAX_RESPONSE_BYTES", 1, LONG_MAX,
     offsetof(tally_client, max_response_bytes)},
    {TALLYOPT_VERBOSE, "TALLYOPT_VERBOSE", 0, 1,
     offsetof(tally_client, verbose)},
    {TALLYOPT_INSECURE, "TALLYOPT_INSECURE", 0, 1,
     offsetof(tally_client, insecure)},
    {TALLYOPT_SHARED_STATE, "TALLYOPT_SHARED_STATE", 0, 1,
     offsetof(tally_client, shared_state)},
};

TALLY_API tally_code tally_setopt_long(tally_client *c, tally_option opt,
                                       long value)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    for (size_t i = 0; i < sizeof long_options / sizeof *long_options; i++) {
        const long_option *o = &long_options[i];
        if (o->opt != opt)
            continue;
        if (value < o->min || value > o->max)
            return tc_set_error(c, TALLYE_ARGUMENT, 0,
                                "%s must be between %ld and %ld, not %ld",
                                o->name, o->min, o->max, value);
        *(long *)((char *)c + o->offset) = value;
        if (opt == TALLYOPT_MAX_CONNECTIONS)
            curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS,
                              (long)(c->nurls ? c->nurls : 1) * value + 4);
        return tc_ok(c, 0);
    }
    if (opt == TALLYOPT_TOKEN || opt == TALLYOPT_USER_AGENT
        || opt == TALLYOPT_CAINFO)
        return tc_set_error(c, TALLYE_ARGUMENT, 0,
                            "option %d takes a string: use tally_setopt_str",
                            (int)opt);
    return tc_set_error(c, TALLYE_ARGUMENT, 0, "unknown option %d", (int)opt);
}

static tally_code set_string(tally_client *c, char **field, const char *prefix,
                             const char *value)
{
    char *copy = NULL;
    if (value != NULL) {
        if (strpbrk(value, "\r\n") != NULL)
            return tc_set_error(c, TALLYE_ARGUMENT, 0,
                                "a header value cannot hold a line break");
        size_t n = strlen(prefix) + strlen(value) + 1;
        copy = malloc(n);
        if (copy == NULL)
            return tc_set_error(c, TALLYE_NOMEM, 0, "out of memory");
        snprintf(copy, n, "%s%s", prefix, value);
    }
    free(*field);
    *field = copy;
    return tc_ok(c, 0);
}

TALLY_API tally_code tally_setopt_str(tally_client *c, tally_option opt,
                                      const char *value)
{
    if (c == NULL)
        return TALLYE_ARGUMENT;
    switch (opt) {
    case TALLYOPT_TOKEN:
        return set_string(c, &c->token_header, "Authorization: Bearer ", value);
    case TALLYOPT_USER_AGENT: return set_string(c, &c->user_agent, "", value);
    case TALLYOPT_CAINFO: return set_string(c, &c->cainfo, "", value);
    default: break;
    }
    for (size_t i = 0; i < sizeof long_options / sizeof *long_options; i++)
        if (long_options[i].opt == opt)
            return tc_set_error(c, TALLYE_ARGUMENT, 0,
                                "%s takes a number: use tally_setopt_long",
                                long_options[i].name);
    return tc_set_error(c, TALLYE_ARGUMENT, 0, "unknown option %d", (int)opt);
}

/* ------------------------------------------------------------------------
 * Easy handles.
 */
CURL *tc_easy_get(tally_client *c)
{
    if (c->neasies > 0) {
        CURL *e = c->easies[--c->neasies];
        curl_easy_reset(e);
        return e;
    }
    return curl_easy_init();
}

void tc_easy_put(tally_client *c, CURL *e)
{
    if (c->neasies == c->easies_cap) {
        size_t cap = c->easies_cap ? c->easies_cap * 2 : 8;
        CURL **p = realloc(c->easies, cap * sizeof *p);
        if (p == NULL) {
            curl_easy_cleanup(e);
            return;
        }
        c->easies = p;
        c->easies_cap = cap;
    }
    c->easies[c->neasies++] = e;
}
