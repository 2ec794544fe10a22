/*
 * fuzz_client_npy.c - libtally's .npy reader (tally_npy_read's core, over
 * the header parser the server shares), fed from memory.
 *
 * The first byte's low bit asks for bfloat16. Properties: a refusal comes
 * with a NUL-terminated UTF-8 message and allocates nothing; an accepted
 * file gives a rank from 1 to TALLY_MAX_RANK and data of exactly
 * shape x itemsize bytes, little-endian and C order, so that writing it
 * as tally writes .npy files and reading it again changes nothing.
 */
#define _GNU_SOURCE /* fmemopen */
#include "../../client/lib/npy.c"

#include "fuzzlib.h"

static tally_code read_mem(const uint8_t *p, size_t n, unsigned flags,
                           tally_dt *dt, int *rank, int64_t *shape, void **data,
                           size_t *bytes, char *msg, size_t msglen)
{
    static const uint8_t none[1];
    FILE *f = fmemopen((void *)(n ? p : none), n ? n : 1, "rb");
    FUZZ_CHECK(f != NULL, "fmemopen");
    if (n == 0)
        fgetc(f); /* at the end: an empty file */
    tally_code c =
        read_file(f, "x.npy", flags, dt, rank, shape, data, bytes, msg, msglen);
    fclose(f);
    return c;
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 1)
        return 0;
    unsigned flags = (in[0] & 1) ? TALLY_NPY_BFLOAT16 : 0;
    tally_dt dt, dt2;
    int rank, rank2;
    int64_t shape[TALLY_MAX_RANK], shape2[TALLY_MAX_RANK];
    void *data = NULL, *data2 = NULL;
    size_t bytes, bytes2;
    char msg[512];
    tally_code c = read_mem(in + 1, size - 1, flags, &dt, &rank, shape, &data,
                            &bytes, msg, sizeof msg);
    if (c != TALLYE_OK) {
        fuzz_message("tally_npy_read's message", msg, sizeof msg);
        FUZZ_CHECK(data == NULL, "a refusal that allocated");
        return 0;
    }
    FUZZ_CHECK(rank >= 1 && rank <= TALLY_MAX_RANK, "rank %d", rank);
    uint64_t count = 1, ushape[TALLY_MAX_RANK];
    for (int d = 0; d < rank; d++) {
        FUZZ_CHECK(shape[d] >= 0, "shape[%d] = %lld", d, (long long)shape[d]);
        count *= (uint64_t)shape[d];
        ushape[d] = (uint64_t)shape[d];
    }
    FUZZ_CHECK(count * tally_dt_size(dt) == bytes, "%llu elements in %zu bytes",
               (unsigned long long)count, bytes);
    uint8_t *file = malloc(TX_NPY_WRITE_MAX + bytes);
    FUZZ_CHECK(file != NULL, "out of memory");
    size_t hlen = tx_npy_write_header((tx_dtype)dt, ushape, rank, file);
    if (bytes)
        memcpy(file + hlen, data, bytes);
    c = read_mem(file, hlen + bytes,
                 dt == TALLY_DT_BFLOAT16 ? TALLY_NPY_BFLOAT16 : 0, &dt2, &rank2,
                 shape2, &data2, &bytes2, msg, sizeof msg);
    FUZZ_CHECK(c == TALLYE_OK, "what tally writes does not read back: %s", msg);
    FUZZ_CHECK(dt2 == dt && rank2 == rank
                   && memcmp(shape2, shape, sizeof shape[0] * (size_t)rank) == 0
                   && bytes2 == bytes
                   && (bytes == 0 || memcmp(data2, data, bytes) == 0),
               "written and read again, the array changed");
    free(file);
    free(data);
    free(data2);
    return 0;
}
