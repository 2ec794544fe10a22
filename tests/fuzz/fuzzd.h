/*
 * fuzzd.h - what the harnesses that link the daemon's code share, beside
 * fuzzlib.h: the server's error body, and a JSON writer's text.
 */
#ifndef TALLY_FUZZD_H
#define TALLY_FUZZD_H

#include <stddef.h>

#include "fuzzlib.h"
#include "json.h"

/* Aborts unless msg, a refusal's message, is NUL-terminated within
 * msglen bytes and not empty, and the error body the server would send for
 * it (http_error_text) is JSON with a string "error". */
void fuzz_refusal(const char *what, const char *msg, size_t msglen);

/* All the text of a JSON writer, which it then frees: malloc'd (free it),
 * its length in *len. */
char *fuzz_written(json_writer *w, size_t *len);

#endif
