/*
 * shm_ref.c - the names of shared-memory regions, as requests give them
 * (shm.h's shm_name_ok and shm_ref_region). Apart from shm.c because the
 * codecs use it and link without the registry, as status.c.
 */
#include <string.h>

#include "shm.h"
#include "tx_utf8.h"

bool shm_name_ok(const char *name, size_t n, char *msg, size_t msglen)
{
    if (n == 0 || n > SHM_NAME_MAX)
        return msg_fail(
            msg, msglen,
            "a shared-memory region's name must have 1 to %d bytes, not "
            "%zu",
            SHM_NAME_MAX, n);
    if (tx_utf8_valid(name, n) != n)
        return msg_fail(msg, msglen,
                        "a shared-memory region's name must be valid UTF-8");
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return msg_fail(msg, msglen,
                            "a shared-memory region's name cannot hold control "
                            "characters");
    return true;
}

bool shm_ref_region(shm_ref *ref, const char *name, size_t n, char *msg,
                    size_t msglen)
{
    if (!shm_name_ok(name, n, msg, msglen))
        return false;
    memcpy(ref->region, name, n);
    ref->region[n] = '\0';
    ref->set = true;
    return true;
}
