/*
 * fuzz_native.c - the native JSON body of POST /v1/cumsum, and DirectML's
 * operator description in JSON, which the same route takes.
 *
 * Properties: a refusal comes with a UTF-8 message; a tensor that parses
 * is written back as valid JSON (the answer's own writer), which parses
 * again to the same dtype, shape and bytes.
 */
#include <stdlib.h>
#include <string.h>

#include "buffer.h"
#include "dml.h"
#include "fuzzd.h"
#include "native.h"

#define MAX_BYTES (1u << 20)

static void dml(const char *text, size_t len)
{
    dml_request q;
    char msg[512];
    if (dml_parse(text, len, MAX_BYTES, true, &q, msg, sizeof msg)
        != ENG_E_OK) {
        fuzz_refusal("dml_parse's message", msg, sizeof msg);
        return;
    }
    char *out = NULL;
    size_t olen = 0;
    FUZZ_CHECK(dml_append_output(&out, &olen, &q), "out of memory");
    fuzz_json("the echoed OutputTensor", out, olen, NULL);
    free(out);
    /* the answer, written over an output buffer of the size promised */
    size_t bytes = (size_t)q.out.span * tx_dtype_size(q.out.dtype);
    void *buf = calloc(1, bytes ? bytes : 1);
    json_writer w;
    FUZZ_CHECK(buf != NULL && dml_json_writer(&w, &q, buf), "out of memory");
    size_t n;
    char *answer = fuzz_written(&w, &n);
    fuzz_json("the DirectML answer", answer, n, NULL);
    free(answer);
    free(buf);
    eng_buffer_free(q.data);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *text = (const char *)data;
    native_request a, b;
    char msg[512];
    eng_err e = native_parse_json(text, size, MAX_BYTES, &a, msg, sizeof msg);
    if (e != ENG_E_OK) {
        fuzz_refusal("native_parse_json's message", msg, sizeof msg);
        if (a.dml)
            dml(text, size);
        return 0;
    }
    json_writer w;
    FUZZ_CHECK(native_json_writer(&w, &a.desc, a.data), "out of memory");
    size_t n;
    char *again = fuzz_written(&w, &n);
    fuzz_json("the written tensor", again, n, "dtype");
    e = native_parse_json(again, n, MAX_BYTES, &b, msg, sizeof msg);
    FUZZ_CHECK(e == ENG_E_OK, "the written tensor does not parse: %s: %.*s",
               msg, (int)(n > 300 ? 300 : n), again);
    FUZZ_CHECK(b.desc.dtype == a.desc.dtype && b.desc.rank == a.desc.rank
                   && memcmp(b.desc.shape, a.desc.shape,
                             sizeof a.desc.shape[0] * (size_t)a.desc.rank)
                          == 0
                   && b.bytes == a.bytes
                   && fuzz_same_values(a.desc.dtype, a.data, b.data,
                                       a.bytes / tx_dtype_size(a.desc.dtype)),
               "the tensor changed on its way through text: %.*s",
               (int)(n > 300 ? 300 : n), again);
    free(again);
    eng_buffer_free(a.data);
    eng_buffer_free(b.data);
    return 0;
}
