/*
 * budget.c - --max-buffered-bytes, for every door (budget.h).
 */
#include "budget.h"

bool budget_take(tallyd_server *s, size_t n)
{
    size_t max = s->cfg.max_buffered_bytes;
    unsigned long long cur =
        atomic_load_explicit(&s->buffered_bytes, memory_order_relaxed);
    do {
        if (n > max || cur > max - n)
            return false;
    } while (!atomic_compare_exchange_weak_explicit(
        &s->buffered_bytes, &cur, cur + n, memory_order_relaxed,
        memory_order_relaxed));
    return true;
}

void budget_give(tallyd_server *s, size_t n)
{
    atomic_fetch_sub_explicit(&s->buffered_bytes, n, memory_order_relaxed);
}
