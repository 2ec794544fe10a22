/*
 * tx_file.h - a whole file read, and one written atomically: for the
 * client library and the CLI, and the daemon's files (its tokens, its
 * TLS keys, its sequence log, the API docs' assets).
 *
 * Threading: any thread; each call works on its own file.
 */
#ifndef TALLY_TX_FILE_H
#define TALLY_TX_FILE_H

#include <stddef.h>

/* Writes head (hlen bytes; may be NULL when 0) then data (dlen bytes) to
 * path, through a new file beside it that is renamed over path once
 * complete, so that readers see the old file or the new one, never a
 * part. The new name is created exclusively (O_EXCL, retried on a
 * collision) with mode 0666 less the umask. "-" writes to standard output
 * instead. Returns 0, or the errno value of the step that failed (the
 * temporary file is then removed). */
int tx_write_file(const char *path, const void *head, size_t hlen,
                  const void *data, size_t dlen);

/* Reads the file at path whole into *data: malloc'd, the caller's, with
 * a NUL after its *len bytes. Returns 0, or the errno value of the step
 * that failed: the open's, a read's, ENOMEM, or EFBIG when it holds more
 * than max bytes (*data is then NULL). tx_read_fd() reads what is left of
 * fd (standard input, say) the same way, and leaves it open. */
int tx_read_file(const char *path, size_t max, char **data, size_t *len);
int tx_read_fd(int fd, size_t max, char **data, size_t *len);

#endif
