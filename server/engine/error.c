/*
 * error.c - names, descriptions and HTTP statuses of the error codes.
 *
 * Each lookup is a switch over the table with no default, so -Wswitch
 * flags a code that one of them forgets.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "error.h"

const char *tally_err_text(tally_err e)
{
    switch (e) {
#define TALLY_ERR_TEXT(name, status, text)                                     \
    case TALLY_E_##name: return text;
        TALLY_ERRORS(TALLY_ERR_TEXT)
#undef TALLY_ERR_TEXT
    }
    return "unknown error";
}

const char *tally_err_name(tally_err e)
{
    switch (e) {
#define TALLY_ERR_NAME(name, status, text)                                     \
    case TALLY_E_##name: return #name;
        TALLY_ERRORS(TALLY_ERR_NAME)
#undef TALLY_ERR_NAME
    }
    return "UNKNOWN";
}

int tally_err_http_status(tally_err e)
{
    switch (e) {
#define TALLY_ERR_STATUS(name, status, text)                                   \
    case TALLY_E_##name: return status;
        TALLY_ERRORS(TALLY_ERR_STATUS)
#undef TALLY_ERR_STATUS
    }
    return 500;
}

tally_err tally_fail(char *buf, size_t len, tally_err e, const char *fmt, ...)
{
    if (buf != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
    return e;
}
