"""perf_page.py - docs/performance.md's tables and pictures, from the
measurements that tests/bench/bench_report.py and bench_peers.py write
into build/bench/ (`make bench-report` and `make bench-peers` run this
last).

The page is written by hand but for its generated blocks, each between
`<!-- perf:NAME -->` and `<!-- /perf:NAME -->`, which this replaces
whole; a block whose measurement is not in build/bench/ is left as it
was. Pictures go to docs/perf/NAME.png, drawn with matplotlib (Agg).

usage: python3 tools/perf_page.py [--check | --only sequence | --only small]
  --check: change nothing; exit 1 when a block names a picture that is
  not there (tests/check_docs.py checks the links too)
  --only sequence: the sequence, durable and store blocks alone, from
  build/bench/sequence.json (bench_serve.py --only sequence runs this);
  --only small: the same for the small block, from build/bench/small.json
  (bench_small.py); either fills both when both files are there
"""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(ROOT, "build", "bench")
PAGE = os.path.join(ROOT, "docs", "performance.md")
README = os.path.join(ROOT, "README.md")
PICS = os.path.join(ROOT, "docs", "perf")

DOOR_NAMES = {"rest-json": "REST JSON", "rest-binary": "REST binary", "grpc": "gRPC",
              "shm": "shared memory"}
STEPS = ("receive", "decode", "parse", "queue", "compute", "render", "send")


def load(part):
    path = os.path.join(BENCH, part + ".json")
    return json.load(open(path)) if os.path.exists(path) else None


