/*
 * list.h - the one intrusive doubly linked list (as libuv's queue.h and
 * h2o's linklist.h): the caller's record embeds a list_node, and a list
 * is a node of its own, the head, linked in a circle. container_of()
 * gets the record back. Linking a node that is in a list, or unlinking
 * one that is not, breaks an invariant and aborts (invariant.h): a node
 * knows whether it is in a list (its links are NULL when not).
 *
 * And the one singly linked queue, for items handed over as a chain
 * (a mailbox's, the log writer's batch): any record with a `next`
 * pointer to its own type, queued on a {head, tail} pair by
 * fifo_push().
 *
 * Threading: none of its own; the owner's lock guards a list and its
 * nodes.
 */
#ifndef TALLY_LIST_H
#define TALLY_LIST_H

#include <stdbool.h>
#include <stddef.h>

#include "invariant.h"

#define container_of(p, type, member)                                          \
    ((type *)(void *)((char *)(p) - offsetof(type, member)))

typedef struct list_node list_node;
struct list_node {
    list_node *prev, *next;
};

/* An empty list (a head). */
static inline void list_init(list_node *head)
{
    head->prev = head->next = head;
}

static inline bool list_empty(const list_node *head)
{
    return head->next == head;
}

/* Whether n (not a head) is in a list. */
static inline bool list_linked(const list_node *n)
{
    return n->next != NULL;
}

/* Links n before at (at a head: last). */
static inline void list_insert_before(list_node *at, list_node *n)
{
    INVARIANT(!list_linked(n));
    n->next = at;
    n->prev = at->prev;
    at->prev->next = n;
    at->prev = n;
}

static inline void list_push_back(list_node *head, list_node *n)
{
    list_insert_before(head, n);
}

static inline void list_push_front(list_node *head, list_node *n)
{
    list_insert_before(head->next, n);
}

static inline void list_remove(list_node *n)
{
    INVARIANT(list_linked(n) && n->prev->next == n && n->next->prev == n);
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = NULL;
}

/* The first and last nodes, or NULL when the list is empty. */
static inline list_node *list_first(const list_node *head)
{
    return list_empty(head) ? NULL : head->next;
}

static inline list_node *list_last(const list_node *head)
{
    return list_empty(head) ? NULL : head->prev;
}

/* The node after (before) n in head's list, or NULL at its end. */
static inline list_node *list_next(const list_node *head, const list_node *n)
{
    return n->next == head ? NULL : n->next;
}

static inline list_node *list_prev(const list_node *head, const list_node *n)
{
    return n->prev == head ? NULL : n->prev;
}

/* Appends item (a pointer to a record with a `next` member) to the queue
 * whose first and last items are *head and *tail (both NULL: empty). */
#define fifo_push(head, tail, item)                                           \
    do {                                                                       \
        (item)->next = NULL;                                                   \
        if (*(tail) != NULL)                                                   \
            (*(tail))->next = (item);                                          \
        else                                                                   \
            *(head) = (item);                                                  \
        *(tail) = (item);                                                      \
    } while (0)

#endif
