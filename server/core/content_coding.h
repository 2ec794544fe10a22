/*
 * content_coding.h - HTTP content codings: gzip and deflate, both ways.
 *
 * Request bodies may arrive gzip- or deflate-encoded (Content-Encoding);
 * they are decoded into a new buffer whose size is capped, so that a small
 * compressed body cannot expand into more memory than a plain one may
 * take. Responses are gzip-encoded whole when they are rendered at once
 * (libdeflate: about twice zlib's speed, BENCHMARKS.md), or as a stream,
 * chunk by chunk, when they are produced as they go out.
 *
 * Threading: any thread; a stream encoder belongs to the one thread that
 * feeds it.
 */
#ifndef TALLY_CONTENT_CODING_H
#define TALLY_CONTENT_CODING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

/* Which coding a Content-Encoding value names: 0 identity, 1 gzip,
 * 2 deflate, -1 anything else (a 415). NULL is identity. */
int encoding_parse(const char *value);

/* Decodes in[0..len) (coding 1 or 2) into a new malloc'd buffer of at most
 * max bytes. STATUS_TOO_LARGE when it would be larger, STATUS_ENCODING
 * when the data is not valid for the coding (msg says why). */
status_code encoding_decode(int coding, const uint8_t *in, size_t len,
                            size_t max, uint8_t **out, size_t *out_len,
                            char *msg, size_t msglen);

/* True when an Accept-Encoding value accepts gzip (q > 0). */
bool encoding_accepts_gzip(const char *accept);

/* A streaming gzip encoder: feed it input with `final` on the last call;
 * it writes compressed bytes into out and reports how much of each it
 * used. */
typedef struct gzip_stream gzip_stream;

gzip_stream *gzip_stream_new(void);
void gzip_stream_free(gzip_stream *g);

/* Compresses from in[0..*in_len) into out[0..*out_len); on return *in_len
 * and *out_len are the bytes consumed and produced. Returns true when the
 * stream is complete (only possible with final). */
bool gzip_stream_run(gzip_stream *g, const uint8_t *in, size_t *in_len,
                     bool final, uint8_t *out, size_t *out_len);

/* Compresses in[0..len) at once into one gzip member in a new malloc'd
 * buffer (*out, *out_len). False when memory runs out. Thread-safe. */
bool gzip_whole(const uint8_t *in, size_t len, uint8_t **out, size_t *out_len);

#endif