def size(n):
    for unit, div in (("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return str(n)


def num(v, digits=3):
    """A figure with `digits` significant digits, no exponent below 1e6."""
    if v is None:
        return "-"
    if v == 0:
        return "0"
    text = "%.*g" % (digits, v)
    if "e" in text and abs(v) >= 1:
        text = "%.0f" % v
    return text


def provenance(d):
    return "%s; commit `%s`, %s; `%s`" % (d["machine"], d["commit"], d["date"], d["command"])


def plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as p
    p.rcParams.update({"font.size": 9, "figure.dpi": 100, "axes.grid": True,
                       "grid.alpha": 0.3, "savefig.bbox": "tight"})
    return p


def save(fig, name):
    os.makedirs(PICS, exist_ok=True)
    fig.savefig(os.path.join(PICS, name + ".png"), metadata={"Software": None})
    plt().close(fig)


# ---------------------------------------------------------------- service

def service_block(d):
    cells = {(c["door"], c["n"], c["concurrency"]): c for c in d["cells"]}
    sizes = sorted({c["n"] for c in d["cells"]})
    conc = sorted({c["concurrency"] for c in d["cells"]})
    doors = [k for k in DOOR_NAMES if any(c["door"] == k for c in d["cells"])]
    lines = ["Measured on %s." % provenance(d), "",
             "requests a second (p50 / p99 ms), float32 [N], %d s windows:" % d["seconds"], ""]
    head = "| N | c | " + " | ".join(DOOR_NAMES[k] for k in doors) + " |"
    lines += [head, "|" + "---|" * (2 + len(doors))]
    for n in sizes:
        for c in conc:
            row = ["%s" % size(n), str(c)]
            for k in doors:
                x = cells.get((k, n, c))
                row.append("-" if x is None or "error" in x else "%s (%s / %s)" % (
                    num(x["rps"]), num(x["p50_ms"]), num(x["p99_ms"])))
            lines.append("| " + " | ".join(row) + " |")
    lines += ["", "![Throughput and p99 against tensor size, per door](perf/service.png)"]
    p = plt()
    fig, (a, b) = p.subplots(1, 2, figsize=(10, 3.8))
    for k in doors:
        xs = [n for n in sizes if "rps" in cells.get((k, n, max(conc)), {})]
        a.plot(xs, [cells[(k, n, max(conc))]["rps"] for n in xs], marker="o",
               label=DOOR_NAMES[k])
        xs = [n for n in sizes if "p99_ms" in cells.get((k, n, min(conc)), {})]
        b.plot(xs, [cells[(k, n, min(conc))]["p99_ms"] for n in xs], marker="o",
               label=DOOR_NAMES[k])
    for ax, title, ylabel in ((a, "throughput, concurrency %d" % max(conc), "requests / s"),
                              (b, "p99 latency, concurrency %d" % min(conc), "ms")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("elements (float32)")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
    a.legend()
    fig.suptitle("tally's doors, %s" % d["machine"], fontsize=9)
    save(fig, "service")
    return lines


# ---------------------------------------------------------------- breakdown

def breakdown_block(d):
    rows = d["cells"]
    lines = ["Measured on %s." % provenance(d), "",
             "median microseconds per step over %d requests a cell, one at a time; "
             "`other` is the request span less its steps (the door's own work "
             "between them):" % d["requests"], "",
             "| door | N | request | " + " | ".join(STEPS) + " | other |",
             "|" + "---|" * (4 + len(STEPS))]
    for c in rows:
        other = max(c["request_us"] - sum(c[s + "_us"] for s in STEPS), 0)
        lines.append("| %s | %s | %s | %s | %s |" % (
            DOOR_NAMES[c["door"]], size(c["n"]), num(c["request_us"]),
            " | ".join(num(c[s + "_us"]) for s in STEPS), num(other)))
    lines += ["", "![Where a request's time goes, by size and door](perf/breakdown.png)"]
    p = plt()
    fig, ax = p.subplots(figsize=(10, 0.32 * len(rows) + 1.2))
    labels = ["%s, %s" % (DOOR_NAMES[c["door"]], size(c["n"])) for c in rows]
    left = [0.0] * len(rows)
    colors = p.get_cmap("tab10").colors
    for i, s in enumerate(STEPS + ("other",)):
        vals = []
        for c in rows:
            tot = max(c["request_us"], 1e-9)
            v = (max(c["request_us"] - sum(c[t + "_us"] for t in STEPS), 0) if s == "other"
                 else c[s + "_us"])
            vals.append(100.0 * v / tot)
        ax.barh(range(len(rows)), vals, left=left, color=colors[i % 10], label=s)
        left = [x + y for x, y in zip(left, vals)]
    for i, c in enumerate(rows):
        ax.text(min(left[i], 100) + 1, i, "%s us" % num(c["request_us"]), va="center",
                fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels)
    ax.invert_yaxis()
    ax.set_xlim(0, 118)
    ax.set_xlabel("share of the request span's median (%)")
    ax.legend(ncol=8, loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=8)
    save(fig, "breakdown")
    return lines


# ---------------------------------------------------------------- engine

def engine_label(r):
    dims = r["shape"].split("x")
    what = ("a line" if len(dims) == 1 else "axis %d of 3" % r["axis"] if len(dims) == 3
            else "%s, axis %d" % (r["shape"], r["axis"]))
    return "%s, %s%s" % (r["size"], what, "" if r["mode"] == "incl" else ", " + r["mode"])


def engine_block(d):
    rows = d["rows"]
    lines = ["Measured on %s; device: %s." % (provenance(d), d["device"]), "",
             "GB/s = (bytes read + bytes written) / s, median of runs; ratio = the plain "
             "copy's time / the scan's, median of back-to-back pairs:", "",
             "| size | shape | axis | mode | engine GB/s | copy GB/s | ratio | host GB/s "
             "| numpy GB/s |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (
            r["size"], r["shape"], r["axis"], r["mode"], num(r["engine_gbs"]),
            num(r["copy_gbs"]), "%.2f" % r["ratio"], num(r["host_gbs"]),
            "-" if r["numpy_gbs"] < 0 else num(r["numpy_gbs"])))
    lines += ["", "![Engine bandwidth against the copy, per axis and size](perf/engine.png)"]
    p = plt()
    fig, ax = p.subplots(figsize=(10, 3.8))
    labels = [engine_label(r) for r in rows]
    width = 0.2
    for i, (key, name) in enumerate((("engine_gbs", "engine"), ("copy_gbs", "plain copy"),
                                     ("host_gbs", "host backend"), ("numpy_gbs", "numpy"))):
        ax.bar([k + (i - 1.5) * width for k in range(len(rows))],
               [max(r[key], 0) for r in rows], width, label=name)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, fontsize=8, rotation=30, ha="right")
    ax.set_ylabel("GB/s (read + written)")
    ax.legend(ncol=4)
    ax.set_title("the engine beside a plain copy of the same bytes", fontsize=9)
    save(fig, "engine")
    return lines


# ---------------------------------------------------------------- accuracy

def accuracy_block(d):
    rows = d["rows"]
    same = all(r.get("loop_equals_numpy", True) for r in rows)
    lines = ["Measured on %s; seed %d." % (provenance(d), d["seed"]), "",
             "largest relative error of a float32 cumulative sum of n values from (0, 1] "
             "against float64 (the requirement is 1e-5):", "",
             "| n | float32 loop | numpy.cumsum | tally |", "|---|---|---|---|"]
    for r in rows:
        lines.append("| 2^%d | %s | %s | %s |" % (
            r["n"].bit_length() - 1, num(r.get("loop"), 2) if "loop" in r else "(numpy's)",
            num(r["numpy"], 2), num(r["tally"], 2)))
    lines += ["", ("numpy's cumsum is a sequential float32 loop: the two were bit for bit the "
                   "same at every n the loop ran (up to 2^20)." if same else
                   "numpy's cumsum and the loop differed at some n."),
              "", "![Relative error against n](perf/accuracy.png)"]
    p = plt()
    fig, ax = p.subplots(figsize=(6.5, 3.8))
    ns = [r["n"] for r in rows]
    ax.plot(ns, [r["numpy"] for r in rows], marker="o", label="numpy.cumsum (float32)")
    lp = [r for r in rows if "loop" in r]
    ax.plot([r["n"] for r in lp], [r["loop"] for r in lp], marker="x", linestyle="--",
            label="a float32 loop")
    ax.plot(ns, [max(r["tally"], 1e-12) for r in rows], marker="s", label="tally")
    ax.axhline(1e-5, color="grey", linestyle=":", label="requirement (1e-5)")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel("largest relative error")
    ax.legend(fontsize=8)
    save(fig, "accuracy")
    return lines


# ---------------------------------------------------------------- peers

PEER_NAMES = {"tally": "tally", "mlserver": "MLServer", "kserve": "KServe ModelServer",
              "fastapi": "FastAPI + uvicorn"}


def peers_block(d):
    cells = {(c["server"], c["format"], c["n"], c["concurrency"]): c for c in d["cells"]}
    servers = [s for s in PEER_NAMES if any(c["server"] == s for c in d["cells"])]
    sizes = sorted({c["n"] for c in d["cells"]})
    conc = sorted({c["concurrency"] for c in d["cells"]})
    ver = "; ".join("%s: %s" % (PEER_NAMES[s], ", ".join(
        "%s %s" % kv for kv in d["versions"].get(s, {}).items())) for s in servers)
    lines = ["Measured on %s; %d s windows." % (provenance(d), d["seconds"]), "",
             "Versions: %s." % ver, "",
             "requests a second (p50 / p99 ms), float32 [N]; binary: perf_analyzer -i http "
             "--async with binary tensors; binary, wrk: the same requests from wrk with one "
             "thread (tests/load/file_body.lua), a much lighter client; JSON: `tally bench "
             "--format json` (KServe v2 JSON):",
             "", "| format | N | c | " + " | ".join(PEER_NAMES[s] for s in servers) + " |",
             "|" + "---|" * (3 + len(servers))]
    for fmt in ("binary", "wrk", "json"):
        if not any(c["format"] == fmt for c in d["cells"]):
            continue
        for n in sizes:
            for c in conc:
                row = [{"wrk": "binary, wrk", "json": "JSON"}.get(fmt, fmt), size(n), str(c)]
                for s in servers:
                    x = cells.get((s, fmt, n, c))
                    if x is None:
                        row.append("n/a")
                    elif "error" in x:
                        row.append(x["error"])
                    else:
                        row.append("%s (%s / %s)" % (num(x["rps"]), num(x["p50_ms"]),
                                                     num(x["p99_ms"])))
                lines.append("| " + " | ".join(row) + " |")
    lines += ["", "![tally beside the Python servers](perf/peers.png)"]
    p = plt()
    fig, axes = p.subplots(1, 2, figsize=(10, 3.8), sharey=True)
    width = 0.8 / len(servers)
    for ax, fmt in zip(axes, ("binary", "json")):
        for i, s in enumerate(servers):
            xs, ys = [], []
            for k, n in enumerate(sizes):
                x = cells.get((s, fmt, n, max(conc)))
                if x is not None and "rps" in x:
                    xs.append(k + (i - (len(servers) - 1) / 2) * width)
                    ys.append(x["rps"])
            ax.bar(xs, ys, width, label=PEER_NAMES[s],
                   color=p.get_cmap("tab10").colors[list(PEER_NAMES).index(s)])
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([size(n) for n in sizes])
        ax.set_yscale("log")
        ax.set_xlabel("elements (float32)")
        ax.set_title("%s, concurrency %d" % ("binary tensors" if fmt == "binary" else "JSON",
                                             max(conc)))
    axes[0].set_ylabel("requests / s")
    # every server in the legend, MLServer too, which has no binary bars
    handles = [p.Rectangle((0, 0), 1, 1, color=p.get_cmap("tab10").colors[i])
               for i, s in enumerate(PEER_NAMES) if s in servers]
    axes[0].legend(handles, [PEER_NAMES[s] for s in PEER_NAMES if s in servers], fontsize=8)
    save(fig, "peers")
    return lines


# ---------------------------------------------------------------- targets

def ratio_rows(e, big):
    return [r for r in e["rows"] if (r["size"] in ("16M", "64M")) == big]


def targets_block(all_):
    e, a, sv = all_.get("engine"), all_.get("accuracy"), all_.get("service")
    rows = []

    def add(target, figure, met, where):
        rows.append("| %s | %s | %s | %s |" % (target, figure,
                                               "met" if met else "**not met**", where))
    if e:
        big, small = ratio_rows(e, True), ratio_rows(e, False)
        lo_big = min(r["ratio"] for r in big)
        lo_small = min(r["ratio"] for r in small)
        add("engine: every row of 16M elements and more at 0.8 of the plain copy or better",
            "lowest %.2f" % lo_big, lo_big >= 0.8, "[The engine](#the-engine)")
        add("engine: every 1M row at 0.7 of the plain copy or better",
            "lowest %.2f" % lo_small, lo_small >= 0.7, "[The engine](#the-engine)")
    if a:
        worst = max(r["tally"] for r in a["rows"])
        add("float32 relative error at most 1e-5 at every length (to 2^%d)"
            % (max(r["n"] for r in a["rows"]).bit_length() - 1),
            "largest %s" % num(worst, 2), worst <= 1e-5, "[Accuracy](#accuracy)")
    if sv:
        cells = {(c["door"], c["n"], c["concurrency"]): c for c in sv["cells"]}
        ratios = [(cells[("grpc",) + k[1:]]["rps"] / cells[k]["rps"], k)
                  for k in cells if k[0] == "rest-binary" and "rps" in cells[k]
                  and "rps" in cells.get(("grpc",) + k[1:], {})]
        if ratios:
            lo = min(ratios)
            add("gRPC at least 0.9 of REST binary's throughput in every cell",
                "lowest %.2f (N=%s, c=%d)" % (lo[0], size(lo[1][1]), lo[1][2]), lo[0] >= 0.9,
                "[The service](#the-service-door-by-door)")
        n16 = 16 << 20
        shm, rest = cells.get(("shm", n16, 1), {}), cells.get(("rest-binary", n16, 1), {})
        if "rps" in shm and "rps" in rest:
            add("shared memory at 16M, concurrency 1: at least 5x REST binary's throughput",
                "%.1fx" % (shm["rps"] / rest["rps"]), shm["rps"] >= 5 * rest["rps"],
                "[The service](#the-service-door-by-door)")
        eng = (e or {}).get("serve", {}).get(str(n16))
        if "p50_ms" in shm and eng:
            add("shared memory at 16M, concurrency 1: a round trip (p50) at most 1.5x the "
                "engine's scan", "%.2fx (%s / %s ms)" % (shm["p50_ms"] / eng, num(shm["p50_ms"]),
                                                        num(eng)),
                shm["p50_ms"] <= 1.5 * eng, "[The service](#the-service-door-by-door)")
    lines = ["| target | today | status | where |", "|---|---|---|---|"] + rows
    lines += ["", "Targets measured by other commands, in the journal with their "
              "figures: small requests against nginx's static answer (`make load`, "
              "[The service: make load](../BENCHMARKS.md#the-service-make-load)), CI in 25 "
              "minutes and `make check` in 2 ([CI stage times](../BENCHMARKS.md#ci-stage-times)), "
              "the soak ([The soak](../BENCHMARKS.md#the-soak-make-soak-10-minutes))."]
    return lines


def headlines(all_):
    """The few figures the README shows too: (what, figure, anchor) rows."""
    e, a, sv, pe = (all_.get(k) for k in ("engine", "accuracy", "service", "peers"))
    out = []
    if e:
        big = ratio_rows(e, True)
        out.append(("the engine, 16M and 64M elements, against a plain copy of the same bytes",
                    "%.2f-%.2f of the copy's speed" % (min(r["ratio"] for r in big),
                                                       max(r["ratio"] for r in big)),
                    "the-engine"))
    if a:
        last = max(a["rows"], key=lambda r: r["n"])
        out.append(("float32 error on 2^%d values (numpy: %s)" % (
            last["n"].bit_length() - 1, num(last["numpy"], 2)),
            "%s relative" % num(last["tally"], 2), "accuracy"))
    if sv:
        cells = {(c["door"], c["n"], c["concurrency"]): c for c in sv["cells"]}
        small = cells.get(("rest-json", 16, 16), {})
        if "rps" in small:
            out.append(("small JSON requests (16 values), 16 at once",
                        "%s requests/s" % num(small["rps"]), "the-service-door-by-door"))
        big = cells.get(("shm", 16 << 20, 1), {})
        rest = cells.get(("rest-binary", 16 << 20, 1), {})
        if "p50_ms" in big and "p50_ms" in rest:
            out.append(("a 64 MiB tensor (16M float32), one at a time",
                        "%s ms in shared memory, %s ms over REST binary" % (
                            num(big["p50_ms"]), num(rest["p50_ms"])),
                        "the-service-door-by-door"))
    if pe:
        cells = {(c["server"], c["format"], c["n"], c["concurrency"]): c for c in pe["cells"]}
        # binary tensors as wrk sends them: perf_analyzer on the same two
        # cores can be the slower half of a cell (the peers' section)
        wrk = any(k[1] == "wrk" for k in cells)
        for fmt, n in (("json", 16), ("wrk" if wrk else "binary", 1 << 20)):
            t = cells.get(("tally", fmt, n, 16), {})
            best = max((c["rps"] for k, c in cells.items() if k[0] != "tally"
                        and k[1:] == (fmt, n, 16) and "rps" in c), default=None)
            if "rps" in t and best:
                out.append(("%s, N=%s, 16 at once, against the fastest Python server" % (
                    {"json": "JSON", "wrk": "binary tensors (wrk)"}.get(fmt, "binary tensors"),
                    size(n)),
                    "%.1fx its throughput" % (t["rps"] / best), "beside-the-python-servers"))
    return out


def partial_headlines(text, all_, link_prefix):
    """The headline table in text, each row drawn from a part in all_
    (known by its link's anchor) replaced by that part's rows now."""
    m = re.search(r"<!-- perf:headlines -->\n(.*?)<!-- /perf:headlines -->", text, re.S)
    old = [l for l in m.group(1).splitlines() if l.strip()] if m else []
    new = headlines(all_)
    anchors = {a for _, _, a in new}
    lines, placed = [], set()
    for l in old:
        a = re.search(r"\]\([^)#]*#([\w-]+)\)", l)
        if a is None or a.group(1) not in anchors:
            lines.append(l)
        elif a.group(1) not in placed:
            placed.add(a.group(1))
            lines += ["| %s | %s | [more](%s#%s) |" % (w, f, link_prefix, x)
                      for w, f, x in new if x == a.group(1)]
    return lines


def headlines_block(all_, link_prefix=""):
    lines = ["| what | today | |", "|---|---|---|"]
    for what, fig, anchor in headlines(all_):
        lines.append("| %s | %s | [more](%s#%s) |" % (what, fig, link_prefix, anchor))
    return lines


# ---------------------------------------------------------------- a node

NODE = os.path.join(PICS, "node.json")


def cores(cpus):
    """[0, 1, 2, 5] as "0-2, 5"."""
    out, start = [], None
    for i, c in enumerate(cpus):
        if start is None:
            start = c
        if i + 1 == len(cpus) or cpus[i + 1] != c + 1:
            out.append(str(start) if start == c else "%d-%d" % (start, c))
            start = None
    return ", ".join(out)


def node_block(d, brief=True):
    """docs/perf/node.json, what `make bench-node` wrote on a lent node
    (kept in the tree: no machine here can make it again). brief, for the
    page: the correctness, the service and the scaling; the calls' notes,
    the rounds, the engine and the layout sweep are the journal's."""
    m = d["machine"]
    lines = ["Measured on %d cores (%s, %s GiB) beside %s; commit `%s`, %s; "
             "`python3 tests/bench/bench_node.py` (`make bench-node`). OpenCL devices: %s." % (
                 m["cores"], m["cpu"], m.get("memory_gib", "?"), m.get("gpu") or "no GPU",
                 m["commit"], m["date"],
                 "; ".join(x.split("  ")[1] for x in m["opencl_devices"] if "  " in x)), ""]
    if d.get("runs") and brief:
        lines += ["Parts measured in %d calls of the script on lent machines of this kind "
                  "(BENCHMARKS.md has each call's notes, the rounds one by one, the engine "
                  "and the layout sweep)." % len(d["runs"]), ""]
    elif d.get("runs"):  # parts measured in more than one call of the script
        lines += ["In %d calls of the script on lent machines of this kind: %s." % (
            len(d["runs"]), "; ".join("%s at `%s` (%s): %s" % (
                ", ".join(r["parts"]), r["commit"], r["date"], r["note"]) for r in d["runs"])),
                  ""]
    if d.get("failed"):
        lines += ["What failed in that run: " + "; ".join(d["failed"]) + ".", ""]
    corr = d.get("correctness", {})
    if corr:
        def one(k, v):
            if "bad" not in v:  # a run before the cases were dealt out
                return "%s %d cases, %d failed, %.0f s%s" % (
                    k, v["cases"], len(v["failed"]), v["seconds"],
                    " (stopped)" if v.get("timed_out") else "")
            return "%s %d cases in %d processes, %d passed, %.0f s%s" % (
                k, v["cases"], v["processes"], v["passed"], v["seconds"],
                "; " + ", ".join("%s %s" % kv for kv in sorted(v["bad"].items()))
                if v["bad"] else "")
        lines.append("Correctness on the device (%s): %s." % (
            d["device"], "; ".join(one(k, v) for k, v in corr.items() if "cases" in v)))
        lines.append("")
    svc = d.get("service", {})
    if svc:
        configs = list(svc["configs"])
        cells = [k for k in svc["configs"][configs[0]] if k != "jobs"]
        pool = "default" in configs and len(configs) == 3
        rounds = svc.get("rounds", 1)
        pin = ("; the tallyds on cores %s, the load tool on %s" % (
            cores(svc["server_cpus"]), cores(svc["load_cpus"]))) if svc.get("load_cpus") else ""
        lines += ["The service, %d HTTP threads, %d load-generator threads, %d s a cell "
                  "(wrk for REST, h2load for gRPC unary calls)%s%s; requests/s and p99 ms%s:" % (
                      svc["http_threads"], svc["load_threads"], svc["seconds"], pin,
                      ", the three tallyds side by side and each cell run against them in "
                      "turn %d times, the order turned each round: the mean of the rounds, "
                      "and the worst p99" % rounds if rounds > 1 else "",
                      "; the last column is the default pool's requests/s over the "
                      "better of the other two" if pool else ""), "",
                  "| cell | " + " | ".join("%s req/s | p99" % c for c in configs)
                  + (" | default / best |" if pool else " |"),
                  "|---|" + "---|---|" * len(configs) + ("---|" if pool else "")]
        for cell in cells:
            row = []
            for c in configs:
                r = svc["configs"][c].get(cell, {})
                row += [num(r.get("rps")), num(r.get("p99_ms"))]
            if pool:
                rates = [svc["configs"][c].get(cell, {}).get("rps") for c in configs]
                row.append("%.2f" % (rates[2] / max(rates[:2])) if all(rates) else "-")
            lines.append("| %s | %s |" % (cell, " | ".join(row)))
        again = d.get("service_again")
        if pool and rounds > 1 and not brief:
            # the pool against the better of the other two in each round
            # (the three measured back to back), here and on another call
            def by_round(rr):
                return [rr["default"][i] / max(rr["host"][i], rr["gpu"][i])
                        for i in range(min(len(x) for x in rr.values()))]
            head = "| cell | default / best, each round |"
            if again:
                head += " again (`%s`), each round |" % again["commit"]
            lines += ["", "Round by round, the default pool over the better of the other two "
                      "in that round" + (", and again at `%s` (%s)" % (
                          again["commit"], again["note"]) if again else "") + ":", "", head,
                      "|---|---|" + ("---|" if again else "")]
            for cell in cells:
                rr = {c: svc["configs"][c].get(cell, {}).get("rounds_rps") or [] for c in configs}
                row = "| %s | %s |" % (cell, ", ".join("%.2f" % x for x in by_round(rr)))
                if again and cell in again["cells"]:
                    row += " %s |" % ", ".join("%.2f" % x for x in by_round(again["cells"][cell]))
                lines.append(row)
            spread = []
            for c in configs:
                for cell in cells:
                    rr = svc["configs"][c].get(cell, {}).get("rounds_rps") or []
                    if len(rr) > 1 and min(rr) > 0:
                        spread.append((max(rr) / min(rr), c, cell))
            if spread:
                top = max(spread)
                lines += ["", "The same tallyd's rounds of one cell differed by up to "
                          "%.2fx (%s, %s)." % top]
        jobs = svc["configs"].get("default", {}).get("jobs", {}) if pool else {}
        placed = []
        for k, v in jobs.items():
            m = re.match(r'tally_placements_total\{backend="(.*)",reason="(\w+)"\}', k)
            if m and v:
                placed.append((v, "%s, %s" % (m[1], m[2])))
        if placed:
            lines += ["", "Where the default pool ran its jobs, over every cell "
                      "(tally_placements_total, by backend and reason): "
                      + "; ".join("%s %d" % (what, v) for v, what in sorted(placed, reverse=True))
                      + "."]
        lines.append("")
    eng = d.get("engine")
    if eng and eng["rows"] and not brief:
        lines += ["The engine (%s; host: %s), GB/s read + written:" % (eng["device"], eng["host"]),
                  "", "| size | shape | axis | mode | device, end to end | copy through it "
                  "| on the device: scan | its copy | host |", "|---|---|---|---|---|---|---|---|---|"]
        for r in eng["rows"]:
            lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s |" % (
                r["size"], r["shape"], r["axis"], r["mode"], num(r["engine_gbs"]),
                num(r["copy_gbs"]), num(r.get("device_scan_gbs")), num(r.get("device_copy_gbs")),
                num(r["host_gbs"])))
        lines.append("")
    runs = d.get("scaling_runs")
    if runs:
        counts = sorted(runs[0]["http"], key=int)
        lines += ["Small requests (JSON over REST with wrk, KServe's ModelInfer over gRPC with "
                  "h2load; c=%d) by HTTP threads and gRPC loops, `--device host`, tallyd and "
                  "the load tool pinned to disjoint cores (a load thread a core), req/s; "
                  "the last columns: CPU microseconds a request in tallyd at 1 thread and at "
                  "%s:" % (runs[0]["connections"], counts[-1]), "",
                  "| door, call, tallyd's cores | " + " | ".join(counts)
                  + " | growth | CPU us, 1 | CPU us, %s |" % counts[-1],
                  "|---|" + "---|" * (len(counts) + 3)]
        for r in runs:
            for door, name in (("http", "REST"), ("grpc", "gRPC")):
                rr = r.get(door, {})
                if not rr:
                    continue
                lines.append("| %s, call %d (`%s`), %d cores | %s | %s | %s | %s |" % (
                    name, r["call"], r["commit"], len(r["server_cpus"]),
                    " | ".join(num(rr[c].get("rps")) if c in rr else "-" for c in counts),
                    "%.2fx" % r[door + "_growth"] if r.get(door + "_growth") else "-",
                    num(rr.get(counts[0], {}).get("server_cpu_us")),
                    num(rr.get(counts[-1], {}).get("server_cpu_us"))))
        lines += ["", "The target is 6x from 1 thread to %s." % counts[-1]]
    sc = d.get("scaling") if not runs else None
    if sc:
        counts = sorted(sc["http"], key=int)
        lines += ["Small requests (JSON over REST with wrk, KServe's ModelInfer over gRPC "
                  "with h2load; c=%d) by HTTP threads and gRPC loops, `--device host`%s, "
                  "req/s:" % (sc["connections"],
                              ", the load tool on %d threads" % sc["load_threads"]
                              if sc.get("load_threads") else ""), "",
                  "| threads | " + " | ".join(counts) + " |", "|---|" + "---|" * len(counts),
                  "| REST | " + " | ".join(num(sc["http"][c].get("rps")) for c in counts) + " |"]
        if sc.get("grpc"):
            lines.append("| gRPC | " + " | ".join(num(sc["grpc"][c]["rps"]) if c in sc["grpc"]
                                                  else "-" for c in counts) + " |")
        growth = ["%s %.2fx" % (door, sc[key]) for door, key in
                  (("REST", "http_growth"), ("gRPC", "grpc_growth")) if sc.get(key)]
        if growth:
            lines += ["", "From 1 thread to %s: %s (the target is 6x)." % (
                counts[-1], ", ".join(growth))]
        if sc.get("grpc_note"):
            lines += ["", "gRPC: " + sc["grpc_note"] + "."]
    lays = {k: v for k, v in d.get("layouts", {}).items() if v.get("rows")}
    if lays and not brief:
        shapes = [(r["shape"], r["axis"]) for r in next(iter(lays.values()))["rows"]]
        lines += ["", "GPU layouts on the 16M rows: the scan on the device over the device's "
                  "own copy (ratio; the target is 0.5):", "",
                  "| layout | " + " | ".join("%s axis %d" % sa for sa in shapes) + " |",
                  "|---|" + "---|" * len(shapes)]
        for k, v in lays.items():
            by = {(r["shape"], r["axis"]): r.get("device_ratio") for r in v["rows"]}
            lines.append("| %s | %s |" % (k, " | ".join(num(by.get(sa)) for sa in shapes)))
        unrun = [k for k, v in d.get("layouts", {}).items() if not v.get("rows")]
        if unrun:
            lines += ["", "Not run: " + ", ".join(unrun) + "."]
    return lines


