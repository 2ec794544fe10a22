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
- README.md is longer than 250 lines;
- a code span in a Markdown file names a path in the repository (one that
  begins with a folder of the tree, or a file at its top) that is not
  there;
- a ready line README.md quotes is not what tallyd prints: each must fit
  the format string of its log_msg() in server/tallyd.c ("..." standing
  for the rest);
- an alert in deploy/prometheus-alerts.yml is not named in
  docs/observability.md;
- a page names `make X` where the Makefile has no target X;
- docs/design.md counts the kinds of threads otherwise than server/tallyd.c
  lists them.

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
    file that writes Prometheus text (# TYPE, or core/metrics.h's
    metrics_family() and metrics_one()), less a histogram's series."""
    names = set()
    for dirpath, _, files in os.walk(os.path.join(TOP, "server")):
        for n in files:
            if n.endswith(".c"):
                with open(os.path.join(dirpath, n), encoding="utf-8") as f:
                    text = f.read()
                if re.search(r'# TYPE|\bmetrics_(family|one)\(', text):
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


# The tree's own folders, and the files at its top, as a code span names
# them; a span with a placeholder in it (DIR, NAME, *, ...) names none.
TREE_DIRS = ("server/", "tests/", "docs/", "deploy/", "client/", "common/", "kernels/",
             "tools/", "proto/", "python/", ".ci/", "examples/")
PLACEHOLDER = re.compile(r'[*<>{}$|]|\.\.\.|\b[A-Z]{2,}\b(?!\.)|\s')


# The journal and the changelog name the files of their day (the tree has
# moved on; BENCHMARKS.md says so at its top).
HISTORY = {"BENCHMARKS.md", "CHANGELOG.md"}


def path_problems(texts):
    """Code spans that name a path of the tree that is not there, but in
    the history's pages."""
    top = set(os.listdir(TOP))
    dirs = tuple(d for d in TREE_DIRS if os.path.isdir(os.path.join(TOP, d)))
    out = []
    for path, text in sorted(texts.items()):
        if path in HISTORY:
            continue
        prose = FENCE.sub("", text)
        for m in CODE.finditer(prose):
            span = m.group(0).strip("`").rstrip(":,.;")
            span = re.sub(r':\d+(-\d+)?$', "", span)  # a line number
            span = TEST_NAME.sub("", span)  # a test's name: test_problems()
            named = span.startswith(dirs) or ("/" not in span and span in top)
            if not named or PLACEHOLDER.search(span.replace("/", " / ").strip()
                                               .replace(" / ", "/")):
                continue
            if not os.path.exists(os.path.join(TOP, span)):
                out.append("%s: `%s` is not in the tree" % (path, span))
    return out


# A test named in the docs: `tests/...file.py::test_name` or
# `tests/...file.c::case`, where a rule or a row of a table says what
# holds it.
TEST_NAME = re.compile(r'::(\w+)$')
TEST_SPAN = re.compile(r'`(tests/[^`\s]+?\.(?:py|c))::(\w+)`')


def test_problems(texts):
    """Each test a page names exists: the file, and in it a function of
    that name (a Python test, or a C case: `static void name(` or its
    registered "name")."""
    out = []
    for path, text in sorted(texts.items()):
        if path in HISTORY:
            continue
        for m in TEST_SPAN.finditer(FENCE.sub("", text)):
            f, name = m.group(1), m.group(2)
            full = os.path.join(TOP, f)
            if not os.path.isfile(full):
                out.append("%s: `%s::%s`: %s is not in the tree" % (path, f, name, f))
                continue
            with open(full, encoding="utf-8") as src:
                code = src.read()
            defined = (r'^def %s\(' if f.endswith(".py") else
                       r'^static void %s\(|"%s"') % ((name,) * (1 if f.endswith(".py") else 2))
            if not re.search(defined, code, re.M):
                out.append("%s: `%s::%s`: no test of that name in %s" % (path, f, name, f))
    return out


READY = re.compile(r'log_msg\("tallyd", "info",\s*((?:"(?:[^"\\]|\\.)*"\s*)+)', re.S)
CONVERSION = re.compile(r'%[-+ #0-9.]*(?:ll|l|z)?[a-z]')


def ready_formats(source):
    """The format strings of tallyd.c's log lines, each as its literal
    parts (a conversion between each two)."""
    out = []
    for m in READY.finditer(source):
        fmt = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', m.group(1)))
        out.append(CONVERSION.split(fmt.replace('\\"', '"')))
    return out


def prints(parts, msg, prefix):
    """Whether the format (its literal parts) prints msg; with prefix,
    msg's beginning."""
    def go(i, pos):
        lit, rest = parts[i], msg[pos:]
        if prefix and len(rest) <= len(lit):
            return lit.startswith(rest)
        if not rest.startswith(lit):
            return False
        pos += len(lit)
        if i + 1 == len(parts):
            return pos == len(msg)
        return any(go(i + 1, j) for j in range(pos, len(msg) + 1))
    return go(0, 0)


def ready_problems(readme, source):
    """README's quoted log lines of tallyd's that no format of it prints
    ("..." at the end: the rest of the line)."""
    formats = ready_formats(source)
    out = []
    for m in re.finditer(r'"module":"tallyd","level":"info","msg":"(.*?)"\}', readme):
        msg = m.group(1)
        cut = msg.endswith("...")
        text = msg[:-3] if cut else msg
        if not any(prints(f, text, cut) for f in formats):
            out.append("README.md quotes \"%s\", which tallyd does not print" % msg)
    return out


