/*
 * ref.h - what the tests compare the engine against.
 *
 * A naive cumulative sum, one element at a time: integers in uint64_t
 * (truncated to the element width, which is addition modulo 2^bits) and
 * floats in long double, along with the running sum of absolute values that
 * the float error bounds scale with. Also input generation and comparison.
 */
#ifndef TALLY_REF_H
#define TALLY_REF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tensor.h"

typedef struct {
    eng_lines l;
    long double *f;   /* float types: exact-ish sums */
    long double *abs; /* float types: running sums of |x| */
    uint64_t *u;      /* integer types: sums modulo 2^64 */
} ref_result;

/* Reads element i of a buffer of dtype t as a long double / as raw bits. */
long double ref_get_f(tx_dtype t, const void *buf, size_t i);
uint64_t ref_get_u(tx_dtype t, const void *buf, size_t i);
void ref_set_f(tx_dtype t, void *buf, size_t i, long double v);
void ref_set_u(tx_dtype t, void *buf, size_t i, uint64_t v);

bool ref_is_float(tx_dtype t);

/* The reference scan of `in` for desc (which must be valid). */
void ref_scan(const eng_scan_desc *desc, const void *in, ref_result *r);
void ref_free(ref_result *r);

/* The error bound a float result must meet, from docs/design.md's accuracy
 * section: |y - exact| <= tol. n is the line length. */
long double ref_tolerance(tx_dtype t, long double exact, long double abs,
                          uint64_t n);

/* Fills `out` with values that differ from the reference everywhere (NaN
 * for floats, the complement of the expected value for integers), so that
 * an element the engine never writes cannot pass. */
void ref_poison(const ref_result *r, void *out);

/* Compares got with the reference; prints up to a few mismatches with
 * their index and values, prefixed by `what`. Returns the mismatch count. */
size_t ref_compare(const ref_result *r, const void *got, const char *what);

/* The same for a result stitched from chunks (libtally's split tensors),
 * whose bound has twice the first term: docs/clients-c.md says why. */
size_t ref_compare_split(const ref_result *r, const void *got,
                         const char *what);

/* Random input of `count` elements: integers over the whole range (or, when
 * small is set, in [-8, 8)); floats uniform in [-1, 1) times a power of two
 * (or [0, 1) when small is set), stored exactly in the dtype. */
void ref_random(tx_dtype t, void *buf, size_t count, bool small);

#endif
