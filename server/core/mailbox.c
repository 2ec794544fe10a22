/*
 * mailbox.c - a loop's mailbox (mailbox.h).
 */
#include "mailbox.h"

/* The list, taken. Under nothing: takes mu. */
static mailbox_item *take(mailbox *m)
{
    uv_mutex_lock(&m->mu);
    mailbox_item *items = m->head;
    m->head = m->tail = NULL;
    m->count = 0;
    uv_mutex_unlock(&m->mu);
    return items;
}

void mailbox_drain(mailbox *m)
{
    OWNER_ASSERT(&m->owner);
    m->fn(m, take(m));
}

static void on_wake(uv_async_t *a)
{
    mailbox_drain(a->data);
}

static void on_soon(uv_timer_t *t)
{
    mailbox_drain(t->data);
}

void mailbox_init(mailbox *m, uv_loop_t *loop, unsigned limit, mailbox_fn fn,
                  void *data)
{
    *m = (mailbox){.fn = fn, .data = data, .limit = limit};
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

bool mailbox_post(mailbox *m, mailbox_item *item)
{
    bool own = mailbox_on_loop(m);
    uv_mutex_lock(&m->mu);
    bool ok =
        !m->closed && (item == NULL || m->limit == 0 || m->count < m->limit);
    if (ok && item != NULL) {
        item->next = NULL;
        if (m->tail != NULL)
            m->tail->next = item;
        else
            m->head = item;
        m->tail = item;
        m->count++;
    }
    /* under mu: the handles close only under it, once closed */
    if (ok && own)
        uv_timer_start(&m->soon, on_soon, 0, 0);
    else if (ok)
        uv_async_send(&m->wake);
    uv_mutex_unlock(&m->mu);
    return ok;
}

mailbox_item *mailbox_close(mailbox *m)
{
    OWNER_ASSERT(&m->owner);
    uv_mutex_lock(&m->mu);
    bool was = m->closed;
    m->closed = true;
    if (!was) {
        uv_close((uv_handle_t *)&m->wake, NULL);
        uv_close((uv_handle_t *)&m->soon, NULL);
    }
    uv_mutex_unlock(&m->mu);
    return take(m);
}
