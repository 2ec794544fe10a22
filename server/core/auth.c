/*
 * auth.c - bearer tokens (see auth.h).
 *
 * A set is one block of memory: the tokens' bytes, then their offsets and
 * lengths. The server holds one set at a time behind a read-write lock;
 * a reload builds a whole new set first, so a bad file changes nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <uv.h>

#include "auth.h"
#include "errors.h"
#include "tx_file.h"

#define AUTH_MAX_FILE (1u << 20)
#define AUTH_MAX_TOKENS 4096
#define AUTH_MAX_TOKEN 512

typedef struct {
    size_t n;
    const char *tok[AUTH_MAX_TOKENS];
    size_t len[AUTH_MAX_TOKENS];
    char *text; /* the file, tokens NUL-terminated in place */
} token_set;

struct auth_tokens {
    uv_rwlock_t lock;
    token_set *set;
};

static void set_free(token_set *t)
{
    if (t == NULL)
        return;
    free(t->text);
    free(t);
}

/* RFC 6750's b64token: 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" /
 * "/" ) *"=" */
static bool b64token(const char *s, size_t n)
{
    size_t i = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
              || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_'
              || c == '~' || c == '+' || c == '/'))
            break;
    }
    if (i == 0)
        return false;
    while (i < n && s[i] == '=')
        i++;
    return i == n;
}

static bool blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r';
}

/* Reads the whole file (at most AUTH_MAX_FILE bytes) into a new string. */
static char *read_text(const char *path, size_t *len, char *msg, size_t msglen)
{
    char *text;
    int e = tx_read_file(path, AUTH_MAX_FILE, &text, len);
    if (e == EFBIG)
        return msg_fail_as(NULL, msg, msglen,
                           "the token file %s holds more than %u bytes", path,
                           AUTH_MAX_FILE);
    if (e != 0)
        return msg_fail_as(NULL, msg, msglen,
                           "cannot open the token file %s: %s", path,
                           strerror(e));
    return text;
}

static token_set *set_load(const char *path, char *msg, size_t msglen)
{
    token_set *t = calloc(1, sizeof *t);
    if (t == NULL)
        return msg_fail_as(NULL, msg, msglen, "out of memory reading %s", path);
    size_t len;
    t->text = read_text(path, &len, msg, msglen);
    if (t->text == NULL) {
        set_free(t);
        return NULL;
    }
    char *p = t->text, *end = t->text + len;
    for (unsigned line = 1; p < end; line++) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *stop = nl != NULL ? nl : end;
        char *a = p, *b = stop;
        while (a < b && blank(*a))
            a++;
        while (b > a && blank(b[-1]))
            b--;
        p = nl != NULL ? nl + 1 : end;
        if (a == b || *a == '#')
            continue;
        size_t n = (size_t)(b - a);
        if (n > AUTH_MAX_TOKEN || !b64token(a, n)) {
            snprintf(msg, msglen,
                     "%s, line %u: a token is 1 to %d of the characters "
                     "A-Z a-z 0-9 - . _ ~ + / followed by any '='",
                     path, line, AUTH_MAX_TOKEN);
            set_free(t);
            return NULL;
        }
        if (t->n == AUTH_MAX_TOKENS) {
            snprintf(msg, msglen, "%s: more than %d tokens", path,
                     AUTH_MAX_TOKENS);
            set_free(t);
            return NULL;
        }
        *b = '\0';
        t->tok[t->n] = a;
        t->len[t->n++] = n;
    }
    if (t->n == 0) {
        snprintf(msg, msglen,
                 "the token file %s holds no token (one a line; '#' starts "
                 "a comment)",
                 path);
        set_free(t);
        return NULL;
    }
    return t;
}

auth_tokens *auth_load(const char *path, char *msg, size_t msglen)
{
    token_set *t = set_load(path, msg, msglen);
    if (t == NULL)
        return NULL;
    auth_tokens *a = calloc(1, sizeof *a);
    if (a == NULL || uv_rwlock_init(&a->lock) != 0) {
        snprintf(msg, msglen, "out of memory");
        free(a);
        set_free(t);
        return NULL;
    }
    a->set = t;
    return a;
}

size_t auth_reload(auth_tokens *a, const char *path, char *msg,
                        size_t msglen)
{
    token_set *t = set_load(path, msg, msglen);
    if (t == NULL)
        return 0;
    uv_rwlock_wrlock(&a->lock);
    token_set *old = a->set;
    a->set = t;
    uv_rwlock_wrunlock(&a->lock);
    set_free(old);
    return t->n;
}

size_t auth_count(auth_tokens *a)
{
    uv_rwlock_rdlock(&a->lock);
    size_t n = a->set->n;
    uv_rwlock_rdunlock(&a->lock);
    return n;
}

/* 0 when p[0..plen) equals t[0..tlen), else non-zero; every byte of t is
 * looked at whatever p holds. */
static unsigned differs(const char *p, size_t plen, const char *t, size_t tlen)
{
    unsigned d = plen != tlen;
    for (size_t i = 0; i < tlen; i++)
        d |= (unsigned char)t[i] ^ (unsigned char)(i < plen ? p[i] : 0);
    return d;
}

/* The token of an Authorization header's Bearer credentials, trimmed as
 * auth_check() trims it (borrowed from authorization): false when there is
 * no header or it is not a Bearer one. */
static bool auth_bearer(const char *authorization, const char **token,
                        size_t *len)
{
    if (authorization == NULL)
        return false;
    const char *p = authorization;
    while (*p == ' ' || *p == '\t')
        p++;
    if (strncasecmp(p, "Bearer", 6) != 0 || (p[6] != ' ' && p[6] != '\t'))
        return false; /* another scheme, or none */
    p += 6;
    while (*p == ' ' || *p == '\t')
        p++;
    size_t n = strlen(p);
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    *token = p;
    *len = n;
    return true;
}

auth_result auth_check(auth_tokens *a, const char *authorization,
                       auth_caller *who)
{
    const char *p;
    size_t n;
    if (!auth_bearer(authorization, &p, &n))
        return AUTH_MISSING;
    if (n == 0 || n > AUTH_MAX_TOKEN)
        return AUTH_INVALID;
    /* volatile, so that no compiler stops at the first match */
    volatile unsigned match = 0;
    uv_rwlock_rdlock(&a->lock);
    const token_set *t = a->set;
    for (size_t i = 0; i < t->n; i++)
        match |= differs(p, n, t->tok[i], t->len[i]) == 0;
    uv_rwlock_rdunlock(&a->lock);
    if (!match)
        return AUTH_INVALID;
    if (who != NULL)
        *who = (auth_caller){p, n};
    return AUTH_OK;
}

void auth_free(auth_tokens *a)
{
    if (a == NULL)
        return;
    uv_rwlock_destroy(&a->lock);
    set_free(a->set);
    free(a);
}
