/*
 * pbwire.h - protobuf's wire format, read and written by hand: varints,
 * field headers, length-delimited spans.
 *
 * Used where protobuf-c's generated code would copy what must stay in
 * place (a tensor in a ModelInferRequest, protocol/kserve_pb.c); everything else is
 * protobuf-c's.
 *
 * Threading: none; pure functions over the caller's memory.
 */
#ifndef TALLY_PBWIRE_H
#define TALLY_PBWIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Wire types. Groups (3, 4) are refused. */
enum { PB_VARINT = 0, PB_I64 = 1, PB_LEN = 2, PB_I32 = 5 };

typedef struct {
    const uint8_t *p, *end;
} pb_reader;

typedef struct {
    const uint8_t *p;
    size_t len;
} pb_span;

typedef struct {
    uint32_t number;
    int type;
    uint64_t varint; /* PB_VARINT's value, or PB_LEN's length */
    pb_span span;    /* PB_LEN's bytes (pb_next only) */
} pb_field;

/* Reads the next field's header (and a PB_LEN's length, into f->varint):
 * 1, 0 at the end of the input, -1 when malformed (a field number of 0 or
 * over 2^29-1, a group, a bad varint). */
int pb_next_header(pb_reader *r, pb_field *f);

/* Steps over the value of the field whose header was just read; false
 * (with r unmoved) when it runs past the end. */
bool pb_skip_value(pb_reader *r, const pb_field *f);

/* Reads the next whole field: 1, 0 at the end, -1 when malformed or
 * truncated. A PB_LEN field's bytes are f->span, in place. */
int pb_next(pb_reader *r, pb_field *f);

/* The bytes v takes as a varint (1..10), and writes it (returns that). */
size_t pb_varint_size(uint64_t v);
size_t pb_put_varint(uint8_t *out, uint64_t v);

#endif
