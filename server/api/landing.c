/*
 * landing.c - GET /: the landing page for browsers (server/web/index.html,
 * built into the binary), or a JSON index of the service for a client
 * that asks for JSON; and GET /openapi.yaml, the API's description
 * (proto/openapi.yaml, built in too; docs.c serves its JSON form). Both files are compiled in by the
 * Makefile (xxd -i into build/gen/web.c), so the daemon needs no files at
 * run time and no network: the page loads nothing from elsewhere.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "reply.h"

extern const unsigned char server_web_index_html[];
extern const unsigned int server_web_index_html_len;
extern const unsigned char proto_openapi_yaml[];
extern const unsigned int proto_openapi_yaml_len;

/* Whether the Accept header prefers JSON to HTML: it names
 * application/json and not text/html (a browser names text/html). */
static bool wants_json(request *r)
{
    const char *a = http_header(r, "Accept");
    return a != NULL && strstr(a, "application/json") != NULL
           && strstr(a, "text/html") == NULL;
}

static void reply_copy(request *r, const char *type, const unsigned char *p,
                       size_t n)
{
    char *b = malloc(n ? n : 1);
    if (b == NULL) {
        http_error(r, STATUS_NOMEM, "out of memory");
        return;
    }
    memcpy(b, p, n);
    http_reply_buffer(r, 200, type, b, n);
}

void api_landing(request *r)
{
    http_add_header(r, "Vary", "Accept");
    if (!wants_json(r)) {
        http_reply_static(r, 200, "text/html; charset=utf-8",
                          server_web_index_html, server_web_index_html_len);
        return;
    }
    /* the version only where /v2, which says it too, needs no token: the
     * page is as open as the health routes */
    bool tokens =
        r->s->cfg.auth_token_file != NULL && r->s->cfg.auth_token_file[0];
    char text[1024];
    int n = snprintf(
        text, sizeof text,
        "{\"name\":\"tally\",%s%s%s\"description\":\"the "
        "cumulative sum of a tensor along an axis, as a service\","
        "\"links\":{\"docs\":\"/docs\",\"openapi\":\"/openapi.yaml\","
        "\"openapi_json\":\"/openapi.json\",\"metrics\":\"/metrics\","
        "\"server_metadata\":\"/v2\",\"live\":\"/v2/health/live\","
        "\"ready\":\"/v2/health/ready\",\"model\":\"/v2/models/cumsum\","
        "\"statistics\":\"/v2/models/cumsum/stats\","
        "\"infer\":\"/v2/models/cumsum/infer\",\"native\":\"/v1/cumsum\"}}",
        tokens ? "" : "\"version\":\"", tokens ? "" : r->s->version,
        tokens ? "" : "\",");
    reply_copy(r, "application/json", (const unsigned char *)text,
               (size_t)n);
}

void api_openapi(request *r)
{
    http_reply_static(r, 200, "application/yaml", proto_openapi_yaml,
                      proto_openapi_yaml_len);
}
