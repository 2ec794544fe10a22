/*
 * fuzzd.c - what the harnesses that link the daemon's code share: a
 * refusal's message as the server would send it, and a JSON writer's
 * whole text.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzzd.h"
#include "reply.h"

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
