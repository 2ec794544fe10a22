/*
 * shm_json.h - the JSON of Triton's system shared-memory extension over
 * REST: the register body, and the status answer.
 *
 *   POST .../region/{name}/register   {"key": "/name", "offset": 0,
 *                                      "byte_size": N}
 *   GET  .../status                   [{"name", "key", "offset",
 *                                       "byte_size"}, ...]
 *
 * Parsed and written with jansson: the documents are small and rare.
 * Threading: none of its own; any thread.
 */
#ifndef TALLY_SHM_JSON_H
#define TALLY_SHM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shm.h"

/* The most bytes a register body may have. */
#define SHM_JSON_BODY_MAX 65536

/* Parses a register body: its key (NUL-terminated into key, of at most
 * SHM_KEY_MAX bytes; the length in *klen, which may count NUL bytes the
 * registry then refuses), offset (0 when absent) and byte_size. False
 * with a message for anything else: not a JSON object, a missing or
 * mistyped member, an unknown member (a misspelt offset would otherwise
 * register the wrong bytes), a negative number, duplicate members. */
bool shm_json_register(const uint8_t *body, size_t len, char *key, size_t *klen,
                       uint64_t *offset, uint64_t *byte_size, char *msg,
                       size_t msglen);

/* The status answer for regions v[0..n): malloc'd JSON text (valid UTF-8:
 * names and keys were checked when registered), NULL when out of
 * memory. */
char *shm_json_status(const shm_info *v, size_t n);

#endif
