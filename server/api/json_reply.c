/*
 * json_reply.c - answering with a JSON tensor: rendered at once, so that it
 * goes out with a Content-Length (by several threads when large), or
 * streamed as the transport asks for it when huge, so that no copy of the
 * whole text is made.
 */
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "fanout.h"
#include "reply.h"

/* From here to JSON_PARALLEL_MAX elements the text is rendered at once in
 * one part per core (fanout.h), which shortens a large KServe round trip
 * on two cores (BENCHMARKS.md has the figures). Smaller answers are
 * rendered at once by this thread; beyond the maximum, the text could take
 * gigabytes, so it is streamed. */
#define JSON_PARALLEL_MIN 65536
#define JSON_PARALLEL_MAX (4u << 20)

_Static_assert(JSON_MAX_PIECES <= HTTP_MAX_PIECES,
               "a rendered text's pieces fit a reply");

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
    if (w->count <= JSON_PARALLEL_MAX) {
        unsigned parts = w->count >= JSON_PARALLEL_MIN ? fanout_width() : 1;
        json_text t;
        if (json_writer_render(w, parts, &t)) {
            http_piece pieces[JSON_MAX_PIECES];
            for (int i = 0; i < t.n; i++) {
                pieces[i].base = t.buf + t.piece[i].off;
                pieces[i].len = t.piece[i].len;
            }
            http_reply_pieces(r, status, "application/json", t.buf, pieces,
                              t.n);
            return;
        }
    }
    json_writer *state = malloc(sizeof *state);
    if (state == NULL) {
        json_writer_free(w);
        http_error(r, STATUS_NOMEM, "out of memory writing the response");
        return;
    }
    *state = *w;
    memset(w, 0, sizeof *w);
    http_reply_stream(r, status, "application/json", writer_read, state,
                      writer_free);
}
