/*
 * errors.c - names and descriptions of the engine's error codes.
 *
 * Each lookup is a switch over the table with no default, so -Wswitch
 * flags a code that one of them forgets.
 */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include "errors.h"

const char *eng_err_text(eng_err e)
{
    switch (e) {
#define ENG_ERR_TEXT(name, text)                                       \
    case ENG_E_##name: return text;
        ENG_ERRORS(ENG_ERR_TEXT)
#undef ENG_ERR_TEXT
    }
    return "unknown error";
}

const char *eng_err_name(eng_err e)
{
    switch (e) {
#define ENG_ERR_NAME(name, text)                                       \
    case ENG_E_##name: return #name;
        ENG_ERRORS(ENG_ERR_NAME)
#undef ENG_ERR_NAME
    }
    return "UNKNOWN";
}

eng_err eng_fail(char *buf, size_t len, eng_err e, const char *fmt, ...)
{
    if (buf != NULL && len > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, len, fmt, ap);
        va_end(ap);
    }
    return e;
}
