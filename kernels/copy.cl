/*
 * copy.cl - plain device copies, the yardsticks of the scan benchmarks.
 *
 * Each work-item moves 16 bytes; work-item 0 also moves the tail when the
 * size is not a multiple of 16. tally_copy is what a scan would cost if
 * summing were free: one read and one write of every byte (and the read
 * of each output line a cached store does first). tally_copy_stream writes
 * with non-temporal stores where the compiler has them (TALLY_NT), as the
 * scan kernels do for large outputs, and is otherwise the same copy.
 */
#ifndef TALLY_NT
#define TALLY_NT 0
#endif

static inline void tail_copy(global const uint4 *in, global uint4 *out,
                             ulong n16, uint tail)
{
    global const uchar *a = (global const uchar *)(in + n16);
    global uchar *b = (global uchar *)(out + n16);
    for (uint t = 0; t < tail; t++)
        b[t] = a[t];
}

kernel void tally_copy(global const uint4 *in, global uint4 *out, ulong n16,
                       uint tail)
{
    size_t i = get_global_id(0);
    if (i < n16)
        out[i] = in[i];
    if (i == 0)
        tail_copy(in, out, n16, tail);
}

kernel void tally_copy_stream(global const uint4 *in, global uint4 *out,
                              ulong n16, uint tail)
{
    size_t i = get_global_id(0);
    if (i < n16) {
#if TALLY_NT
        __builtin_nontemporal_store(in[i], &out[i]);
#else
        out[i] = in[i];
#endif
    }
    if (i == 0)
        tail_copy(in, out, n16, tail);
}
