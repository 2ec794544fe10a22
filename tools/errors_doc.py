#!/usr/bin/env python3
"""errors_doc.py - docs/errors.md's two tables, made from the tables the
code answers with: the daemon's statuses (TALLY_STATUSES in
server/core/status.h, with status_retry_later() in status.c, which adds
Retry-After) and libtally's result codes (TALLY_CODES in
client/include/tally.h, with code_for_status() in client/lib/transfer.c,
which maps an HTTP status to one).

    python3 tools/errors_doc.py          rewrite the tables in the page
    python3 tools/errors_doc.py --check  exit 1 when the page's tables are
                                         not what the sources make

Each table stands between its two marker lines; the rest of the page is
written by hand.
"""
import os
import re
import sys

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
STATUS_H = os.path.join(TOP, "server/core/status.h")
STATUS_C = os.path.join(TOP, "server/core/status.c")
TALLY_H = os.path.join(TOP, "client/include/tally.h")
TRANSFER_C = os.path.join(TOP, "client/lib/transfer.c")
PAGE = os.path.join(TOP, "docs/errors.md")
MARKS = {
    "statuses": ("<!-- statuses: made by `make docs-errors` from server/core/status.h; "
                 "do not edit -->", "<!-- end of statuses -->"),
    "codes": ("<!-- codes: made by `make docs-errors` from client/include/tally.h; "
              "do not edit -->", "<!-- end of codes -->"),
}

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from config_doc import STRING, literal, macro_body  # noqa: E402


def statuses(status_h, status_c):
    """[(name, http, grpc code name, retry_after, text)] in the table's
    order."""
    body = macro_body(status_h, "TALLY_STATUSES")
    entry = re.compile(r'X\(\s*(\w+)\s*,\s*(\d+)\s*,\s*GRPC_(\w+)\s*,((?:\s*%s)+)\s*\)'
                       % STRING)
    fn = re.search(r'bool status_retry_later\(status_code s\)\s*\{(.*?)\n\}', status_c, re.S)
    retry = set(re.findall(r'STATUS_(\w+)', fn.group(1))) if fn else set()
    out = []
    for m in entry.finditer(body):
        text = "".join(literal(p) for p in re.findall(STRING, m.group(4)))
        out.append((m.group(1), int(m.group(2)), m.group(3), m.group(1) in retry, text))
    return out


def codes(tally_h, transfer_c):
    """[(name, number, text, HTTP statuses that give it)]."""
    body = macro_body(tally_h, "TALLY_CODES")
    entry = re.compile(r'X\(\s*(\w+)\s*,\s*(\d+)\s*,((?:\s*%s)+)\s*\)' % STRING)
    fn = re.search(r'static tally_code code_for_status\(long status\)\s*\{(.*?)\n\}',
                   transfer_c, re.S)
    given = {}
    if fn:
        pending = []
        for tok in re.finditer(r'case (\d+):|return TALLYE_(\w+);|'
                               r'status >= (\d+) && status < (\d+)', fn.group(1)):
            if tok.group(1):
                pending.append(tok.group(1))
            elif tok.group(3):
                pending.append("other %sxx" % tok.group(3)[0])
            elif tok.group(2):
                given.setdefault(tok.group(2), []).extend(pending)
                pending = []
    out = []
    for m in entry.finditer(body):
        text = "".join(literal(p) for p in re.findall(STRING, m.group(3)))
        out.append((m.group(1), int(m.group(2)), text, given.get(m.group(1), [])))
    return out


def status_table(rows):
    lines = ["| status | HTTP | gRPC | Retry-After | meaning |", "|---|---|---|---|---|"]
    for name, http, grpc, retry, text in rows:
        lines.append("| `%s` | %d | `%s` | %s | %s |" % (
            name, http, grpc, "yes" if retry else "", text.replace("|", "\\|")))
    return "\n".join(lines)


def code_table(rows):
    lines = ["| code | number | meaning | from the HTTP statuses |", "|---|---|---|---|"]
    for name, num, text, given in rows:
        lines.append("| `TALLYE_%s` | %d | %s | %s |" % (
            name, num, text.replace("|", "\\|"), ", ".join(given)))
    return "\n".join(lines)


def render(page, status_rows, code_rows):
    for key, made in (("statuses", status_table(status_rows)),
                      ("codes", code_table(code_rows))):
        begin, end = MARKS[key]
        a, b = page.index(begin), page.index(end)
        page = page[:a + len(begin)] + "\n\n" + made + "\n\n" + page[b:]
    return page


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def sources():
    return (statuses(read(STATUS_H), read(STATUS_C)),
            codes(read(TALLY_H), read(TRANSFER_C)))


def main():
    status_rows, code_rows = sources()
    if not status_rows or not code_rows:
        print("errors_doc: no statuses or no codes found")
        return 1
    page = read(PAGE)
    new = render(page, status_rows, code_rows)
    if "--check" in sys.argv[1:]:
        if new != page:
            print("errors_doc: docs/errors.md is not what status.h and tally.h make: "
                  "run `make docs-errors`")
            return 1
        print("errors_doc: docs/errors.md lists %d statuses and %d codes" % (
            len(status_rows), len(code_rows)))
        return 0
    if new == page:  # unchanged: its time stays
        print("errors_doc: docs/errors.md already lists the %d statuses and %d codes" % (
            len(status_rows), len(code_rows)))
        return 0
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(new)
    print("errors_doc: %d statuses and %d codes written to docs/errors.md" % (
        len(status_rows), len(code_rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
