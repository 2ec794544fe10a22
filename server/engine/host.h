/*
 * host.h - the host backend's object (scan_host.h's eng_host): the
 * thread pool its scans fan out over, inside the engine.
 *
 * Threading: as scan_host.h says of an eng_host.
 */
#ifndef TALLY_HOST_H
#define TALLY_HOST_H

#include "pool.h"
#include "scan_host.h"

/* h's pool; borrowed, h's until eng_host_free(). */
eng_pool *eng_host_pool(const eng_host *h);

#endif
