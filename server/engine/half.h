/*
 * half.h - conversions between float32 and the 16-bit float formats.
 *
 * IEEE binary16 (float16) and bfloat16, both ways, rounding to nearest
 * even, with subnormals, infinities and NaN handled as IEEE 754 says.
 */
#ifndef TALLY_HALF_H
#define TALLY_HALF_H

#include <stdint.h>

float tally_f16_to_f32(uint16_t h);
uint16_t tally_f32_to_f16(float f);
float tally_bf16_to_f32(uint16_t h);
uint16_t tally_f32_to_bf16(float f);

/* From float64 directly, rounding once (so that a decimal parsed with
 * strtod is rounded to the 16-bit format once more, not twice). */
uint16_t tally_f64_to_f16(double d);
uint16_t tally_f64_to_bf16(double d);

#endif
