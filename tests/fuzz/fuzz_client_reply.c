/*
 * fuzz_client_reply.c - libtally's reading of an answer: the header lines
 * curl hands it (Retry-After, Tensor-Dtype), the body in pieces, and the
 * verdict with its message (the server's own words from a JSON error, or
 * the first printable line of anything else).
 *
 * transfer.c is included, as h2o's tests do, to reach its callbacks.
 * Input: a status (from a list), flags (check the tensor; a fixed buffer
 * of the expected size), a dtype, the piece size, then header lines, a
 * blank line and the body.
 *
 * Properties: the message is a NUL-terminated UTF-8 sentence whatever the
 * server sent; Retry-After lands in 0..24 h or -1; a fixed buffer is
 * never written past; a success's tensor is checked for dtype and length;
 * 503 and 429 are the only answers retried.
 */
#include "../../client/lib/transfer.c"

#include "fuzzlib.h"

static const long statuses[] = {200, 201, 204, 400, 401, 403, 404, 405,
                                413, 415, 429, 500, 502, 503, 504, 302};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    tc_transfer t;
    memset(&t, 0, sizeof t);
    t.retry_after_ms = -1;
    t.status = statuses[data[0] % (sizeof statuses / sizeof statuses[0])];
    t.check_tensor = data[1] & 1;
    bool fixed = data[1] & 2;
    t.expect_dtype = (tally_dt)(data[2] % 12);
    size_t piece = 1 + data[3] % 64;
    const char *p = (const char *)data + 4, *end = (const char *)data + size;
    for (;;) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        if (e == NULL)
            e = end;
        size_t n = (size_t)(e - p);
        char line[1024];
        if (n > 0 && n + 2 < sizeof line) {
            memcpy(line, p, n);
            memcpy(line + n, "\r\n", 2);
            FUZZ_CHECK(on_header(line, 1, n + 2, &t) == n + 2,
                       "a header line not taken whole");
        }
        p = e < end ? e + 1 : end;
        if (n == 0 || p == end)
            break;
    }
    size_t body = (size_t)(end - p);
    t.expect_bytes = body;
    if (fixed) {
        t.recv_cap = body / 2;
        t.recv = malloc(t.recv_cap ? t.recv_cap : 1);
    } else {
        t.recv_cap = (size_t)1 << 20;
    }
    bool stopped = false;
    for (size_t at = 0; at < body && !stopped; at += piece) {
        size_t n = body - at < piece ? body - at : piece;
        stopped = take_body(&t, t.status, p + at, n) != n;
    }
    FUZZ_CHECK(t.recv_len <= t.recv_cap, "%zu bytes in a buffer of %zu",
               t.recv_len, t.recv_cap);
    FUZZ_CHECK(t.retry_after_ms >= -1 && t.retry_after_ms <= 86400000L,
               "Retry-After gave %ld ms", t.retry_after_ms);
    if (!stopped) {
        bool retry = judge_answer(&t, "http://fuzz:8080");
        fuzz_message("the client's message", t.msg, sizeof t.msg);
        FUZZ_CHECK(retry == (t.status == 503 || t.status == 429),
                   "status %ld %s retried", t.status, retry ? "is" : "is not");
        bool ok = t.status >= 200 && t.status <= 299;
        FUZZ_CHECK(
            (t.code == TALLYE_OK)
                == (ok
                    && (!t.check_tensor
                        || (strcmp(t.got_dtype, tally_dt_name(t.expect_dtype))
                                == 0
                            && t.recv_len == body))),
            "status %ld gave code %s", t.status, tally_code_name(t.code));
        if (!ok)
            FUZZ_CHECK(t.msg[0] != '\0', "a failure without a message");
    }
    free(t.err_body);
    free(t.grown);
    free(t.recv);
    return 0;
}
