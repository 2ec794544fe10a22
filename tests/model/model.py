"""A reference model of tally's sequence rules (docs/sequences.md), for the
model checker (driver.py): what a sequence is, and what each chunk does to
it and answers, in Python, apart from the server's C (server/sched/
seq_rules.c, seq_line.c, seq_decide.c).

A sequence id's state is a World. Where the checker cannot know which
of several states the server is in (a chunk whose answer never came, a
503 from the store, a timer that may or may not have run out while a
request was on its way), it keeps every possible World of that id, as
Knossos keeps every linearization open, and each answer keeps only the
Worlds it fits. An answer that fits none is a failure.

Times are the checker's monotonic seconds. A request's effect happens at
some moment between its send and its answer, its window [s, r]: a
renewal or an end is known as such a window, and a sequence's expiry as
the window of its last renewal (or its end) plus the idle time (or the
linger).

Chunks are tensors of a few small numbers, of any dtype (integers wrap,
as tally's do; floats stay exact: small integers), rank 1 to 3, summed
along any axis, inclusive or exclusive, forward or reversed: a sequence's
running sum is one value per line (the shape off its axis), kept as a
flat tuple."""
from collections import namedtuple

import numpy as np

ABSENT, LIVE, CLOSED = "absent", "live", "closed"

# kinds of answer
OK, INVALID, CONFLICT, GAP, FULL, UNKNOWN, TOO_LARGE, DEADLINE = (
    "ok", "invalid", "conflict", "gap", "full", "unknown", "too_large", "deadline")

World = namedtuple("World", [
    "status",     # ABSENT, LIVE or CLOSED (ended; kept for its linger, or
                  # numbered, for a repeat of its end)
    "numbered",   # its start had a sequence_chunk
    "attrs",      # its first chunk's (Chunk.attrs): what every chunk keeps
    "applied",    # numbered: the last applied chunk's number
    "total",      # the running sums after the last applied chunk (None: 0)
    "prev",       # numbered: the running sums before it
    "last",       # numbered: the last applied chunk's data (its input)
    "renew",      # (lo, hi): when its idle time last began (an answered
                  # chunk: applied or repeated)
    "renew_log",  # the same, from applied chunks only (--state-dir's log
                  # keeps those; a repeat is not logged)
    "close",      # (lo, hi): when its end was applied
])

NONE = World(ABSENT, False, None, 0, None, None, None, None, None, None)


class Timers:
    """The server's settings, and the checker's margins around them. A
    state's time to live starts at its write, which is answered after it
    (so by the answer's arrival), and every store drops a state whose time
    has run out at the next read of its key, not at a sweep (kv.h): a
    decision taken after that moment finds none, however late the sweep
    or loaded the machine. So an expiry is certain M_HI after the latest
    moment it could have come, the stores' clock steps (1 ms) and the
    client's clock read aside, and impossible until M_LO before the
    earliest."""

    def __init__(self, idle, linger, reorder, m_lo=0.02, m_hi=0.02, renew_may_fail=False):
        self.idle, self.linger, self.reorder = idle, linger, reorder
        self.m_lo, self.m_hi = m_lo, m_hi
        # a repeat's renewal is a write of the store, which may fail while
        # the repeat is still answered (a full disk, Redis gone): its idle
        # time then runs from the renewal before
        self.renew_may_fail = renew_may_fail

    def expiry(self, w):
        """(earliest, latest) moment w stops being kept; None: never."""
        if w.status == LIVE:
            return w.renew[0] + self.idle, w.renew[1] + self.idle
        if w.status == CLOSED:
            t = self.idle if w.numbered else self.linger
            return w.close[0] + t, w.close[1] + t
        return None


class Chunk:
    """A chunk as sent: its flags, number (None: unnumbered), dtype, shape,
    the scan's axis and mode, and its data (flat, in C order, as Python
    numbers)."""

    def __init__(self, data, start=False, end=False, number=None, dtype="int64",
                 shape=None, axis=0, exclusive=False, reverse=False):
        self.shape = tuple(shape) if shape is not None else (len(data),)
        self.dtype, self.axis, self.exclusive, self.reverse = dtype, axis, exclusive, reverse
        self.data = tuple(v.item() for v in np.array(data, dtype=dtype).reshape(-1))
        self.start, self.end, self.number = start, end, number

    @property
    def numbered(self):
        return self.number is not None

    @property
    def attrs(self):
        """What every chunk of a sequence keeps: dtype, rank, axis, mode
        and the shape off the axis."""
        off = self.shape[:self.axis] + self.shape[self.axis + 1:]
        return (self.dtype, len(self.shape), self.axis, self.exclusive, self.reverse, off)

    def signature(self):
        """What makes a chunk the same chunk again: dtype, shape, bytes."""
        return (self.dtype, self.shape, self.data)

    def array(self):
        return np.array(self.data, dtype=self.dtype).reshape(self.shape)

    def _carry(self, carry):
        off = self.attrs[5]
        if carry is None:
            return np.zeros(off, dtype=self.dtype)
        return np.array(carry, dtype=self.dtype).reshape(off)

    def answer(self, carry):
        """Its answer after the running sums carry (None: zeros)."""
        x, ax = self.array(), self.axis
        if self.reverse:
            x = np.flip(x, ax)
        with np.errstate(over="ignore"):
            y = np.cumsum(x, axis=ax, dtype=x.dtype)
            if self.exclusive:
                y = y - x
            y = y + np.expand_dims(self._carry(carry), ax)
        if self.reverse:
            y = np.flip(y, ax)
        return tuple(v.item() for v in y.reshape(-1))

    def total(self, carry):
        """The running sums after it."""
        with np.errstate(over="ignore"):
            t = self._carry(carry) + self.array().sum(axis=self.axis, dtype=self.dtype)
        return tuple(v.item() for v in np.asarray(t, dtype=self.dtype).reshape(-1))

    def __repr__(self):
        flags = ("S" if self.start else "") + ("E" if self.end else "")
        mode = "".join(m for m, on in (("x", self.exclusive), ("r", self.reverse)) if on)
        shape = "" if len(self.shape) == 1 and self.axis == 0 else " %s@%d" % (
            list(self.shape), self.axis)
        return "<%s%s%s%s %s%s>" % ("#%d " % self.number if self.numbered else "", self.dtype,
                                    shape, " " + mode if mode else "", list(self.data),
                                    " " + flags if flags else "")


