/*
 * scan.cl - cumulative sum along one axis, for every numeric dtype.
 *
 * The host collapses a tensor of any rank to (outer, n, inner): n is the
 * length of the scanned axis, inner the product of the dimensions after it
 * and outer the product of those before it. Two families of kernels cover
 * that space:
 *
 *   rows (inner == 1): each line is contiguous. tally_rows_direct gives whole
 *     lines to work-items; tally_rows_chained cuts long lines into tiles that
 *     are chained with a decoupled look-back.
 *   cols (inner > 1): lines are strided; a work-item owns a block of adjacent
 *     columns and walks down the rows, so every row it touches is contiguous.
 *     tally_cols_direct walks whole columns; tally_cols_chained cuts them into
 *     row chunks chained with a look-back when there are too few columns to
 *     keep the device busy.
 *   strided layouts (DirectML's buffer tensors: any element strides, in the
 *     input and the output alike): tally_strided_direct and
 *     tally_strided_chained are the two column kernels with every offset
 *     taken through the strides. The host collapses such a tensor to rows
 *     along the axis, one dimension of columns and any number of outer
 *     dimensions, and passes them in a small `geom` buffer.
 *
 * Work-groups are persistent: each one takes tile ids from an atomic counter
 * until none are left. Because ids are handed out in order, a tile only ever
 * waits on tiles that a running work-group already holds, so the look-back
 * cannot deadlock however the device schedules work-groups.
 *
 * rows_chained is single-pass in memory traffic: a work-group reduces tile
 * t+1 in the same loop that scans tile t, so the input is read from memory
 * once (the scan re-reads tile t from cache) and the look-back for a tile
 * happens one full tile after its aggregate was published, by which time
 * its predecessor has published too.
 *
 * Layouts. On a CPU device a work-group is one work-item that streams a big
 * tile with explicit 8-wide vectors (TALLY_WG=1); on a GPU many work-items
 * share a tile and combine through local memory (TALLY_WG=128). The code is
 * the same; only the -D values differ.
 *
 * Accuracy. Integers add modulo 2^bits. float64 accumulates in float64.
 * float32, float16 and bfloat16 compute in float32, but every running total
 * that spans more than one block of TALLY_BLK vectors is carried as a
 * float-float pair (an unevaluated sum hi + lo, updated with Knuth's
 * two-sum), so the error of an output is bounded by a few units in the last
 * place of the block-local sums instead of growing with the line length.
 * This needs no float64 support from the device.
 *
 * Every parameter has a default so the file compiles alone:
 *   TALLY_STORAGE  element storage: 1 f16, 2 bf16, 3 f32, 4 f64,
 *                  5/6/7/8 integers of 8/16/32/64 bits (signedness does not
 *                  matter for wrapping addition)
 *   TALLY_WG       work-group size
 *   TALLY_ROW_K    elements per work-item in a row tile (multiple of 8)
 *   TALLY_COL_W    most columns per work-item in a column tile (multiple of 8)
 *   TALLY_BLK      vectors (or rows) per float-float flush
 *   TALLY_PIPE     tiles a CPU work-group of rows_chained keeps in flight
 *   TALLY_LAZY     testing: 1 makes tiles publish no inclusive prefix (a
 *                  line's first tile aside), so every look-back walks back
 *                  to the line's start, the long path a lightly loaded
 *                  device seldom takes
 *
 * The kernels support in-place operation: in and out may be the same buffer.
 * Every element is read before it is written, by the one work-item that
 * writes it, and no tile is read after its owner has written it.
 */

#ifndef TALLY_STORAGE
#define TALLY_STORAGE 3
#endif
#ifndef TALLY_LAZY
#define TALLY_LAZY 0
#endif
#ifndef TALLY_WG
#define TALLY_WG 1
#endif
#ifndef TALLY_ROW_K
#define TALLY_ROW_K 131072
#endif
#ifndef TALLY_COL_W
#define TALLY_COL_W 512
#endif
#ifndef TALLY_BLK
#define TALLY_BLK 8
#endif
#ifndef TALLY_PIPE
#define TALLY_PIPE 3
#endif

#if TALLY_ROW_K % 8 != 0 || TALLY_COL_W % 8 != 0
#error "TALLY_ROW_K and TALLY_COL_W must be multiples of 8"
#endif

/* The mode bits come with the build options, from the host's one
 * definition (engine/cl_program.h: ENG_CL_MODE_REVERSE, _EXCLUSIVE and
 * _STREAM, the last to write with non-temporal stores: see STORE8S). */
#if !defined(MODE_REVERSE) || !defined(MODE_EXCLUSIVE) || !defined(MODE_STREAM)
#error "build with -DMODE_REVERSE, -DMODE_EXCLUSIVE and -DMODE_STREAM"
#endif

/* ------------------------------------------------------------------------
 * Element types. ST is the storage type, CT the compute type. LOAD8/STORE8
 * move 8 consecutive elements (any alignment); LOAD1/STORE1 move one.
 */
#if TALLY_STORAGE == 1
/* float16 travels as its bits. The conversions are written out rather
 * than taken from vload_half8/vstore_half8_rte: PoCL 3.1 compiles the
 * latter to aligned 16-byte stores, which fault on the 2-byte alignment
 * OpenCL allows. Both round to nearest even and keep inf and NaN. */
typedef ushort ST;
#define CT float
#define CT4 float4
#define CT8 float8
#define CARRY_FF 1
#define LOAD8(p) f16_to_f32_8(vload8(0, (p)))
#define LOAD1(p) f16_to_f32_1(*(p))
#define STORE8(p, v) vstore8(f32_to_f16_8(v), 0, (p))
#define STORE1(p, v) (*(p) = f32_to_f16_1(v))

static inline float8 f16_to_f32_8(ushort8 hv)
{
    uint8 h = convert_uint8(hv);
    uint8 sign = (h & 0x8000u) << 16;
    uint8 em = h & 0x7fffu;
    /* normal: rebias the exponent; subnormal: exact from the integer */
    uint8 normal = (em << 13) + (uint8)((127 - 15) << 23);
    uint8 sub = as_uint8(convert_float8(em) * 0x1p-24f);
    uint8 special = (em << 13) | 0x7f800000u;
    uint8 r = select(normal, sub, em < 0x400u);
    r = select(r, special, em >= 0x7c00u);
    return as_float8(r | sign);
}

static inline float f16_to_f32_1(ushort hv)
{
    uint h = hv, sign = (h & 0x8000u) << 16, em = h & 0x7fffu;
    uint r = em < 0x400u ? as_uint((float)em * 0x1p-24f)
             : em >= 0x7c00u ? ((em << 13) | 0x7f800000u)
                             : (em << 13) + ((127 - 15) << 23);
    return as_float(r | sign);
}

static inline ushort8 f32_to_f16_8(float8 f)
{
    uint8 u = as_uint8(f);
    uint8 sign = (u >> 16) & 0x8000u;
    uint8 a = u & 0x7fffffffu;
    uint8 n = a - 0x38000000u; /* rebias; rounds off 13 bits below */
    n = (n + 0xfffu + ((n >> 13) & 1u)) >> 13;
    uint8 sub = convert_uint8_rte(as_float8(a) * 0x1p24f);
    uint8 r = select(n, sub, a < 0x38800000u);
    r = select(r, (uint8)0x7c00u, a >= 0x477ff000u);
    r = select(r, 0x7e00u | ((a >> 13) & 0x3ffu), a > 0x7f800000u);
    return convert_ushort8(r | sign);
}

static inline ushort f32_to_f16_1(float f)
{
    uint u = as_uint(f), sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu, r;
    if (a > 0x7f800000u)
        r = 0x7e00u | ((a >> 13) & 0x3ffu);
    else if (a >= 0x477ff000u)
        r = 0x7c00u;
    else if (a < 0x38800000u)
        r = convert_uint_rte(as_float(a) * 0x1p24f);
    else {
        uint n = a - 0x38000000u;
        r = (n + 0xfffu + ((n >> 13) & 1u)) >> 13;
    }
    return (ushort)(r | sign);
}

