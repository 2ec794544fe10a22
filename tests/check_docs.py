#!/usr/bin/env python3
"""check_docs.py - the documentation against the tree. Fails (exit 1, one
line per problem) when:

- a relative link in a Markdown file names a file that is not there, or an
  anchor that no heading (or <a id>) of its page makes;
- docs/configuration.md's table of settings is not what the settings table
  in server/core/config.h makes (tools/config_doc.py; `make docs-config`
  rewrites it);
- the daemon can show a metric that docs/observability.md's table does not
  list, or the table lists one the daemon cannot show;
- README.md is longer than 250 lines.

    python3 tests/check_docs.py              check the tree
    python3 tests/check_docs.py --self-test  check that each check catches
                                             what it is for
"""
import os
import re
import subprocess
import sys

TOP = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(TOP, "tools"))
import config_doc  # noqa: E402
import errors_doc  # noqa: E402

README_MAX_LINES = 250
METRICS_PAGE = "docs/observability.md"
SKIP_DIRS = {".git", "build", "node_modules", "__pycache__"}

FENCE = re.compile(r'^```.*?^```', re.M | re.S)
CODE = re.compile(r'`[^`\n]*`')
LINK = re.compile(r'\]\(([^)\s]+)\)')
HEADING = re.compile(r'^#{1,6}\s+(.*?)\s*#*\s*$', re.M)
ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"')


def markdown_files():
    """The Markdown files git tracks or would track (not ignored)."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard",
                              "*.md"], cwd=TOP, capture_output=True, text=True, check=True)
        files = [f for f in out.stdout.split("\n") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for dirpath, dirs, names in os.walk(TOP):
            dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith("build-")]
            files += [os.path.relpath(os.path.join(dirpath, n), TOP)
                      for n in names if n.endswith(".md")]
    return sorted(f for f in files if os.path.exists(os.path.join(TOP, f)))


def slug(heading):
    """GitHub's anchor for a heading."""
    text = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # a link's words
    text = text.lower().replace("`", "")
    text = re.sub(r'[^\w\- ]', '', text)
    return text.replace(" ", "-")


def anchors(text):
    prose = FENCE.sub("", text)
    seen, out = {}, set()
    for h in HEADING.findall(prose):
        s = slug(h)
        n = seen.get(s, 0)
        out.add(s if n == 0 else "%s-%d" % (s, n))
        seen[s] = n + 1
    return out | set(ANCHOR.findall(text))


def link_problems(texts):
    """texts: {relative path: Markdown text}. Problems with their relative
    links, files and anchors alike."""
    problems = []
    for path, text in sorted(texts.items()):
        prose = CODE.sub("", FENCE.sub("", text))
        for target in LINK.findall(prose):
            if re.match(r'[a-z][a-z0-9+.-]*:', target):
                continue  # http:, mailto: ...
            file, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
            if file and not os.path.exists(os.path.join(TOP, dest)):
                problems.append("%s: the link %s names %s, which is not there" % (path, target, dest))
                continue
            if anchor and dest.endswith(".md"):
                page = texts.get(dest)
                if page is None:
                    with open(os.path.join(TOP, dest), encoding="utf-8") as f:
                        page = f.read()
                if anchor not in anchors(page):
                    problems.append("%s: the link %s names an anchor %s has not" % (
                        path, target, dest))
    return problems


def errors_problems():
    status_rows, code_rows = errors_doc.sources()
    if not status_rows or not code_rows:
        return ["no statuses in server/core/status.h or no codes in client/include/tally.h"]
    page = read("docs/errors.md")
    if errors_doc.render(page, status_rows, code_rows) != page:
        return ["docs/errors.md is not what status.h and tally.h make: run `make docs-errors`"]
    return []


LIMIT_FLAG = re.compile(r'`--([a-z0-9-]+)` \(([^;:)]+)')


def limits_problems(page, rows):
    """docs/limits.md names settings with their defaults in parentheses:
    each must be a setting of config.h, with that default (spaces aside;
    a trailing "s" for seconds)."""
    defaults = {r[0]: r[3] for r in rows}
    problems = []
    for flag, value in LIMIT_FLAG.findall(page):
        v = value.replace(" ", "").replace(",", "")
        if flag not in defaults:
            problems.append("docs/limits.md: --%s is no setting of config.h" % flag)
        elif v != defaults[flag] and v != defaults[flag] + "s":
            problems.append("docs/limits.md: --%s defaults to %s, not %s" % (
                flag, defaults[flag], value))
    if not LIMIT_FLAG.findall(page):
        problems.append("docs/limits.md names no setting")
    return problems


