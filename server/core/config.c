/*
 * config.c - parsing settings.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "config.h"
#include "scan_host.h"

enum kind { STR, UINT, SIZE, BOOL };

typedef struct {
    const char *flag, *env, *def, *help;
    enum kind kind;
    size_t offset;
} setting;

static const setting settings[] = {
#define TALLYD_SETTING_ROW(field, flag, env, kind, def, help)                  \
    {flag, env, def, help, kind, offsetof(tallyd_config, field)},
    TALLYD_SETTINGS(TALLYD_SETTING_ROW)
#undef TALLYD_SETTING_ROW
};
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

static bool set(tallyd_config *c, const setting *s, const char *v,
                const char *from, char *msg, size_t msglen)
{
    void *field = (char *)c + s->offset;
    switch (s->kind) {
    case STR: {
        char *copy = strdup(v);
        if (copy == NULL) {
            snprintf(msg, msglen, "out of memory");
            return false;
        }
        free(*(char **)field);
        *(char **)field = copy;
        return true;
    }
    case UINT: {
        char *end;
        errno = 0;
        unsigned long n = strtoul(v, &end, 10);
        if (!isdigit((unsigned char)v[0]) || *end != '\0' || errno != 0
            || n > 100000000ul) {
            snprintf(msg, msglen,
                     "%s: %s must be a non-negative integer, not "
                     "\"%s\"",
                     from, s->flag, v);
            return false;
        }
        *(unsigned *)field = (unsigned)n;
        return true;
    }
    case SIZE:
        if (!parse_size(v, (size_t *)field)) {
            snprintf(msg, msglen,
                     "%s: %s must be a size such as 256MiB, 64M "
                     "or 1000000, not \"%s\"",
                     from, s->flag, v);
            return false;
        }
        return true;
    case BOOL:
        if (!parse_bool(v, (bool *)field)) {
            snprintf(msg, msglen, "%s: %s must be true or false, not \"%s\"",
                     from, s->flag, v);
            return false;
        }
        return true;
    }
    return false;
}

/* --access-log's words: errors, all, off, and a switch's words (its
 * values when it was one: true for all, false for off). */