def floors_block(d):
    """The service beside the machine's floor: nginx for the same traffic."""
    # its small requests are the small block's now (bench_small.py: nginx
    # and the smallest libmicrohttpd server beside tallyd)
    lines = ["Measured on %s; wrk %d s a run." % (provenance(d), d["seconds"])]
    lines += ["", "Large tensors: one .npy round trip through tally (POST /v1/cumsum, the "
              "answer read back) beside curl moving the same bytes up to nginx (a POST it "
              "discards) and down from it (the file served); the median of 5 curl runs, "
              "seconds:", "",
              "| float32 [N] | bytes | tally | nginx up | nginx down | up + down "
              "| tally / (up + down) |",
              "|---|---|---|---|---|---|---|"]
    for c in d["large"]:
        lines.append("| %s | %d | %.4f | %.4f | %.4f | %.4f | %.2f |" % (
            size(c["n"]), c["bytes"], c["tally_s"], c["up_s"], c["down_s"],
            c["up_s"] + c["down_s"], c["ratio"]))
    return lines


def seq_cells(d):
    for c in d["cells"]:
        yield c, ("REST" if c["proto"] == "http" else "gRPC"), size(c["n"]), c["c"]


def rate(r):
    return "-" if r is None else "%.0f" % r["rps"]


def ratio(a, b):
    return "-" if a is None or b is None else "%.2f" % (a["rps"] / b["rps"])


