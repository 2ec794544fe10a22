/*
 * npy.c - reading and writing NumPy .npy files.
 *
 * An .npy file is a magic string, a version, a header length, a header
 * that is a Python dict literal ({'descr': '<f4', 'fortran_order': False,
 * 'shape': (3, 4), }) padded so that the data starts on a 64-byte
 * boundary, and the raw data. Reading accepts versions 1 to 3, either byte
 * order and either memory order, and hands back little-endian C order;
 * writing produces version 1. The header itself is read and written by
 * common/tx_npy.c, which the server uses too; this file does the I/O.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "tx_file.h"
#include "tx_npy.h"

static tally_code say(char *msg, size_t len, tally_code code, const char *fmt,
                      ...) __attribute__((format(printf, 4, 5)));

static tally_code say(char *msg, size_t len, tally_code code, const char *fmt,
                      ...)
{
    if (msg != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, len, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ------------------------------------------------------------------------
 * Reading.
 */
static bool read_all(FILE *f, void *buf, size_t n)
{
    return n == 0 || fread(buf, 1, n, f) == n;
}

static tally_code read_file(FILE *f, const char *path, unsigned flags,
                            tally_dt *dtype, int *rank, int64_t *shape,
                            void **data, size_t *bytes, char *msg, size_t len)
{
    /* the preamble (10 or 12 bytes), then the header it announces, then
     * the one parser the server uses too */
    uint8_t pre[12];
    size_t got = fread(pre, 1, 10, f), plen, hlen, need;
    if (got < 10 && ferror(f))
        return say(msg, len, TALLYE_IO, "%s: %s", path, strerror(errno));
    char why[256];
    tx_npy_status st =
        tx_npy_preamble(pre, got, &plen, &hlen, &need, why, sizeof why);
    if (st != TX_NPY_OK && need == 12) {
        got += fread(pre + 10, 1, 2, f);
        st = tx_npy_preamble(pre, got, &plen, &hlen, &need, why, sizeof why);
    }
    if (st != TX_NPY_OK && (got < 10 || memcmp(pre, "\x93NUMPY", 6) != 0))
        return say(msg, len, TALLYE_FORMAT, "%s is not an .npy file (%s)", path,
                   got < 10 ? "too short" : "no \\x93NUMPY magic");
    if (st != TX_NPY_OK)
        return say(msg, len, TALLYE_FORMAT, "%s: %s", path, why);
    uint8_t *text = malloc(plen + hlen);
    if (text == NULL)
        return say(msg, len, TALLYE_NOMEM, "out of memory");
    memcpy(text, pre, plen);
    tx_npy_header h;
    tally_code code = TALLYE_OK;
    if (!read_all(f, text + plen, hlen))
        code = say(msg, len, TALLYE_FORMAT, "%s: truncated header", path);
    else if (tx_npy_parse(text, plen + hlen, (flags & TALLY_NPY_BFLOAT16) != 0,
                          &h, why, sizeof why)
             != TX_NPY_OK)
        code = say(msg, len, TALLYE_FORMAT, "%s: %s", path, why);
    free(text);
    if (code != TALLYE_OK)
        return code;

    size_t size = tx_dtype_size(h.dtype);
    if (h.data_bytes > SIZE_MAX / 2)
        return say(msg, len, TALLYE_FORMAT,
                   "%s: the shape is too large for memory", path);
    /* a dimension past int64 (the API's type) can pass the size check
     * beside a 0: (0, 2^64 - 1) holds no bytes */
    for (int d = 0; d < h.rank; d++)
        if (h.shape[d] > (uint64_t)INT64_MAX)
            return say(msg, len, TALLYE_FORMAT,
                       "%s: dimension %d of its shape, %llu, is larger than "
                       "2^63 - 1",
                       path, d, (unsigned long long)h.shape[d]);
    size_t n = (size_t)h.data_bytes, count = n / size;
    /* a file shorter than its shape says is caught before allocating; a
     * pipe, whose length is unknown, gets memory as its bytes come */
    struct stat st_;
    long at = ftell(f);
    bool sized = fstat(fileno(f), &st_) == 0 && S_ISREG(st_.st_mode) && at >= 0;
    if (sized && (uint64_t)st_.st_size - (uint64_t)at < n)
        return say(msg, len, TALLYE_FORMAT,
                   "%s is truncated: its shape needs %zu bytes of data, it "
                   "has %llu",
                   path, n,
                   (unsigned long long)st_.st_size - (unsigned long long)at);
    void *buf = NULL;
    size_t have = 0, cap = 0;
    while (have < n) {
        if (have == cap) {
            size_t next = sized || n - cap <= (1u << 20) ? n
                          : cap == 0                     ? (size_t)1 << 20
                          : n / 2 < cap                  ? n
                                                         : cap * 2;
            void *nb = realloc(buf, next);
            if (nb == NULL) {
                free(buf);
                return say(msg, len, TALLYE_NOMEM,
                           "out of memory for %zu bytes of %s", n, path);
            }
            buf = nb;
            cap = next;
        }
        size_t r = fread((char *)buf + have, 1, cap - have, f);
        have += r;
        if (r == 0) {
            free(buf);
            if (ferror(f))
                return say(msg, len, TALLYE_IO, "%s: %s", path,
                           strerror(errno));
            return say(msg, len, TALLYE_FORMAT,
                       "%s is truncated: its shape needs %zu bytes of data, "
                       "it has %zu",
                       path, n, have);
        }
    }
    if (fgetc(f) != EOF) {
        free(buf);
        return say(msg, len, TALLYE_FORMAT,
                   "%s has bytes after the data its shape describes", path);
    }
    if (h.big_endian)
        tx_npy_byteswap(buf, count, size);
    if (h.fortran_order && h.rank > 1 && count > 0) {
        void *c_order = malloc(n);
        if (c_order == NULL) {
            free(buf);
            return say(msg, len, TALLYE_NOMEM, "out of memory");
        }
        tx_npy_fortran_to_c(buf, c_order, size, h.shape, h.rank);
        free(buf);
        buf = c_order;
    }
    for (int d = 0; d < h.rank; d++)
        shape[d] = (int64_t)h.shape[d]; /* <= INT64_MAX, checked above */
    *dtype = (tally_dt)h.dtype;
    *rank = h.rank;
    *data = buf;
    *bytes = n;
    return TALLYE_OK;
}