def config_problems():
    with open(config_doc.CONFIG_H, encoding="utf-8") as f:
        rows = config_doc.settings(f.read())
    with open(config_doc.PAGE, encoding="utf-8") as f:
        page = f.read()
    if not rows:
        return ["no settings found in server/core/config.h"]
    if config_doc.render(page, rows) != page:
        return ["docs/configuration.md is not what server/core/config.h makes: "
                "run `make docs-config`"]
    return []


def daemon_metrics():
    """The metrics the daemon's sources can write: every tally_ name in a
    file that writes Prometheus text (# TYPE), less a histogram's series."""
    names = set()
    for dirpath, _, files in os.walk(os.path.join(TOP, "server")):
        for n in files:
            if n.endswith(".c"):
                with open(os.path.join(dirpath, n), encoding="utf-8") as f:
                    text = f.read()
                if "# TYPE" in text:
                    names |= set(re.findall(r'\b(tally_[a-z0-9_]+)', text))
    return {m for m in names
            if not (re.search(r'_(bucket|sum|count)$', m)
                    and re.sub(r'_(bucket|sum|count)$', '', m) in names)}


def metric_problems(shown, page):
    listed = set(re.findall(r'^\| `(tally_[a-z0-9_]+)`', page, re.M))
    return (["%s has no row for %s, which the daemon can show" % (METRICS_PAGE, m)
             for m in sorted(shown - listed)] +
            ["%s lists %s, which the daemon cannot show" % (METRICS_PAGE, m)
             for m in sorted(listed - shown)])


def readme_problems(text):
    n = text.count("\n")
    return ["README.md has %d lines, more than %d" % (n, README_MAX_LINES)] \
        if n > README_MAX_LINES else []


def read(path):
    with open(os.path.join(TOP, path), encoding="utf-8") as f:
        return f.read()


def check():
    texts = {p: read(p) for p in markdown_files()}
    return (link_problems(texts) + config_problems() + errors_problems() +
            limits_problems(read("docs/limits.md"),
                            config_doc.settings(read("server/core/config.h"))) +
            metric_problems(daemon_metrics(), read(METRICS_PAGE)) +
            readme_problems(read("README.md")))


def self_test():
    ok = True
    if check():
        print("self-test: the tree itself fails")
        ok = False
    texts = {p: read(p) for p in markdown_files()}
    bad = dict(texts)
    bad["docs/README.md"] += "\n[gone](nothing-here.md) [anchor](api.md#no-such-heading)\n"
    found = link_problems(bad)
    if not any("nothing-here.md" in p for p in found):
        print("self-test: a link to a missing file was not caught")
        ok = False
    if not any("#no-such-heading" in p for p in found):
        print("self-test: a link to a missing anchor was not caught")
        ok = False
    page = read(METRICS_PAGE)
    found = metric_problems(daemon_metrics() | {"tally_new_total"},
                            page.replace("| `tally_queue_depth` |", "| `tally_queue_dept` |"))
    if not any("no row for tally_new_total" in p for p in found) or \
            not any("lists tally_queue_dept" in p for p in found):
        print("self-test: a metric without its row, or a row without its metric, was not caught")
        ok = False
    if not readme_problems("x\n" * (README_MAX_LINES + 1)):
        print("self-test: a long README was not caught")
        ok = False
    rows = config_doc.settings(read("server/core/config.h"))
    page = read("docs/configuration.md")
    if config_doc.render(page, rows[:-1]) == page:
        print("self-test: a setting missing from docs/configuration.md was not caught")
        ok = False
    status_rows, code_rows = errors_doc.sources()
    page = read("docs/errors.md")
    if errors_doc.render(page, status_rows[:-1], code_rows) == page \
            or errors_doc.render(page, status_rows, code_rows[:-1]) == page:
        print("self-test: a status or a code missing from docs/errors.md was not caught")
        ok = False
    rows = config_doc.settings(read("server/core/config.h"))
    found = limits_problems("`--queue-depth` (64) and `--no-such` (1)", rows)
    if not any("defaults to 1024" in p for p in found) or \
            not any("--no-such is no setting" in p for p in found):
        print("self-test: a wrong default or an unknown setting in limits.md was not caught")
        ok = False
    if slug("The service: `make load`") != "the-service-make-load":
        print("self-test: headings' anchors are not GitHub's")
        ok = False
    print("check_docs self-test: %s" % ("ok" if ok else "FAILED"))
    return ok


def main():
    if "--self-test" in sys.argv[1:]:
        return 0 if self_test() else 1
    problems = check()
    for p in problems:
        print("check_docs: " + p)
    print("check_docs: %d Markdown files, %d problems" % (len(markdown_files()), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