#elif TALLY_STORAGE == 2
typedef ushort ST;
#define CT float
#define CT4 float4
#define CT8 float8
#define CARRY_FF 1
#define LOAD8(p) as_float8(convert_uint8(vload8(0, (p))) << 16)
#define LOAD1(p) as_float((uint)(*(p)) << 16)
#define STORE8(p, v) vstore8(bf16_round8(v), 0, (p))
#define STORE1(p, v) (*(p) = bf16_round1(v))

/* Round to nearest even; NaN stays a (quiet) NaN. */
static inline ushort8 bf16_round8(float8 v)
{
    uint8 b = as_uint8(v);
    uint8 r = (b + (uint8)0x7fffu + ((b >> 16) & 1u)) >> 16;
    uint8 q = (b >> 16) | 0x40u;
    return convert_ushort8(select(r, q, as_uint8(isnan(v))));
}

static inline ushort bf16_round1(float v)
{
    uint b = as_uint(v);
    if (isnan(v))
        return (ushort)((b >> 16) | 0x40u);
    return (ushort)((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

#elif TALLY_STORAGE == 3
typedef float ST;
#define CT float
#define CT4 float4
#define CT8 float8
#define CARRY_FF 1
#define LOAD8(p) vload8(0, (p))
#define LOAD1(p) (*(p))
#define STORE8(p, v) vstore8((v), 0, (p))
#define STORE1(p, v) (*(p) = (v))

#elif TALLY_STORAGE == 4
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
typedef double ST;
#define CT double
#define CT4 double4
#define CT8 double8
#define CARRY_FF 0

#else
#if TALLY_STORAGE == 5
typedef uchar ST;
#define CT uchar
#define CT4 uchar4
#define CT8 uchar8
#elif TALLY_STORAGE == 6
typedef ushort ST;
#define CT ushort
#define CT4 ushort4
#define CT8 ushort8
#elif TALLY_STORAGE == 7
typedef uint ST;
#define CT uint
#define CT4 uint4
#define CT8 uint8
#elif TALLY_STORAGE == 8
typedef ulong ST;
#define CT ulong
#define CT4 ulong4
#define CT8 ulong8
#else
#error "unknown TALLY_STORAGE"
#endif
#define CARRY_FF 0
#endif

#ifndef LOAD8
#define LOAD8(p) vload8(0, (p))
#define LOAD1(p) (*(p))
#define STORE8(p, v) vstore8((v), 0, (p))
#define STORE1(p, v) (*(p) = (v))
#endif

/* STORE8S: STORE8, or when the launch streams (MODE_STREAM) a
 * non-temporal store that bypasses the cache. For an output larger than
 * the cache that saves reading every line before writing it (a third of
 * the memory traffic). Non-temporal vector stores need aligned addresses:
 * the host sets MODE_STREAM only when every vector store of the launch is
 * 32-byte aligned, and only 4- and 8-byte elements stream. TALLY_NT is set
 * for devices whose compiler has the builtin (PoCL's clang). */
#ifndef TALLY_NT
#define TALLY_NT 0
#endif
#if TALLY_NT && (TALLY_STORAGE == 3 || TALLY_STORAGE == 4 || TALLY_STORAGE == 7 \
                 || TALLY_STORAGE == 8)
#define STORE8S(mode, p, v)                                                    \
    do {                                                                       \
        if ((mode) & MODE_STREAM)                                              \
            __builtin_nontemporal_store((v), (global CT8 *)(p));               \
        else                                                                   \
            STORE8((p), (v));                                                  \
    } while (0)
#else
#define STORE8S(mode, p, v) STORE8((p), (v))
#endif

/* shuffle2 masks: unsigned integers as wide as the elements */
#if TALLY_STORAGE == 4 || TALLY_STORAGE == 8
#define UT8 ulong8
#elif TALLY_STORAGE == 5
#define UT8 uchar8
#elif TALLY_STORAGE == 6
#define UT8 ushort8
#else
#define UT8 uint8
#endif

#define Z ((CT)0)

/* ------------------------------------------------------------------------
 * Running totals. A carry is hi + lo. With CARRY_FF the block-local sum
 * `run` is kept in plain CT and folded into the pair every TALLY_BLK steps;
 * without it (exact or float64 types) the pair degenerates to hi alone.
 */
typedef struct {
    CT h;
    CT l;
} carry_t;

#if CARRY_FF
/* (h, l) += x, error-free up to the final rounding of l. When the sum is
 * not finite the error term is meaningless (inf - inf), so it is dropped
 * and IEEE propagation of inf and NaN is kept. */
#define FF_ADD(h, l, x)                                                        \
    do {                                                                       \
        CT b_ = (x) + (l);                                                     \
        CT s_ = (h) + b_;                                                      \
        CT v_ = s_ - (h);                                                      \
        CT e_ = ((h) - (s_ - v_)) + (b_ - v_);                                 \
        (h) = s_;                                                              \
        (l) = isfinite(s_) ? e_ : Z;                                           \
    } while (0)
#define FF_ADD8(h, l, x)                                                       \
    do {                                                                       \
        CT8 b_ = (x) + (l);                                                    \
        CT8 s_ = (h) + b_;                                                     \
        CT8 v_ = s_ - (h);                                                     \
        CT8 e_ = ((h) - (s_ - v_)) + (b_ - v_);                                \
        (h) = s_;                                                              \
        (l) = select((CT8)Z, e_, isfinite(s_));                                \
    } while (0)
#define OUT(c, run, s) ((c).h + ((c).l + ((run) + (s))))
#define ADV(c, run, t) ((run) += (t))
#define FLUSH(c, run)                                                          \
    do {                                                                       \
        FF_ADD((c).h, (c).l, (run));                                           \
        (run) = Z;                                                             \
    } while (0)
#else
#define FF_ADD(h, l, x) ((h) += (x))
#define FF_ADD8(h, l, x) ((h) += (x))
#define OUT(c, run, s) ((c).h + (s))
#define ADV(c, run, t) ((c).h += (t))
#define FLUSH(c, run) ((void)0)
#endif

static inline carry_t carry_zero(void)
{
    carry_t c;
    c.h = Z;
    c.l = Z;
    return c;
}

/* a += b */
static inline void carry_add(carry_t *a, carry_t b)
{
    FF_ADD(a->h, a->l, b.h);
#if CARRY_FF
    FF_ADD(a->h, a->l, b.l);
#endif
}

/* ------------------------------------------------------------------------
 * In-register scans of 8 lanes. F: towards higher lanes; R: towards lower
 * lanes (the decreasing direction). The exclusive forms shift an inclusive
 * result by one lane, so no subtraction is ever needed.
 */
static inline CT4 scan4f(CT4 x)
{
    x += (CT4)(Z, x.s012);
    x += (CT4)(Z, Z, x.s01);
    return x;
}

static inline CT4 scan4r(CT4 x)
{
    x += (CT4)(x.s123, Z);
    x += (CT4)(x.s23, Z, Z);
    return x;
}

static inline CT8 scan8f(CT8 v)
{
    CT4 lo = scan4f(v.lo);
    CT4 hi = scan4f(v.hi) + lo.s3;
    return (CT8)(lo, hi);
}

static inline CT8 scan8r(CT8 v)
{
    CT4 hi = scan4r(v.hi);
    CT4 lo = scan4r(v.lo) + hi.s0;
    return (CT8)(lo, hi);
}

/* One whole-vector shuffle each (lanes 8+ come from the zero vector). */
static inline CT8 excl8f(CT8 s)
{
    return shuffle2(s, (CT8)Z, (UT8)(8, 0, 1, 2, 3, 4, 5, 6));
}

static inline CT8 excl8r(CT8 s)
{
    return shuffle2(s, (CT8)Z, (UT8)(1, 2, 3, 4, 5, 6, 7, 8));
}

/* Segmented scans for lines of P = 1, 2, 4 or 8 elements, 8/P lines per
 * vector. Inclusive and exclusive, both directions. */
#define SEG2F(x) ((x) + (CT8)(Z, (x).s0, Z, (x).s2, Z, (x).s4, Z, (x).s6))
#define SEG2R(x) ((x) + (CT8)((x).s1, Z, (x).s3, Z, (x).s5, Z, (x).s7, Z))
#define SEG2XF(s) ((CT8)(Z, (s).s0, Z, (s).s2, Z, (s).s4, Z, (s).s6))
#define SEG2XR(s) ((CT8)((s).s1, Z, (s).s3, Z, (s).s5, Z, (s).s7, Z))
#define SEG4F(x) ((CT8)(scan4f((x).lo), scan4f((x).hi)))
#define SEG4R(x) ((CT8)(scan4r((x).lo), scan4r((x).hi)))
#define SEG4XF(s) ((CT8)((CT4)(Z, (s).s012), (CT4)(Z, (s).s456)))
#define SEG4XR(s) ((CT8)((CT4)((s).s123, Z), (CT4)((s).s567, Z)))

/* ------------------------------------------------------------------------
 * Reduction of a contiguous segment into a carry, with float-float blocks.
 */
static inline carry_t hsum8(CT8 h, CT8 l)
{
    CT hs[8], ls[8];
    vstore8(h, 0, hs);
    vstore8(l, 0, ls);
    carry_t r = carry_zero();
    for (int i = 0; i < 8; i++) {
        FF_ADD(r.h, r.l, hs[i]);
#if CARRY_FF
        FF_ADD(r.h, r.l, ls[i]);
#endif
    }
    return r;
}

/* ------------------------------------------------------------------------
 * The segment scanner, instantiated once per mode. It scans `len`
 * consecutive elements at src into dst in the direction of the mode,
 * continuing from *c and leaving the total of everything scanned in *c.
 * In the same loop it reduces `rlen` elements at rsrc into *rs, which is
 * how rows_chained overlaps the reduction of the next tile with the scan of
 * the current one. Either length may be zero.
 *
 * Vector k (k = 0 first in scan order) covers [8k, 8k+8) going forward and
 * [len-8k-8, len-8k) in reverse; the len % 8 leftover elements are at the
 * end going forward and at the start in reverse.
 */
#define DEFINE_SEGMENT_SCAN(NAME, REV, EXCL)                                   \
    static void NAME(uint mode, global const ST *src, global ST *dst,          \
                     ulong len, carry_t *c, global const ST *rsrc, ulong rlen, \
                     carry_t *rs)                                              \
    {                                                                          \
        carry_t cc = *c;                                                       \
        CT run = Z;                                                            \
        CT8 rh = (CT8)Z, rl = (CT8)Z;                                          \
        ulong nv = len / 8, rnv = rlen / 8;                                    \
        ulong both = min(nv, rnv) / TALLY_BLK * TALLY_BLK;                     \
        ulong k = 0;                                                           \
        (void)run;                                                             \
        for (; k < nv; k += TALLY_BLK) {                                       \
            ulong kend = min(k + TALLY_BLK, nv);                               \
            CT8 ra = (CT8)Z;                                                   \
            for (ulong j = k; j < kend; j++) {                                 \
                ulong off = REV ? len - 8 * j - 8 : 8 * j;                     \
                CT8 x = LOAD8(src + off);                                      \
                CT8 s = REV ? scan8r(x) : scan8f(x);                           \
                CT8 o = EXCL ? (REV ? excl8r(s) : excl8f(s)) : s;              \
                STORE8S(mode, dst + off, OUT(cc, run, o));                     \
                ADV(cc, run, REV ? s.s0 : s.s7);                               \
                if (k < both)                                                  \
                    ra += LOAD8(rsrc + 8 * j);                                 \
            }                                                                  \
            FLUSH(cc, run);                                                    \
            FF_ADD8(rh, rl, ra);                                               \
        }                                                                      \
        for (ulong t = 0; t < len % 8; t++) {                                  \
            ulong off = REV ? len % 8 - 1 - t : nv * 8 + t;                    \
            CT x = LOAD1(src + off);                                           \
            if (EXCL) {                                                        \
                STORE1(dst + off, OUT(cc, run, Z));                            \
                ADV(cc, run, x);                                               \
            } else {                                                           \
                ADV(cc, run, x);                                               \
                STORE1(dst + off, OUT(cc, run, Z));                            \
            }                                                                  \
        }                                                                      \
        FLUSH(cc, run);                                                        \
        *c = cc;                                                               \
        if (rlen == 0)                                                         \
            return;                                                            \
        for (k = both; k < rnv; k += TALLY_BLK) {                              \
            ulong kend = min(k + TALLY_BLK, rnv);                              \
            CT8 ra = (CT8)Z;                                                   \
            for (ulong j = k; j < kend; j++)                                   \
                ra += LOAD8(rsrc + 8 * j);                                     \
            FF_ADD8(rh, rl, ra);                                               \
        }                                                                      \
        {                                                                      \
            CT8 ra = (CT8)Z;                                                   \
            for (ulong t = rnv * 8; t < rlen; t++)                             \
                ra.s0 += LOAD1(rsrc + t);                                      \
            FF_ADD8(rh, rl, ra);                                               \
        }                                                                      \
        *rs = hsum8(rh, rl);                                                   \
    }

/* Lines of PP in {1, 2, 4, 8} elements, scanned as one flat run of
 * `lines` lines, 8/PP lines per vector. Leftover lines go one by one. */
#define DEFINE_SMALL_LINES(NAME, SEG, REV, EXCL, PP)                           \
    static void NAME(uint mode, global const ST *src, global ST *dst,          \
                     ulong lines)                                              \
    {                                                                          \
        ulong len = lines * PP, nv = len / 8;                                  \
        for (ulong j = 0; j < nv; j++) {                                       \
            CT8 x = LOAD8(src + 8 * j), o;                                     \
            if (PP == 1) {                                                     \
                o = EXCL ? (CT8)Z : x;                                         \
            } else if (PP == 2) {                                              \
                CT8 s = REV ? SEG2R(x) : SEG2F(x);                             \
                o = EXCL ? (REV ? SEG2XR(s) : SEG2XF(s)) : s;                  \
            } else if (PP == 4) {                                              \
                CT8 s = REV ? SEG4R(x) : SEG4F(x);                             \
                o = EXCL ? (REV ? SEG4XR(s) : SEG4XF(s)) : s;                  \
            } else {                                                           \
                CT8 s = REV ? scan8r(x) : scan8f(x);                           \
                o = EXCL ? (REV ? excl8r(s) : excl8f(s)) : s;                  \
            }                                                                  \
            STORE8S(mode, dst + 8 * j, o);                                     \
        }                                                                      \
        for (ulong off = nv * 8; off < len; off += PP) {                       \
            carry_t c = carry_zero();                                          \
            SEG(mode, src + off, dst + off, PP, &c, src, 0, &c);               \
        }                                                                      \
    }

/* Instantiates the four modes of one line length and its dispatcher. */
#define DEFINE_SMALL_LINES_P(PP)                                               \
    DEFINE_SMALL_LINES(small##PP##_fi, seg_fi, 0, 0, PP)                       \
    DEFINE_SMALL_LINES(small##PP##_fx, seg_fx, 0, 1, PP)                       \
    DEFINE_SMALL_LINES(small##PP##_ri, seg_ri, 1, 0, PP)                       \
    DEFINE_SMALL_LINES(small##PP##_rx, seg_rx, 1, 1, PP)                       \
    static void small##PP(uint mode, global const ST *src, global ST *dst,     \
                          ulong lines)                                         \
    {                                                                          \
        switch (mode & 3u) {                                                   \
        case 0:                                                                \
            small##PP##_fi(mode, src, dst, lines);                                   \
            break;                                                             \
        case MODE_REVERSE:                                                     \
            small##PP##_ri(mode, src, dst, lines);                                   \
            break;                                                             \
        case MODE_EXCLUSIVE:                                                   \
            small##PP##_fx(mode, src, dst, lines);                                   \
            break;                                                             \
        default:                                                               \
            small##PP##_rx(mode, src, dst, lines);                                   \
            break;                                                             \
        }                                                                      \
    }

DEFINE_SEGMENT_SCAN(seg_fi, 0, 0)
DEFINE_SEGMENT_SCAN(seg_fx, 0, 1)
DEFINE_SEGMENT_SCAN(seg_ri, 1, 0)
DEFINE_SEGMENT_SCAN(seg_rx, 1, 1)

DEFINE_SMALL_LINES_P(1)
DEFINE_SMALL_LINES_P(2)
DEFINE_SMALL_LINES_P(4)
DEFINE_SMALL_LINES_P(8)

static inline void segment_scan(uint mode, global const ST *src, global ST *dst,
                                ulong len, carry_t *c, global const ST *rsrc,
                                ulong rlen, carry_t *rs)
{
    switch (mode & 3u) {
    case 0:
        seg_fi(mode, src, dst, len, c, rsrc, rlen, rs);
        break;
    case MODE_REVERSE:
        seg_ri(mode, src, dst, len, c, rsrc, rlen, rs);
        break;
    case MODE_EXCLUSIVE:
        seg_fx(mode, src, dst, len, c, rsrc, rlen, rs);
        break;
    default:
        seg_rx(mode, src, dst, len, c, rsrc, rlen, rs);
        break;
    }
}

/* ------------------------------------------------------------------------
 * Tile scheduling and the look-back. state[0] is the tile counter and
 * state[1 + t] the status of tile t: 0 nothing yet, 1 its aggregate is
 * published, 2 its inclusive prefix is published. The host zeroes the
 * counter and the statuses before every launch.
 */
#define ST_AGGREGATE 1u
#define ST_PREFIX 2u

/* One work-item takes the next tile id for its whole work-group. The
 * second barrier keeps a fast work-item from overwriting the shared id
 * before every work-item has read it.
 *
 * With TALLY_WG == 1 (the CPU layout) work-groups are persistent and loop
 * over tiles. Wider work-groups take exactly one tile each (the host
 * launches one work-group per tile): that is the natural shape on a GPU,
 * and it keeps barriers out of loops, which PoCL's compiler mishandles
 * (LLVM 15 crashes on the persistent rows_chained with 2+ work-items). */
static inline ulong next_tile(global volatile uint *state, local uint *shared)
{
    if (get_local_id(0) == 0)
        *shared = atomic_inc(&state[0]);
    barrier(CLK_LOCAL_MEM_FENCE);
    ulong t = *shared;
    barrier(CLK_LOCAL_MEM_FENCE);
    return t;
}

#if TALLY_WG == 1
#define EACH_TILE(t, ntiles, shared, call)                                     \
    for (ulong t; (t = next_tile(state, (shared))) < (ntiles);)                \
        call
#else
#define EACH_TILE(t, ntiles, shared, call)                                     \
    do {                                                                       \
        ulong t = next_tile(state, (shared));                                  \
        if (t < (ntiles))                                                      \
            call;                                                              \
    } while (0)
#endif

static inline void publish(global volatile carry_t *vals, ulong width,
                           ulong tile, ulong col, carry_t v, uint status)
{
    global volatile carry_t *p = vals + (2 * tile + (status == ST_PREFIX)) * width + col;
    p->h = v.h;
    p->l = v.l;
}

static inline void set_status(global volatile uint *state, ulong tile, uint status)
{
    write_mem_fence(CLK_GLOBAL_MEM_FENCE);
    atomic_xchg(&state[1 + tile], status);
}

/* The exclusive prefix of `tile` in column `col`: the sum of the aggregates
 * of the tiles before it in the same line, back to the nearest one whose
 * inclusive prefix is known. `first` is the id of the line's first tile. */
static carry_t look_back(global volatile uint *state,
                         global volatile carry_t *vals, ulong width,
                         ulong tile, ulong first, ulong col)
{
    carry_t p = carry_zero();
    for (ulong q = tile; q > first;) {
        q--;
        uint st;
        do {
            st = state[1 + q];
        } while (st == 0);
        read_mem_fence(CLK_GLOBAL_MEM_FENCE);
        global volatile carry_t *v = vals + (2 * q + (st == ST_PREFIX)) * width + col;
        carry_t x;
        x.h = v->h;
        x.l = v->l;
        carry_add(&p, x);
        if (st == ST_PREFIX)
            break;
    }
    return p;
}

/* Exclusive scan of one carry per work-item, through local memory
 * (Hillis-Steele). Returns this work-item's exclusive prefix and stores the
 * work-group total in *total. With TALLY_WG == 1 it costs nothing. */
static carry_t wg_exclusive(carry_t mine, local carry_t *tmp, carry_t *total)
{
#if TALLY_WG == 1
    *total = mine;
    return carry_zero();
#else
    uint lid = get_local_id(0);
    tmp[lid] = mine;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint d = 1; d < TALLY_WG; d <<= 1) {
        carry_t add = carry_zero();
        if (lid >= d)
            add = tmp[lid - d];
        barrier(CLK_LOCAL_MEM_FENCE);
        if (lid >= d) {
            carry_t t = tmp[lid];
            carry_add(&t, add);
            tmp[lid] = t;
        }
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    carry_t incl = tmp[lid];
    carry_t excl = lid ? tmp[lid - 1] : carry_zero();
    *total = tmp[TALLY_WG - 1];
    barrier(CLK_LOCAL_MEM_FENCE);
    (void)incl;
    return excl;
#endif
}

/* ------------------------------------------------------------------------
 * rows_direct: lines of length n (inner == 1), each tile is TALLY_WG * rpt
 * whole lines, rpt per work-item. When P is nonzero, n == P is 1, 2, 4 or
 * 8 and a work-item scans its lines as one flat run of vectors.
 */
static void rows_direct_tile(global const ST *in, global ST *out, ulong t,
                             ulong lines, ulong n, ulong rpt, uint P,
                             uint mode)
{
    ulong r0 = t * TALLY_WG * rpt + get_local_id(0) * rpt;
    ulong r1 = min(r0 + rpt, lines);
    if (r0 >= r1)
        return;
    global const ST *src = in + r0 * n;
    global ST *dst = out + r0 * n;
    switch (P) {
    case 1:
        small1(mode, src, dst, r1 - r0);
        return;
    case 2:
        small2(mode, src, dst, r1 - r0);
        return;
    case 4:
        small4(mode, src, dst, r1 - r0);
        return;
    case 8:
        small8(mode, src, dst, r1 - r0);
        return;
    }
    for (ulong r = r0; r < r1; r++, src += n, dst += n) {
        carry_t c = carry_zero();
        segment_scan(mode, src, dst, n, &c, src, 0, &c);
    }
}

kernel __attribute__((reqd_work_group_size(TALLY_WG, 1, 1)))
void tally_rows_direct(global const ST *in, global ST *out,
                       global volatile uint *state, ulong lines, ulong n,
                       ulong rpt, uint P, uint mode)
{
    local uint tile_sh;
    ulong per_tile = (ulong)TALLY_WG * rpt;
    ulong ntiles = (lines + per_tile - 1) / per_tile;
    EACH_TILE(t, ntiles, &tile_sh,
              rows_direct_tile(in, out, t, lines, n, rpt, P, mode));
}

/* ------------------------------------------------------------------------
 * rows_chained: long lines cut into tiles of TALLY_WG * TALLY_ROW_K
 * elements. Tile t is chunk t % nchunks of line t / nchunks, counted in
 * scan order (from the end of the line when reversed).
 *
 * A persistent work-group keeps TALLY_PIPE tiles in flight: it has reduced
 * and published them all, and it scans the oldest while reducing a newly
 * taken one. The oldest was published TALLY_PIPE - 1 tiles ago, which is
 * the slack its predecessor (another work-group's tile, usually) has to
 * publish before the look-back would have to wait.
 */
static inline void tile_span(ulong t, ulong nchunks, ulong n, uint mode,
                             ulong *off, ulong *len)
{
    ulong line = t / nchunks, chunk = t % nchunks;
    ulong a = chunk * (ulong)(TALLY_WG * TALLY_ROW_K)
              + get_local_id(0) * (ulong)TALLY_ROW_K;
    ulong b = min(a + TALLY_ROW_K, n);
    if (a >= n) {
        *off = line * n;
        *len = 0;
        return;
    }
    *off = line * n + ((mode & MODE_REVERSE) ? n - b : a);
    *len = b - a;
}

kernel __attribute__((reqd_work_group_size(TALLY_WG, 1, 1)))
void tally_rows_chained(global const ST *in, global ST *out,
                        global volatile uint *state,
                        global volatile carry_t *vals, ulong lines, ulong n,
                        uint mode)
{
    local uint tile_sh;
    local carry_t tmp[TALLY_WG];
    local carry_t prefix_sh;
#if TALLY_WG == 1
    ulong nchunks = (n + TALLY_WG * TALLY_ROW_K - 1) / (TALLY_WG * TALLY_ROW_K);
    ulong ntiles = lines * nchunks;
    uint lid = get_local_id(0);

    /* pending tiles: ids, their aggregates and each work-item's exclusive
     * offset inside the tile */
    ulong pend[TALLY_PIPE];
    carry_t pagg[TALLY_PIPE], pwi[TALLY_PIPE];
    int np = 0;

    for (int k = 0; k < TALLY_PIPE; k++) {
        ulong t = next_tile(state, &tile_sh);
        if (t >= ntiles)
            break;
        ulong off, len;
        tile_span(t, nchunks, n, mode, &off, &len);
        carry_t mine = carry_zero(), dummy = carry_zero(), total;
        segment_scan(0, in, out, 0, &dummy, in + off, len, &mine);
        pwi[np] = wg_exclusive(mine, tmp, &total);
        pagg[np] = total;
        pend[np++] = t;
        if (lid == 0) {
            uint st = t % nchunks == 0 ? ST_PREFIX : ST_AGGREGATE;
            publish(vals, 1, t, 0, total, st);
            set_status(state, t, st);
        }
    }

    while (np > 0) {
        ulong tp = pend[0];
        if (lid == 0) {
            ulong first = tp - tp % nchunks;
            carry_t pre = look_back(state, vals, 1, tp, first, 0);
            if (tp != first && !TALLY_LAZY) {
                carry_t inc = pre;
                carry_add(&inc, pagg[0]);
                publish(vals, 1, tp, 0, inc, ST_PREFIX);
                set_status(state, tp, ST_PREFIX);
            }
            prefix_sh = pre;
        }
        ulong tn = next_tile(state, &tile_sh); /* barriers publish prefix_sh */
        carry_t c = prefix_sh;
        carry_add(&c, pwi[0]);

        ulong off, len, noff = 0, nlen = 0;
        tile_span(tp, nchunks, n, mode, &off, &len);
        if (tn < ntiles)
            tile_span(tn, nchunks, n, mode, &noff, &nlen);
        carry_t mine = carry_zero();
        segment_scan(mode, in + off, out + off, len, &c, in + noff, nlen, &mine);

        for (int k = 1; k < np; k++) {
            pend[k - 1] = pend[k];
            pagg[k - 1] = pagg[k];
            pwi[k - 1] = pwi[k];
        }
        np--;
        if (tn < ntiles) {
            carry_t total;
            pwi[np] = wg_exclusive(mine, tmp, &total);
            pagg[np] = total;
            pend[np++] = tn;
            if (lid == 0) {
                uint st = tn % nchunks == 0 ? ST_PREFIX : ST_AGGREGATE;
                publish(vals, 1, tn, 0, total, st);
                set_status(state, tn, st);
            }
        }
    }
#else
    /* one tile per work-group: reduce, look back, scan */
    ulong nchunks = (n + TALLY_WG * TALLY_ROW_K - 1) / (TALLY_WG * TALLY_ROW_K);
    ulong ntiles = lines * nchunks;
    uint lid = get_local_id(0);
    ulong t = next_tile(state, &tile_sh);
    if (t >= ntiles)
        return; /* uniform: the host launches one work-group per tile */
    ulong off, len;
    tile_span(t, nchunks, n, mode, &off, &len);
    carry_t mine = carry_zero(), dummy = carry_zero(), total;
    segment_scan(0, in, out, 0, &dummy, in + off, len, &mine);
    carry_t excl = wg_exclusive(mine, tmp, &total);
    if (lid == 0) {
        ulong first = t - t % nchunks;
        uint st = t == first ? ST_PREFIX : ST_AGGREGATE;
        publish(vals, 1, t, 0, total, st);
        set_status(state, t, st);
        carry_t pre = look_back(state, vals, 1, t, first, 0);
        if (t != first && !TALLY_LAZY) {
            carry_t inc = pre;
            carry_add(&inc, total);
            publish(vals, 1, t, 0, inc, ST_PREFIX);
            set_status(state, t, ST_PREFIX);
        }
        prefix_sh = pre;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    carry_t c = prefix_sh;
    carry_add(&c, excl);
    segment_scan(mode, in + off, out + off, len, &c, in, 0, &dummy);
#endif
}

/* ------------------------------------------------------------------------
 * Column kernels (inner > 1). A tile is a block of TALLY_WG * cw adjacent
 * columns of one outer slice, over all rows (direct) or over a chunk of
 * `rows` rows (chained). Work-item lid owns columns
 * [blk * TALLY_WG * cw + lid * cw, ... + cw) clipped to inner, and walks the
 * rows in scan order keeping one running total per column.
 */
#define CV (TALLY_COL_W / 8)

typedef struct {
    CT8 h[CV], l[CV], run[CV];
    CT th[8], tl[8], trun[8];
} colacc_t;

static inline void colacc_init(colacc_t *a, uint nvec, uint ntail)
{
    for (uint v = 0; v < nvec; v++) {
        a->h[v] = (CT8)Z;
        a->l[v] = (CT8)Z;
    }
    for (uint t = 0; t < ntail; t++) {
        a->th[t] = Z;
        a->tl[t] = Z;
    }
}

/* Group v of a column accumulator as 8 scalars: the vector v when
 * v < nvec, else the scalar tail (padded with zeros). */
static inline void colacc_get(const colacc_t *a, uint v, uint nvec, uint ntail,
                              CT *h, CT *l)
{
    if (v < nvec) {
        vstore8(a->h[v], 0, h);
        vstore8(a->l[v], 0, l);
        return;
    }
    for (uint e = 0; e < 8; e++) {
        h[e] = e < ntail ? a->th[e] : Z;
        l[e] = e < ntail ? a->tl[e] : Z;
    }
}

static inline void colacc_set(colacc_t *a, uint v, uint nvec, uint ntail,
                              const CT *h, const CT *l)
{
    if (v < nvec) {
        a->h[v] = vload8(0, h);
        a->l[v] = vload8(0, l);
        return;
    }
    for (uint e = 0; e < ntail; e++) {
        a->th[e] = h[e];
        a->tl[e] = l[e];
    }
}

/* Walk rows [0, rows) of a column block laid out as span_t (below) says,
 * scanning into out in the mode's row order, so that each row of a packed
 * tensor is read as one sequential run. Each column keeps a
 * float-float carry (h, l); during a block of TALLY_BLK rows the low part
 * and the rows' sum build up in `run` (which starts at l), so an element
 * costs two additions, and the pair is renormalised once per block. Leaves
 * the running totals in *a. */
#if CARRY_FF
#define COL_OUT(h, run) ((h) + (run))
#define COL_FOLD(h, l, run) FF_ADD((h), (l), (run))
#define COL_FOLD8(h, l, run) FF_ADD8((h), (l), (run))
#else
/* exact types (and float64): run is the running total itself */
#define COL_OUT(h, run) (run)
#define COL_FOLD(h, l, run) ((h) = (run))
#define COL_FOLD8(h, l, run) ((h) = (run))
#endif

/* Where a work-item's columns lie: the offsets of its first column in
 * row 0, and the steps between rows and between columns, in elements, in
 * the input and the output. Packed tiles have ri == ro == inner and
 * ci == co == 1; strided tiles (tally_strided_*) have anything. */
typedef struct {
    ulong bi, bo, ri, ro, ci, co;
} span_t;

/* 8 elements s apart: one vector access when they are adjacent. */
#define LOADG8(p, s)                                                           \
    ((s) == 1 ? LOAD8(p)                                                       \
              : (CT8)(LOAD1(p), LOAD1((p) + (s)), LOAD1((p) + 2 * (s)),        \
                      LOAD1((p) + 3 * (s)), LOAD1((p) + 4 * (s)),              \
                      LOAD1((p) + 5 * (s)), LOAD1((p) + 6 * (s)),              \
                      LOAD1((p) + 7 * (s))))
#define STOREG8(p, s, v)                                                       \
    do {                                                                       \
        CT8 w_ = (v);                                                          \
        if ((s) == 1) {                                                        \
            STORE8((p), w_);                                                   \
        } else {                                                               \
            STORE1((p), w_.s0);                                                \
            STORE1((p) + (s), w_.s1);                                          \
            STORE1((p) + 2 * (s), w_.s2);                                      \
            STORE1((p) + 3 * (s), w_.s3);                                      \
            STORE1((p) + 4 * (s), w_.s4);                                      \
            STORE1((p) + 5 * (s), w_.s5);                                      \
            STORE1((p) + 6 * (s), w_.s6);                                      \
            STORE1((p) + 7 * (s), w_.s7);                                      \
        }                                                                      \
    } while (0)

/* Column c of a row: adjacent in packed walks (STRIDED 0, so that the
 * compiler sees the unit step), c * step in strided ones. */
#define COL_AT(STRIDED, p, c, step) ((STRIDED) ? (p) + (c) * (step) : (p) + (c))

#define DEFINE_COL_WALK(NAME, REV, EXCL, STRIDED)                              \
    static void NAME(uint mode, global const ST *in, global ST *out,           \
                     span_t sp, ulong rows, uint ncols, colacc_t *a)           \
    {                                                                          \
        uint nvec = ncols / 8, ntail = ncols % 8;                              \
        for (ulong r0 = 0; r0 < rows; r0 += TALLY_BLK) {                       \
            ulong r1 = min(r0 + (ulong)TALLY_BLK, rows);                       \
            /* the block starts from the carries: run = l (or the total) */   \
            for (uint v = 0; v < nvec; v++)                                    \
                a->run[v] = CARRY_FF ? a->l[v] : a->h[v];                      \
            for (uint t = 0; t < ntail; t++)                                   \
                a->trun[t] = CARRY_FF ? a->tl[t] : a->th[t];                   \
            for (ulong r = r0; r < r1; r++) {                                  \
                ulong row = REV ? rows - 1 - r : r;                            \
                global const ST *x = in + sp.bi + row * sp.ri;                 \
                global ST *y = out + sp.bo + row * sp.ro;                      \
                /* decreasing scans also walk each row backwards, so that     \
                 * the whole block is one descending stream */                 \
                for (uint i = 0; i < nvec; i++) {                              \
                    uint v = REV ? nvec - 1 - i : i;                           \
                    global const ST *xp = COL_AT(STRIDED, x, 8 * v, sp.ci);    \
                    global ST *yp = COL_AT(STRIDED, y, 8 * v, sp.co);          \
                    CT8 xv = STRIDED ? LOADG8(xp, sp.ci) : LOAD8(xp);          \
                    CT8 run = a->run[v], o;                                    \
                    if (EXCL) {                                                \
                        o = COL_OUT(a->h[v], run);                             \
                        run += xv;                                             \
                    } else {                                                   \
                        run += xv;                                             \
                        o = COL_OUT(a->h[v], run);                             \
                    }                                                          \
                    if (STRIDED)                                               \
                        STOREG8(yp, sp.co, o);                                 \
                    else                                                       \
                        STORE8S(mode, yp, o);                                  \
                    a->run[v] = run;                                           \
                }                                                              \
                for (uint i = 0; i < ntail; i++) {                             \
                    uint t = REV ? ntail - 1 - i : i;                          \
                    uint c = 8 * nvec + t;                                     \
                    CT xs = LOAD1(COL_AT(STRIDED, x, c, sp.ci));               \
                    CT run = a->trun[t];                                       \
                    global ST *yp = COL_AT(STRIDED, y, c, sp.co);              \
                    if (EXCL) {                                                \
                        STORE1(yp, COL_OUT(a->th[t], run));                    \
                        run += xs;                                             \
                    } else {                                                   \
                        run += xs;                                             \
                        STORE1(yp, COL_OUT(a->th[t], run));                    \
                    }                                                          \
                    a->trun[t] = run;                                          \
                }                                                              \
            }                                                                  \
            for (uint v = 0; v < nvec; v++) {                                  \
                CT8 l = (CT8)Z;                                                \
                COL_FOLD8(a->h[v], l, a->run[v]);                              \
                a->l[v] = l;                                                   \
            }                                                                  \
            for (uint t = 0; t < ntail; t++) {                                 \
                CT l = Z;                                                      \
                COL_FOLD(a->th[t], l, a->trun[t]);                             \
                a->tl[t] = l;                                                  \
            }                                                                  \
        }                                                                      \
    }

DEFINE_COL_WALK(col_fi, 0, 0, 0)
DEFINE_COL_WALK(col_fx, 0, 1, 0)
DEFINE_COL_WALK(col_ri, 1, 0, 0)
DEFINE_COL_WALK(col_rx, 1, 1, 0)
DEFINE_COL_WALK(scol_fi, 0, 0, 1)
DEFINE_COL_WALK(scol_fx, 0, 1, 1)
DEFINE_COL_WALK(scol_ri, 1, 0, 1)
DEFINE_COL_WALK(scol_rx, 1, 1, 1)

/* Strided walks whose output runs along the rows (ro == 1: each output
 * line is contiguous) go 64 rows by 16 columns at a time, so that every
 * column's 64 outputs are written as one run of whole cache lines; each
 * column's rows are scanned in vector lanes, as rows_direct scans a line.
 * An input that is not contiguous along the rows is read a row of 16
 * columns at a time and transposed in registers; its cache lines serve all
 * 16 columns while they are in the cache. (Measured, BENCHMARKS.md: for
 * lines contiguous on both sides this runs at the packed scan's speed,
 * where the row-at-a-time walk ran at a fifth of it; for layouts that
 * transpose, it is no faster than that walk.) */
#define TR 64 /* rows per tile: TR / 8 vectors per column */
#define TC 16 /* columns per tile */

/* The transpose of an 8 x 8 block in registers: three rounds of
 * shuffles, each swapping the off-diagonal quarters of ever larger
 * blocks (1 x 1 within 2 x 2, 2 x 2 within 4 x 4, 4 x 4 within 8 x 8). */
static inline void transpose8(const CT8 *a, CT8 *d)
{
    CT8 b[8], c[8];
    for (uint i = 0; i < 8; i += 2) {
        CT8 x = a[i], y = a[i + 1];
        b[i] = (CT8)(x.s0, y.s0, x.s2, y.s2, x.s4, y.s4, x.s6, y.s6);
        b[i + 1] = (CT8)(x.s1, y.s1, x.s3, y.s3, x.s5, y.s5, x.s7, y.s7);
    }
    for (uint i = 0; i < 8; i += (i % 2 ? 3 : 1)) { /* 0, 1, 4, 5 */
        CT8 x = b[i], y = b[i + 2];
        c[i] = (CT8)(x.s01, y.s01, x.s45, y.s45);
        c[i + 2] = (CT8)(x.s23, y.s23, x.s67, y.s67);
    }
    for (uint i = 0; i < 4; i++) {
        d[i] = (CT8)(c[i].lo, c[i + 4].lo);
        d[i + 4] = (CT8)(c[i].hi, c[i + 4].hi);
    }
}

/* The first nt tiles of TR rows in scan order, for ncols columns (a
 * multiple of TC), into an output with ro == 1. */
#define DEFINE_COL_TILES(NAME, REV, EXCL)                                      \
    static void NAME(global const ST *in, global ST *out, span_t sp,           \
                     ulong rows, ulong nt, uint ncols, colacc_t *a)            \
    {                                                                          \
        bool tin = sp.ri == 1;                                                 \
        for (uint g = 0; g < ncols / TC; g++) {                                \
            CT hs[TC], ls[TC];                                                 \
            vstore8(a->h[2 * g], 0, hs);                                       \
            vstore8(a->h[2 * g + 1], 0, hs + 8);                               \
            vstore8(a->l[2 * g], 0, ls);                                       \
            vstore8(a->l[2 * g + 1], 0, ls + 8);                               \
            for (ulong b = 0; b < nt; b++) {                                   \
                ulong p0 = REV ? rows - TR * (b + 1) : TR * b;                 \
                global const ST *x0 =                                          \
                    in + sp.bi + p0 * sp.ri + TC * g * sp.ci;                  \
                global ST *y0 = out + sp.bo + p0 + TC * g * sp.co;             \
                CT8 C[TC][TR / 8];                                             \
                if (tin) {                                                     \
                    for (uint c = 0; c < TC; c++)                              \
                        for (uint j = 0; j < TR / 8; j++)                      \
                            C[c][j] = LOAD8(x0 + c * sp.ci + 8 * j);           \
                } else {                                                       \
                    for (uint k = 0; k < TR / 8; k++)                          \
                        for (uint h = 0; h < 2; h++) {                         \
                            CT8 R[8], T[8];                                    \
                            for (uint r = 0; r < 8; r++)                       \
                                R[r] = LOADG8(x0 + (8 * k + r) * sp.ri         \
                                                  + 8 * h * sp.ci,             \
                                              sp.ci);                          \
                            transpose8(R, T);                                  \
                            for (uint i = 0; i < 8; i++)                       \
                                C[8 * h + i][k] = T[i];                        \
                        }                                                      \
                }                                                              \
                for (uint c = 0; c < TC; c++) {                                \
                    CT h = hs[c], run = CARRY_FF ? ls[c] : hs[c];              \
                    (void)h;                                                   \
                    for (uint q = 0; q < TR / 8; q++) {                        \
                        uint j = REV ? TR / 8 - 1 - q : q;                     \
                        CT8 s = REV ? scan8r(C[c][j]) : scan8f(C[c][j]);       \
                        CT8 o = EXCL ? (REV ? excl8r(s) : excl8f(s)) : s;      \
                        STORE8(y0 + c * sp.co + 8 * j, COL_OUT(h, run + o));   \
                        run += REV ? s.s0 : s.s7;                              \
                        if (q % TALLY_BLK == TALLY_BLK - 1) {                  \
                            CT l = Z;                                          \
                            COL_FOLD(h, l, run);                               \
                            run = CARRY_FF ? l : h;                            \
                        }                                                      \
                    }                                                          \
                    CT l = Z;                                                  \
                    COL_FOLD(h, l, run);                                       \
                    hs[c] = h;                                                 \
                    ls[c] = CARRY_FF ? l : h;                                  \
                }                                                              \
            }                                                                  \
            a->h[2 * g] = vload8(0, hs);                                       \
            a->h[2 * g + 1] = vload8(0, hs + 8);                               \
            a->l[2 * g] = vload8(0, ls);                                       \
            a->l[2 * g + 1] = vload8(0, ls + 8);                               \
        }                                                                      \
    }

DEFINE_COL_TILES(tile_fi, 0, 0)
DEFINE_COL_TILES(tile_fx, 0, 1)
DEFINE_COL_TILES(tile_ri, 1, 0)
DEFINE_COL_TILES(tile_rx, 1, 1)

/* One row at a time (see DEFINE_COL_WALK). */
static inline void col_walk_rows(uint mode, bool strided, global const ST *in,
                                 global ST *out, span_t sp, ulong rows,
                                 uint ncols, colacc_t *a)
{
    switch ((mode & 3u) | (strided ? 4u : 0u)) {
    case 0: col_fi(mode, in, out, sp, rows, ncols, a); break;
    case MODE_REVERSE: col_ri(mode, in, out, sp, rows, ncols, a); break;
    case MODE_EXCLUSIVE: col_fx(mode, in, out, sp, rows, ncols, a); break;
    case 3: col_rx(mode, in, out, sp, rows, ncols, a); break;
    case 4: scol_fi(mode, in, out, sp, rows, ncols, a); break;
    case 4 | MODE_REVERSE: scol_ri(mode, in, out, sp, rows, ncols, a); break;
    case 4 | MODE_EXCLUSIVE: scol_fx(mode, in, out, sp, rows, ncols, a); break;
    default: scol_rx(mode, in, out, sp, rows, ncols, a); break;
    }
}

static inline void col_walk(uint mode, bool strided, global const ST *in,
                            global ST *out, span_t sp, ulong rows, uint ncols,
                            colacc_t *a)
{
    if (strided && sp.ro == 1 && ncols % TC == 0 && ncols > 0 && rows >= TR) {
        ulong nt = rows / TR, left = rows - TR * nt;
        switch (mode & 3u) {
        case 0: tile_fi(in, out, sp, rows, nt, ncols, a); break;
        case MODE_REVERSE: tile_ri(in, out, sp, rows, nt, ncols, a); break;
        case MODE_EXCLUSIVE: tile_fx(in, out, sp, rows, nt, ncols, a); break;
        default: tile_rx(in, out, sp, rows, nt, ncols, a); break;
        }
        if (left == 0)
            return;
        /* the rows left over, in scan order after the tiles: the first
         * physical rows when decreasing, the last ones otherwise */
        if (!(mode & MODE_REVERSE)) {
            sp.bi += TR * nt * sp.ri;
            sp.bo += TR * nt * sp.ro;
        }
        rows = left;
    }
    col_walk_rows(mode, strided, in, out, sp, rows, ncols, a);
}

/* Column sums of `rows` rows of the input side of sp into *a, in the same
 * blocked order as the walk. */
#define DEFINE_COL_REDUCE(NAME, STRIDED)                                       \
    static void NAME(global const ST *in, span_t sp, ulong rows, uint ncols,   \
                     colacc_t *a)                                              \
    {                                                                          \
        uint nvec = ncols / 8, ntail = ncols % 8;                              \
        for (ulong r0 = 0; r0 < rows; r0 += TALLY_BLK) {                       \
            uint nr = (uint)min((ulong)TALLY_BLK, rows - r0);                  \
            global const ST *x0 = in + sp.bi + r0 * sp.ri;                     \
            for (uint v = 0; v < nvec; v++) {                                  \
                CT8 r = (CT8)Z;                                                \
                for (uint k = 0; k < nr; k++) {                                \
                    global const ST *p =                                       \
                        COL_AT(STRIDED, x0 + k * sp.ri, 8 * v, sp.ci);         \
                    r += STRIDED ? LOADG8(p, sp.ci) : LOAD8(p);                \
                }                                                              \
                FF_ADD8(a->h[v], a->l[v], r);                                  \
            }                                                                  \
            for (uint t = 0; t < ntail; t++) {                                 \
                CT r = Z;                                                      \
                for (uint k = 0; k < nr; k++)                                  \
                    r += LOAD1(                                                \
                        COL_AT(STRIDED, x0 + k * sp.ri, 8 * nvec + t, sp.ci)); \
                FF_ADD(a->th[t], a->tl[t], r);                                 \
            }                                                                  \
        }                                                                      \
    }
DEFINE_COL_REDUCE(col_reduce_packed, 0)
DEFINE_COL_REDUCE(col_reduce_strided, 1)

static inline void col_reduce(bool strided, global const ST *in, span_t sp,
                              ulong rows, uint ncols, colacc_t *a)
{
    if (strided)
        col_reduce_strided(in, sp, rows, ncols, a);
    else
        col_reduce_packed(in, sp, rows, ncols, a);
}

/* This work-item's columns in a column tile: the first column and count. */
static inline uint col_span(ulong blk, ulong inner, uint cw, ulong *c0)
{
    ulong first = blk * (ulong)TALLY_WG * cw + get_local_id(0) * (ulong)cw;
    *c0 = first;
    if (first >= inner)
        return 0;
    return (uint)min((ulong)cw, inner - first);
}

/* The span of this work-item's columns in column block blk of outer
 * slice o, and their count (0: none). geom is NULL for packed tensors of
 * (outer, n, inner); for strided ones it holds, as ulongs: ri, ro, ci, co,
 * the number of outer dimensions d, then their d sizes, d input strides
 * and d output strides, outermost first. */
static inline uint tile_columns(global const ulong *geom, ulong o, ulong blk,
                                ulong n, ulong inner, uint cw, span_t *sp)
{
    ulong c0;
    uint ncols = col_span(blk, inner, cw, &c0);
    if (geom == 0) {
        sp->bi = sp->bo = o * n * inner + c0;
        sp->ri = sp->ro = inner;
        sp->ci = sp->co = 1;
        return ncols;
    }
    sp->ri = geom[0];
    sp->ro = geom[1];
    sp->ci = geom[2];
    sp->co = geom[3];
    ulong nd = geom[4], bi = c0 * sp->ci, bo = c0 * sp->co;
    for (ulong k = nd; k-- > 0;) {
        ulong size = geom[5 + k], i = o % size;
        o /= size;
        bi += i * geom[5 + nd + k];
        bo += i * geom[5 + 2 * nd + k];
    }
    sp->bi = bi;
    sp->bo = bo;
    return ncols;
}

static void cols_direct_tile(global const ST *in, global ST *out,
                             global const ulong *geom, ulong t, ulong n,
                             ulong inner, uint cw, ulong nblk, uint mode)
{
    span_t sp;
    uint ncols = tile_columns(geom, t / nblk, t % nblk, n, inner, cw, &sp);
    if (ncols == 0)
        return;
    colacc_t a;
    colacc_init(&a, ncols / 8, ncols % 8);
    col_walk(mode, geom != 0, in, out, sp, n, ncols, &a);
}

kernel __attribute__((reqd_work_group_size(TALLY_WG, 1, 1)))
void tally_cols_direct(global const ST *in, global ST *out,
                       global volatile uint *state, ulong outer, ulong n,
                       ulong inner, uint cw, ulong nblk, uint mode)
{
    local uint tile_sh;
    EACH_TILE(t, outer * nblk, &tile_sh,
              cols_direct_tile(in, out, 0, t, n, inner, cw, nblk, mode));
}

/* tally_cols_direct through strides: the geometry is in geom (see
 * tile_columns); outer counts the outer slices, inner the columns. */
kernel __attribute__((reqd_work_group_size(TALLY_WG, 1, 1)))
void tally_strided_direct(global const ST *in, global ST *out,
                          global volatile uint *state,
                          global const ulong *geom, ulong outer, ulong n,
                          ulong inner, uint cw, ulong nblk, uint mode)
{
    local uint tile_sh;
    EACH_TILE(t, outer * nblk, &tile_sh,
              cols_direct_tile(in, out, geom, t, n, inner, cw, nblk, mode));
}

/* Chained columns: tile t is chunk t % nchunks (of `rows` rows, in scan
 * order) of column block (t / nchunks) % nblk of slice t / nchunks / nblk.
 * Each column of a tile publishes its own aggregate and prefix (TALLY_WG * cw
 * values per tile); the status word is per tile and set once every
 * work-item has written its columns. Every work-item reaches every barrier:
 * work-items without columns just have nothing to publish. */
static void cols_chained_tile(global const ST *in, global ST *out,
                              global volatile uint *state,
                              global volatile carry_t *vals,
                              global const ulong *geom, ulong t, ulong n,
                              ulong inner, uint cw, ulong nblk, ulong rows,
                              uint mode)
{
    ulong nchunks = (n + rows - 1) / rows;
    ulong width = (ulong)TALLY_WG * cw;
    uint lid = get_local_id(0);
    ulong chunk = t % nchunks, slice = t / nchunks;
    span_t sp;
    uint ncols =
        tile_columns(geom, slice / nblk, slice % nblk, n, inner, cw, &sp);
    ulong r0 = chunk * rows, nr = min(rows, n - r0);
    /* rows [r0, r0 + nr) in scan order; the physical first row: */
    ulong prow = (mode & MODE_REVERSE) ? n - r0 - nr : r0;
    sp.bi += prow * sp.ri;
    sp.bo += prow * sp.ro;
    bool strided = geom != 0;
    uint nvec = ncols / 8, ntail = ncols % 8;
    uint st = chunk == 0 ? ST_PREFIX : ST_AGGREGATE;
    colacc_t a;

    /* 1. reduce and publish this tile's column sums */
    colacc_init(&a, nvec, ntail);
    col_reduce(strided, in, sp, nr, ncols, &a);
    for (uint v = 0; v < nvec + (ntail > 0); v++) {
        CT h[8], l[8];
        colacc_get(&a, v, nvec, ntail, h, l);
        for (uint e = 0; e < 8 && 8 * v + e < ncols; e++) {
            carry_t x;
            x.h = h[e];
            x.l = l[e];
            publish(vals, width, t, lid * cw + 8 * v + e, x, st);
        }
    }
    barrier(CLK_GLOBAL_MEM_FENCE);
    if (lid == 0)
        set_status(state, t, st);

    /* 2. look back, column by column, and publish the prefixes */
    colacc_t pre;
    colacc_init(&pre, nvec, ntail);
    if (chunk != 0) {
        ulong first = t - chunk;
        for (uint v = 0; v < nvec + (ntail > 0); v++) {
            CT h[8], l[8], ph[8], pl[8];
            colacc_get(&a, v, nvec, ntail, h, l);
            for (uint e = 0; e < 8; e++) {
                ph[e] = Z;
                pl[e] = Z;
                if (8 * v + e >= ncols)
                    continue;
                ulong col = lid * cw + 8 * v + e;
                carry_t p = look_back(state, vals, width, t, first, col);
                carry_t inc = p, me;
                me.h = h[e];
                me.l = l[e];
                carry_add(&inc, me);
                if (!TALLY_LAZY)
                    publish(vals, width, t, col, inc, ST_PREFIX);
                ph[e] = p.h;
                pl[e] = p.l;
            }
            colacc_set(&pre, v, nvec, ntail, ph, pl);
        }
        barrier(CLK_GLOBAL_MEM_FENCE);
        if (lid == 0 && !TALLY_LAZY)
            set_status(state, t, ST_PREFIX);
    }

    /* 3. scan the tile from the prefixes */
    if (ncols)
        col_walk(mode, strided, in, out, sp, nr, ncols, &pre);
}

kernel __attribute__((reqd_work_group_size(TALLY_WG, 1, 1)))
void tally_cols_chained(global const ST *in, global ST *out,
                        global volatile uint *state,
                        global volatile carry_t *vals, ulong outer, ulong n,
                        ulong inner, uint cw, ulong nblk, ulong rows,
                        uint mode)
{
    local uint tile_sh;
    ulong ntiles = outer * nblk * ((n + rows - 1) / rows);
    EACH_TILE(t, ntiles, &tile_sh,
              cols_chained_tile(in, out, state, vals, 0, t, n, inner, cw,
                                nblk, rows, mode));
}

/* tally_cols_chained through strides (see tally_strided_direct). */
kernel __attribute__((reqd_work_group_size(TALLY_WG, 1, 1)))
void tally_strided_chained(global const ST *in, global ST *out,
                           global volatile uint *state,
                           global volatile carry_t *vals,
                           global const ulong *geom, ulong outer, ulong n,
                           ulong inner, uint cw, ulong nblk, ulong rows,
                           uint mode)
{
    local uint tile_sh;
    ulong ntiles = outer * nblk * ((n + rows - 1) / rows);
    EACH_TILE(t, ntiles, &tile_sh,
              cols_chained_tile(in, out, state, vals, geom, t, n, inner, cw,
                                nblk, rows, mode));
}
