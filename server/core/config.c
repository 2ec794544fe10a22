/*
 * config.c - parsing settings.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config.h"
#include "errors.h"
#include "scan_host.h"

enum kind { STR, UINT, SIZE, BOOL, ENUM };

typedef struct {
    const char *flag, *env, *def, *help;
    enum kind kind;
    unsigned lo, hi;   /* UINT's */
    const char *words; /* ENUM's */
    size_t offset;
} setting;

/* config.h's kinds, as a setting's fields */
#define KIND_STR .kind = STR
#define KIND_UINT .kind = UINT, .lo = 0, .hi = TALLYD_UINT_MAX
#define KIND_RANGE(l, h) .kind = UINT, .lo = (l), .hi = (h)
#define KIND_SIZE .kind = SIZE
#define KIND_BOOL .kind = BOOL
#define KIND_ENUM(w) .kind = ENUM, .words = (w)

static const setting settings[] = {
#define TALLYD_SETTING_ROW(field, flag_, env_, kind, def_, help_)              \
    {.flag = flag_,                                                           \
     .env = env_,                                                             \
     .def = def_,                                                             \
     .help = help_,                                                           \
     KIND_##kind,                                                             \
     .offset = offsetof(tallyd_config, field)},
    TALLYD_SETTINGS(TALLYD_SETTING_ROW)
#undef TALLYD_SETTING_ROW
};
/* an ENUM's field is one of config.h's enums, written as an unsigned */
_Static_assert(sizeof(tallyd_placement) == sizeof(unsigned),
               "an enum setting is stored as an unsigned");
#define NSETTINGS (sizeof settings / sizeof settings[0])

/* "256MiB", "64M", "1000000": bytes. */
static bool parse_size(const char *v, size_t *out)
{
    char *end;
    errno = 0;
    if (!isdigit((unsigned char)v[0]))
        return false;
    unsigned long long n = strtoull(v, &end, 10);
    if (errno != 0)
        return false;
    unsigned long long mul = 1;
    if (*end != '\0') {
        if (strcasecmp(end, "k") == 0 || strcasecmp(end, "kib") == 0
            || strcasecmp(end, "kb") == 0)
            mul = 1ull << 10;
        else if (strcasecmp(end, "m") == 0 || strcasecmp(end, "mib") == 0
                 || strcasecmp(end, "mb") == 0)
            mul = 1ull << 20;
        else if (strcasecmp(end, "g") == 0 || strcasecmp(end, "gib") == 0
                 || strcasecmp(end, "gb") == 0)
            mul = 1ull << 30;
        else
            return false;
    }
    if (n > SIZE_MAX / mul)
        return false;
    *out = (size_t)(n * mul);
    return true;
}

/* A switch's words: true, 1, yes, on; false, 0, no, off. */
static bool parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "1", "yes", "on"},
                             *const no[] = {"false", "0", "no", "off"};
    for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++)
        if (strcmp(v, yes[i]) == 0 || strcmp(v, no[i]) == 0) {
            *out = strcmp(v, yes[i]) == 0;
            return true;
        }
    return false;
}

/* One of an ENUM's words ("a|b|x=a"): its text, and for an alias the
 * word it stands for (to NULL: none). */
typedef struct {
    const char *w, *to;
    size_t n, ton;
} enum_word;

/* The word at *at, which moves past it; false after the last. */
static bool next_word(const char **at, enum_word *x)
{
    if (*at == NULL)
        return false;
    const char *w = *at, *end = strchr(w, '|');
    size_t len = end != NULL ? (size_t)(end - w) : strlen(w);
    const char *eq = memchr(w, '=', len);
    x->w = w;
    x->n = eq != NULL ? (size_t)(eq - w) : len;
    x->to = eq != NULL ? eq + 1 : NULL;
    x->ton = eq != NULL ? len - x->n - 1 : 0;
    *at = end != NULL ? end + 1 : NULL;
    return true;
}

/* The position of v[0..vn) among the words that are not aliases. */
static bool word_pos(const char *words, const char *v, size_t vn,
                     unsigned *out)
{
    unsigned pos = 0;
    enum_word x;
    for (const char *at = words; next_word(&at, &x);) {
        if (x.to != NULL)
            continue;
        if (x.n == vn && memcmp(x.w, v, vn) == 0) {
            *out = pos;
            return true;
        }
        pos++;
    }
    return false;
}

/* An ENUM's value for the word v: true with *out. */
static bool enum_value(const char *words, const char *v, unsigned *out)
{
    size_t vn = strlen(v);
    enum_word x;
    for (const char *at = words; next_word(&at, &x);)
        if (x.to != NULL && x.n == vn && memcmp(x.w, v, vn) == 0)
            return word_pos(words, x.to, x.ton, out);
    return word_pos(words, v, vn, out);
}

