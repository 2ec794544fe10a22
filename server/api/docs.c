/*
 * docs.c - the interactive API docs: GET /docs (server/web/docs.html,
 * built in), the Swagger UI files it loads (GET /docs/swagger-ui-bundle.js
 * and /docs/swagger-ui.css, read once at
 * start-up from --docs-dir), and GET /openapi.json (proto/openapi.json,
 * built in; proto/openapi.yaml turned into JSON by tools/openapi_json.py,
 * and a test checks that the two agree).
 *
 * Swagger UI is not in the tree: it comes from Debian's python3-flasgger
 * package, which `make deps` unpacks (tools/swagger_ui.sh; no Python is
 * needed) and `make` copies into build/share/tally/docs
 * (`make install` into PREFIX/share/tally/docs). tallyd looks for it in
 * share/tally/docs beside its own bin/, so both a built and an installed
 * daemon find theirs; without it /docs answers 404 saying how to get it.
 * Nothing is fetched from the network, at build time by tallyd or at run
 * time by the page.
 */
#define _DEFAULT_SOURCE /* readlink */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "log.h"
#include "reply.h"
#include "tx_file.h"

extern const unsigned char server_web_docs_html[];
extern const unsigned int server_web_docs_html_len;
extern const unsigned char proto_openapi_json[];
extern const unsigned int proto_openapi_json_len;

/* The files /docs/{file} serves, and their types. */
static const struct {
    const char *name, *type;
} files[API_DOCS_FILES] = {
    {"swagger-ui-bundle.js", "application/javascript; charset=utf-8"},
    {"swagger-ui.css", "text/css; charset=utf-8"},
};

/* A Swagger UI file is about 1 MiB; anything far larger is not one. */
#define DOCS_FILE_MAX (32u << 20)

/* Reads path whole into *data, *len (malloc'd). False with msg. */
static bool read_file(const char *path, char **data, size_t *len, char *msg,
                      size_t msglen)
{
    int e = tx_read_file(path, DOCS_FILE_MAX, data, len);
    if (e == EFBIG)
        return msg_fail(msg, msglen, "%.512s holds more than %u bytes", path,
                        DOCS_FILE_MAX);
    if (e != 0)
        return msg_fail(msg, msglen, "cannot read %.512s: %s", path,
                        strerror(e));
    return true;
}

/* share/tally/docs beside the directory that holds this binary, or "" when
 * /proc/self/exe cannot say. */
static void default_dir(char *dir, size_t n)
{
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    dir[0] = '\0';
    if (k <= 0)
        return;
    exe[k] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash == NULL)
        return;
    *slash = '\0'; /* .../bin */
    char path[PATH_MAX + 32], real[PATH_MAX];
    snprintf(path, sizeof path, "%s/../share/tally/docs", exe);
    snprintf(dir, n, "%s", realpath(path, real) != NULL ? real : path);
}

bool api_docs_load(api_docs *d, const char *dir, char *msg, size_t msglen)
{
    memset(d, 0, sizeof *d);
    bool chosen = dir != NULL && dir[0] != '\0';
    char where[PATH_MAX + 32];
    if (chosen)
        snprintf(where, sizeof where, "%s", dir);
    else
        default_dir(where, sizeof where);
    d->dir = strdup(where);
    if (d->dir == NULL)
        return msg_fail(msg, msglen, "out of memory");
    char why[768] = "";
    for (int i = 0; i < API_DOCS_FILES; i++) {
        char path[sizeof where + 64];
        snprintf(path, sizeof path, "%s/%s", where, files[i].name);
        if (!read_file(path, &d->data[i], &d->len[i], why, sizeof why))
            break;
    }
    if (why[0] == '\0') {
        d->loaded = true;
        log_msg("tallyd", "info", "API docs at /docs, with Swagger UI from %s",
                where);
        return true;
    }
    api_docs_free(d);
    if (chosen) { /* asked for and missing: say so before serving */
        return msg_fail(msg, msglen, "--docs-dir: %.700s", why);
    }
    d->dir = strdup(where); /* for the 404's message */
    log_msg("tallyd", "info",
            "no Swagger UI in %s, so /docs answers 404 (`make deps && make` "
            "puts it there, or pass --docs-dir): %s",
            where, why);
    return true;
}

void api_docs_free(api_docs *d)
{
    for (int i = 0; i < API_DOCS_FILES; i++) {
        free(d->data[i]);
        d->data[i] = NULL;
    }
    free(d->dir);
    d->dir = NULL;
    d->loaded = false;
}

static const api_docs *docs_of(request *r)
{
    return r->s->app->docs;
}

static bool docs_ready(request *r, const api_docs *d)
{
    if (d != NULL && d->loaded)
        return true;
    http_error(r, STATUS_NOT_FOUND,
               "the API docs need Swagger UI's files, which are not "
               "installed in %s: `make deps && make` (or `make install`) "
               "puts them there, or start tallyd with --docs-dir; the API's "
               "description is at /openapi.yaml",
               d != NULL && d->dir != NULL ? d->dir : "share/tally/docs");
    return false;
}

void api_docs_page(request *r)
{
    if (!docs_ready(r, docs_of(r)))
        return;
    http_reply_static(r, 200, "text/html; charset=utf-8", server_web_docs_html,
                      server_web_docs_html_len);
}

void api_docs_file(request *r)
{
    const api_docs *d = docs_of(r);
    const char *name = strrchr(r->path, '/') + 1; /* the route's own */
    for (int i = 0; i < API_DOCS_FILES; i++)
        if (strcmp(files[i].name, name) == 0) {
            if (!docs_ready(r, d))
                return;
            /* the files change only with a new tallyd */
            http_add_header(r, "Cache-Control", "public, max-age=3600");
            http_reply_static(r, 200, files[i].type, d->data[i], d->len[i]);
            return;
        }
    http_error(r, STATUS_NOT_FOUND,
               "no such file under /docs/: it serves swagger-ui-bundle.js "
               "and swagger-ui.css");
}

void api_openapi_json(request *r)
{
    http_reply_static(r, 200, "application/json", proto_openapi_json,
                      proto_openapi_json_len);
}
