/*
 * fuzzd.h - what the harnesses that link the daemon's code share, beside
 * fuzzlib.h: the server's error body, a JSON writer's text, and a daemon
 * built as tallyd builds one.
 */
#ifndef TALLY_FUZZD_H
#define TALLY_FUZZD_H

#include <stddef.h>

#include "api.h"
#include "fuzzlib.h"
#include "json.h"

/* Aborts unless msg, a refusal's message, is NUL-terminated within
 * msglen bytes and not empty, and the error body the server would send for
 * it (http_error_text) is JSON with a string "error". */
void fuzz_refusal(const char *what, const char *msg, size_t msglen);

/* Builds a daemon's state as tallyd.c does, from the settings argv[1..argc)
 * (argv[0] names the harness): the configuration into s, one engine on the
 * host backend with one thread into *engine (its name "host"), the
 * metrics, and the API layer (the scheduler, its worker started) into
 * app. The transports are the harness's to start. Aborts on failure. */
void fuzz_daemon_start(tallyd_server *s, api_state *app, eng_engine **engine,
                       int argc, char **argv);

/* All the text of a JSON writer, which it then frees: malloc'd (free it),
 * its length in *len. */
char *fuzz_written(json_writer *w, size_t *len);

#endif