def alert_problems(rules, page):
    """Alerts the rules file has and the page does not name."""
    return ["%s does not name the alert %s (deploy/prometheus-alerts.yml)" % (METRICS_PAGE, a)
            for a in re.findall(r'^\s*-\s*alert:\s*(\S+)', rules, re.M) if a not in page]


def target_problems(texts, makefile):
    """`make X` in a page (but the history's) where the Makefile has no
    target X."""
    targets = set(re.findall(r'^([a-z][a-z0-9-]*):', makefile, re.M))
    return ["%s: `make %s` is no target of the Makefile" % (path, t)
            for path, text in sorted(texts.items()) if path not in HISTORY
            for t in sorted(set(re.findall(r'`make ([a-z][a-z0-9-]*)', text)))
            if t not in targets]


def thread_count_problems(design, tallyd):
    """design.md's count of the kinds of threads against tallyd.c's."""
    want = re.search(r'Threading model\. (\w+) kinds of threads', tallyd)
    said = re.search(r'^(\w+) kinds, written down', design, re.M)
    if want and said and said.group(1).lower() != want.group(1).lower():
        return ["docs/design.md says %s kinds of threads; server/tallyd.c lists %s" % (
            said.group(1), want.group(1).lower())]
    return []


PERF_PAGE = "docs/performance.md"
PERF_MAX_LINES = 350


def perf_page_problems(page):
    """docs/performance.md: at most PERF_MAX_LINES lines, and every table
    row between `perf:` markers, where the bench that measures it remakes
    it (tools/perf_page.py)."""
    problems = []
    lines = page.split("\n")
    if len(lines) > PERF_MAX_LINES:
        problems.append("%s has %d lines, over %d" % (PERF_PAGE, len(lines), PERF_MAX_LINES))
    inside = None
    for n, line in enumerate(lines, 1):
        m = re.match(r'<!-- (/?)perf:([a-z-]+) -->', line)
        if m:
            if m.group(1) and inside != m.group(2):
                problems.append("%s:%d: closes perf:%s, which is not open" % (PERF_PAGE, n, m.group(2)))
            inside = None if m.group(1) else m.group(2)
        elif line.startswith("|") and inside is None:
            problems.append("%s:%d: a table row outside the perf: markers" % (PERF_PAGE, n))
    return problems


def read(path):
    with open(os.path.join(TOP, path), encoding="utf-8") as f:
        return f.read()


def check():
    texts = {p: read(p) for p in markdown_files()}
    return (link_problems(texts) + config_problems() + errors_problems() +
            limits_problems(read("docs/limits.md"),
                            config_doc.settings(read("server/core/config.h"))) +
            metric_problems(daemon_metrics(), read(METRICS_PAGE)) +
            readme_problems(read("README.md")) + path_problems(texts) +
            ready_problems(read("README.md"), read("server/tallyd.c")) +
            alert_problems(read("deploy/prometheus-alerts.yml"), read(METRICS_PAGE)) +
            target_problems(texts, read("Makefile")) +
            thread_count_problems(read("docs/design.md"), read("server/tallyd.c")) +
            perf_page_problems(read(PERF_PAGE)) + test_problems(texts))


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
    if not path_problems({"x.md": "see `server/no/such.c` and `server/tallyd.c`"}) or \
            path_problems({"x.md": "`server/tallyd.c` `DIR/sequences.log` `deploy/...`"}):
        print("self-test: a code span naming a missing path was not caught (or a real one was)")
        ok = False
    found = test_problems({"x.md": "`tests/server/test_seq.c::no_such_case` "
                                   "`tests/integration/test_model.py::test_no_such` "
                                   "`tests/server/test_seq.c::limits` "
                                   "`tests/integration/test_model.py::test_model_memory`"})
    if len(found) != 2 or path_problems({"x.md": "`tests/server/test_seq.c::limits`"}):
        print("self-test: a test name that does not exist was not caught (or one that does was)")
        ok = False
    src = read("server/tallyd.c")
    readme = read("README.md")
    if ready_problems(readme, src) or not ready_problems(
            readme.replace("(port 8001, h2c, 2 loops)", "(port 8001, h2c)"), src):
        print("self-test: the README's ready line without its loops was not caught")
        ok = False
    rules = read("deploy/prometheus-alerts.yml")
    if not alert_problems(rules, read(METRICS_PAGE).replace("TallyStateStoreDown", "")):
        print("self-test: an alert the page does not name was not caught")
        ok = False
    if not target_problems({"x.md": "`make no-such-target`"}, read("Makefile")):
        print("self-test: a `make` of no target was not caught")
        ok = False
    if not thread_count_problems(read("docs/design.md").replace("Twelve kinds", "Ten kinds"),
                                 read("server/tallyd.c")):
        print("self-test: design.md's count of the threads was not caught")
        ok = False
    page = read(PERF_PAGE)
    if not perf_page_problems(page + "\n| a | row |\n") or \
            not perf_page_problems(page + "\n" * PERF_MAX_LINES):
        print("self-test: a table outside the markers, or a long performance page, was not caught")
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
