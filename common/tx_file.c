/*
 * tx_file.c - read a whole file; write to a temporary name, then rename.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tx_file.h"

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

int tx_write_file(const char *path, const void *head, size_t hlen,
                  const void *data, size_t dlen)
{
    if (strcmp(path, "-") == 0) {
        /* whatever stdio holds for standard output goes first */
        if (fflush(stdout) != 0)
            return errno;
        int err = write_all(STDOUT_FILENO, head, hlen);
        return err != 0 ? err : write_all(STDOUT_FILENO, data, dlen);
    }
    size_t n = strlen(path) + 40;
    char *tmp = malloc(n);
    if (tmp == NULL)
        return ENOMEM;
    static unsigned long serial;
    int fd = -1, err = 0;
    for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
        snprintf(tmp, n, "%s.%ld.%lu~", path, (long)getpid(),
                 __atomic_add_fetch(&serial, 1, __ATOMIC_RELAXED) % 100000);
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        err = errno;
        free(tmp);
        return err;
    }
    err = write_all(fd, head, hlen);
    if (err == 0)
        err = write_all(fd, data, dlen);
    if (close(fd) != 0 && err == 0)
        err = errno;
    if (err == 0 && rename(tmp, path) != 0)
        err = errno;
    if (err != 0)
        unlink(tmp);
    free(tmp);
    return err;
}

int tx_read_fd(int fd, size_t max, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    /* a regular file's size is the first guess; a stream grows from 4 KiB */
    struct stat st;
    size_t cap = 4096, n = 0;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        if ((uint64_t)st.st_size > max)
            return EFBIG;
        cap = (size_t)st.st_size + 1;
    }
    char *b = malloc(cap);
    int e = b != NULL ? 0 : ENOMEM;
    while (e == 0) {
        char one; /* when b is full: whether there is more, before growing */
        bool full = n == cap - 1;
        ssize_t r = full ? read(fd, &one, 1) : read(fd, b + n, cap - 1 - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            e = errno;
        if (r <= 0)
            break;
        if (full) {
            size_t want = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
            char *nb = n < max ? realloc(b, want) : NULL;
            if (nb == NULL) {
                e = n < max ? ENOMEM : EFBIG;
                break;
            }
            b = nb;
            cap = want;
            b[n] = one;
        }
        n += (size_t)r;
    }
    if (e == 0 && n > max)
        e = EFBIG;
    if (e != 0) {
        free(b);
        return e;
    }
    b[n] = '\0';
    *data = b;
    *len = n;
    return 0;
}

int tx_read_file(const char *path, size_t max, char **data, size_t *len)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int e = tx_read_fd(fd, max, data, len);
    close(fd);
    return e;
}
