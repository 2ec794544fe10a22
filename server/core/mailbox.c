/*
 * mailbox.c - a loop's mailbox (mailbox.h).
 */
#include "invariant.h"
#include "list.h"
#include "mailbox.h"

/* rx's list, taken, and whether a wake alone came. Takes mu. */
static mailbox_item *take(mailbox_rx *rx, bool *woken)
{
    uv_mutex_lock(&rx->m->mu);
    mailbox_item *items = rx->head;
    rx->head = rx->tail = NULL;
    rx->count = 0;
    *woken = rx->woken;
    rx->woken = false;
    uv_mutex_unlock(&rx->m->mu);
    return items;
}

void mailbox_drain(mailbox_rx *rx)
{
    OWNER_ASSERT(&rx->m->owner);
    bool woken;
    mailbox_item *items = take(rx, &woken);
    rx->fn(rx, items);
}

/* Every receiver's turn. One may leave, or another join, meanwhile: each
 * slot is read again when its turn comes. */
static void drain_all(mailbox *m)
{
    OWNER_ASSERT(&m->owner);
    for (int i = 0; i < MAILBOX_RX_MAX; i++) {
        mailbox_rx *rx = m->rx[i];
        if (rx == NULL)
            continue;
        bool woken;
        mailbox_item *items = take(rx, &woken);
        if (items != NULL || woken)
            rx->fn(rx, items);
    }
}

static void on_wake(uv_async_t *a)
{
    drain_all(a->data);
}

static void on_soon(uv_timer_t *t)
{
    drain_all(t->data);
}

void mailbox_init(mailbox *m, uv_loop_t *loop)
{
    *m = (mailbox){.loop = loop};
    atomic_init(&m->owner.known, false);
    uv_mutex_init(&m->mu);
    uv_async_init(loop, &m->wake, on_wake);
    m->wake.data = m;
    uv_timer_init(loop, &m->soon);
    m->soon.data = m;
}

void mailbox_own(mailbox *m)
{
    loop_owner_set(&m->owner);
}

bool mailbox_listen(mailbox *m, mailbox_rx *rx, unsigned limit, mailbox_fn fn,
                    void *data)
{
    *rx = (mailbox_rx){.m = m, .fn = fn, .data = data, .limit = limit};
    uv_mutex_lock(&m->mu);
    bool ok = false;
    for (int i = 0; !m->closed && !ok && i < MAILBOX_RX_MAX; i++)
        if (m->rx[i] == NULL) {
            m->rx[i] = rx;
            ok = true;
        }
    rx->gone = !ok;
    uv_mutex_unlock(&m->mu);
    return ok;
}

bool mailbox_post(mailbox_rx *rx, mailbox_item *item)
{
    mailbox *m = rx->m;
    bool own = mailbox_on_loop(m);
    uv_mutex_lock(&m->mu);
    bool ok = !m->closed && !rx->gone
              && (item == NULL || rx->limit == 0 || rx->count < rx->limit);
    if (ok && item != NULL) {
        fifo_push(&rx->head, &rx->tail, item);
        rx->count++;
    } else if (ok) {
        rx->woken = true;
    }
    /* under mu: the handles close only under it, once closed */
    if (ok && own)
        uv_timer_start(&m->soon, on_soon, 0, 0);
    else if (ok)
        uv_async_send(&m->wake);
    uv_mutex_unlock(&m->mu);
    return ok;
}

mailbox_item *mailbox_leave(mailbox_rx *rx)
{
    mailbox *m = rx->m;
    OWNER_ASSERT(&m->owner);
    uv_mutex_lock(&m->mu);
    if (!rx->gone)
        for (int i = 0; i < MAILBOX_RX_MAX; i++)
            if (m->rx[i] == rx)
                m->rx[i] = NULL;
    rx->gone = true;
    uv_mutex_unlock(&m->mu);
    bool woken;
    return take(rx, &woken);
}

void mailbox_close(mailbox *m)
{
    OWNER_ASSERT(&m->owner);
    uv_mutex_lock(&m->mu);
    for (int i = 0; i < MAILBOX_RX_MAX; i++)
        INVARIANT(m->rx[i] == NULL);
    bool was = m->closed;
    m->closed = true;
    if (!was) {
        uv_close((uv_handle_t *)&m->wake, NULL);
        uv_close((uv_handle_t *)&m->soon, NULL);
    }
    uv_mutex_unlock(&m->mu);
}