static bool access_mode(const char *v, tallyd_access_mode *mode)
{
    bool on;
    if (strcmp(v, "errors") == 0)
        *mode = TALLYD_ACCESS_ERRORS;
    else if (strcmp(v, "all") == 0)
        *mode = TALLYD_ACCESS_ALL;
    else if (parse_bool(v, &on))
        *mode = on ? TALLYD_ACCESS_ALL : TALLYD_ACCESS_OFF;
    else
        return false;
    return true;
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
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            c->help = true;
            continue;
        }
        if (strcmp(arg, "--version") == 0) {
            c->version = true;
            continue;
        }
        if (strcmp(arg, "--list-devices") == 0) {
            c->list_devices = true;
            continue;
        }
        if (strcmp(arg, "--warm-cache") == 0) {
            c->warm_cache = true;
            continue;
        }
        if (strncmp(arg, "--", 2) != 0) {
            snprintf(msg, msglen, "unexpected argument \"%s\" (see --help)",
                     arg);
            return false;
        }
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
        if (s == NULL) {
            snprintf(msg, msglen, "unknown option --%.*s (see --help)",
                     (int)nlen, name);
            return false;
        }
        const char *v;
        if (eq != NULL)
            v = eq + 1;
        else if (s->kind == BOOL)
            v = negated ? "false" : "true";
        else if (a + 1 < argc)
            v = argv[++a];
        else {
            snprintf(msg, msglen, "option --%s needs a value", s->flag);
            return false;
        }
        if (negated && eq != NULL) {
            snprintf(msg, msglen, "--no-%s takes no value", s->flag);
            return false;
        }
        char from[64];
        snprintf(from, sizeof from, "--%s", s->flag);
        if (!set(c, s, v, from, msg, msglen))
            return false;
    }
    if (c->workers == 0 || c->http_threads == 0 || c->queue_depth == 0
        || c->max_batch == 0) {
        snprintf(msg, msglen,
                 "workers, http-threads, queue-depth and "
                 "max-batch must be at least 1");
        return false;
    }
    if (c->max_batch > TALLYD_MAX_BATCH) {
        snprintf(msg, msglen, "max-batch is at most %d, not %u",
                 TALLYD_MAX_BATCH, c->max_batch);
        return false;
    }
    if (strcmp(c->state_fsync, "always") != 0
        && strcmp(c->state_fsync, "everysec") != 0) {
        snprintf(msg, msglen, "state-fsync must be always or everysec, not "
                              "\"%s\"",
                 c->state_fsync);
        return false;
    }
    if (c->state_store[0] != '\0' && c->state_dir[0] != '\0') {
        snprintf(msg, msglen,
                 "state-store and state-dir cannot be combined: a sequence's "
                 "state lives in one place (Redis, for many replicas; a "
                 "directory, for one)");
        return false;
    }
    if (c->state_store[0] != '\0' && c->state_store_timeout_ms == 0) {
        snprintf(msg, msglen, "state-store-timeout-ms must be at least 1");
        return false;
    }
    if (c->grpc_threads > TALLYD_GRPC_THREADS_MAX) {
        snprintf(msg, msglen, "grpc-threads is at most %u, not %u",
                 TALLYD_GRPC_THREADS_MAX, c->grpc_threads);
        return false;
    }
    if (strcmp(c->placement, "cost") != 0
        && strcmp(c->placement, "device") != 0) {
        snprintf(msg, msglen, "placement must be cost or device, not \"%s\"",
                 c->placement);
        return false;
    }
    if (c->fault_state[0] != '\0' && strcmp(c->fault_state, "enospc") != 0
        && strcmp(c->fault_state, "eio") != 0
        && strcmp(c->fault_state, "fsync") != 0) {
        snprintf(msg, msglen, "fault-state must be enospc, eio or fsync, not "
                              "\"%s\"",
                 c->fault_state);
        return false;
    }
    if (!access_mode(c->access_log, &c->access_mode)) {
        snprintf(msg, msglen,
                 "access-log must be errors, all or off, not \"%s\"",
                 c->access_log);
        return false;
    }
    char host[256];
    unsigned port;
    if (!tallyd_config_split_listen(c->listen, host, sizeof host, &port)) {
        snprintf(msg, msglen,
                 "listen must be HOST:PORT (such as "
                 "127.0.0.1:8080 or [::1]:8080), not \"%s\"",
                 c->listen);
        return false;
    }
    if (c->grpc_listen[0] != '\0'
        && !tallyd_config_split_listen(c->grpc_listen, host, sizeof host,
                                       &port)) {
        snprintf(msg, msglen,
                 "grpc-listen must be HOST:PORT (such as 127.0.0.1:8001), "
                 "or empty to turn gRPC off, not \"%s\"",
                 c->grpc_listen);
        return false;
    }
    if (c->grpc_max_streams == 0 || c->grpc_max_streams > 65536) {
        snprintf(msg, msglen, "grpc-max-streams must be 1 to 65536, not %u",
                 c->grpc_max_streams);
        return false;
    }
    if (c->shm_max_regions == 0 || c->shm_max_regions > 2048) {
        snprintf(msg, msglen, "shm-max-regions must be 1 to 2048, not %u",
                 c->shm_max_regions);
        return false;
    }
    if (c->max_sequences > 0 && c->sequence_idle_ms == 0) {
        snprintf(msg, msglen,
                 "sequence-idle-ms must be at least 1 while sequences are on "
                 "(max-sequences %u)",
                 c->max_sequences);
        return false;
    }
    if (c->max_sequences > 0 && c->sequence_max_bytes < 8) {
        snprintf(msg, msglen,
                 "sequence-max-bytes must hold one carry (8 bytes) at least "
                 "while sequences are on");
        return false;
    }
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
