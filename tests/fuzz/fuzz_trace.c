/*
 * fuzz_trace.c - the W3C traceparent parser (core/trace.h).
 *
 * Input: a header value. Properties: a value that parses has the form the
 * parser claims (it is written back, with the caller's span id, as the
 * same 55 bytes, for version 00 and for the first 55 bytes of a later
 * version); one that does not parse leaves the context as it was; a
 * request's context never has an all-zero trace or span id, and it
 * continues the caller's trace exactly when the value parses.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzzlib.h"
#include "trace.h"

static bool zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i])
            return false;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *v = (const char *)data;
    trace_ctx t, before;
    memset(&t, 0xAB, sizeof t);
    before = t;
    bool ok = trace_parse(v, size, &t);
    if (!ok) {
        FUZZ_CHECK(memcmp(&t, &before, sizeof t) == 0,
                   "a refused value changed the context");
    } else {
        FUZZ_CHECK(size >= TRACE_PARENT_LEN, "parsed %zu bytes", size);
        memcpy(t.span_id, t.parent_id, sizeof t.span_id);
        char out[TRACE_PARENT_LEN + 1];
        trace_format(&t, out);
        FUZZ_CHECK(memcmp(out + 2, v + 2, TRACE_PARENT_LEN - 2) == 0,
                   "%.55s parsed, but writes back as %s", v, out);
        FUZZ_CHECK(!zero(t.trace_id, 16) && !zero(t.parent_id, 8),
                   "an all-zero id parsed");
    }
    trace_ctx r;
    trace_begin(&r, v, size, NULL);
    FUZZ_CHECK(r.continued == ok, "continued %d, parsed %d", r.continued, ok);
    FUZZ_CHECK(!zero(r.trace_id, 16) && !zero(r.span_id, 8),
               "a request got an all-zero id");
    if (ok)
        FUZZ_CHECK(memcmp(r.trace_id, t.trace_id, 16) == 0
                       && memcmp(r.parent_id, t.parent_id, 8) == 0,
                   "the caller's trace was not continued");
    return 0;
}
