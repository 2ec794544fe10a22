"""Running sums that survive kill -9 (docs/kserve.md, "Numbered chunks"
and "Restarts"): tallyd with --state-dir killed with SIGKILL at random
moments, many times, and started again on the same directory, while
clients send numbered int64 chunks and send again, with the same number,
every chunk whose answer did not come. Every answer must equal numpy's
cumsum of the whole sequence exactly, and nothing may be refused.

And a write that fails (a full disk, an I/O error, a failed flush):
the chunk is answered 503, and nothing moves."""
import http.client
import json
import os
import random
import signal
import subprocess
import threading
import time

import numpy as np
import pytest

from conftest import Daemon
from reference import random_tensor
from seqlib import send

SEED = int(os.environ.get("TALLY_CRASH_SEED", random.randrange(1 << 32)))


class Restarting:
    """A tallyd on one --state-dir that a killer thread kills and starts
    again: the port of the one running now (None while it is down)."""

    def __init__(self, state, extra):
        self.args = ["--device", "host", "--state-dir", state] + extra
        self.lock = threading.Lock()
        self.daemons = []
        self.port = None
        self.resent = 0  # chunks sent again (their answer had not come)
        self.start()

    def start(self):
        d = Daemon(*self.args)
        with self.lock:
            self.daemons.append(d)
            self.port = d.port

    def kill(self):
        with self.lock:
            d = self.daemons[-1]
            self.port = None
        d.proc.kill()
        d.proc.wait()

    def log(self):
        return "\n".join(d.log()[-3000:] for d in self.daemons)

    def cleanup(self):
        for d in self.daemons:
            d.cleanup()


def send_until_answered(srv, seq, n, data, start, end, deadline):
    """One numbered chunk, sent again until an answer comes: (status,
    body) of that answer, or (None, why) past the deadline."""
    params = {"sequence_id": seq, "sequence_chunk": n}
    if start:
        params["sequence_start"] = True
    if end:
        params["sequence_end"] = True
    body = json.dumps({"parameters": params, "inputs": [
        {"name": "x", "datatype": "INT64", "shape": [len(data)], "data": data}]})
    why = ""
    sends = 0
    while time.time() < deadline:
        port = srv.port
        if port is None:
            time.sleep(0.02)
            continue
        sends += 1
        if sends > 1:
            srv.resent += 1
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            c.request("POST", "/v2/models/cumsum/infer", body,
                      {"Content-Type": "application/json"})
            r = c.getresponse()
            raw = r.read()
            c.close()
        except (OSError, http.client.HTTPException) as e:
            why = repr(e)
            time.sleep(0.02)
            continue
        if r.status in (502, 503, 504):
            why = raw.decode(errors="replace")
            time.sleep(0.02)
            continue
        return r.status, json.loads(raw)
    return None, why


