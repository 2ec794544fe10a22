/*
 * fuzz_kserve.c - KServe v2 inference requests, JSON and binary (the
 * binary tensor data extension).
 *
 * Input: the first byte chooses the form; for the binary form the next
 * two give Inference-Header-Content-Length (little-endian). The rest is
 * the body.
 *
 * Properties: a refusal comes with a message the server can send; a
 * request that parses gets an answer that is valid JSON (and, for a
 * binary answer, a header that is JSON announcing the tensor's bytes);
 * the JSON answer's output, sent back as an input, parses to the same
 * dtype, shape and bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "fuzzd.h"
#include "kserve_json.h"

#define MAX_BYTES (1u << 20)

/* The answer's output "y", sent back as the input "x". */
static void round_trip(const kserve_request *a, const char *answer, size_t n)
{
    static const char head[] = "{\"name\":\"y\"";
    const char *y = strstr(answer, head);
    FUZZ_CHECK(y != NULL && n >= 2 && memcmp(answer + n - 2, "]}", 2) == 0,
               "the answer has no output y: %.*s", (int)(n > 300 ? 300 : n),
               answer);
    size_t ylen = (size_t)(answer + n - 2 - y);
    char *req = malloc(ylen + 16);
    FUZZ_CHECK(req != NULL, "out of memory");
    memcpy(req, "{\"inputs\":[", 11);
    memcpy(req + 11, y, ylen);
    req[11 + 9] = 'x'; /* {"name":"y" -> "x" */
    memcpy(req + 11 + ylen, "]}", 2);
    size_t rlen = 11 + ylen + 2;
    uint8_t *body = eng_buffer_alloc(rlen ? rlen : 1);
    FUZZ_CHECK(body != NULL, "out of memory");
    memcpy(body, req, rlen);
    kserve_request b;
    char msg[512];
    eng_err e =
        kserve_parse(body, rlen, SIZE_MAX, MAX_BYTES, &b, msg, sizeof msg);
    FUZZ_CHECK(e == ENG_E_OK,
               "the answer's output does not parse as an input: "
               "%s: %.*s",
               msg, (int)(rlen > 300 ? 300 : rlen), req);
    FUZZ_CHECK(b.desc.dtype == a->desc.dtype && b.desc.rank == a->desc.rank
                   && memcmp(b.desc.shape, a->desc.shape,
                             sizeof a->desc.shape[0] * (size_t)a->desc.rank)
                          == 0
                   && b.bytes == a->bytes
                   && fuzz_same_values(a->desc.dtype, a->data, b.data,
                                       a->bytes / tx_dtype_size(a->desc.dtype)),
               "the tensor changed on its way through text: %.*s",
               (int)(rlen > 300 ? 300 : rlen), req);
    kserve_request_free(&b);
    eng_buffer_free(body);
    free(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    bool binary = data[0] & 1;
    size_t hlen = binary ? (size_t)(data[1] | data[2] << 8) : SIZE_MAX;
    data += 3;
    size -= 3;
    uint8_t *body = eng_buffer_alloc(size ? size : 1);
    FUZZ_CHECK(body != NULL, "out of memory");
    memcpy(body, data, size);
    kserve_request r;
    char msg[512];
    eng_err e = kserve_parse(body, size, hlen, MAX_BYTES, &r, msg, sizeof msg);
    if (e != ENG_E_OK) {
        fuzz_refusal("kserve_parse's message", msg, sizeof msg);
        eng_buffer_free(body);
        return 0;
    }
    if (r.y_shm.set) { /* y goes to a region: the answer names no data */
        size_t n;
        char *a = kserve_shm_output_json(&r, &n);
        FUZZ_CHECK(a != NULL, "out of memory");
        fuzz_json("the shared-memory answer", a, n, "model_name");
        FUZZ_CHECK(strstr(a, "\"data\"") == NULL, "data in %.*s", (int)n, a);
        free(a);
    }
    if (r.x_shm.set) { /* x's bytes are in a region (fuzz_shm finds them) */
        FUZZ_CHECK(r.data == NULL, "data beside a region");
        kserve_request_free(&r);
        eng_buffer_free(body);
        return 0;
    }
    FUZZ_CHECK(r.data != NULL || r.bytes == 0, "no data for %zu bytes",
               r.bytes);
    if (r.binary_output) {
        size_t n;
        char *h = kserve_binary_header(&r, &n);
        FUZZ_CHECK(h != NULL, "out of memory");
        fuzz_json("the binary answer's header", h, n, "model_name");
        char want[64];
        snprintf(want, sizeof want, "\"binary_data_size\":%zu}", r.bytes);
        FUZZ_CHECK(strstr(h, want) != NULL,
                   "the header does not announce %zu "
                   "bytes: %.*s",
                   r.bytes, (int)n, h);
        free(h);
    }
    json_writer w;
    FUZZ_CHECK(kserve_json_writer(&w, &r, r.data), "out of memory");
    size_t n;
    char *answer = fuzz_written(&w, &n);
    fuzz_json("the JSON answer", answer, n, "model_name");
    round_trip(&r, answer, n);
    free(answer);
    kserve_request_free(&r);
    eng_buffer_free(body);
    return 0;
}
