/*
 * common.c - what the `tally` command's subcommands share: option parsing,
 * clients from options, exit codes, messages and whole-file I/O (see
 * cli.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "tx_file.h"

/* ------------------------------------------------------------------------
 * Messages and exit codes.
 */
void cli_say(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tally %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

int cli_exit_code(tally_code code)
{
    switch (code) {
    case TALLYE_OK: return EXIT_OK;
    case TALLYE_ARGUMENT:
    case TALLYE_URL: return EXIT_USAGE;
    case TALLYE_CONNECT:
    case TALLYE_TIMEOUT:
    case TALLYE_NETWORK:
    case TALLYE_TLS: return EXIT_NETWORK;
    case TALLYE_IO:
    case TALLYE_FORMAT: return EXIT_FILE;
    default: return EXIT_SERVER;
    }
}

int cli_fail(const char *cmd, tally_code code, const char *message)
{
    cli_say(cmd, "%s", message && message[0] ? message : tally_strerror(code));
    const char *hint = NULL;
    switch (code) {
    case TALLYE_CONNECT:
        hint = "is tallyd running there? Start one with `make run` or "
               "`tallyd --listen HOST:PORT`, or point --url (or TALLY_URL) "
               "at one";
        break;
    case TALLYE_TIMEOUT:
        hint = "the server did not answer in time; raise --timeout-ms or "
               "try a smaller tensor";
        break;
    case TALLYE_BUSY:
        hint = "the server stayed busy (an unnumbered chunk of a sequence "
               "is not retried: it may have been added); raise --retries, "
               "or add servers with more --url options";
        break;
    case TALLYE_TOO_LARGE:
        hint = "the tensor is over the server's --max-body-bytes; lower "
               "--chunk-bytes so that it is sent in pieces";
        break;
    case TALLYE_NOT_FOUND:
        hint = "check that the URL is the server's base URL, such as "
               "http://127.0.0.1:8080";
        break;
    case TALLYE_URL: hint = "give a URL such as http://127.0.0.1:8080"; break;
    case TALLYE_UNAUTHORIZED:
        hint = "give the server's token with --token or TALLY_TOKEN";
        break;
    case TALLYE_TLS:
        hint = "name the CA that signed the server's certificate with "
               "--cacert, or (for tests only) skip the check with "
               "--insecure";
        break;
    default: break;
    }
    if (hint != NULL)
        fprintf(stderr, "  (%s)\n", hint);
    return cli_exit_code(code);
}

/* ------------------------------------------------------------------------
 * Options.
 */
void cli_common_init(cli_common *o)
{
    memset(o, 0, sizeof *o);
    o->timeout_ms = o->connect_timeout_ms = o->retries = -1;
    o->chunk_bytes = o->connections = -1;
}

static bool parse_long(const char *cmd, const char *name, const char *text,
                       bool negative_ok, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (text[0] == '\0' || *end != '\0' || errno != 0
        || (!negative_ok && v < 0)) {
        cli_say(cmd, "--%s needs %s integer, not \"%s\"", name,
                negative_ok ? "an" : "a non-negative", text);
        return false;
    }
    *out = v;
    return true;
}

static const cli_opt *find_opt(const cli_opt *opts, const char *name,
                               size_t len)
{
    for (const cli_opt *o = opts; o && o->name; o++)
        if (strlen(o->name) == len && memcmp(o->name, name, len) == 0)
            return o;
    return NULL;
}

int cli_parse(const char *cmd, const cli_opt *opts, cli_common *common,
              int argc, char **argv, int first, const char **pos, int max_pos,
              int *npos)
{
    long dummy_long;
    const char *dummy_str;
    const cli_opt common_opts[] = {
        {"url", OPT_STRING, &dummy_str, false},
        {"timeout-ms", OPT_LONG, common ? &common->timeout_ms : &dummy_long,
         false},
        {"connect-timeout-ms", OPT_LONG,
         common ? &common->connect_timeout_ms : &dummy_long, false},
        {"retries", OPT_LONG, common ? &common->retries : &dummy_long, false},
        {"chunk-bytes", OPT_LONG, common ? &common->chunk_bytes : &dummy_long,
         false},
        {"connections", OPT_LONG, common ? &common->connections : &dummy_long,
         false},
        {"token", OPT_STRING, common ? &common->token : &dummy_str, false},
        {"cacert", OPT_STRING, common ? &common->cacert : &dummy_str, false},
        {"insecure", OPT_FLAG, common ? &common->insecure : NULL, false},
        {"verbose", OPT_FLAG, common ? &common->verbose : NULL, false},
        {NULL, OPT_FLAG, NULL, false},
    };
    bool options_done = false;
    *npos = 0;
    for (int i = first; i < argc; i++) {
        const char *a = argv[i];
        if (options_done || a[0] != '-' || strcmp(a, "-") == 0) {
            if (*npos == max_pos) {
                cli_say(cmd, "unexpected argument \"%s\" (see tally %s --help)",
                        a, cmd);
                return EXIT_USAGE;
            }
            pos[(*npos)++] = a;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            options_done = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0)
            return -1;
        if (a[1] != '-') {
            cli_say(cmd,
                    "unknown option %s; options are spelled --name (see "
                    "tally %s --help)",
                    a, cmd);
            return EXIT_USAGE;
        }
        const char *name = a + 2, *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        const cli_opt *o = find_opt(opts, name, len);
        bool is_common = false;
        if (o == NULL && common != NULL) {
            o = find_opt(common_opts, name, len);
            is_common = o != NULL;
        }
        if (o == NULL) {
            cli_say(cmd, "unknown option --%.*s (see tally %s --help)",
                    (int)len, name, cmd);
            return EXIT_USAGE;
        }
        if (o->kind == OPT_FLAG) {
            if (eq != NULL) {
                cli_say(cmd, "--%s takes no value", o->name);
                return EXIT_USAGE;
            }
            if (o->value != NULL)
                *(bool *)o->value = true;
            continue;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (value == NULL) {
            if (i + 1 == argc) {
                cli_say(cmd, "--%s needs a value", o->name);
                return EXIT_USAGE;
            }
            value = argv[++i];
        }
        if (is_common && strcmp(o->name, "url") == 0) {
            if (common->nurls
                == (int)(sizeof common->urls / sizeof *common->urls)) {
                cli_say(cmd, "too many --url options");
                return EXIT_USAGE;
            }
            common->urls[common->nurls++] = value;
        } else if (o->kind == OPT_STRING) {
            *(const char **)o->value = value;
        } else if (!parse_long(cmd, o->name, value, o->negative_ok,
                               (long *)o->value)) {
            return EXIT_USAGE;
        }
    }
    return EXIT_OK;
}

int cli_begin(const char *cmd, const char *help, const cli_opt *opts,
              cli_common *common, int argc, char **argv, const char **pos,
              int max_pos, int *npos)
{
    if (common != NULL)
        cli_common_init(common);
    int rc = cli_parse(cmd, opts, common, argc, argv, 2, pos, max_pos, npos);
    if (rc < 0) {
        fputs(help, stdout);
        return EXIT_OK;
    }
    return rc == EXIT_OK ? -1 : rc;
}

void cli_resolve_urls(cli_common *o)
{
    if (o->nurls > 0)
        return;
    static char env_copy[4096];
    const char *env = getenv("TALLY_URL");
    if (env == NULL || env[0] == '\0') {
        o->urls[o->nurls++] = "http://127.0.0.1:8080";
        return;
    }
    snprintf(env_copy, sizeof env_copy, "%s", env);
    char *p = env_copy;
    while (p != NULL && o->nurls < (int)(sizeof o->urls / sizeof *o->urls)) {
        char *comma = strchr(p, ',');
        if (comma != NULL)
            *comma = '\0';
        if (p[0] != '\0')
            o->urls[o->nurls++] = p;
        p = comma ? comma + 1 : NULL;
    }
    if (o->nurls == 0)
        o->urls[o->nurls++] = "http://127.0.0.1:8080";
}

tally_client *cli_client(const char *cmd, const cli_common *o, int url_index,
                         int *exit_code)
{
    tally_client *c = tally_client_new();
    if (c == NULL) {
        cli_say(cmd, "out of memory");
        *exit_code = EXIT_SERVER;
        return NULL;
    }
    tally_code code = TALLYE_OK;
    for (int i = 0; i < o->nurls && code == TALLYE_OK; i++)
        if (url_index < 0 || url_index == i)
            code = tally_add_url(c, o->urls[i]);
    struct {
        tally_option opt;
        long value;
    } longs[] = {
        {TALLYOPT_TIMEOUT_MS, o->timeout_ms},
        {TALLYOPT_CONNECT_TIMEOUT_MS, o->connect_timeout_ms},
        {TALLYOPT_RETRIES, o->retries},
        {TALLYOPT_CHUNK_BYTES, o->chunk_bytes},
        {TALLYOPT_MAX_CONNECTIONS, o->connections},
        {TALLYOPT_VERBOSE, o->verbose ? 1 : -1},
    };
    for (size_t i = 0; i < sizeof longs / sizeof *longs && code == TALLYE_OK;
         i++)
        if (longs[i].value >= 0)
            code = tally_setopt_long(c, longs[i].opt, longs[i].value);
    /* TALLY_TOKEN keeps the token out of the process list */
    const char *token = o->token != NULL ? o->token : getenv("TALLY_TOKEN");
    if (code == TALLYE_OK && token != NULL && token[0] != '\0')
        code = tally_setopt_str(c, TALLYOPT_TOKEN, token);
    if (code == TALLYE_OK && o->cacert != NULL)
        code = tally_setopt_str(c, TALLYOPT_CAINFO, o->cacert);
    if (code == TALLYE_OK && o->insecure)
        code = tally_setopt_long(c, TALLYOPT_INSECURE, 1);
    if (code == TALLYE_OK)
        code = tally_setopt_str(c, TALLYOPT_USER_AGENT,
                                "tally-cli/" TALLY_VERSION);
    if (code != TALLYE_OK) {
        *exit_code = cli_fail(cmd, code, tally_last_message(c));
        tally_client_free(c);
        return NULL;
    }
    return c;
}

/* ------------------------------------------------------------------------
 * Shapes and files.
 */
bool cli_parse_shape(const char *cmd, const char *text, int *rank,
                     int64_t *shape)
{
    return cli_parse_sizes(cmd, "--shape", text, rank, shape);
}

bool cli_parse_sizes(const char *cmd, const char *opt, const char *text,
                     int *rank, int64_t *shape)
{
    int r = 0;
    const char *p = text;
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno != 0 || v < 0 || (*end != ',' && *end != '\0')
            || *p == '+' || *p == ' ') {
            cli_say(cmd,
                    "%s needs numbers separated by commas, such as 3,4, "
                    "not \"%s\"",
                    opt, text);
            return false;
        }
        if (r == TALLY_MAX_RANK) {
            cli_say(cmd, "%s has more than %d numbers", opt, TALLY_MAX_RANK);
            return false;
        }
        shape[r++] = v;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    *rank = r;
    return true;
}

bool cli_read_file(const char *cmd, const char *path, char **data, size_t *len)
{
    bool std = strcmp(path, "-") == 0;
    int err = std ? tx_read_fd(0, SIZE_MAX, data, len)
                  : tx_read_file(path, SIZE_MAX, data, len);
    if (err != 0)
        cli_say(cmd, "cannot read %s: %s", std ? "standard input" : path,
                strerror(err));
    return err == 0;
}

bool cli_write_file(const char *cmd, const char *path, const void *data,
                    size_t len)
{
    int err = tx_write_file(path, NULL, 0, data, len);
    if (err != 0)
        cli_say(cmd, "cannot write %s: %s",
                strcmp(path, "-") == 0 ? "standard output" : path,
                strerror(err));
    return err == 0;
}