def sequence_block(d):
    """A chunk of a sequence beside the same request alone."""
    fast = ""
    if d.get("fast_cells"):  # the bench's own windows and rounds for those cells
        fast = " (%g s at %s, the median of %d rounds)" % (
            d["fast_window_s"], ", ".join("N=%d c=%d" % tuple(k) for k in d["fast_cells"]),
            d["fast_rounds"])
    lines = ["Measured on %s; perf_analyzer `--async`, %d s windows%s." % (
        provenance(d), d["seconds"], fast), "",
             "float32 [N], binary tensors. plain: tallyd's defaults (perf_analyzer sends "
             "plain requests); sequence: perf_analyzer's sequence mode, 20 chunks a sequence, "
             "against `--model-sequence-batching`. Target: sequence / plain at least 0.9.", "",
             "| door | N | c | plain req/s | p50 ms | sequence req/s | p50 ms | sequence / plain |",
             "|---|---|---|---|---|---|---|---|"]
    for c, door, n, conc in seq_cells(d):
        a, b = c["plain"], c["sequence"]
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
            door, n, conc, rate(a), num(a and a["p50_ms"]), rate(b), num(b and b["p50_ms"]),
            ratio(b, a)))
    return lines


def durable_block(d):
    """The sequences made durable (--state-dir), beside the disk's floor."""
    lines = ["Measured on %s. The floor: `fdatasync` of 64 bytes on the same disk, "
             "p50 %.0f us (tests/bench/fsync_latency.c). Targets: everysec / sequence at "
             "least 0.9; always / sequence at least 0.7 at c=16, and at c=1 a p50 within "
             "the sequence's plus 1.5 fdatasyncs." % (provenance(d), d["fsync_p50_us"]), "",
             "| door | N | c | sequence req/s | everysec req/s | / sequence | always req/s "
             "| / sequence | always p50 ms | sequence p50 + 1.5 fdatasync |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for c, door, n, conc in seq_cells(d):
        b, e, w = c["sequence"], c["everysec"], c["always"]
        bound = "-" if b is None else num(b["p50_ms"] + 1.5 * d["fsync_p50_us"] / 1e3)
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s |" % (
            door, n, conc, rate(b), rate(e), ratio(e, b), rate(w), ratio(w, b),
            num(w and w["p50_ms"]), bound if conc == 1 else "-"))
    return lines


