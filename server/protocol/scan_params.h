/*
 * scan_params.h - the operator's parameters as every protocol gives them
 * (native JSON and query strings, KServe's JSON and protobuf, DirectML):
 * axis (an integer, default 0; or KServe's and ONNX's "axis" input
 * tensor), exclusive and reverse (booleans, default false) and direction
 * ("increasing" or "decreasing", DirectML's name for reverse; disagreeing
 * with reverse is an error); the sequence parameters (sequence_id.h:
 * sequence_id, sequence_start, sequence_end) in JSON and in query
 * strings; and the text forms of query-string values.
 *
 * Threading: pure functions of their arguments; any thread.
 */
#ifndef TALLY_SCAN_PARAMS_H
#define TALLY_SCAN_PARAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "json.h"
#include "sequence_id.h"
#include "tensor.h"

/* Parameters as given, before they are combined. */
typedef struct {
    bool has_axis, has_exclusive, has_reverse, has_direction;
    int64_t axis;
    bool exclusive, reverse, decreasing;
} scan_params;

/* Sets desc's axis, exclusive and reverse from p (defaults: 0, false,
 * false). False, with a message, when reverse and direction disagree. */
bool scan_params_apply(const scan_params *p, eng_scan_desc *desc, char *msg,
                       size_t msglen);

/* Takes the axis given as an input tensor (ONNX CumSum's way, KServe's
 * "axis" input) into p; false, with a message, when p already has an
 * axis parameter that says otherwise. */
bool scan_params_axis_input(scan_params *p, int64_t axis, char *msg,
                            size_t msglen);

/* The axis input itself (KServe's "axis", ONNX CumSum's): an INT32 or
 * INT64 tensor of one element. scan_axis_input_kind() checks its datatype
 * and element count; scan_axis_input_raw() takes its value from len raw
 * bytes (which `field` names in the message: "binary_data_size",
 * "raw_input_contents"); scan_axis_value() widens one element of it that
 * the caller decoded otherwise (JSON, typed contents). False with a
 * message. */
bool scan_axis_input_kind(int dtype, uint64_t elements, char *msg,
                          size_t msglen);
bool scan_axis_input_raw(int dtype, const void *bytes, uint64_t len,
                         const char *field, int64_t *axis, char *msg,
                         size_t msglen);
int64_t scan_axis_value(int dtype, const void *one);

/* A JSON member (key[0..kn)) that is a sequence parameter, read into p
 * at the cursor: true when key is one (then *ok says whether its value
 * was good; c has the error when not), false when it is not (nothing is
 * read). `where` prefixes the names in messages ("parameters."). */
bool seq_json_param(jcur *c, const char *key, size_t kn, const char *where,
                    seq_params *p, bool *ok);

/* The same for a query string's name=v: true when name is one; *ok false
 * with a message when its value is bad. */
bool seq_query_param(const char *name, const char *v, seq_params *p, bool *ok,
                     char *msg, size_t msglen);

/* Query-string values: "true"/"false"/"1"/"0"; a decimal integer; a
 * direction name; a comma-separated shape ("3,4"). Each returns false with a
 * message naming the parameter when the text is not what it must be. */
bool parse_bool_text(const char *name, const char *v, bool *out, char *msg,
                     size_t msglen);
bool parse_int_text(const char *name, const char *v, int64_t *out, char *msg,
                    size_t msglen);
bool parse_direction_text(const char *name, const char *v, bool *decreasing,
                          char *msg, size_t msglen);
bool parse_shape_text(const char *name, const char *v, uint64_t *shape,
                      int *rank, char *msg, size_t msglen);

/* "3,4" for a shape, into buf. */
void shape_to_text(const uint64_t *shape, int rank, char *buf, size_t len);

#endif
