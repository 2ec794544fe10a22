/*
 * info.c - `tally health` and `tally info`: the KServe v2 health and
 * metadata routes of each server, for people and for scripts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

static const char health_help[] =
    "usage: tally health [options]\n"
    "\n"
    "Asks each server whether it is live (/v2/health/live) and ready to\n"
    "compute (/v2/health/ready) and prints one line per server. Meant for\n"
    "scripts and container health checks: it does not retry, and gives up\n"
    "after 5 seconds unless told otherwise.\n"
    "\n"
    "Exit codes: 0 every server is ready; 1 a server answered but is not\n"
    "ready (starting, or draining after SIGTERM); 3 a server did not answer.\n"
    "\n"
    "Options: --url URL (repeatable; default $TALLY_URL, else\n"
    "http://127.0.0.1:8080), --timeout-ms MS, --connect-timeout-ms MS,\n"
    "--retries N, --token T, --cacert FILE, --insecure, --verbose, --quiet "
    "(print nothing, just exit).\n";

static const char info_help[] =
    "usage: tally info [options]\n"
    "\n"
    "Prints each server's metadata (GET /v2: name, version, protocol\n"
    "extensions) and the cumsum model's (GET /v2/models/cumsum: inputs,\n"
    "outputs, datatypes) as indented JSON.\n"
    "\n"
    "Exit codes as for tally health: 0, 1 (an error answer), 3 (no answer).\n"
    "\n"
    "Options: --url URL (repeatable; default $TALLY_URL, else\n"
    "http://127.0.0.1:8080), --timeout-ms MS, --connect-timeout-ms MS,\n"
    "--retries N, --token T, --cacert FILE, --insecure, --verbose.\n";

/* Which of two exit codes says more is wrong. */
static int worse(int a, int b)
{
    return a > b ? a : b;
}

/* Sets defaults that suit a probe: quick, no retries. */
static void probe_defaults(cli_common *o)
{
    if (o->retries < 0)
        o->retries = 0;
    if (o->timeout_ms < 0)
        o->timeout_ms = 5000;
    if (o->connect_timeout_ms < 0)
        o->connect_timeout_ms = 5000;
}

int cmd_health(int argc, char **argv)
{
    const char *cmd = "health";
    bool quiet = false;
    cli_opt opts[] = {
        {"quiet", OPT_FLAG, &quiet, false},
        {NULL, OPT_FLAG, NULL, false},
    };
    cli_common common;
    const char *pos[1];
    int npos;
    int rc =
        cli_begin(cmd, health_help, opts, &common, argc, argv, pos, 0, &npos);
    if (rc >= 0)
        return rc;
    cli_resolve_urls(&common);
    probe_defaults(&common);
    int result = EXIT_OK;
    for (int i = 0; i < common.nurls; i++) {
        tally_client *c = cli_client(cmd, &common, i, &rc);
        if (c == NULL)
            return rc;
        char *body;
        tally_code live =
            tally_http(c, "GET", "/v2/health/live", NULL, NULL, 0, &body, NULL);
        tally_free(body);
        if (live != TALLYE_OK) {
            int code = cli_exit_code(live);
            if (code == EXIT_USAGE)
                code = EXIT_SERVER;
            result = worse(result, code);
            if (!quiet)
                printf("%s: %s: %s\n", common.urls[i],
                       code == EXIT_NETWORK ? "unreachable" : "not live",
                       tally_last_message(c));
            tally_client_free(c);
            continue;
        }
        tally_code ready = tally_http(c, "GET", "/v2/health/ready", NULL, NULL,
                                      0, &body, NULL);
        tally_free(body);
        if (ready == TALLYE_OK) {
            if (!quiet)
                printf("%s: live, ready\n", common.urls[i]);
        } else {
            int code = cli_exit_code(ready);
            result = worse(result, code == EXIT_NETWORK ? code : EXIT_SERVER);
            if (!quiet)
                printf("%s: live, not ready: %s\n", common.urls[i],
                       tally_last_message(c));
        }
        tally_client_free(c);
    }
    return result;
}

/* Prints JSON text indented by two spaces a level. Strings are copied as
 * they are; only structure outside them is re-spaced. */
static void print_json(const char *s, size_t len, int base)
{
    int depth = 0;
    bool in_string = false, escaped = false;
    for (size_t i = 0; i < len; i++) {
        char ch = s[i];
        if (in_string) {
            putchar(ch);
            if (escaped)
                escaped = false;
            else if (ch == '\\')
                escaped = true;
            else if (ch == '"')
                in_string = false;
            continue;
        }
        switch (ch) {
        case ' ':
        case '\t':
        case '\n':
        case '\r': break;
        case '"':
            in_string = true;
            putchar(ch);
            break;
        case '{':
        case '[': {
            /* an empty {} or [] stays on one line */
            size_t j = i + 1;
            while (j < len && strchr(" \t\r\n", s[j]) != NULL)
                j++;
            if (j < len && (s[j] == '}' || s[j] == ']')) {
                printf("%c%c", ch, s[j]);
                i = j;
                break;
            }
            depth++;
            printf("%c\n%*s", ch, 2 * (base + depth), "");
            break;
        }
        case '}':
        case ']':
            depth--;
            printf("\n%*s%c", 2 * (base + depth), "", ch);
            break;
        case ',': printf(",\n%*s", 2 * (base + depth), ""); break;
        case ':': printf(": "); break;
        default: putchar(ch); break;
        }
    }
    putchar('\n');
}

int cmd_info(int argc, char **argv)
{
    const char *cmd = "info";
    cli_common common;
    const char *pos[1];
    int npos;
    int rc =
        cli_begin(cmd, info_help, NULL, &common, argc, argv, pos, 0, &npos);
    if (rc >= 0)
        return rc;
    cli_resolve_urls(&common);
    probe_defaults(&common);
    static const struct {
        const char *label, *path;
    } routes[] = {
        {"server", "/v2"},
        {"model", "/v2/models/cumsum"},
    };
    int result = EXIT_OK;
    for (int i = 0; i < common.nurls; i++) {
        tally_client *c = cli_client(cmd, &common, i, &rc);
        if (c == NULL)
            return rc;
        printf("%s\n", common.urls[i]);
        for (size_t r = 0; r < sizeof routes / sizeof *routes; r++) {
            char *body;
            size_t len;
            tally_code code = tally_http(c, "GET", routes[r].path, NULL, NULL,
                                         0, &body, &len);
            if (code != TALLYE_OK) {
                result =
                    worse(result, cli_fail(cmd, code, tally_last_message(c)));
                break;
            }
            printf("  %s (GET %s):\n    ", routes[r].label, routes[r].path);
            print_json(body, len, 2);
            tally_free(body);
        }
        tally_client_free(c);
    }
    return result;
}