def store_block(d):
    """The sequences in Redis (--state-store), beside the smallest server
    doing the same work."""
    lines = ["Measured on %s; Redis on the same machine (appendonly yes, appendfsync "
             "everysec), with one replica. The floor: the smallest server that does a chunk's "
             "work (tests/bench/store_floor.c over REST, grpc_floor.c over gRPC), in memory "
             "and through Redis; Redis's PING p50 %s ms. redis: `--state-store`; wait: the "
             "same with `--state-store-wait 1`, its ratio to redis. Targets: redis / sequence "
             "at least 0.7 at c=16; at c=1 a p50 within the sequence's plus 1.5 PINGs." % (
                 provenance(d), num(d["ping_p50_ms"])), "",
             "| door | N | c | sequence req/s | redis req/s | / sequence | wait req/s "
             "| / redis | floor: Redis / memory | redis p50 ms | sequence p50 + 1.5 PING |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for c, door, n, conc in seq_cells(d):
        b, r, w = c["sequence"], c["redis"], c["wait"]
        bound = "-" if b is None else num(b["p50_ms"] + 1.5 * d["ping_p50_ms"])
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            door, n, conc, rate(b), rate(r), ratio(r, b), rate(w), ratio(w, r),
            ratio(c.get("floor-store"), c.get("floor-mem")), num(r and r["p50_ms"]),
            bound if conc == 1 else "-"))
    return lines


