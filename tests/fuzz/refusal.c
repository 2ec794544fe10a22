/*
 * refusal.c - fuzz_refusal(), for the harnesses that link the daemon: a
 * refusal's message as the server would send it.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzzlib.h"
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