def run_crash_test(tmp_path, extra, kills, nseq=4, nchunk=60):
    seed = SEED
    print("seed %d (replay with TALLY_CRASH_SEED=%d)" % (seed, seed))
    rng = np.random.default_rng(seed)
    xs, cuts = [], []
    for _ in range(nseq):
        lengths = rng.integers(1, 9, size=nchunk)
        xs.append(random_tensor(rng, "int64", (int(lengths.sum()),)))
        cuts.append(np.concatenate([[0], np.cumsum(lengths)]))
    # kills at random points of the run, counted in answered chunks, so
    # that they land in the middle of it however fast the machine is
    total = nseq * nchunk
    kill_at = sorted(int(v) for v in rng.integers(5, total * 3 // 4, size=kills))
    srv = Restarting(str(tmp_path), extra)
    wrong, refused, stuck = [], [], []
    answered = [0]
    count = threading.Lock()

    def client(s):
        want = np.cumsum(xs[s])
        deadline = time.time() + 240
        for k in range(nchunk):
            lo, hi = cuts[s][k], cuts[s][k + 1]
            st, b = send_until_answered(srv, "crash-%d-%d" % (seed % 1000, s), k + 1,
                                        xs[s][lo:hi].tolist(), k == 0, k == nchunk - 1,
                                        deadline)
            if st is None:
                stuck.append((s, k, b))
                return
            if st != 200:
                refused.append((s, k, st, b))
                return
            if b["outputs"][0]["data"] != want[lo:hi].tolist():
                wrong.append((s, k, b["outputs"][0]["data"], want[lo:hi].tolist()))
            with count:
                answered[0] += 1

    threads = [threading.Thread(target=client, args=(s,)) for s in range(nseq)]
    try:
        for t in threads:
            t.start()
        restarts = 0
        for point in kill_at:
            while answered[0] < point and any(t.is_alive() for t in threads):
                time.sleep(0.001)
            if answered[0] < point:
                break  # the clients stopped early: a failure, asserted below
            time.sleep(float(rng.uniform(0, 0.01)))  # anywhere in a chunk
            srv.kill()
            srv.start()
            restarts += 1
        for t in threads:
            t.join(300)
        print("%d kills, %d chunks sent again" % (restarts, srv.resent))
        assert not stuck, (stuck[:2], srv.log())
        assert not refused, refused[:3]
        assert not wrong, wrong[:3]
        return srv, restarts
    finally:
        srv.cleanup()


@pytest.mark.parametrize("fsync", ["always", "everysec"])
def test_kill_9_loses_no_answered_chunk_and_counts_none_twice(tmp_path, fsync):
    srv, restarts = run_crash_test(tmp_path, ["--state-fsync", fsync], kills=8)
    assert restarts == 8, restarts


@pytest.mark.parametrize("fault", ["enospc", "eio", "fsync"])
def test_a_failed_write_answers_503_and_moves_nothing(spawn, tmp_path, fault):
    """Two records go in; the third chunk's write fails: 503 with the
    reason, counted; the sequence is where chunk 2 left it, in memory
    and in the log (a restart without the fault goes on from there)."""
    state = str(tmp_path)
    d = spawn("--device", "host", "--state-dir", state, "--fault-state", fault,
              "--fault-state-after", "2")
    assert send(d, "full", [1, 2, 3], number=1, start=True)[0] == 200
    assert send(d, "full", [4, 5], number=2)[0] == 200
    st, b = send(d, "full", [6], number=3)
    assert st == 503, b
    words = {"enospc": "No space left", "eio": "Input/output error",
             "fsync": "cannot flush"}[fault]
    assert words in b["error"] and "sequences.log" in b["error"], b
    assert d.metric("tally_sequence_log_failures_total") == 1
    # nothing moved: chunk 2 again is a repeat (answered from memory)
    st, b = send(d, "full", [4, 5], number=2)
    assert st == 200 and b["outputs"][0]["data"] == [10, 15], b
    assert d.stop() == 0
    d2 = spawn("--device", "host", "--state-dir", state)
    st, b = send(d2, "full", [6], number=3)
    assert st == 200 and b["outputs"][0]["data"] == [21], b
    st, b = send(d2, "full", [7, 8], number=4, end=True)
    assert st == 200 and b["outputs"][0]["data"] == [28, 36], b


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_tallyd_starts_on_a_full_disk(spawn, tmp_path, how):
    """tallyd stopped (a clean stop cuts the log's room ahead off; kill -9
    leaves it), then the disk of --state-dir fills up: tallyd starts all
    the same, reads its log back and serves plain requests; durable
    chunks are answered while their records find room, then 503 ("No
    space left") with nothing moved; once there is room, the sequence goes on from where it
    was, after a restart too. The disk is a small tmpfs (root only)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(disk)],
                       capture_output=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a tmpfs here: %s" % r.stderr.decode(errors="replace"))
    try:
        state = str(disk / "state")
        os.mkdir(state)
        d = spawn("--device", "host", "--state-dir", state)
        assert send(d, "disk", [1, 2, 3], number=1, start=True)[0] == 200
        assert send(d, "disk", [4, 5], number=2)[0] == 200
        d.stop(getattr(signal, how))
        filler = disk / "filler"
        with open(filler, "wb", buffering=0) as f:  # every byte the disk has left
            for size in (65536, 4096, 1):
                try:
                    while True:
                        f.write(b"\0" * size)
                except OSError:
                    pass
        d2 = spawn("--device", "host", "--state-dir", state)
        st, _, b = d2.post_json("/v1/cumsum", {"dtype": "int64", "shape": [3],
                                               "data": [1, 1, 1]})
        assert st == 200 and b["data"] == [1, 2, 3], b
        st, b = send(d2, "disk", [4, 5], number=2)  # a repeat: nothing to write
        assert st == 200 and b["outputs"][0]["data"] == [10, 15], b
        # chunks go on while the log's last page (or its room ahead) holds
        # their records, then 503 with nothing moved
        total, n, refused = 15, 3, None
        while n < 100:
            st, b = send(d2, "disk", [n], number=n)
            if st != 200:
                refused = (st, b)
                break
            total += n
            assert b["outputs"][0]["data"] == [total], (n, b)
            n += 1
        if how == "SIGTERM" or refused:  # kill -9 leaves 4 MiB of room ahead
            assert refused and refused[0] == 503 and \
                "No space left" in refused[1]["error"], refused
            if n > 3:  # the last answered one again: a repeat, nothing moved
                st, b = send(d2, "disk", [n - 1], number=n - 1)
                assert st == 200 and b["outputs"][0]["data"] == [total], b
        os.unlink(filler)
        st, b = send(d2, "disk", [n], number=n)
        total += n
        assert st == 200 and b["outputs"][0]["data"] == [total], b
        assert d2.stop() == 0
        d3 = spawn("--device", "host", "--state-dir", state)
        st, b = send(d3, "disk", [1, 2], number=n + 1, end=True)
        assert st == 200 and b["outputs"][0]["data"] == [total + 1, total + 3], b
        d3.stop()
    finally:
        subprocess.run(["umount", "-l", str(disk)], capture_output=True)
