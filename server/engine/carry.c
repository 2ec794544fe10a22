/*
 * carry.c - a sequence's carries (carry.h): a chunk's line totals, and
 * the carry added to its answer.
 *
 * Both walk the packed (outer, n, inner) view. With inner > 1 the inner
 * loop runs along a row of inner carries, which the compiler vectorizes;
 * a line of its own (inner == 1, the common 1-D chunk) is summed in four
 * independent partial sums, so that the additions do not wait on one
 * another.
 */
#include <stdbool.h>

#include "carry.h"
#include "tx_half.h"

/* Float types: through double. LOAD turns an element into double, STORE
 * rounds a double back into one. */
#define F32_LOAD(p) ((double)(p))
#define F32_STORE(v) ((float)(v))
#define F64_LOAD(p) (p)
#define F64_STORE(v) (v)
#define F16_LOAD(p) ((double)tx_f16_to_f32(p))
#define F16_STORE(v) tx_f64_to_f16(v)
#define BF16_LOAD(p) ((double)tx_bf16_to_f32(p))
#define BF16_STORE(v) tx_f64_to_bf16(v)

#define FLOAT_TOTALS(T, LOAD)                                                  \
    do {                                                                       \
        const T *x = in;                                                       \
        for (uint64_t o = 0; o < l->outer; o++) {                              \
            const T *s = x + o * l->n * l->inner;                              \
            eng_carry *c = t + o * l->inner;                                   \
            if (l->inner == 1) {                                               \
                double a0 = 0, a1 = 0, a2 = 0, a3 = 0;                         \
                uint64_t i = 0;                                                \
                for (; i + 4 <= l->n; i += 4) {                                \
                    a0 += LOAD(s[i]);                                          \
                    a1 += LOAD(s[i + 1]);                                      \
                    a2 += LOAD(s[i + 2]);                                      \
                    a3 += LOAD(s[i + 3]);                                      \
                }                                                              \
                for (; i < l->n; i++)                                          \
                    a0 += LOAD(s[i]);                                          \
                c[0].f += (a0 + a1) + (a2 + a3);                               \
                continue;                                                      \
            }                                                                  \
            for (uint64_t i = 0; i < l->n; i++)                                \
                for (uint64_t k = 0; k < l->inner; k++)                        \
                    c[k].f += LOAD(s[i * l->inner + k]);                       \
        }                                                                      \
    } while (0)

#define INT_TOTALS(T)                                                          \
    do {                                                                       \
        const T *x = in;                                                       \
        for (uint64_t o = 0; o < l->outer; o++) {                              \
            const T *s = x + o * l->n * l->inner;                              \
            eng_carry *c = t + o * l->inner;                                   \
            if (l->inner == 1) {                                               \
                uint64_t a = 0;                                                \
                for (uint64_t i = 0; i < l->n; i++)                            \
                    a += (uint64_t)s[i];                                       \
                c[0].u += a;                                                   \
                continue;                                                      \
            }                                                                  \
            for (uint64_t i = 0; i < l->n; i++)                                \
                for (uint64_t k = 0; k < l->inner; k++)                        \
                    c[k].u += (uint64_t)s[i * l->inner + k];                   \
        }                                                                      \
    } while (0)

void eng_carry_totals(const eng_lines *l, const void *in, eng_carry *t)
{
    switch (l->dtype) {
    case TX_FLOAT16: FLOAT_TOTALS(uint16_t, F16_LOAD); break;
    case TX_BFLOAT16: FLOAT_TOTALS(uint16_t, BF16_LOAD); break;
    case TX_FLOAT32: FLOAT_TOTALS(float, F32_LOAD); break;
    case TX_FLOAT64: FLOAT_TOTALS(double, F64_LOAD); break;
    case TX_INT8: INT_TOTALS(int8_t); break;
    case TX_INT16: INT_TOTALS(int16_t); break;
    case TX_INT32: INT_TOTALS(int32_t); break;
    case TX_INT64: INT_TOTALS(int64_t); break;
    case TX_UINT8: INT_TOTALS(uint8_t); break;
    case TX_UINT16: INT_TOTALS(uint16_t); break;
    case TX_UINT32: INT_TOTALS(uint32_t); break;
    case TX_UINT64: INT_TOTALS(uint64_t); break;
    case TX_NDTYPES: break;
    }
}

