/*
 * fuzzd.c - what the harnesses that link the daemon's code share: a
 * refusal's message as the server would send it, a JSON writer's whole
 * text, and a daemon's state.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzzd.h"
#include "reply.h"

void fuzz_daemon_start(tallyd_server *s, api_state *app, eng_engine **engine,
                       int argc, char **argv)
{
    char msg[1024];
    s->version = TALLYD_VERSION;
    FUZZ_CHECK(tallyd_config_load(&s->cfg, argc, argv, msg, sizeof msg), "%s",
               msg);
    eng_engine_options o;
    eng_engine_options_init(&o);
    o.device = "host";
    o.warmup = false;
    o.host_threads = 1;
    FUZZ_CHECK(eng_engine_open(&o, engine, msg, sizeof msg) == ENG_E_OK, "%s",
               msg);
    static const char *name = "host";
    snprintf(s->device, sizeof s->device, "host");
    metrics_init(&s->metrics, api_routes.labels, api_routes.nlabels);
    reqlog_init(&s->reqlog, &s->cfg);
    stats_init(&s->stats);
    FUZZ_CHECK(api_start(app, s, engine, &name, 1, msg, sizeof msg), "%s", msg);
}

void fuzz_refusal(const char *what, const char *msg, size_t msglen)
{
    size_t n = strnlen(msg, msglen);
    FUZZ_CHECK(n < msglen, "%s is not NUL-terminated", what);
    FUZZ_CHECK(n > 0, "%s is empty", what);
    char *body = http_error_text(msg);
    FUZZ_CHECK(body != NULL, "out of memory");
    fuzz_json(what, body, strlen(body), "error");
    free(body);
}

char *fuzz_written(json_writer *w, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *out = malloc(cap);
    for (;;) {
        if (cap - n < 1024) {
            cap *= 2;
            out = realloc(out, cap);
        }
        FUZZ_CHECK(out != NULL, "out of memory");
        size_t got = json_writer_read(w, out + n, cap - n);
        if (got == 0)
            break;
        n += got;
    }
    json_writer_free(w);
    *len = n;
    return out;
}