/* An ENUM's words for a message, "a, b or c": no alias; the empty word
 * as "empty". */
static void enum_words(const char *words, char *out, size_t len)
{
    size_t count = 0, k = 0, at = 0;
    enum_word x;
    for (const char *p = words; next_word(&p, &x);)
        count += x.to == NULL;
    out[0] = '\0';
    for (const char *p = words; next_word(&p, &x) && at < len;) {
        if (x.to != NULL)
            continue;
        k++;
        at += (size_t)snprintf(out + at, len - at, "%s%.*s",
                               k == 1 ? "" : k == count ? " or " : ", ",
                               x.n ? (int)x.n : 5, x.n ? x.w : "empty");
    }
}

static bool set(tallyd_config *c, const setting *s, const char *v,
                const char *from, char *msg, size_t msglen)
{
    void *field = (char *)c + s->offset;
    switch (s->kind) {
    case STR: {
        char *copy = strdup(v);
        if (copy == NULL)
            return msg_fail(msg, msglen, "out of memory");
        free(*(char **)field);
        *(char **)field = copy;
        return true;
    }
    case UINT: {
        char *end;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        if (!isdigit((unsigned char)v[0]) || *end != '\0' || errno != 0
            || n < s->lo || n > s->hi) {
            if (s->hi == TALLYD_UINT_MAX)
                snprintf(msg, msglen,
                         "%s: %s must be an integer, at least %u, not \"%s\"",
                         from, s->flag, s->lo, v);
            else
                snprintf(msg, msglen,
                         "%s: %s must be an integer from %u to %u, not \"%s\"",
                         from, s->flag, s->lo, s->hi, v);
            return false;
        }
        *(unsigned *)field = (unsigned)n;
        return true;
    }
    case ENUM:
        if (!enum_value(s->words, v, (unsigned *)field)) {
            char words[200];
            enum_words(s->words, words, sizeof words);
            return msg_fail(msg, msglen, "%s: %s must be %s, not \"%s\"", from,
                            s->flag, words, v);
        }
        return true;
    case SIZE:
        if (!parse_size(v, (size_t *)field))
            return msg_fail(msg, msglen,
                            "%s: %s must be a size such as 256MiB, 64M "
                            "or 1000000, not \"%s\"",
                            from, s->flag, v);
        return true;
    case BOOL:
        if (!parse_bool(v, (bool *)field))
            return msg_fail(msg, msglen,
                            "%s: %s must be true or false, not \"%s\"", from,
                            s->flag, v);
        return true;
    }
    return false;
}

bool tallyd_config_load(tallyd_config *c, int argc, char **argv, char *msg,
                        size_t msglen)
{
    memset(c, 0, sizeof *c);
    for (size_t i = 0; i < NSETTINGS; i++)
        if (!set(c, &settings[i], settings[i].def, "default", msg, msglen))
            return false;
    for (size_t i = 0; i < NSETTINGS; i++) {
        const char *v = getenv(settings[i].env);
        if (v != NULL && !set(c, &settings[i], v, settings[i].env, msg, msglen))
            return false;
    }
    /* the flags that ask for something else than serving */
    static const char *const asks[] = {"-h", "--help", "--version",
                                       "--list-devices", "--warm-cache"};
    bool *const asked[] = {&c->help, &c->help, &c->version, &c->list_devices,
                           &c->warm_cache};
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        size_t k = 0, n = sizeof asks / sizeof asks[0];
        while (k < n && strcmp(arg, asks[k]) != 0)
            k++;
        if (k < n) {
            *asked[k] = true;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0)
            return msg_fail(msg, msglen,
                            "unexpected argument \"%s\" (see --help)", arg);
        const char *name = arg + 2, *eq = strchr(name, '=');
        size_t nlen = eq != NULL ? (size_t)(eq - name) : strlen(name);
        const setting *s = NULL;
        bool negated = false;
        for (size_t i = 0; i < NSETTINGS && s == NULL; i++) {
            if (strlen(settings[i].flag) == nlen
                && strncmp(settings[i].flag, name, nlen) == 0)
                s = &settings[i];
            else if (settings[i].kind == BOOL && nlen > 3
                     && strncmp(name, "no-", 3) == 0
                     && strlen(settings[i].flag) == nlen - 3
                     && strncmp(settings[i].flag, name + 3, nlen - 3) == 0) {
                s = &settings[i];
                negated = true;
            }
        }
        if (s == NULL)
            return msg_fail(msg, msglen, "unknown option --%.*s (see --help)",
                            (int)nlen, name);
        const char *v;
        if (eq != NULL)
            v = eq + 1;
        else if (s->kind == BOOL)
            v = negated ? "false" : "true";
        else if (a + 1 < argc)
            v = argv[++a];
        else {
            return msg_fail(msg, msglen, "option --%s needs a value", s->flag);
        }
        if (negated && eq != NULL)
            return msg_fail(msg, msglen, "--no-%s takes no value", s->flag);
        char from[64];
        snprintf(from, sizeof from, "--%s", s->flag);
        if (!set(c, s, v, from, msg, msglen))
            return false;
    }
    if (c->state_store[0] != '\0' && c->state_dir[0] != '\0')
        return msg_fail(
            msg, msglen,
            "state-store and state-dir cannot be combined: a sequence's "
            "state lives in one place (Redis, for many replicas; a "
            "directory, for one)");
    if (c->state_store[0] != '\0' && c->state_store_timeout_ms == 0)
        return msg_fail(msg, msglen,
                        "state-store-timeout-ms must be at least 1");
    char host[256];
    unsigned port;
    if (!tallyd_config_split_listen(c->listen, host, sizeof host, &port))
        return msg_fail(msg, msglen,
                        "listen must be HOST:PORT (such as "
                        "127.0.0.1:8080 or [::1]:8080), not \"%s\"",
                        c->listen);
    if (c->grpc_listen[0] != '\0'
        && !tallyd_config_split_listen(c->grpc_listen, host, sizeof host,
                                       &port))
        return msg_fail(
            msg, msglen,
            "grpc-listen must be HOST:PORT (such as 127.0.0.1:8001), "
            "or empty to turn gRPC off, not \"%s\"",
            c->grpc_listen);
    if (c->max_sequences > 0 && c->sequence_idle_ms == 0)
        return msg_fail(
            msg, msglen,
            "sequence-idle-ms must be at least 1 while sequences are on "
            "(max-sequences %u)",
            c->max_sequences);
    if (c->max_sequences > 0 && c->sequence_max_bytes < 8)
        return msg_fail(
            msg, msglen,
            "sequence-max-bytes must hold one carry (8 bytes) at least "
            "while sequences are on");
    return true;
}

