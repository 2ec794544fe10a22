/*
 * mutex.c - the byte whose address names a thread (mutex.h's holder).
 */
#include "mutex.h"

#ifdef TALLY_OWNER_ASSERTS
_Thread_local char mutex_me;
#endif
