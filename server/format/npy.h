/*
 * npy.h - a .npy request body: the header, read by the reader the client
 * shares (common/tx_npy.h), checked against the bytes that arrived.
 *
 * Any byte order and either memory order is accepted on input; tally
 * answers little-endian, C order. numpy has no bfloat16 descr: a 2-byte
 * array is read as bfloat16 when the request says dtype=bfloat16.
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_NPY_H
#define TALLY_NPY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "tx_npy.h"

/* Parses the header of the body at buf (len bytes), and checks that the
 * body holds exactly the data the header implies. Returns ENG_E_INVALID,
 * _DTYPE, _RANK or _TOO_LARGE with a message on failure. */
eng_err npy_parse(const uint8_t *buf, size_t len, bool bf16, tx_npy_header *h,
                  char *msg, size_t msglen);

#endif
