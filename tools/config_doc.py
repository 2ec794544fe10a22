#!/usr/bin/env python3
"""config_doc.py - docs/configuration.md's table of settings, made from the
settings table in server/core/config.h (TALLYD_SETTINGS), which also makes
tallyd's flags, its environment variables and --help.

    python3 tools/config_doc.py          rewrite the table in the page
    python3 tools/config_doc.py --check  exit 1 when the page's table is
                                         not what config.h makes

The table stands between the two marker lines below; the rest of the page
is written by hand.
"""
import os
import re
import sys

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
CONFIG_H = os.path.join(TOP, "server/core/config.h")
PAGE = os.path.join(TOP, "docs/configuration.md")
BEGIN = "<!-- settings: made by `make docs-config` from server/core/config.h; do not edit -->"
END = "<!-- end of settings -->"

STRING = r'"(?:[^"\\]|\\.)*"'
# a row: X(field, flag, env, kind, default, help); kind: a name, or a
# name with arguments (RANGE(lo, hi), ENUM("words"))
ENTRY = re.compile(r'X\(\s*(\w+)\s*,\s*(%s)\s*,\s*(%s)\s*,\s*(\w+(?:\((?:[^()"]|%s)*\))?)\s*,'
                   r'\s*(%s)\s*,((?:\s*%s)+)\s*\)' % (STRING, STRING, STRING, STRING, STRING))
KINDS = {"STR": "text", "UINT": "number", "SIZE": "size", "BOOL": "switch"}


def literal(s):
    """A C string literal's text (the escapes config.h uses)."""
    return re.sub(r'\\(.)', r'\1', s[1:-1])


def macro_body(text, name):
    """The text of the multi-line `#define NAME(X)`, its backslashes gone
    (tools/errors_doc.py reads its tables with it too)."""
    start = text.index("#define %s(X)" % name)
    body = []
    for line in text[start:].split("\n")[1:]:
        body.append(line.rstrip().rstrip("\\"))
        if not line.rstrip().endswith("\\"):
            break
    return "\n".join(body)


def kind_text(kind, text):
    """A kind as the page says it: "number, 1 to 64", "one of cost,
    device" (the numbers' names resolved from text's #defines)."""
    m = re.match(r'(\w+)(?:\((.*)\))?$', kind, re.S)
    name, args = m.group(1), m.group(2)
    if name == "RANGE":
        lo, hi = (a.strip() for a in args.split(","))
        value = lambda a: int(re.search(r'#define %s (\d+)' % a, text).group(1)) \
            if not a.isdigit() else int(a)
        lo, hi = value(lo), value(hi)
        return "number, at least %d" % lo if "UINT_MAX" in args else \
            "number, %d to %d" % (lo, hi)
    if name == "ENUM":
        words = "".join(literal(p) for p in re.findall(STRING, args)).split("|")
        return "one of " + ", ".join("`%s`" % w if w else "empty"
                                     for w in words if "=" not in w)
    return KINDS.get(name, name)


def settings(text):
    """[(flag, env, kind, default, help)] in the table's order; kind as
    the page says it."""
    out = []
    for m in ENTRY.finditer(macro_body(text, "TALLYD_SETTINGS")):
        helptext = "".join(literal(p) for p in re.findall(STRING, m.group(6)))
        out.append((literal(m.group(2)), literal(m.group(3)), kind_text(m.group(4), text),
                    literal(m.group(5)), helptext))
    return out


def table(rows):
    lines = ["| flag | environment | kind | default | what it sets |",
             "|---|---|---|---|---|"]
    for flag, env, kind, default, helptext in rows:
        cell = lambda s: s.replace("|", "\\|")
        lines.append("| `--%s` | `%s` | %s | %s | %s |" % (
            flag, env, kind,
            "`%s`" % default if default else "(none)", cell(helptext)))
    return "\n".join(lines)


def render(page, rows):
    a, b = page.index(BEGIN), page.index(END)
    return page[:a + len(BEGIN)] + "\n\n" + table(rows) + "\n\n" + page[b:]


def main():
    with open(CONFIG_H, encoding="utf-8") as f:
        rows = settings(f.read())
    if not rows:
        print("config_doc: no settings found in %s" % CONFIG_H)
        return 1
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    new = render(page, rows)
    if "--check" in sys.argv[1:]:
        if new != page:
            print("config_doc: docs/configuration.md is not what server/core/config.h "
                  "makes: run `make docs-config`")
            return 1
        print("config_doc: docs/configuration.md lists the %d settings of config.h" % len(rows))
        return 0
    if new == page:  # unchanged: its time stays
        print("config_doc: docs/configuration.md already lists the %d settings" % len(rows))
        return 0
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(new)
    print("config_doc: %d settings written to docs/configuration.md" % len(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
