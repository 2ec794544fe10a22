/*
 * npy.c - reading and writing NumPy .npy files.
 *
 * An .npy file is a magic string, a version, a header length, a header
 * that is a Python dict literal ({'descr': '<f4', 'fortran_order': False,
 * 'shape': (3, 4), }) padded so that the data starts on a 64-byte
 * boundary, and the raw data. Reading accepts versions 1 to 3, either byte
 * order and either memory order, and hands back little-endian C order;
 * writing produces version 1 (2 when the header is too long for it).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define MAGIC "\x93NUMPY"
#define MAX_HEADER (1u << 20)

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
 * The header dict.
 */
typedef struct {
    const char *p, *end;
} cursor;

static void skip_space(cursor *c)
{
    while (c->p < c->end
           && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        c->p++;
}

static bool eat(cursor *c, char ch)
{
    skip_space(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes: what numpy writes. */
static bool quoted(cursor *c, const char **s, size_t *len)
{
    skip_space(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return false;
    char q = *c->p++;
    const char *start = c->p;
    while (c->p < c->end && *c->p != q && *c->p != '\\')
        c->p++;
    if (c->p >= c->end || *c->p != q)
        return false;
    *s = start;
    *len = (size_t)(c->p - start);
    c->p++;
    return true;
}

static bool word(cursor *c, const char *w)
{
    skip_space(c);
    size_t n = strlen(w);
    if ((size_t)(c->end - c->p) >= n && memcmp(c->p, w, n) == 0) {
        c->p += n;
        return true;
    }
    return false;
}

typedef struct {
    char descr[16];
    bool fortran;
    int rank;
    int64_t shape[TALLY_MAX_RANK];
} header;

static tally_code parse_shape(cursor *c, header *h, char *msg, size_t len)
{
    if (!eat(c, '('))
        return say(msg, len, TALLYE_FORMAT, "'shape' is not a tuple");
    h->rank = 0;
    for (;;) {
        if (eat(c, ')'))
            return TALLYE_OK;
        skip_space(c);
        if (h->rank == TALLY_MAX_RANK)
            return say(msg, len, TALLYE_FORMAT,
                       "the array has more than %d dimensions", TALLY_MAX_RANK);
        char *end;
        errno = 0;
        if (c->p >= c->end || *c->p < '0' || *c->p > '9')
            return say(msg, len, TALLYE_FORMAT,
                       "'shape' holds something other than sizes");
        unsigned long long v = strtoull(c->p, &end, 10);
        if (errno != 0 || end > c->end || v > INT64_MAX)
            return say(msg, len, TALLYE_FORMAT, "a size in 'shape' is too big");
        c->p = end;
        word(c, "L"); /* Python 2's long suffix */
        h->shape[h->rank++] = (int64_t)v;
        if (!eat(c, ',')) {
            if (eat(c, ')'))
                return TALLYE_OK;
            return say(msg, len, TALLYE_FORMAT, "'shape' is not a tuple");
        }
    }
}

static tally_code parse_header(const char *text, size_t n, header *h, char *msg,
                               size_t len)
{
    cursor c = {text, text + n};
    bool have_descr = false, have_order = false, have_shape = false;
    if (!eat(&c, '{'))
        return say(msg, len, TALLYE_FORMAT, "the header is not a dict");
    for (;;) {
        if (eat(&c, '}'))
            break;
        const char *key;
        size_t klen;
        if (!quoted(&c, &key, &klen) || !eat(&c, ':'))
            return say(msg, len, TALLYE_FORMAT, "the header dict is malformed");
        if (klen == 5 && memcmp(key, "descr", 5) == 0) {
            const char *v;
            size_t vlen;
            if (!quoted(&c, &v, &vlen))
                return say(msg, len, TALLYE_FORMAT,
                           "'descr' is not a simple type string (structured "
                           "arrays are not tensors)");
            if (vlen >= sizeof h->descr)
                return say(msg, len, TALLYE_FORMAT,
                           "dtype '%.40s' is not numeric", v);
            memcpy(h->descr, v, vlen);
            h->descr[vlen] = '\0';
            have_descr = true;
        } else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0) {
            if (word(&c, "True"))
                h->fortran = true;
            else if (word(&c, "False"))
                h->fortran = false;
            else
                return say(msg, len, TALLYE_FORMAT,
                           "'fortran_order' is not True or False");
            have_order = true;
        } else if (klen == 5 && memcmp(key, "shape", 5) == 0) {
            tally_code code = parse_shape(&c, h, msg, len);
            if (code != TALLYE_OK)
                return code;
            have_shape = true;
        } else {
            return say(msg, len, TALLYE_FORMAT,
                       "the header has an unknown key '%.*s'",
                       (int)(klen > 40 ? 40 : klen), key);
        }
        if (!eat(&c, ',')) {
            if (eat(&c, '}'))
                break;
            return say(msg, len, TALLYE_FORMAT, "the header dict is malformed");
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return say(msg, len, TALLYE_FORMAT, "the header lacks '%s'",
                   !have_descr   ? "descr"
                   : !have_order ? "fortran_order"
                                 : "shape");
    return TALLYE_OK;
}

/* Maps a descr ('<f4') to a dtype; sets *swap for big-endian data. */
static tally_code dtype_of(const char *d, unsigned flags, tally_dt *dt,
                           bool *swap, char *msg, size_t len)
{
    static const struct {
        const char *code;
        tally_dt dt;
    } table[] = {
        {"f2", TALLY_DT_FLOAT16}, {"f4", TALLY_DT_FLOAT32},
        {"f8", TALLY_DT_FLOAT64}, {"i1", TALLY_DT_INT8},
        {"i2", TALLY_DT_INT16},   {"i4", TALLY_DT_INT32},
        {"i8", TALLY_DT_INT64},   {"u1", TALLY_DT_UINT8},
        {"u2", TALLY_DT_UINT16},  {"u4", TALLY_DT_UINT32},
        {"u8", TALLY_DT_UINT64},
    };
    char order = d[0];
    const char *code = d + 1;
    if (order != '<' && order != '>' && order != '|' && order != '=')
        return say(msg, len, TALLYE_FORMAT, "dtype '%s' is not understood", d);
    *swap = order == '>';
    if (flags & TALLY_NPY_BFLOAT16) {
        if (strcmp(code, "u2") == 0 || strcmp(code, "i2") == 0
            || strcmp(code, "f2") == 0 || strcmp(code, "V2") == 0) {
            *dt = TALLY_DT_BFLOAT16;
            return TALLYE_OK;
        }
        return say(msg, len, TALLYE_FORMAT,
                   "bfloat16 needs a 2-byte array ('<u2', '<i2', '<f2' or "
                   "'|V2'), not '%s'",
                   d);
    }
    for (size_t i = 0; i < sizeof table / sizeof *table; i++)
        if (strcmp(code, table[i].code) == 0) {
            *dt = table[i].dt;
            if (tally_dt_size(*dt) == 1)
                *swap = false;
            return TALLYE_OK;
        }
    return say(msg, len, TALLYE_FORMAT,
               "dtype '%s' is not one tally computes (float16/32/64, "
               "int8-64, uint8-64; bfloat16 as a 2-byte array)",
               d);
}

/* ------------------------------------------------------------------------
 * Layout fixes.
 */
static void byteswap(void *data, size_t count, size_t size)
{
    unsigned char *p = data;
    for (size_t i = 0; i < count; i++, p += size)
        for (size_t a = 0, b = size - 1; a < b; a++, b--) {
            unsigned char t = p[a];
            p[a] = p[b];
            p[b] = t;
        }
}

/* Copies Fortran-order src into C-order dst. Walks the source in order,
 * keeping the destination offset with an odometer over the dimensions,
 * the first fastest. */
static void fortran_to_c(const char *src, char *dst, size_t size, int rank,
                         const int64_t *shape, size_t count)
{
    size_t stride[TALLY_MAX_RANK], idx[TALLY_MAX_RANK] = {0};
    size_t s = size;
    for (int d = rank - 1; d >= 0; d--) {
        stride[d] = s;
        s *= (size_t)shape[d];
    }
    size_t off = 0;
    for (size_t i = 0; i < count; i++) {
        memcpy(dst + off, src + i * size, size);
        for (int d = 0; d < rank; d++) {
            off += stride[d];
            if (++idx[d] < (size_t)shape[d])
                break;
            off -= stride[d] * idx[d];
            idx[d] = 0;
        }
    }
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
    unsigned char pre[12];
    if (!read_all(f, pre, 10)) {
        if (ferror(f))
            return say(msg, len, TALLYE_IO, "%s: %s", path, strerror(errno));
        return say(msg, len, TALLYE_FORMAT,
                   "%s is not an .npy file (too short)", path);
    }
    if (memcmp(pre, MAGIC, 6) != 0)
        return say(msg, len, TALLYE_FORMAT,
                   "%s is not an .npy file (no \\x93NUMPY magic)", path);
    int major = pre[6];
    size_t hlen;
    if (major == 1) {
        hlen = pre[8] | (size_t)pre[9] << 8;
    } else if (major == 2 || major == 3) {
        if (!read_all(f, pre + 10, 2))
            return say(msg, len, TALLYE_FORMAT, "%s: truncated header", path);
        hlen = pre[8] | (size_t)pre[9] << 8 | (size_t)pre[10] << 16
               | (size_t)pre[11] << 24;
    } else {
        return say(msg, len, TALLYE_FORMAT,
                   "%s: .npy format version %d is not 1, 2 or 3", path, major);
    }
    if (hlen > MAX_HEADER)
        return say(msg, len, TALLYE_FORMAT,
                   "%s: the header claims %zu bytes (limit %u)", path, hlen,
                   MAX_HEADER);
    char *text = malloc(hlen + 1);
    if (text == NULL)
        return say(msg, len, TALLYE_NOMEM, "out of memory");
    header h = {0};
    tally_code code = TALLYE_OK;
    if (!read_all(f, text, hlen))
        code = say(msg, len, TALLYE_FORMAT, "%s: truncated header", path);
    else
        code = parse_header(text, hlen, &h, msg, len);
    free(text);
    if (code != TALLYE_OK)
        return code;

    bool swap = false;
    tally_dt dt = TALLY_DT_FLOAT32;
    code = dtype_of(h.descr, flags, &dt, &swap, msg, len);
    if (code != TALLYE_OK)
        return code;
    if (h.rank == 0)
        return say(msg, len, TALLYE_FORMAT,
                   "%s holds a scalar (rank 0); a cumulative sum needs an "
                   "array of rank 1 or more",
                   path);
    size_t size = tally_dt_size(dt), count = 1;
    for (int d = 0; d < h.rank; d++) {
        uint64_t s = (uint64_t)h.shape[d];
        if (s != 0 && count > SIZE_MAX / 2 / size / s)
            return say(msg, len, TALLYE_FORMAT,
                       "%s: the shape is too large for memory", path);
        count *= (size_t)s;
    }
    size_t n = count * size;
    /* a file shorter than its shape says is caught before allocating */
    struct stat st;
    long at = ftell(f);
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && at >= 0
        && (uint64_t)st.st_size - (uint64_t)at < n)
        return say(msg, len, TALLYE_FORMAT,
                   "%s is truncated: its shape needs %zu bytes of data, it "
                   "has %llu",
                   path, n,
                   (unsigned long long)st.st_size - (unsigned long long)at);
    void *buf = NULL;
    if (n > 0) {
        buf = malloc(n);
        if (buf == NULL)
            return say(msg, len, TALLYE_NOMEM,
                       "out of memory for %zu bytes of %s", n, path);
        if (!read_all(f, buf, n)) {
            free(buf);
            if (ferror(f))
                return say(msg, len, TALLYE_IO, "%s: %s", path,
                           strerror(errno));
            return say(msg, len, TALLYE_FORMAT,
                       "%s is truncated: its shape needs %zu bytes of data",
                       path, n);
        }
    }
    if (fgetc(f) != EOF) {
        free(buf);
        return say(msg, len, TALLYE_FORMAT,
                   "%s has bytes after the data its shape describes", path);
    }
    if (swap)
        byteswap(buf, count, size);
    if (h.fortran && h.rank > 1 && count > 0) {
        void *c_order = malloc(n);
        if (c_order == NULL) {
            free(buf);
            return say(msg, len, TALLYE_NOMEM, "out of memory");
        }
        fortran_to_c(buf, c_order, size, h.rank, h.shape, count);
        free(buf);
        buf = c_order;
    }
    *dtype = dt;
    *rank = h.rank;
    memcpy(shape, h.shape, (size_t)h.rank * sizeof *shape);
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
static const char *descr_of(tally_dt t)
{
    switch (t) {
    case TALLY_DT_FLOAT16: return "<f2";
    case TALLY_DT_BFLOAT16: return "<u2";
    case TALLY_DT_FLOAT32: return "<f4";
    case TALLY_DT_FLOAT64: return "<f8";
    case TALLY_DT_INT8: return "|i1";
    case TALLY_DT_INT16: return "<i2";
    case TALLY_DT_INT32: return "<i4";
    case TALLY_DT_INT64: return "<i8";
    case TALLY_DT_UINT8: return "|u1";
    case TALLY_DT_UINT16: return "<u2";
    case TALLY_DT_UINT32: return "<u4";
    case TALLY_DT_UINT64: return "<u8";
    }
    return NULL;
}

/* The preamble and header, padded to 64 bytes; returns its length, or 0
 * when memory runs out. The caller frees *out. */
static size_t make_header(tally_dt t, int rank, const int64_t *shape,
                          char **out)
{
    size_t cap = 128 + (size_t)rank * 24;
    char *dict = malloc(cap);
    if (dict == NULL)
        return 0;
    size_t n = (size_t)snprintf(dict, cap,
                                "{'descr': '%s', 'fortran_order': False, "
                                "'shape': (",
                                descr_of(t));
    for (int d = 0; d < rank; d++)
        n += (size_t)snprintf(dict + n, cap - n, "%s%" PRId64, d ? ", " : "",
                              shape[d]);
    n += (size_t)snprintf(dict + n, cap - n, "%s), }", rank == 1 ? "," : "");
    /* version 1 has a 2-byte header length, version 2 a 4-byte one */
    size_t pre = 10, total = (pre + n + 1 + 63) / 64 * 64;
    if (total - pre > 65535) {
        pre = 12;
        total = (pre + n + 1 + 63) / 64 * 64;
    }
    char *h = malloc(total);
    if (h == NULL) {
        free(dict);
        return 0;
    }
    size_t hlen = total - pre;
    memcpy(h, MAGIC, 6);
    h[6] = pre == 10 ? 1 : 2;
    h[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        h[8 + i] = (char)((hlen >> (8 * i)) & 0xff);
    memcpy(h + pre, dict, n);
    memset(h + pre + n, ' ', total - pre - n - 1);
    h[total - 1] = '\n';
    free(dict);
    *out = h;
    return total;
}

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
    char *head;
    size_t hlen = make_header(dtype, rank, shape, &head);
    if (hlen == 0)
        return say(msg, msg_len, TALLYE_NOMEM, "out of memory");

    bool std = strcmp(path, "-") == 0;
    char *tmp = NULL;
    FILE *f = stdout;
    if (!std) {
        size_t n = strlen(path) + 40;
        tmp = malloc(n);
        if (tmp == NULL) {
            free(head);
            return say(msg, msg_len, TALLYE_NOMEM, "out of memory");
        }
        /* a new name beside the target, created with the usual mode (the
         * umask applies), renamed over it once complete */
        static unsigned long serial;
        int fd = -1;
        for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
            snprintf(tmp, n, "%s.%ld.%lu~", path, (long)getpid(),
                     __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED) % 100000);
            fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
            if (fd < 0 && errno != EEXIST)
                break;
        }
        f = fd < 0 ? NULL : fdopen(fd, "wb");
        if (f == NULL) {
            int err = errno;
            if (fd >= 0) {
                close(fd);
                unlink(tmp);
            }
            free(tmp);
            free(head);
            return say(msg, msg_len, TALLYE_IO, "cannot write %s: %s", path,
                       strerror(err));
        }
    }
    bool ok = fwrite(head, 1, hlen, f) == hlen
              && (count == 0 || fwrite(data, size, count, f) == count);
    int err = errno;
    if (std) {
        ok = fflush(f) == 0 && ok;
    } else {
        ok = fclose(f) == 0 && ok;
        if (!ok)
            err = errno;
        if (ok && rename(tmp, path) != 0) {
            ok = false;
            err = errno;
        }
        if (!ok)
            unlink(tmp);
        free(tmp);
    }
    free(head);
    if (!ok)
        return say(msg, msg_len, TALLYE_IO, "cannot write %s: %s",
                   std ? "standard output" : path, strerror(err));
    return TALLYE_OK;
}
