/*
 * tx_dtype.c - lookups in the dtype table.
 */
#include <string.h>

#include "tx_dtype.h"

static const struct {
    const char *name, *kserve, *npy;
    size_t size;
    tx_kind kind;
} dtypes[TX_NDTYPES] = {
#define TX_DTYPE_ROW(id, name, kserve, size, kind, npy)                        \
    [TX_##id] = {name, kserve, npy, size, TX_KIND_##kind},
    TX_DTYPES(TX_DTYPE_ROW)
#undef TX_DTYPE_ROW
};

static int is(const char *want, const char *s, size_t len)
{
    return strlen(want) == len && memcmp(want, s, len) == 0;
}

int tx_dtype_parse(const char *s, size_t len)
{
    for (int t = 0; t < TX_NDTYPES; t++)
        if (is(dtypes[t].name, s, len) || is(dtypes[t].kserve, s, len))
            return t;
    return -1;
}

const char *tx_dtype_name(tx_dtype t)
{
    return dtypes[t].name;
}

const char *tx_dtype_kserve(tx_dtype t)
{
    return dtypes[t].kserve;
}

const char *tx_dtype_npy(tx_dtype t)
{
    return dtypes[t].npy;
}

size_t tx_dtype_size(tx_dtype t)
{
    return dtypes[t].size;
}

tx_kind tx_dtype_kind(tx_dtype t)
{
    return dtypes[t].kind;
}

const char *tx_dtype_list(void)
{
    /* Every name with a ", " before it; the first separator is skipped. */
    static const char list[] =
#define TX_DTYPE_LIST(id, name, kserve, size, kind, npy) ", " name
        TX_DTYPES(TX_DTYPE_LIST);
#undef TX_DTYPE_LIST
    return list + 2;
}