def small_block(d):
    """A small request's CPU and rate beside nginx's and the smallest
    libmicrohttpd server's (tests/bench/bench_small.py), a row a load."""
    cell = {(c["body"], c["c"], c["server"]): c for c in d["cells"]}
    lines = ["Measured on %s; %d rounds of %d s windows, the servers in turn, medians. 4 "
             "float32 as native JSON to /v1/cumsum or as a KServe binary request, wrk one "
             "thread; gRPC: a unary ModelInfer, h2load 32 streams, beside "
             "tests/bench/grpc_floor.c. The floor: tests/bench/mhd_floor.c (libmicrohttpd, "
             "one thread, tallyd's answer's bytes). CPU: the server's utime + stime a "
             "request, us, and tallyd's as a ratio to the floor's / to nginx's; rate: "
             "tallyd's req/s / nginx's. tallyd-1: `--http-threads 1`; tallyd: the default "
             "(2). Targets: CPU at most 1.2 / 1.25 at c=32 (gRPC 1.3 / -), rate at least "
             "0.85 (c=1: 0.95)." % (provenance(d), d["rounds"], d["seconds"]), "",
             "| body | c | nginx req/s | nginx CPU | floor CPU | tallyd-1 CPU | / floor / "
             "nginx | rate | tallyd CPU | / floor / nginx | rate |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for body, conc in (("json", 1), ("json", 32), ("binary", 1), ("binary", 32),
                       ("grpc", 32)):
        ng, fl = cell.get((body, conc, "nginx")), cell.get(
            (body, conc, "grpc_floor" if body == "grpc" else "floor"))
        if fl is None:
            continue
        row = ["%s | %d | %s | %s | %.2f" % (body, conc, num(ng["rps"]) if ng else "-",
                                              "%.2f" % ng["cpu_us"] if ng else "-",
                                              fl["cpu_us"])]
        for name in ("tallyd-1", "tallyd"):
            c = cell.get((body, conc, name))
            if c is None:
                row.append("- | - | -")
                continue
            row.append("%.2f | %.2f / %s | %s" % (
                c["cpu_us"], c["cpu_us"] / fl["cpu_us"],
                "%.2f" % (c["cpu_us"] / ng["cpu_us"]) if ng else "-",
                "%.2f" % (c["rps"] / ng["rps"]) if ng else "-"))
        lines.append("| " + " | ".join(row) + " |")
    return lines