TALLY_API tally_code tally_npy_read(const char *path, unsigned flags,
                                    tally_dt *dtype, int *rank, int64_t *shape,
                                    void **data, size_t *bytes, char *msg,
                                    size_t msg_len)
{
    if (path == NULL || dtype == NULL || rank == NULL || shape == NULL
        || data == NULL || bytes == NULL || (flags & ~TALLY_NPY_BFLOAT16))
        return say(msg, msg_len, TALLYE_ARGUMENT,
                   "tally_npy_read: a NULL argument or unknown flags");
    *data = NULL;
    *bytes = 0;
    bool std = strcmp(path, "-") == 0;
    FILE *f = std ? stdin : fopen(path, "rb");
    if (f == NULL)
        return say(msg, msg_len, TALLYE_IO, "cannot open %s: %s", path,
                   strerror(errno));
    tally_code code = read_file(f, std ? "standard input" : path, flags, dtype,
                                rank, shape, data, bytes, msg, msg_len);
    if (!std)
        fclose(f);
    return code;
}

/* ------------------------------------------------------------------------
 * Writing.
 */
TALLY_API tally_code tally_npy_write(const char *path, tally_dt dtype, int rank,
                                     const int64_t *shape, const void *data,
                                     char *msg, size_t msg_len)
{
    if (path == NULL || shape == NULL || tally_dt_size(dtype) == 0 || rank < 1
        || rank > TALLY_MAX_RANK)
        return say(msg, msg_len, TALLYE_ARGUMENT,
                   "tally_npy_write: a NULL path or shape, a bad dtype, or a "
                   "rank outside 1 to %d",
                   TALLY_MAX_RANK);
    size_t count = 1, size = tally_dt_size(dtype);
    for (int d = 0; d < rank; d++) {
        if (shape[d] < 0)
            return say(msg, msg_len, TALLYE_ARGUMENT,
                       "tally_npy_write: shape[%d] is negative", d);
        if (shape[d] != 0 && count > SIZE_MAX / 2 / size / (uint64_t)shape[d])
            return say(msg, msg_len, TALLYE_ARGUMENT,
                       "tally_npy_write: the shape is too large");
        count *= (size_t)shape[d];
    }
    if (count > 0 && data == NULL)
        return say(msg, msg_len, TALLYE_ARGUMENT,
                   "tally_npy_write: the data is NULL");
    uint8_t head[TX_NPY_WRITE_MAX];
    uint64_t ushape[TALLY_MAX_RANK];
    for (int d = 0; d < rank; d++)
        ushape[d] = (uint64_t)shape[d];
    size_t hlen = tx_npy_write_header((tx_dtype)dtype, ushape, rank, head);
    int err = tx_write_file(path, head, hlen, data, count * size);
    if (err != 0)
        return say(msg, msg_len, TALLYE_IO, "cannot write %s: %s",
                   strcmp(path, "-") == 0 ? "standard output" : path,
                   strerror(err));
    return TALLYE_OK;
}
