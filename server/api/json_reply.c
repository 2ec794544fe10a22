/*
 * json_reply.c - answering with a JSON tensor: rendered at once when small,
 * so that it goes out with a Content-Length; rendered at once by several
 * threads when large; streamed as the transport asks for it when huge, so
 * that no copy of the whole text is made.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api.h"
#include "reply.h"

/* JSON tensors up to this many elements are rendered into one buffer;
 * larger ones are streamed. */
#define JSON_INLINE_MAX 4096
/* From here to JSON_PARALLEL_MAX elements the text is rendered at once by
 * one thread per core (up to 4): on two cores a 1M-element float32
 * KServe round trip went from 166 to 135 ms (BENCHMARKS.md); beyond, the
 * text could take gigabytes, so it is streamed. */
#define JSON_PARALLEL_MIN 65536
#define JSON_PARALLEL_MAX (4u << 20)

static size_t writer_read(void *state, char *buf, size_t max)
{
    return json_writer_read(state, buf, max);
}

static void writer_free(void *state)
{
    json_writer_free(state);
    free(state);
}

void api_reply_json(request *r, int status, json_writer *w)
{
    if (w->count <= JSON_INLINE_MAX) {
        /* at most 42 bytes an element, and the text around them */
        size_t cap = w->prefix_len + w->suffix_len + (size_t)w->count * 42 + 16;
        char *buf = malloc(cap);
        if (buf != NULL) {
            size_t n = json_writer_read(w, buf, cap);
            json_writer_free(w);
            http_reply_buffer(r, status, "application/json", buf, n);
            return;
        }
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores > 1 && w->count >= JSON_PARALLEL_MIN
        && w->count <= JSON_PARALLEL_MAX) {
        char *buf;
        size_t n;
        if (json_writer_render(w, cores > 4 ? 4 : (unsigned)cores, &buf, &n)) {
            http_reply_buffer(r, status, "application/json", buf, n);
            return;
        }
    }
    json_writer *state = malloc(sizeof *state);
    if (state == NULL) {
        json_writer_free(w);
        http_error(r, ENG_E_NOMEM, "out of memory writing the response");
        return;
    }
    *state = *w;
    memset(w, 0, sizeof *w);
    http_reply_stream(r, status, "application/json", writer_read, state,
                      writer_free);
}