def settle(w, timers, s, r):
    """The Worlds w may be in at a decision within [s, r]: as it is, or
    gone when its expiry may have passed, or only gone when it surely
    has."""
    e = timers.expiry(w)
    if e is None:
        return [w]
    lo, hi = e
    if r < lo - timers.m_lo:
        return [w]
    if s > hi + timers.m_hi:
        return [NONE]
    return [w, NONE]


def restarted(w):
    """w after tallyd with --state-dir was killed and started again: its
    log gives back every state it answered, with its timers (an ended
    sequence's linger or idle time from its end). A repeat's renewal is a
    write of the log too, answered once logged, but one that failed
    leaves the repeat answered: the idle time runs from the last applied
    chunk's or from a later renewal's."""
    if w.status == LIVE:
        return w._replace(renew=(w.renew_log[0], w.renew[1]))
    return w


def admit(w, c):
    """seq_rule_admit(): 'start', 'take' (late: an unnumbered chunk after
    its sequence's end), or a refusal kind."""
    restart = c.start
    if (restart and c.numbered and w.status != ABSENT and w.numbered
            and (w.status == LIVE or (w.applied == 1 and w.last == c.signature()))):
        restart = False
    if restart:
        return "start"
    if w.status == ABSENT:
        return INVALID  # not live
    if w.attrs != c.attrs:
        return INVALID  # unlike its first chunk
    if w.numbered != c.numbered:
        return INVALID
    closed = w.status == CLOSED
    if w.numbered and c.number < w.applied:
        return CONFLICT
    if w.numbered and closed and c.number != w.applied:
        return CONFLICT
    if w.numbered and c.number == w.applied and w.last != c.signature():
        return CONFLICT
    return "take"


def outcome(w, c):
    """seq_rule_outcome() for a numbered chunk taken by w."""
    closed = w.status == CLOSED
    if c.number == w.applied + 1 and not closed:
        return "apply"
    if c.number == w.applied and w.applied > 0 and c.signature() == w.last:
        return "repeat"
    if c.number > w.applied + 1 and not closed:
        return "early"
    return CONFLICT


def step(w, c, s, r, renew_may_fail=False):
    """What chunk c does to w, decided in [s, r], when nothing comes to
    fill a gap before it: a list of (kind, answer, next World)."""
    a = admit(w, c)
    win = (s, r)
    if a == "start":
        n = World(CLOSED if c.end else LIVE, c.numbered, c.attrs,
                  c.number if c.numbered else 0, c.total(None), None, c.signature(),
                  win, win, win if c.end else None)
        return [(OK, c.answer(None), n)]
    if a != "take":
        return [(a, None, w)]
    what = outcome(w, c) if c.numbered else "apply"
    if what == "early":
        return [(GAP, None, w)]
    if what == CONFLICT:
        return [(CONFLICT, None, w)]
    if what == "repeat":
        n = w
        if w.status == LIVE:  # renewed, or (its write failed) not
            n = w._replace(renew=(w.renew[0], r) if renew_may_fail else win)
        return [(OK, c.answer(w.prev), n)]
    # applied: the next chunk, or an unnumbered one (late, after the end)
    closing = c.end and w.status == LIVE
    n = w._replace(
        status=CLOSED if closing or w.status == CLOSED else LIVE,
        applied=c.number if c.numbered else w.applied,
        total=c.total(w.total), prev=w.total, last=c.signature(),
        renew=win if w.status == LIVE else w.renew,
        renew_log=win if w.status == LIVE else w.renew_log,
        close=win if closing else w.close)
    return [(OK, c.answer(w.total), n)]


def applied_by(w, c, s, r, renew_may_fail=False):
    """The Worlds after c if it had its effect (for an answer that never
    came): step()'s, whatever the kind."""
    return [n for _, _, n in step(w, c, s, r, renew_may_fail)]
