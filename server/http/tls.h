/*
 * tls.h - the certificate and key for HTTPS.
 *
 * Threading: the loop thread, at startup.
 */
#ifndef TALLY_HTTP_TLS_H
#define TALLY_HTTP_TLS_H

#include <stdbool.h>
#include <stddef.h>

#include "config.h"

/* Reads --tls-cert and --tls-key (PEM files of at most 1 MiB): both, or
 * neither (then *cert and *key are NULL and HTTPS is off). The texts are
 * malloc'd, the caller's to free once libmicrohttpd has started (it keeps
 * no pointer to them). False, with msg, when they cannot be had. */
bool http_tls_read(const tallyd_config *c, char **cert, char **key, char *msg,
                   size_t msglen);

#endif
