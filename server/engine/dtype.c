/*
 * dtype.c - lookups in the dtype table.
 */
#include <string.h>

#include "dtype.h"

static const struct {
    const char *name;
    const char *kserve;
    size_t size;
    tally_kind kind;
    tally_storage storage;
} dtypes[TALLY_NDTYPES] = {
#define TALLY_DTYPE_ROW(id, name, kserve, size, kind, storage)                 \
    [TALLY_##id] = {name, kserve, size, TALLY_KIND_##kind,                     \
                    TALLY_STORAGE_##storage},
    TALLY_DTYPES(TALLY_DTYPE_ROW)
#undef TALLY_DTYPE_ROW
};

int tally_dtype_parse(const char *s, size_t len)
{
    for (int t = 0; t < TALLY_NDTYPES; t++) {
        if ((strlen(dtypes[t].name) == len
             && memcmp(dtypes[t].name, s, len) == 0)
            || (strlen(dtypes[t].kserve) == len
                && memcmp(dtypes[t].kserve, s, len) == 0))
            return t;
    }
    return -1;
}

const char *tally_dtype_name(tally_dtype t)
{
    return dtypes[t].name;
}

const char *tally_dtype_kserve(tally_dtype t)
{
    return dtypes[t].kserve;
}

size_t tally_dtype_size(tally_dtype t)
{
    return dtypes[t].size;
}

tally_kind tally_dtype_kind(tally_dtype t)
{
    return dtypes[t].kind;
}

tally_storage tally_dtype_storage(tally_dtype t)
{
    return dtypes[t].storage;
}

const char *tally_dtype_list(void)
{
    /* Every name with a ", " before it; the first separator is skipped. */
    static const char list[] =
#define TALLY_DTYPE_LIST(id, name, kserve, size, kind, storage) ", " name
        TALLY_DTYPES(TALLY_DTYPE_LIST);
#undef TALLY_DTYPE_LIST
    return list + 2;
}
