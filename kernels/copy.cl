/*
 * copy.cl - a plain device copy, the yardstick of the scan benchmarks.
 *
 * Each work-item moves 16 bytes; work-item 0 also moves the tail when the
 * size is not a multiple of 16. It is what a scan would cost if summing
 * were free: one read and one write of every byte.
 */
kernel void tally_copy(global const uint4 *in, global uint4 *out, ulong n16,
                       uint tail)
{
    size_t i = get_global_id(0);
    if (i < n16)
        out[i] = in[i];
    if (i == 0) {
        global const uchar *a = (global const uchar *)(in + n16);
        global uchar *b = (global uchar *)(out + n16);
        for (uint t = 0; t < tail; t++)
            b[t] = a[t];
    }
}