void tallyd_config_free(tallyd_config *c)
{
    for (size_t i = 0; i < NSETTINGS; i++)
        if (settings[i].kind == STR) {
            char **field = (char **)((char *)c + settings[i].offset);
            free(*field);
            *field = NULL;
        }
}

bool tallyd_config_split_listen(const char *listen, char *host, size_t hostlen,
                                unsigned *port)
{
    const char *colon;
    const char *h = listen;
    size_t hl;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (close == NULL || close[1] != ':')
            return false;
        h = listen + 1;
        hl = (size_t)(close - h);
        colon = close + 1;
    } else {
        colon = strrchr(listen, ':');
        if (colon == NULL)
            return false;
        hl = (size_t)(colon - listen);
    }
    if (hl == 0 || hl >= hostlen)
        return false;
    char *end;
    errno = 0;
    unsigned long p = strtoul(colon + 1, &end, 10);
    if (!isdigit((unsigned char)colon[1]) || *end != '\0' || errno != 0
        || p > 65535)
        return false;
    memcpy(host, h, hl);
    host[hl] = '\0';
    *port = (unsigned)p;
    return true;
}

void tallyd_config_usage(FILE *f, const char *prog)
{
    fprintf(
        f,
        "usage: %s [options]\n\n"
        "tallyd serves the cumulative sum of tensors over HTTP: the native\n"
        "API (POST /v1/cumsum: JSON, .npy, raw bytes) and KServe v2\n"
        "(model \"cumsum\"). Every option can also be set by environment\n"
        "variable; a flag wins.\n\n",
        prog);
    for (size_t i = 0; i < NSETTINGS; i++) {
        const setting *s = &settings[i];
        char left[64];
        snprintf(left, sizeof left, "--%s%s", s->flag,
                 s->kind == BOOL ? "[=BOOL]" : "=VALUE");
        fprintf(f, "  %-26s %s\n  %-26s [env %s, default %s]\n", left, s->help,
                "", s->env, s->def);
    }
    fprintf(f, "  %-26s %s\n", "--list-devices",
            "print the OpenCL devices and exit");
    fprintf(f, "  %-26s %s\n  %-26s %s\n", "--warm-cache",
            "compile every kernel for the device and layout into the OpenCL",
            "", "compiler's cache (POCL_CACHE_DIR for PoCL) and exit");
    fprintf(f, "  %-26s %s\n  %-26s %s\n", "--version",
            "print the version and exit", "--help", "print this and exit");
}

unsigned tallyd_config_host_threads(const tallyd_config *c)
{
    unsigned cores = eng_host_cores();
    return cores > c->workers ? cores / c->workers : 1;
}