# Blocks of a part that bench-serve writes on its own (not bench-report's:
# the targets and headlines do not wait for them).
SEQUENCE_BLOCKS = {"sequence": sequence_block, "durable": durable_block, "store": store_block}


BLOCKS = {"service": service_block, "breakdown": breakdown_block, "engine": engine_block,
          "accuracy": accuracy_block, "peers": peers_block, "floors": floors_block}


def main():
    check = "--check" in sys.argv[1:]
    text = open(PAGE).read()
    missing = [m for m in re.findall(r"\]\((perf/[\w.-]+\.png)\)", text)
               if not os.path.exists(os.path.join(ROOT, "docs", m))]
    if check:
        for m in missing:
            print("perf_page: docs/%s is named but not there" % m)
        sys.exit(1 if missing else 0)
    if os.path.exists(NODE):  # from a lent node, kept in the tree
        text = fill(text, "node", node_block(json.load(open(NODE))), PAGE)
        print("perf_page: node: from docs/perf/node.json")
    seq = load("sequence")
    if seq is not None:
        for name, fn in SEQUENCE_BLOCKS.items():
            text = fill(text, name, fn(seq), PAGE)
        print("perf_page: sequence, durable, store: from build/bench/sequence.json")
    small = load("small")
    if small is not None:
        text = fill(text, "small", small_block(small), PAGE)
        print("perf_page: small: from build/bench/small.json")
    if "--only" in sys.argv[1:]:  # that part's blocks, no others
        with open(PAGE, "w") as f:
            f.write(text)
        return
    all_ = {name: load(name) for name in BLOCKS}
    all_ = {k: v for k, v in all_.items() if v is not None}
    for name, fn in BLOCKS.items():
        if name not in all_:
            print("perf_page: no build/bench/%s.json: its block is left as it was" % name)
            continue
        text = fill(text, name, fn(all_[name]), PAGE)
        pic = os.path.join(PICS, name + ".png")
        print("perf_page: %s: its block%s" % (
            name, " and docs/perf/%s.png" % name if os.path.exists(pic) else ""))
    # the targets draw on every part: from some, they would lose the rows
    # of the others; the headlines' rows are each one part's, so a part
    # measured again replaces its own rows and leaves the others'
    whole = set(all_) == set(BLOCKS)
    if whole:
        text = fill(text, "targets", targets_block(all_), PAGE)
        text = fill(text, "headlines", headlines_block(all_), PAGE)
    else:
        text = fill(text, "headlines", partial_headlines(text, all_, ""), PAGE)
    with open(PAGE, "w") as f:
        f.write(text)
    if not whole:
        readme = open(README).read()
        readme = fill(readme, "headlines",
                      partial_headlines(readme, all_, "docs/performance.md"), README)
        with open(README, "w") as f:
            f.write(readme)
        print("perf_page: the targets are left as they were (they need every part in "
              "build/bench/; missing: %s); the headlines' rows of the parts measured are "
              "replaced, here and in README.md" % ", ".join(sorted(set(BLOCKS) - set(all_))))
        return
    # the README's headline table: the same figures, from the same files
    readme = open(README).read()
    readme = fill(readme, "headlines", headlines_block(all_, "docs/performance.md"), README)
    with open(README, "w") as f:
        f.write(readme)
    print("perf_page: the targets, and the headlines here and in README.md")


def fill(text, name, lines, path):
    pattern = re.compile(r"(<!-- perf:%s -->\n).*?(<!-- /perf:%s -->)" % (name, name), re.S)
    if not pattern.search(text):
        sys.exit("perf_page: %s has no perf:%s block" % (os.path.relpath(path, ROOT), name))
    body = "\n".join(lines) + "\n"
    return pattern.sub(lambda m: m.group(1) + body + m.group(2), text)


if __name__ == "__main__":
    main()
