/*
 * json.h - a small JSON scanner for request bodies, and tensor text.
 *
 * Tensor data can be millions of numbers, which a DOM parser such as
 * jansson turns into millions of objects (and jansson's integers stop at
 * 2^63 - 1). So request bodies are walked with this scanner instead: it
 * finds members and spans of values, skips what it does not need, and
 * parses data arrays straight into typed memory. Small values (the KServe
 * `parameters` object) may still be handed to jansson by span.
 *
 * Errors are reported as text naming the member, element index or byte
 * offset; the caller turns them into a 400.
 *
 * json_scan.c is the scanner, json_tensor_in.c reads tensor data
 * (jcur_tensor, jcur_infer), json_tensor_out.c writes it.
 *
 * Threading: a cursor and a writer belong to one thread at a time; a
 * writer's render may share its parts with the fanout helpers (fanout.h).
 */
#ifndef TALLY_JSON_H
#define TALLY_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

typedef struct {
    const char *base; /* start of the document, for offsets */
    const char *p, *end;
    char *err; /* message buffer */
    size_t errlen;
    bool failed;
} jcur;

void jcur_init(jcur *c, const char *text, size_t len, char *err, size_t errlen);

/* Records the first error (later ones are ignored) and returns false. */
bool jcur_fail(jcur *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void jcur_ws(jcur *c);

/* What is at the cursor, for messages: "a string", "the end of the
 * body", "invalid JSON"... */
const char *jcur_found(const jcur *c);

/* Consumes ch (after whitespace) or fails naming what was expected. */
bool jcur_expect(jcur *c, char ch, const char *what);

/* A string's contents, still escaped, as a span (quotes excluded). */
bool jcur_string(jcur *c, const char **s, size_t *len);

/* The length of a bare NaN, Infinity or -Infinity token at p (not JSON,
 * but what Python's json module and Triton's clients write for
 * non-finite floats), or 0. */
size_t jcur_bare_special(const char *p, const char *end);

/* Skips one value of any kind, checking its syntax (bare NaN and the
 * infinities pass as numbers). */
bool jcur_skip(jcur *c);

/* Iterates over an object's members: call with *first = true before the
 * first member; returns false at the closing brace or on error (check
 * c->failed). On true, *key and *klen name the member, and the cursor is at
 * its value. */
bool jcur_member(jcur *c, bool *first, const char **key, size_t *klen);

/* The same for array elements; on true the cursor is at the element. */
bool jcur_element(jcur *c, bool *first);

/* Scalars. `what` names the member in error messages. */
bool jcur_int64(jcur *c, const char *what, int64_t *out);
bool jcur_uint64(jcur *c, const char *what, uint64_t *out);
bool jcur_bool(jcur *c, const char *what, bool *out);

/* A string's value, unescaped into out (cap bytes at most, not
 * NUL-terminated; its length in *len): \uXXXX escapes, surrogate pairs
 * included, become UTF-8. Fails naming `what` when the string is longer
 * than cap, or an escape is a lone surrogate or \u0000. */
bool jcur_string_value(jcur *c, const char *what, char *out, size_t cap,
                       size_t *len);

/* A shape: an array of non-negative integers (at most ENG_MAX_RANK). */
bool jcur_shape(jcur *c, const char *what, uint64_t *shape, int *rank);

/* Parses tensor data at the cursor into dst (count elements of dtype t):
 * either a flat array of count elements or arrays nested to match shape.
 * Numbers must fit the dtype exactly; non-finite floats are the strings
 * "NaN", "Infinity" and "-Infinity". `what` names the member ("data"). */
bool jcur_tensor(jcur *c, const char *what, tx_dtype t, const uint64_t *shape,
                 int rank, uint64_t count, void *dst);

/* How many flat arrays have been parsed in parts on several cores (from
 * 65536 elements, when there are cores to share) since the process
 * started; an array whose parts disagree is parsed again on one thread,
 * and not counted. For tests and benchmarks. */
unsigned long long jcur_parallel_parses(void);

/* Infers the shape of the nested arrays at the cursor, as numpy.array
 * does: the lengths along the first path, with every array at one depth of
 * the same length and every number at the deepest level (ragged nesting
 * fails, naming the first bad index); [] is shape [0]. *is_float: some
 * number has a fraction or an exponent, or is "NaN"/"Infinity", or there is
 * no number at all (numpy's float64 for an empty array). The numbers are
 * not converted: jcur_tensor() does that, and reports bad ones. */
bool jcur_infer(jcur *c, const char *what, uint64_t *shape, int *rank,
                bool *is_float);

/* The span of the value at the cursor, which is then skipped. */
bool jcur_span(jcur *c, const char **s, size_t *len);

/* True when s[0..len) equals the NUL-terminated lit. */
bool json_eq(const char *s, size_t len, const char *lit);

/* JSON's whitespace: space, tab, newline, carriage return. */
static inline bool json_is_ws(char ch)
{
    return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r';
}

/* ------------------------------------------------------------------------
 * Tensor text, produced in chunks: a prefix, the elements of a tensor as a
 * JSON array body (comma-separated, no brackets), and a suffix.
 */
typedef struct {
    char *prefix, *suffix; /* owned (malloc), may be NULL */
    size_t prefix_len, suffix_len;
    tx_dtype dtype;
    const void *data; /* borrowed: must outlive the writer */
    uint64_t count;
    /* progress */
    int stage;     /* 0 prefix, 1 elements, 2 suffix, 3 done */
    size_t pos;    /* in the prefix or suffix */
    uint64_t next; /* next element */
    char pending[48];
    size_t pend_len, pend_pos;
} json_writer;

/* Fills up to max bytes of out with the next part of the text; returns the
 * number written, 0 when all has been written. */
size_t json_writer_read(json_writer *w, char *out, size_t max);

/* Sets up *w to write prefix, the elements of the tensor `desc` describes
 * (at data, borrowed), then suffix. Takes prefix and suffix (malloc'd, or
 * NULL); when ok is false it frees them and returns false, so a caller can
 * pass the result of building them straight in. */
bool json_writer_init(json_writer *w, bool ok, char *prefix, size_t prefix_len,
                      char *suffix, size_t suffix_len,
                      const eng_scan_desc *desc, const void *data);

/* Text rendered at once: pieces of one buffer, to be sent one after
 * another. buf is eng_buffer_alloc'd (free it with eng_buffer_free). */
#define JSON_MAX_PIECES 8
typedef struct {
    char *buf;
    int n;
    struct {
        size_t off, len;
    } piece[JSON_MAX_PIECES];
} json_text;

/* Renders all of w's text into *out, the elements split into `parts`
 * parts (1 to JSON_MAX_PIECES) that fanout.h's helpers and the caller
 * share: for large answers on a machine with cores to spare. Each part is
 * written in place in the one buffer, which is sized for the longest text
 * of every element (numtext_max_len() + 1 bytes each), and the parts are
 * sent from where they lie instead of being moved together. The writer is
 * then spent. False when memory cannot be had; w is untouched then. */
bool json_writer_render(json_writer *w, unsigned parts, json_text *out);

/* Frees prefix and suffix. */
void json_writer_free(json_writer *w);

/* Appends raw text. */
bool json_append(char **buf, size_t *blen, const char *s, size_t len);

/* Appends v in decimal. */
bool json_append_u64(char **buf, size_t *blen, uint64_t v);

/* Appends "[d0,d1,...]". */
bool json_append_shape(char **buf, size_t *blen, const uint64_t *shape,
                       int rank);

#endif