/* Every element of line (o, k) gets c[o * inner + k]. */
#define APPLY(T, FIELD, LOAD, STORE)                                           \
    do {                                                                       \
        T *y = out;                                                            \
        for (uint64_t o = 0; o < l->outer; o++) {                              \
            T *s = y + o * l->n * l->inner;                                    \
            const eng_carry *c = cs + o * l->inner;                            \
            if (l->inner == 1) {                                               \
                for (uint64_t i = 0; i < l->n; i++)                            \
                    s[i] = STORE(LOAD(s[i]) + c[0].FIELD);                     \
                continue;                                                      \
            }                                                                  \
            for (uint64_t i = 0; i < l->n; i++)                                \
                for (uint64_t k = 0; k < l->inner; k++)                        \
                    s[i * l->inner + k] =                                      \
                        STORE(LOAD(s[i * l->inner + k]) + c[k].FIELD);         \
        }                                                                      \
    } while (0)

#define U64_LOAD(p) ((uint64_t)(p))
#define I8_STORE(v) ((int8_t)(uint8_t)(v))
#define I16_STORE(v) ((int16_t)(uint16_t)(v))
#define I32_STORE(v) ((int32_t)(uint32_t)(v))
#define I64_STORE(v) ((int64_t)(v))
#define U8_STORE(v) ((uint8_t)(v))
#define U16_STORE(v) ((uint16_t)(v))
#define U32_STORE(v) ((uint32_t)(v))
#define U64_STORE(v) (v)

void eng_carry_apply(const eng_lines *l, void *out, const eng_carry *cs)
{
    switch (l->dtype) {
    case TX_FLOAT16: APPLY(uint16_t, f, F16_LOAD, F16_STORE); break;
    case TX_BFLOAT16: APPLY(uint16_t, f, BF16_LOAD, BF16_STORE); break;
    case TX_FLOAT32: APPLY(float, f, F32_LOAD, F32_STORE); break;
    case TX_FLOAT64: APPLY(double, f, F64_LOAD, F64_STORE); break;
    case TX_INT8: APPLY(int8_t, u, U64_LOAD, I8_STORE); break;
    case TX_INT16: APPLY(int16_t, u, U64_LOAD, I16_STORE); break;
    case TX_INT32: APPLY(int32_t, u, U64_LOAD, I32_STORE); break;
    case TX_INT64: APPLY(int64_t, u, U64_LOAD, I64_STORE); break;
    case TX_UINT8: APPLY(uint8_t, u, U64_LOAD, U8_STORE); break;
    case TX_UINT16: APPLY(uint16_t, u, U64_LOAD, U16_STORE); break;
    case TX_UINT32: APPLY(uint32_t, u, U64_LOAD, U32_STORE); break;
    case TX_UINT64: APPLY(uint64_t, u, U64_LOAD, U64_STORE); break;
    case TX_NDTYPES: break;
    }
}

void eng_carry_add(eng_carry *c, const eng_carry *t, uint64_t n,
                   bool is_float)
{
    if (is_float)
        for (uint64_t i = 0; i < n; i++)
            c[i].f += t[i].f;
    else
        for (uint64_t i = 0; i < n; i++)
            c[i].u += t[i].u;
}

bool eng_carry_zero(const eng_carry *c, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (c[i].u != 0)
            return false;
    return true;
}

void eng_carry_scan(const eng_lines *l, const void *in, void *out,
                    const eng_carry *cs)
{
    if (!eng_carry_rescans(l->dtype))
        return;
    bool bf = l->dtype == TX_BFLOAT16;
    const uint16_t *x = in;
    uint16_t *y = out;
    for (uint64_t o = 0; o < l->outer; o++)
        for (uint64_t k = 0; k < l->inner; k++) {
            double acc = cs[o * l->inner + k].f;
            for (uint64_t s = 0; s < l->n; s++) {
                uint64_t i = l->reverse ? l->n - 1 - s : s;
                uint64_t at = (o * l->n + i) * l->inner + k;
                double v = bf ? BF16_LOAD(x[at]) : F16_LOAD(x[at]);
                if (!l->exclusive)
                    acc += v;
                y[at] = bf ? BF16_STORE(acc) : F16_STORE(acc);
                if (l->exclusive)
                    acc += v;
            }
        }
}
