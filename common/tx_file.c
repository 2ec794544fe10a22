/*
 * tx_file.c - write to a temporary name, then rename.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
