/*
 * tls.c - --tls-cert and --tls-key read for libmicrohttpd (tls.h).
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "tls.h"
#include "tx_file.h"

/* A PEM file's text, for --tls-cert and --tls-key: NUL-terminated, at
 * most 1 MiB. NULL with a message when it cannot be read. */
static char *read_pem(const char *flag, const char *path, char *msg,
                      size_t msglen)
{
    char *text;
    size_t n;
    int e = tx_read_file(path, 1u << 20, &text, &n);
    if (e != 0 && e != EFBIG)
        return msg_fail_as(NULL, msg, msglen, "--%s %s: %s", flag, path,
                           strerror(e));
    if (e == 0 && memchr(text, '\0', n) == NULL
        && strstr(text, "-----BEGIN ") != NULL)
        return text;
    free(text);
    return msg_fail_as(NULL, msg, msglen,
                       "--%s %s: not a PEM file of at most 1 MiB", flag, path);
}

/* --tls-cert and --tls-key, read for libmicrohttpd (which hands them to
 * GnuTLS while the daemon starts, and keeps no pointer to them after):
 * both, or neither. */
bool http_tls_read(const tallyd_config *c, char **cert, char **key, char *msg,
                   size_t msglen)
{
    *cert = *key = NULL;
    bool has_cert = c->tls_cert[0] != '\0', has_key = c->tls_key[0] != '\0';
    if (!has_cert && !has_key)
        return true;
    if (has_cert != has_key)
        return msg_fail(msg, msglen,
                        "HTTPS needs both --tls-cert and --tls-key");
    if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
        return msg_fail(msg, msglen,
                        "this libmicrohttpd was built without TLS");
    *cert = read_pem("tls-cert", c->tls_cert, msg, msglen);
    *key = *cert != NULL ? read_pem("tls-key", c->tls_key, msg, msglen) : NULL;
    if (*key == NULL) {
        free(*cert);
        *cert = NULL;
        return false;
    }
    return true;
}
