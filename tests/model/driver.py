"""The model checker's driver: random operations from many clients,
through every door, against a real tallyd setup under faults, each answer
checked against the reference model (model.py).

    python3 tests/model/driver.py --setup fake|memory|state-dir|redis|failover \\
        [--seconds 20] [--seed N] [--fsync always|everysec]

Setups (docs/durability.md, "Checking it yourself"):
  fake       three replicas of the shared store's backend on a fake store
             (build/bin/model_fake): no tallyd and no Redis, the store's
             answers interleaved at random, writes lost before or after
             they are applied, replicas killed;
  memory     one tallyd, its sequences in memory;
  state-dir  one tallyd with --state-dir (--fsync), killed with SIGKILL
             or stopped with SIGTERM at random, and started again (now
             and then with --fault-state: its writes fail after a few);
             its disk (a tmpfs, as root) filled for a moment;
  failover   two replicas with --state-store-wait 1 on a Redis primary and
             its replica behind a proxy: the replica held back, the
             primary killed, the replica promoted;
  redis      three replicas on one Redis (appendfsync always): replicas
             killed and started again, Redis killed and started again,
             Redis paused (SIGSTOP) past --state-store-timeout-ms, and
             Redis rolled back to a snapshot taken a few seconds before
             (the model rolls back with it).

Each client owns a few sequence ids, which it starts, feeds, ends, lets
expire and starts again, through a door drawn at random: KServe over
REST (JSON, and binary tensors through tritonclient.http), the native API
(raw bytes), libtally (the tally CLI), Python's RunningSum, gRPC calls,
the gRPC stream (several chunks of a sequence at once) and shared memory
in place (REST and gRPC); some chunks carry a deadline of a few ms
(X-Timeout-Ms: a 504 must leave the sequence as it was), and some clients
leave before the answer. Chunks of every dtype, rank 1 to 3, any axis,
inclusive or exclusive, forward or reversed (1-D int64 on the fake
store). Numbered and unnumbered sequences, repeats, conflicts, early
chunks (a chunk sent before the one ahead of it, which follows within or
after --sequence-reorder-ms), starts sent while a chunk of the same id is
on its way, starts and chunks sent as the idle time runs out, chunks
after the end, chunks that differ from their sequence's first (dtype,
mode or shape), and starts beyond --max-sequences. The timers are short,
so that expiry, the linger and the reuse of ids happen often.

Every answer (its kind, its data, and a shared-memory region after it)
must fit a state the model allows; an answer that cannot come (a dropped
connection, a 503 from the store) keeps both outcomes open until a later
answer decides. A failure prints the seed and the history of the one
sequence it is about, from the last moment that sequence was surely gone:
the shortest history that shows it. TALLY_MODEL_SEED (or --seed) replays
a run's operations."""
import argparse
import contextlib
import http.client
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import re
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

import numpy as np  # noqa: E402

import model  # noqa: E402
import seqlib  # noqa: E402
from model import (CONFLICT, DEADLINE, FULL, GAP, INVALID, NONE, OK,  # noqa: E402
                   UNKNOWN, Chunk, Timers)

# The server's timers in these runs: short, so that the idle expiry, the
# linger and the reuse of ids come within seconds.
IDLE_MS, LINGER_MS, REORDER_MS = 900, 400, 250
# A chunk whose client left carries a deadline: tallyd decides it by then
# or not at all, and its write lands at most a Redis pause later; its
# window stays open that long.
DROP_DEADLINE_MS = 300
DROP_GRACE = 1.5
CLI = os.environ.get("TALLY_CLI", os.path.join(ROOT, "build", "bin", "tally"))
MAX_SEQUENCES = 12  # memory and --state-dir: a few starts find no room
MAX_WORLDS = 48     # an id with more open states is set aside until it expires


# the dtypes the chunks take, and their KServe names
DTYPES = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64"]
KSERVE = {"int8": "INT8", "int16": "INT16", "int32": "INT32", "int64": "INT64",
          "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32", "uint64": "UINT64",
          "float32": "FP32", "float64": "FP64"}


class Failure(Exception):
    pass


def flat(a):
    """An answer's values, flat, as Python numbers (a numpy array, or
    JSON's lists, nested or not)."""
    if isinstance(a, list):
        return tuple(v for x in a for v in (flat(x) if isinstance(x, list) else (x,)))
    return tuple(v.item() for v in np.asarray(a).reshape(-1))


# ---------------------------------------------------------------- the setups

class Setup:
    """Doors onto one state: (REST port, gRPC port) of each tallyd up now;
    a fault thread; restarts (to tell the model)."""

    name = "?"
    # the doors a chunk goes through, and an early chunk's
    chunk_kinds = ["rest", "native", "grpc", "shm_rest", "shm_grpc", "binary", "cli",
                   "deadline", "drop"]
    early_kinds = ["rest", "native", "grpc", "binary"]
    own_doors = False  # True: send() and stream() are the setup's
    general = True  # any dtype, rank, axis and mode (False: 1-D int64)
    # How long after its unknown answer (a 503 at the store's timeout) a
    # chunk's write may still land, and its time to live begin: none for
    # a local store, whose failed write surely was not applied
    late_s = 0.0

    def __init__(self, seed):
        self.lock = threading.Lock()
        self.daemons = []
        self.faults = 0
        self.faults_by_kind = {}
        self.epoch = 0  # bumped at each tallyd start (regions to register)
        self.rng = random.Random(seed * 1000 + 999)
        self.stopping = threading.Event()
        self.restart_listeners = []
        self.broken = None  # why the fault loop could not go on
        self.ids = None  # the checker's side (Ids), for faults it must hear of

    def common_args(self):
        return ["--device", "host", "--allow-shared-memory",
                "--sequence-idle-ms", str(IDLE_MS), "--sequence-linger-ms", str(LINGER_MS),
                "--sequence-reorder-ms", str(REORDER_MS), "--inline-max-elements", "0",
                "--max-sequences", str(self.max_sequences())]

    def max_sequences(self):
        return MAX_SEQUENCES

    def full_possible(self):
        """Whether a start may be refused for --max-sequences (memory's
        live sequences; with Redis it counts chunks in flight only)."""
        return True

    def doors(self):
        with self.lock:
            return [(d.port, d.grpc_port, d.epoch) for d in self.daemons if d.up]

    def count(self, kind):
        with self.lock:
            self.faults += 1
            self.faults_by_kind[kind] = self.faults_by_kind.get(kind, 0) + 1

    def start_daemon(self, args):
        from conftest import Daemon
        d = Daemon(*args)
        with self.lock:
            self.epoch += 1
            d.epoch = self.epoch
            d.up = True
            self.daemons.append(d)
        return d

    def kill_daemon(self, d):
        with self.lock:
            d.up = False
        d.proc.kill()
        d.proc.wait()

    def fault_loop(self):
        pass

    def logs(self):
        return "\n".join(d.log()[-1500:] for d in self.daemons[-4:])

    def cleanup(self):
        self.stopping.set()
        for d in self.daemons:
            d.cleanup()


class Memory(Setup):
    name = "memory"

    def __init__(self, seed):
        super().__init__(seed)
        self.start_daemon(self.common_args())


class StateDir(Setup):
    name = "state-dir"

    def __init__(self, seed, fsync="always"):
        super().__init__(seed)
        self.top = tempfile.mkdtemp(prefix="tally-model-")
        # a small disk of its own, to fill (root only; else no full disk)
        self.disk = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m", "tmpfs",
                                    self.top], capture_output=True).returncode == 0
        self.dir = os.path.join(self.top, "state")
        os.mkdir(self.dir)
        self.fsync = fsync
        self.start_daemon(self.args())

    def args(self, faulty=False):
        a = self.common_args() + ["--state-dir", self.dir, "--state-fsync", self.fsync]
        if faulty:  # every write fails after a few: 503s, nothing moved
            a += ["--fault-state", self.rng.choice(["enospc", "eio", "fsync"]),
                  "--fault-state-after", str(self.rng.randint(0, 60))]
        return a

    def fill_disk(self):
        """The disk full for a moment: every byte left taken, then freed."""
        filler = os.path.join(self.top, "filler")
        with open(filler, "wb", buffering=0) as f:
            for size in (1 << 20, 4096, 1):
                try:
                    while True:
                        f.write(b"\0" * size)
                except OSError:
                    pass
        self.count("the disk full")
        self.stopping.wait(self.rng.uniform(0.2, 1.0))
        os.unlink(filler)

    def fault_loop(self):
        while not self.stopping.wait(self.rng.uniform(1.0, 3.0)):
            d = self.daemons[-1]
            if self.disk and self.rng.random() < 0.25:
                self.fill_disk()
                continue
            if self.rng.random() < 0.3:  # a clean stop: its drain answers what it took
                with self.lock:
                    d.up = False
                d.proc.send_signal(signal.SIGTERM)
                try:
                    d.proc.wait(30)
                except subprocess.TimeoutExpired:
                    d.proc.kill()
                    d.proc.wait()
                self.count("tallyd stopped (SIGTERM)")
            else:
                self.kill_daemon(d)
                self.count("tallyd killed")
            for fn in self.restart_listeners:
                fn()
            if self.stopping.wait(self.rng.uniform(0.0, 0.3)):
                return
            faulty = self.rng.random() < 0.2
            try:
                self.start_daemon(self.args(faulty))
            except RuntimeError as e:  # the run cannot go on: say why
                self.broken = "tallyd did not start again on its --state-dir: %s" % e
                return
            if faulty:
                self.count("started with --fault-state")

    def cleanup(self):
        super().cleanup()
        if self.disk:
            subprocess.run(["umount", "-l", self.top], capture_output=True)
        shutil.rmtree(self.top, ignore_errors=True)


class RedisReplicas(Setup):
    name = "redis"

    def __init__(self, seed):
        super().__init__(seed)
        from seqlib import Redis
        self.redis = Redis()
        for _ in range(3):
            self.start_daemon(self.args())

    # a write sent as Redis is paused (SIGSTOP, 0.8 s at most) is applied
    # when it goes on
    late_s = 1.0

    def args(self):
        return self.common_args() + ["--state-store", self.redis.url(),
                                     "--state-store-timeout-ms", "400"]

    def max_sequences(self):
        return 1024

    def full_possible(self):
        return False

    def fault_loop(self):
        while not self.stopping.wait(self.rng.uniform(0.8, 2.5)):
            what = self.rng.choice(["replica", "replica", "redis", "pause", "rollback"])
            if what == "replica":
                up = [d for d in self.daemons if d.up]
                d = self.rng.choice(up)
                self.kill_daemon(d)
                self.count("replica killed")
                if self.stopping.wait(self.rng.uniform(0.0, 0.5)):
                    return
                try:
                    self.start_daemon(self.args())
                except RuntimeError as e:
                    self.broken = "a replica did not start again: %s" % e
                    return
            elif what == "redis":
                self.redis.kill()
                self.count("Redis killed")
                if self.stopping.wait(self.rng.uniform(0.0, 0.4)):
                    return
                self.redis.start()
            elif what == "rollback" and self.ids.snapshot is None:
                with self.ids.no_compound_op():
                    self.ids.snapshot_taken(self.redis.save)
                self.count("Redis snapshot taken")
            elif what == "rollback":
                with self.ids.no_compound_op():
                    self.rollback()
            else:
                self.redis.proc.send_signal(signal.SIGSTOP)
                self.count("Redis paused")
                self.stopping.wait(self.rng.uniform(0.45, 0.8))
                self.redis.proc.send_signal(signal.SIGCONT)

    def rollback(self):
        """Redis killed and started from its last snapshot, without its
        append-only file: every write since the snapshot is gone, as
        after a restore from a backup. Then its append-only file is made
        anew from what it holds (appendfsync always again) before any
        other fault."""
        self.redis.kill()
        self.ids.rolled_back()
        self.count("Redis rolled back to its snapshot")
        shutil.rmtree(os.path.join(self.redis.dir, "appendonlydir"), ignore_errors=True)
        aof, self.redis.aof = self.redis.aof, None
        try:
            self.redis.start()
        finally:
            self.redis.aof = aof
        self.redis.command("CONFIG", "SET", "appendfsync", "always")
        self.redis.command("CONFIG", "SET", "appendonly", "yes")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            info = self.redis.command("INFO", "persistence").decode(errors="replace")
            if "aof_enabled:1" in info and "aof_rewrite_in_progress:0" in info \
                    and "aof_rewrite_scheduled:0" in info:
                return
            time.sleep(0.05)
        self.broken = "Redis did not write its append-only file after the rollback"

    def cleanup(self):
        super().cleanup()
        try:
            self.redis.proc.send_signal(signal.SIGCONT)
        except OSError:
            pass
        self.redis.cleanup()


class RedisFailover(Setup):
    """Two replicas of tallyd with --state-store-wait 1 on a Redis primary
    and its replica, behind a proxy (as a Kubernetes Service is); the
    fault: the replica held back a moment, the primary killed, the
    replica promoted, a new replica started for it, and the proxy pointed
    at the new primary. With WAIT, every answered chunk is on the replica
    promoted: nothing answered is lost; a write answered 503 since the
    replica stopped may be, even when a refusal saw it meanwhile."""

    name = "failover"
    # Redis runs a connection's commands in order, and a WAIT holds the
    # ones behind it until the replica takes the write or the WAIT's own
    # timeout (600 ms) ends, one WAIT after another while the new replica
    # syncs: a write given up at its deadline lands when those have ended
    late_s = 3.0

    def __init__(self, seed):
        super().__init__(seed)
        from seqlib import Proxy, Redis
        self.Redis, self.Proxy = Redis, Proxy
        self.primary = Redis(aof="everysec")
        self.link = Proxy(self.primary.port)  # the replication's link, to hold up
        self.replica = Redis(aof="everysec", extra=("--replicaof", "127.0.0.1",
                                                    str(self.link.port)))
        self.synced(self.replica)
        self.proxy = Proxy(self.primary.port)
        for _ in range(2):
            self.start_daemon(self.args())

    def synced(self, node):
        deadline = time.monotonic() + 15
        while b"master_link_status:up" not in node.command("INFO", "replication"):
            if time.monotonic() > deadline:
                raise RuntimeError("a Redis replica did not sync:\n" + node.log())
            time.sleep(0.05)

    def args(self):
        return self.common_args() + ["--state-store", "redis://127.0.0.1:%d" % self.proxy.port,
                                     "--state-store-wait", "1",
                                     "--state-store-timeout-ms", "600"]

    def max_sequences(self):
        return 1024

    def full_possible(self):
        return False

    def fault_loop(self):
        while not self.stopping.wait(self.rng.uniform(1.5, 3.0)):
            # The replica keeps what the primary had when its link stopped
            # (every answered write: WAIT saw it there); a write answered
            # 503 since, and seen since by a refusal, may be lost: to the
            # model a failover is a rollback to a snapshot taken then.
            with self.ids.no_compound_op():
                self.link.frozen = True
                self.ids.snapshot_taken(lambda: None)
                self.stopping.wait(self.rng.uniform(0.05, 0.4))
                self.primary.kill()
                # the model rolls back before any request can reach the
                # replica: one decided there after is the snapshot's
                self.ids.rolled_back()
                self.link.close()
                self.replica.command("REPLICAOF", "NO", "ONE")
                old = self.primary
                self.primary, self.link = self.replica, self.Proxy(self.replica.port)
                self.replica = self.Redis(aof="everysec", extra=(
                    "--replicaof", "127.0.0.1", str(self.link.port)))
                self.proxy.switch(self.primary.port)
            old.cleanup()
            self.count("a failover")
            try:
                self.synced(self.replica)
            except RuntimeError as e:
                self.broken = str(e)
                return

    def cleanup(self):
        super().cleanup()
        for x in (self.proxy, self.link):
            x.close()
        for n in (self.primary, self.replica):
            n.cleanup()


class FakeStore(Setup):
    """The shared store's backend itself, three replicas of it on a fake
    store, in one process (tests/model/fake_replicas.c): chunks go in as
    lines, answers come back as lines."""

    name = "fake"
    chunk_kinds = early_kinds = ["fake"]
    own_doors = True
    general = False
    REPLICAS = 3

    def __init__(self, seed):
        super().__init__(seed)
        binary = os.environ.get("TALLY_MODEL_FAKE",
                                os.path.join(ROOT, "build", "bin", "model_fake"))
        self.proc = subprocess.Popen(
            [binary, "--seed", str(seed), "--replicas", str(self.REPLICAS),
             "--idle-ms", str(IDLE_MS), "--linger-ms", str(LINGER_MS),
             "--reorder-ms", str(REORDER_MS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self.answers = {}
        self.cv = threading.Condition()
        self.next_id = 0
        self.counts = None
        self.reader = threading.Thread(target=self.read_answers, daemon=True)
        self.reader.start()

    def read_answers(self):
        for line in self.proc.stdout:
            parts = line.rstrip("\n").split(" ", 3)
            with self.cv:
                if parts[0] == "S":
                    self.counts = dict(kv.split("=") for kv in line.split()[1:])
                elif parts[0] == "A":
                    self.answers[int(parts[1])] = (int(parts[2]), parts[3] if len(parts) > 3 else "")
                self.cv.notify_all()

    def write(self, text):
        with self.lock:
            self.proc.stdin.write(text)
            self.proc.stdin.flush()

    def line(self, replica, seq, c):
        with self.cv:
            self.next_id += 1
            rid = self.next_id
        flags = ("s" if c.start else "") + ("e" if c.end else "") or "-"
        return rid, "C %d %d %s %s %d %s %d %s\n" % (
            rid, replica, seq, flags, c.number or 0, c.dtype, len(c.data),
            " ".join(str(v) for v in c.data))

    def wait(self, rid, c):
        with self.cv:
            if not self.cv.wait_for(lambda: rid in self.answers, timeout=20):
                raise Failure("model_fake never answered a chunk (%r)" % c)
            status, rest = self.answers.pop(rid)
        if status == 200:
            return OK, tuple(int(v) for v in rest.split()), ""
        return classify(status, rest), None, rest

    def doors(self):
        return [(i, None, 0) for i in range(self.REPLICAS)]

    def send(self, door, seq, c):
        rid, text = self.line(door[0], seq, c)
        self.write(text)
        return self.wait(rid, c)

    def stream(self, door, seq, chunks):
        """The chunks sent at once to one replica, as a gRPC stream's."""
        lines = [self.line(door[0], seq, c) for c in chunks]
        self.write("".join(t for _, t in lines))
        return [self.wait(rid, c) for (rid, _), c in zip(lines, chunks)]

    def max_sequences(self):
        return 1024

    def full_possible(self):
        return False

    def fault_loop(self):
        while not self.stopping.wait(self.rng.uniform(0.3, 1.5)):
            self.write("K %d\n" % self.rng.randrange(self.REPLICAS))
            self.count("replica killed")

    def finish(self):
        """The store's own counts, into the faults."""
        self.write("Q\n")
        self.proc.wait(30)
        self.reader.join(5)
        c = self.counts or {}
        for name, key in (("a write lost before it was applied", "lost_before"),
                          ("an answer lost after its write", "lost_after")):
            n = int(c.get(key, 0))
            self.faults += n
            self.faults_by_kind[name] = n
        self.faults_by_kind["writes that found another version"] = int(c.get("conflicts", 0))

    def logs(self):
        return ""

    def cleanup(self):
        super().cleanup()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


# ---------------------------------------------------------------- the doors

def orphan_outcomes(exp, c, w, waited):
    """exp, c's outcomes on w, and those of c (not a start) as an orphan:
    behind a start that did not start its sequence (docs/sequences.md,
    "One rule for each race"), where c may or may not have been (the
    start's answer lost, or c ahead of it in the line). An unnumbered
    orphan is refused, and a numbered one goes on only where w takes it
    (applied or a repeat), else waits for chunk 1 and gets its gap after
    reorder_ms; nothing changes."""
    if c.numbered:
        orphan = [e for e in exp if e[0] == OK] + ([(GAP, None, w)] if waited else [])
    else:
        orphan = [(INVALID, None, w)]
    return exp + orphan


def classify(status, message):
    """An answer's kind from its status (HTTP's, or 0 for gRPC) and
    words."""
    m = message or ""
    if status == 200:
        return OK
    if "as many as the server keeps" in m or "live sequences' carries take" in m:
        return FULL
    if status in (400,) or "not live" in m or "keeps its first chunk" in m \
            or "numbers its chunks" in m or "does not number" in m:
        return INVALID
    if "waited" in m and "--sequence-reorder-ms" in m:
        return GAP
    if "older than its last" in m or "applied with another input" in m \
            or "cannot follow it" in m:
        return CONFLICT
    if status == 413:
        return model.TOO_LARGE
    if status == 504:
        return DEADLINE  # its deadline passed before its turn: nothing changed
    return UNKNOWN  # 503 (the store, the log), a drain, a dropped connection


def params_of(seq, c, scan=True):
    """The request's parameters: the sequence's, and the scan's."""
    p = {"axis": c.axis, "exclusive": c.exclusive, "reverse": c.reverse} if scan else {}
    p["sequence_id"] = seq
    if c.start:
        p["sequence_start"] = True
    if c.end:
        p["sequence_end"] = True
    if c.numbered:
        p["sequence_chunk"] = c.number
    return p


def seq_param(seq):
    """The id as the doors take it: a number for 'n:...', else a string."""
    return int(seq[2:]) if seq.startswith("n:") else seq[2:]


class Doors:
    """One client's ways into the setup: connections, a gRPC client per
    port, its shared-memory region (registered on each tallyd it meets)."""

    KINDS = ["rest", "native", "grpc", "stream", "shm_rest", "shm_grpc"]

    def __init__(self, name, rng):
        import tritonclient.utils.shared_memory as shm
        self.rng = rng
        self.shm = shm
        self.region = "model-%s" % name
        self.key = "/tally-model-%d-%s" % (os.getpid(), name)
        self.handle = shm.create_shared_memory_region(self.region, self.key, 64)
        self.registered = set()  # (port, epoch)
        self.grpc = {}

    def close(self):
        for c in self.grpc.values():
            try:
                c.close()
            except Exception:
                pass
        try:
            self.shm.destroy_shared_memory_region(self.handle)
        except Exception:
            pass

    def grpc_client(self, port):
        import tritonclient.grpc as grpcclient
        c = self.grpc.get(port)
        if c is None:
            c = self.grpc[port] = grpcclient.InferenceServerClient("127.0.0.1:%d" % port)
        return c

    # each returns (kind, answer tuple or None, words)

    def rest(self, door, seq, c, timeout=5, headers=None):
        st, body = seqlib.send(door[0], None, list(c.data), dtype=KSERVE[c.dtype],
                               shape=c.shape, params=params_of(seq_param(seq), c),
                               timeout=timeout, headers=headers)
        if st == 200:
            return OK, flat(body["outputs"][0]["data"]), ""
        words = body.get("error", "")
        return classify(st, words), None, words

    def native(self, door, seq, c, timeout=5):
        q = {"dtype": c.dtype, "shape": ",".join(str(n) for n in c.shape)}
        for k, v in params_of(seq_param(seq), c).items():
            q[k] = ("true" if v else "false") if isinstance(v, bool) else str(v)
        if isinstance(seq_param(seq), str):
            q["sequence_id"] = seq_param(seq)
        raw = c.array().tobytes()
        conn = http.client.HTTPConnection("127.0.0.1", door[0], timeout=timeout)
        try:
            conn.request("POST", "/v1/cumsum?" + urllib.parse.urlencode(q), raw,
                         {"Content-Type": "application/octet-stream"})
            r = conn.getresponse()
            body = r.read()
        finally:
            conn.close()
        if r.status == 200:
            return OK, flat(np.frombuffer(body, dtype=c.dtype)), ""
        words = json.loads(body).get("error", "") if body else ""
        return classify(r.status, words), None, words

    def grpc_call(self, door, seq, c, timeout=5, shm=False):
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException
        cl = self.grpc_client(door[1])
        x = c.array()
        i = grpcclient.InferInput("x", list(c.shape), KSERVE[c.dtype])
        outs = None
        if shm:
            self.shm.set_shared_memory_region(self.handle, [x])
            i.set_shared_memory(self.region, x.nbytes)
            o = grpcclient.InferRequestedOutput("y")
            o.set_shared_memory(self.region, x.nbytes)
            outs = [o]
        else:
            i.set_data_from_numpy(x)
        p = params_of(seq_param(seq), c)
        extra = {k: p[k] for k in ("sequence_chunk", "axis", "exclusive", "reverse") if k in p}
        try:
            r = cl.infer("cumsum", [i], outputs=outs, sequence_id=p["sequence_id"],
                         sequence_start=c.start, sequence_end=c.end, parameters=extra,
                         client_timeout=timeout)
        except InferenceServerException as e:
            words = e.message() or ""
            st = str(e.status())
            if "UNAVAILABLE" in st and not words.startswith("sequence") \
                    or "DEADLINE" in st or "CANCELLED" in st:
                return UNKNOWN, None, "%s %s" % (st, words)
            return classify(0, words), None, words
        if shm:
            return OK, flat(self.region_now(len(c.data), c.dtype)), ""
        return OK, flat(r.as_numpy("y")), ""

    def binary(self, door, seq, c, timeout=5):
        """KServe REST with the tensors as binary data (tritonclient.http)."""
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException
        cl = httpclient.InferenceServerClient("127.0.0.1:%d" % door[0],
                                              connection_timeout=timeout,
                                              network_timeout=timeout)
        i = httpclient.InferInput("x", list(c.shape), KSERVE[c.dtype])
        i.set_data_from_numpy(c.array(), binary_data=True)
        p = params_of(seq_param(seq), c)
        extra = {k: p[k] for k in ("sequence_chunk", "axis", "exclusive", "reverse") if k in p}
        try:
            r = cl.infer("cumsum", [i], outputs=[httpclient.InferRequestedOutput(
                "y", binary_data=True)], sequence_id=p["sequence_id"],
                sequence_start=c.start, sequence_end=c.end, parameters=extra)
        except InferenceServerException as e:
            words = e.message() or ""
            try:
                status = int(e.status())
            except (TypeError, ValueError):
                return UNKNOWN, None, words
            return classify(status, words), None, words
        finally:
            cl.close()
        return OK, flat(r.as_numpy("y")), ""

    def cli(self, door, seq, c, timeout=10):
        """libtally, through the tally CLI: a chunk as .npy files."""
        d = tempfile.mkdtemp(prefix="tally-model-cli-")
        try:
            src, dst = os.path.join(d, "x.npy"), os.path.join(d, "y.npy")
            np.save(src, c.array())
            cmd = [CLI, "cumsum", "--url", "http://127.0.0.1:%d" % door[0],
                   "--sequence-id", str(seq_param(seq)), "--axis", str(c.axis)]
            if c.exclusive:
                cmd.append("--exclusive")
            if c.reverse:
                cmd.append("--reverse")
            if c.start:
                cmd.append("--sequence-start")
            if c.end:
                cmd.append("--sequence-end")
            if c.numbered:
                cmd += ["--sequence-chunk", str(c.number)]
            try:
                r = subprocess.run(cmd + [src, dst], capture_output=True, timeout=timeout)
            except subprocess.TimeoutExpired:
                return UNKNOWN, None, "the CLI timed out"
            words = r.stderr.decode(errors="replace")
            if r.returncode == 0:
                return OK, flat(np.load(dst)), ""
            m = re.search(r"\(HTTP (\d+) from", words)
            if r.returncode != 1 or m is None:
                return UNKNOWN, None, words
            return classify(int(m.group(1)), words), None, words
        finally:
            shutil.rmtree(d, ignore_errors=True)

    def region_now(self, n, dtype="int64"):
        return self.shm.get_contents_as_numpy(self.handle, np.dtype(dtype), [n]).copy()

    def shm_rest(self, door, seq, c, timeout=5):
        x = c.array()
        self.shm.set_shared_memory_region(self.handle, [x])
        place = {"shared_memory_region": self.region, "shared_memory_offset": 0,
                 "shared_memory_byte_size": x.nbytes}
        body = json.dumps({
            "parameters": params_of(seq_param(seq), c),
            "inputs": [{"name": "x", "datatype": KSERVE[c.dtype], "shape": list(c.shape),
                        "parameters": place}],
            "outputs": [{"name": "y", "parameters": place}]})
        conn = http.client.HTTPConnection("127.0.0.1", door[0], timeout=timeout)
        try:
            conn.request("POST", "/v2/models/cumsum/infer", body,
                         {"Content-Type": "application/json"})
            r = conn.getresponse()
            raw = r.read()
        finally:
            conn.close()
        if r.status == 200:
            return OK, flat(self.region_now(len(c.data), c.dtype)), ""
        words = json.loads(raw).get("error", "") if raw else ""
        return classify(r.status, words), None, words

    def register(self, door):
        if (door[0], door[2]) in self.registered:
            return
        body = json.dumps({"key": self.key, "offset": 0, "byte_size": 64})
        conn = http.client.HTTPConnection("127.0.0.1", door[0], timeout=5)
        try:
            conn.request("POST", "/v2/systemsharedmemory/region/%s/register" % self.region,
                         body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
        finally:
            conn.close()
        if r.status != 200:
            raise OSError("register: %d" % r.status)
        self.registered.add((door[0], door[2]))

    def stream(self, door, seq, chunks, timeout=5):
        """The chunks on one gRPC stream, sent at once: each one's
        (kind, answer, words), UNKNOWN for those whose answer never came."""
        import tritonclient.grpc as grpcclient
        results = queue.Queue()
        cl = grpcclient.InferenceServerClient("127.0.0.1:%d" % door[1])
        out = [(UNKNOWN, None, "no answer")] * len(chunks)
        try:
            cl.start_stream(callback=lambda result, error: results.put((result, error)))
            for k, c in enumerate(chunks):
                i = grpcclient.InferInput("x", list(c.shape), KSERVE[c.dtype])
                i.set_data_from_numpy(c.array())
                p = params_of(seq_param(seq), c)
                cl.async_stream_infer("cumsum", [i], request_id=str(k),
                                      sequence_id=p["sequence_id"], sequence_start=c.start,
                                      sequence_end=c.end, parameters={
                                          n: p[n] for n in ("sequence_chunk", "axis",
                                                            "exclusive", "reverse") if n in p})
            deadline = time.time() + timeout
            got = 0
            while got < len(chunks) and time.time() < deadline:
                try:
                    result, error = results.get(timeout=max(0.01, deadline - time.time()))
                except queue.Empty:
                    break
                got += 1
                if error is not None:
                    # a refusal names nothing but its words; the order of
                    # the answers is the order sent (one stream, one
                    # sequence): the first still open
                    words = error.message() if hasattr(error, "message") else str(error)
                    words = words or ""
                    # a numbered refusal names its chunk; the others come in
                    # the order sent (one sequence: admitted in order)
                    k = next(j for j, o in enumerate(out) if o[2] == "no answer")
                    for j, c in enumerate(chunks):
                        if c.numbered and out[j][2] == "no answer" \
                                and ("chunk %d " % c.number) in words:
                            k = j
                            break
                    kind = classify(0, words or "")
                    out[k] = (kind, None, words or "")
                    continue
                k = int(result.get_response().id)
                out[k] = (OK, flat(result.as_numpy("y")), "")
        except Exception as e:  # the stream broke: the rest stay unknown
            out = [o if o[2] != "no answer" else (UNKNOWN, None, repr(e)) for o in out]
        finally:
            try:
                cl.stop_stream()
            except Exception:
                pass
            cl.close()
        return out

    def send(self, kind, door, seq, c):
        """One chunk through door kind: (kind, answer, words, region)."""
        try:
            if kind == "rest":
                return self.rest(door, seq, c) + (None,)
            if kind == "native":
                return self.native(door, seq, c) + (None,)
            if kind == "grpc":
                return self.grpc_call(door, seq, c) + (None,)
            if kind == "binary":
                return self.binary(door, seq, c) + (None,)
            if kind == "cli":
                return self.cli(door, seq, c) + (None,)
            if kind == "deadline":  # its deadline may pass before its turn
                return self.rest(door, seq, c, headers={
                    "X-Timeout-Ms": str(self.rng.choice([1, 2, 5]))}) + (None,)
            if kind == "drop":  # the client leaves before the answer
                try:  # tallyd gives the chunk up at its deadline if still undecided
                    return self.rest(door, seq, c, timeout=self.rng.choice([0.001, 0.003]),
                                     headers={"X-Timeout-Ms": str(DROP_DEADLINE_MS)}) + (None,)
                finally:
                    # tallyd may still decide the chunk after the client
                    # left: its window lasts until it surely has
                    time.sleep(DROP_GRACE)
            self.register(door)
            if kind == "shm_rest":
                k, a, w = self.shm_rest(door, seq, c)
            else:
                k, a, w = self.grpc_call(door, seq, c, shm=True)
            region = None if k in (OK, UNKNOWN) else flat(self.region_now(len(c.data), c.dtype))
            return k, a, w, region
        except (OSError, http.client.HTTPException) as e:
            return UNKNOWN, None, repr(e), None


# ---------------------------------------------------------------- the checker

class Ids:
    """Every id's open states, under one lock: the model's side."""

    def __init__(self, timers, setup, full_limit):
        self.timers = timers
        self.setup = setup
        self.lock = threading.Lock()
        self.worlds = {}   # id -> [World]
        self.history = {}  # id -> [(what, ...)] since it was surely gone
        self.inflight = {}  # id -> count of requests on their way
        self.full_limit = full_limit
        self.ops = self.unknown = self.set_aside = self.max_worlds = 0
        # the states of ids whose request was on its way when tallyd was
        # killed: that request took effect before the kill, or after the
        # start, or not at all
        self.before_restart = {}  # id -> ([World], what the fault made of one)
        # Redis's snapshot: each id's states when it was taken, and the ids
        # whose request was on its way then (in it, or not)
        self.snapshot = None
        self.snap_pending = set()
        self.changed_at = {}  # id -> when its last request ended
        self.gone_at = {}  # id -> its history's length when it was surely gone
        # operations of several requests on their way (a stream, an early
        # pair, a race), and whether a fault keeps new ones waiting
        self.gate = threading.Condition()
        self.compound = 0
        self.holding = False
        # writes answered 503 over a shared store that may still land:
        # id -> [(the state decided on, the state after, until when)]
        self.pending = {}
        setup.restart_listeners.append(self.on_restart)
        setup.ids = self

    def on_restart(self):
        """tallyd (--state-dir) was killed: what each id may be now."""
        with self.lock:
            for seq, ws in self.worlds.items():
                if self.inflight.get(seq) and seq not in self.before_restart:
                    self.before_restart[seq] = (list(ws), lambda w: [model.restarted(w)])
                self.worlds[seq] = dedupe([model.restarted(w) for w in ws])
                self.history.setdefault(seq, []).append(("restart", "%.3f" % time.monotonic()))

    def add_pending(self, seq, before, after, until):
        """A write of seq answered 503 that may land until `until`, from
        before to after. Under the lock: check()'s run calls it."""
        p = self.pending.setdefault(seq, [])
        if (before, after, until) not in p:
            p.append((before, after, until))

    def landed(self, seq, ws, s):
        """ws, and the states a pending write of seq may have made by a
        decision after s: its compare-and-set lands on the state it was
        decided on, at most once each (a state it made is another)."""
        pend = [p for p in self.pending.get(seq, []) if p[2] > s]
        self.pending[seq] = pend
        out = list(ws)
        for before, after, _ in pend:
            if before in out and after not in out:
                out.append(after)
        return out

    @contextlib.contextmanager
    def compound_op(self):
        """An operation of several requests, checked as one: it waits while
        a fault holds them off."""
        with self.gate:
            while self.holding:
                self.gate.wait()
            self.compound += 1
        try:
            yield
        finally:
            with self.gate:
                self.compound -= 1
                self.gate.notify_all()

    @contextlib.contextmanager
    def no_compound_op(self):
        """A fault that changes every state at once (Redis's snapshot, its
        rollback), which the model places before or after a request but
        not between two requests of one operation: it waits until none of
        those is on its way, and none starts until it has ended."""
        with self.gate:
            self.holding = True
            while self.compound:
                self.gate.wait()
        try:
            yield
        finally:
            with self.gate:
                self.holding = False
                self.gate.notify_all()

    def snapshot_taken(self, save):
        """Redis takes a snapshot (save(): SAVE, which blocks Redis while it
        writes): each id's states now, and those of the ids whose request
        is on its way (its write may land before the snapshot or after)."""
        with self.lock:
            self.snapshot = {seq: list(ws) for seq, ws in self.worlds.items()}
            self.snap_pending = {seq for seq, n in self.inflight.items() if n}
            save()

    def rolled_back(self):
        """Redis was started again from the snapshot: every id is back to
        its states then (an id it did not hold is absent); a request on
        its way took effect before (then lost) or after, on the snapshot's
        state."""
        with self.lock:
            snap = self.snapshot or {}
            for seq in set(self.worlds) | set(snap):
                back = list(snap.get(seq, [NONE]))
                if self.inflight.get(seq):
                    self.before_restart[seq] = (list(self.worlds.get(seq, [NONE])),
                                                lambda w, back=back: back)
                self.worlds[seq] = dedupe(back)
                self.history.setdefault(seq, []).append(
                    ("rollback", "%.3f" % time.monotonic()))
            self.snapshot, self.snap_pending = None, set()

    def later(self, states, s, r):
        """states as a later request within [s, r] may find them: a
        sequence's idle time may run out between two requests of one
        operation (a stream's chunks, a race's or an early pair's two)."""
        return dedupe([x for w in states for x in model.settle(w, self.timers, s, r)])

    def get(self, seq):
        with self.lock:
            return list(self.worlds.get(seq, [NONE]))

    def begin(self, seq):
        with self.lock:
            self.inflight[seq] = self.inflight.get(seq, 0) + 1

    def live_bounds(self, s, r, skip):
        """(surely live, maybe live) sequences at a decision within [s, r]:
        what --max-sequences compares. Maybe: one with a request on its
        way, or whose last request ended after s (its change may have come
        before or after the decision)."""
        lo = hi = 0
        seen = []
        for seq in set(self.worlds) | set(self.inflight):
            if seq == skip:
                continue
            ws = self.worlds.get(seq, [NONE])
            live = [model.settle(w, self.timers, s, r) for w in ws]
            states = [x.status == model.LIVE for group in live for x in group]
            if self.inflight.get(seq) or self.changed_at.get(seq, 0) > s:
                hi += 1
                seen.append((seq, "on its way, or changed meanwhile"))
                continue
            if states and all(states):
                lo += 1
            if any(states):
                hi += 1
                seen.append((seq, [(w.status, w.renew) for w in ws]))
        self.last_bounds = (s, lo, hi, seen)
        return lo, hi

    def check(self, seq, what, run, s, r):
        """Filters seq's states with an observation: run(world) gives the
        list of next states it allows for that world (empty: it does not
        fit). Raises Failure with the history when nothing fits."""
        with self.lock:
            self.inflight[seq] -= 1
            self.ops += 1
            ws = self.landed(seq, self.worlds.get(seq, [NONE]), s)
            hist = self.history.setdefault(seq, [])
            hist.append(what)
            nxt = []
            for w0 in ws:
                for w in model.settle(w0, self.timers, s, r):
                    nxt.extend(run(w))
            before, after = self.before_restart.pop(seq, ([], None))
            for w0 in before:
                for w in model.settle(w0, self.timers, s, r):
                    for x in run(w):
                        nxt.extend(after(x))
            nxt = dedupe(nxt)
            if not nxt:
                raise Failure(self.explain(seq, ws))
            if len(nxt) > 1:
                self.unknown += 1
            if all(w.status == model.ABSENT for w in nxt):
                self.gone_at[seq] = len(hist)  # surely gone after these
            del hist[:-200]
            self.worlds[seq] = nxt
            if seq in self.snap_pending:  # its effect is in the snapshot, or not
                self.snap_pending.discard(seq)
                self.snapshot[seq] = dedupe(self.snapshot.get(seq, [NONE]) + nxt)
            self.changed_at[seq] = time.monotonic()
            self.max_worlds = max(self.max_worlds, len(nxt))
            return nxt

    def explain(self, seq, ws):
        lines = ["sequence %s: no state the model allows fits its last answer" % seq,
                 "its states before it:"]
        lines += ["  %r" % (w,) for w in ws]
        if getattr(self, "last_bounds", None):
            at, lo, hi, seen = self.last_bounds
            lines.append("the last count of live sequences, at %.3f: %d to %d: %s"
                         % (at, lo, hi, seen))
        if any(w.status != model.LIVE for w in ws):
            at = time.monotonic()
            lo, hi = self.live_bounds(at, at, seq)
            lines.append("live sequences now, as the model sees them: %d to %d of "
                         "--max-sequences %d; the others:" % (lo, hi, self.full_limit))
            for other, ows in sorted(self.worlds.items()):
                if other != seq:
                    lines.append("  %s%s: %s" % (other, " (a request on its way)"
                                                 if self.inflight.get(other) else "",
                                                 [(w.status, self.timers.expiry(w))
                                                  for w in ows]))
                    for h in self.history.get(other, [])[-4:]:
                        lines.append("      " + " ".join(str(x) for x in h))
        lines.append("its history, from when it was surely gone (times: the checker's "
                     "monotonic seconds; * before it):")
        hist = self.history.get(seq, [])
        mark = min(self.gone_at.get(seq, 0), len(hist) - 1)
        for i, h in enumerate(hist[max(0, mark - 3):], max(0, mark - 3)):
            lines.append(("* " if i < mark else "  ") + " ".join(str(x) for x in h))
        return "\n".join(lines)

    def expires_by(self, seq):
        """When every state of seq is surely gone (None: it is now)."""
        with self.lock:
            ws = self.worlds.get(seq, [NONE])
            t = None
            for w in ws:
                e = self.timers.expiry(w)
                if e is not None:
                    t = max(t or 0, e[1] + self.timers.m_hi)
            return t


def dedupe(ws):
    out = []
    for w in ws:
        if w not in out:
            out.append(w)
    return out


def fits(kind, answer, region, c, expected):
    """Whether an observation fits one of expected's (kind, answer, World):
    the Worlds it leads to."""
    out = []
    for ek, ea, n in expected:
        if kind != ek:
            continue
        if kind == OK and answer != ea:
            continue
        if region is not None and kind != OK and region != c.data:
            continue  # a refused in-place chunk must leave its input
        out.append(n)
    return out


# ---------------------------------------------------------------- the clients

class Client(threading.Thread):
    def __init__(self, k, setup, ids, seed, stop_at, errors):
        super().__init__(daemon=True)
        self.k, self.setup, self.ids = k, setup, ids
        self.rng = random.Random(seed * 1000 + k)
        self.stop_at = stop_at
        self.errors = errors
        self.doors = None if setup.own_doors else Doors("%d-%d" % (seed % 100000, k),
                                                        random.Random(seed * 1000 + 500 + k))
        tag = seed % 100000
        # a string id and a number id of its own, used again and again
        self.seqs = ["s:m%d-%d-a" % (tag, k), "n:%d" % (tag * 100 + k + 1),
                     "s:m%d-%d-b" % (tag, k)]
        self.set_aside = {}
        self.ops = 0
        self.by_door = {}  # chunks sent through each door

    def run(self):
        try:
            while time.monotonic() < self.stop_at and not self.errors:
                self.one()
        except Failure as e:
            self.errors.append(str(e))
        except Exception as e:  # noqa: B902 - the driver's own bug: say so
            import traceback
            self.errors.append("client %d: %s\n%s" % (self.k, e, traceback.format_exc()))
        finally:
            if self.doors is not None:
                self.doors.close()

    def door(self):
        up = self.setup.doors()
        while not up:
            if self.setup.broken:
                raise Failure(self.setup.broken)
            time.sleep(0.02)
            up = self.setup.doors()
        return self.rng.choice(up)

    def new_attrs(self):
        """A new sequence's attributes (Chunk.attrs): any dtype, rank 1 to
        3, any axis and mode, at most 4 lines; the fake store's replicas
        take 1-D int64 chunks only."""
        if not self.setup.general:
            return ("int64", 1, 0, False, False, ())
        rank = self.rng.choice([1, 1, 2, 3])
        off = tuple(self.rng.randint(1, 2) for _ in range(rank - 1))
        return (self.rng.choice(DTYPES), rank, self.rng.randrange(rank),
                self.rng.random() < 0.3, self.rng.random() < 0.3, off)

    def other(self, attrs):
        """attrs with one of them changed: a chunk its sequence refuses."""
        dtype, rank, axis, exclusive, reverse, off = attrs
        if not self.setup.general:
            return ("int32",) + attrs[1:]
        what = self.rng.choice(["dtype", "exclusive", "reverse", "shape"])
        if what == "dtype":
            return (self.rng.choice([d for d in DTYPES if d != dtype]),) + attrs[1:]
        if what == "exclusive":
            return (dtype, rank, axis, not exclusive, reverse, off)
        if what == "reverse":
            return (dtype, rank, axis, exclusive, not reverse, off)
        if rank == 1:  # a second dimension
            return (dtype, 2, 0, exclusive, reverse, (2,))
        return (dtype, rank, axis, exclusive, reverse, (off[0] + 1,) + off[1:])

    def make(self, attrs, **kw):
        """A chunk of a sequence with attrs (None: a new one's), of a few
        small numbers (at most 8: the shared-memory region's 64 bytes)."""
        dtype, rank, axis, exclusive, reverse, off = attrs or self.new_attrs()
        lines = int(np.prod(off)) if off else 1
        n = self.rng.randint(1, max(1, 8 // lines) if self.setup.general else 4)
        shape = off[:axis] + (n,) + off[axis:]
        lo = 0 if dtype.startswith("uint") else -50
        data = [self.rng.randint(lo, 50) for _ in range(n * lines)]
        return Chunk(data, dtype=dtype, shape=shape, axis=axis, exclusive=exclusive,
                     reverse=reverse, **kw)

    def again(self, w, **kw):
        """w's last applied chunk again (its repeat), with flags kw."""
        dtype, shape, data = w.last
        _, _, axis, exclusive, reverse, _ = w.attrs
        return Chunk(data, dtype=dtype, shape=shape, axis=axis, exclusive=exclusive,
                     reverse=reverse, number=w.applied, **kw)

    def one(self):
        seq = self.rng.choice(self.seqs)
        self.cur_seq = seq  # expect()'s: whose late writes it notes
        if self.set_aside.get(seq, 0) > time.monotonic():
            time.sleep(0.01)
            return
        ws = self.ids.get(seq)
        if len(ws) > MAX_WORLDS:
            self.set_aside[seq] = self.ids.expires_by(seq) or 0
            self.ids.set_aside += 1
            return
        w = self.rng.choice(ws)
        r = self.rng.random()
        if w.status == model.ABSENT:
            if r < 0.1:  # a chunk of a sequence that is not live
                self.chunk(seq, self.make(None, number=self.rng.choice([None, 2])))
            elif r < 0.2 and not self.setup.own_doors:
                self.python_run(seq)
            else:
                numbered = self.rng.random() < 0.5
                self.chunk(seq, self.make(None, start=True, number=1 if numbered else None,
                                          end=self.rng.random() < 0.05))
            return
        nxt = w.applied + 1 if w.numbered else None
        if w.status == model.CLOSED:
            if r < 0.3:
                self.chunk(seq, self.make(w.attrs, number=nxt))  # late, or a conflict
            elif r < 0.5 and w.numbered and w.last:
                self.chunk(seq, self.again(w, end=True))  # its end again
            elif r < 0.75:
                self.chunk(seq, self.make(None, start=True,
                                          number=1 if self.rng.random() < 0.5 else None))
            else:
                time.sleep(self.rng.choice([0.05, (LINGER_MS + 900) / 1000.0]))
            return
        if r < 0.45:
            self.chunk(seq, self.make(w.attrs, number=nxt))
        elif r < 0.52:
            self.chunk(seq, self.make(w.attrs, number=nxt, end=True))
        elif r < 0.62:
            with self.ids.compound_op():
                self.stream(seq, w)
        elif r < 0.67 and w.numbered and w.last:
            self.chunk(seq, self.again(w, start=w.applied == 1))
        elif r < 0.70 and w.numbered and w.applied:
            self.chunk(seq, self.make(w.attrs, number=self.rng.randint(1, w.applied)))
        elif r < 0.76 and w.numbered:
            with self.ids.compound_op():
                self.early(seq, w)
        elif r < 0.78:
            self.chunk(seq, self.make(self.other(w.attrs), number=nxt))
        elif r < 0.80:
            self.chunk(seq, self.make(w.attrs, number=None if w.numbered else 1))
        elif r < 0.83:
            self.chunk(seq, self.make(None, start=True,
                                      number=1 if self.rng.random() < 0.5 else None))
        elif r < 0.86:
            time.sleep((IDLE_MS + 1000) / 1000.0)  # surely past its idle time
        elif r < 0.91:
            with self.ids.compound_op():
                self.race(seq, w)
        elif r < 0.94:
            self.at_expiry(seq, w)
        elif r < 0.96 and not self.setup.own_doors:
            self.python_run(seq)
        else:
            time.sleep(self.rng.choice([0.0, 0.01, 0.05]))

    def record(self, seq, what, c, kind, answer, words, s, r):
        return (what, "%.3f-%.3f" % (s, r), repr(c), "->", kind,
                list(answer) if answer else "", words[:160] if words else "")

    def expect(self, w, c, s, r, kind):
        """step()'s outcomes for w, and FULL where --max-sequences may
        refuse a start; an unknown answer allows any of them or none."""
        if kind == UNKNOWN:  # its write may land after its answer
            r += self.setup.late_s
        exp = model.step(w, c, s, r, self.ids.timers.renew_may_fail)
        if kind == UNKNOWN and self.setup.late_s:
            # and after the requests that come next: a compare-and-set on
            # the state it was decided on, which lands while that holds
            for _, _, n in exp:
                if n != w:
                    self.ids.add_pending(self.cur_seq, w, n, r)
        starts = exp and exp[0][0] == OK and model.admit(w, c) == "start"
        # a start that ends at once keeps nothing live: it takes no room
        if starts and not c.end and self.setup.full_possible() and w.status != model.LIVE:
            lo, hi = self.ids.live_bounds(s, r, None)
            if hi + 1 > self.ids.full_limit:  # may find no room
                exp = exp + [(FULL, None, w)]
            if lo >= self.ids.full_limit:
                exp = [(FULL, None, w)]
        if kind == UNKNOWN:
            return [(UNKNOWN, None, w)] + [(UNKNOWN, None, n) for _, _, n in exp]
        if kind == DEADLINE:  # failed before its decision: nothing moved
            return [(DEADLINE, None, w)]
        return exp

    def send(self, kind, door, seq, c):
        """(kind, answer, words, region) through the door kind."""
        self.by_door[kind] = self.by_door.get(kind, 0) + 1
        if self.setup.own_doors:
            return self.setup.send(door, seq, c) + (None,)
        return self.doors.send(kind, door, seq, c)

    def chunk(self, seq, c):
        kind_door = self.rng.choice(self.setup.chunk_kinds)
        door = self.door()
        self.ids.begin(seq)
        s = time.monotonic()
        kind, answer, words, region = self.send(kind_door, door, seq, c)
        r = time.monotonic()
        self.ops += 1
        what = self.record(seq, kind_door, c, kind, answer, words, s, r)
        self.ids.check(seq, what,
                       lambda w: fits(kind, answer, region, c, self.expect(w, c, s, r, kind)),
                       s, r)

    def stream(self, seq, w):
        n = self.rng.randint(2, 4)
        nxt = w.applied + 1 if w.numbered else None
        chunks = [self.make(w.attrs, number=None if nxt is None else nxt + i,
                            end=i == n - 1 and self.rng.random() < 0.3) for i in range(n)]
        door = self.door()
        self.by_door["stream"] = self.by_door.get("stream", 0) + n
        self.ids.begin(seq)
        s = time.monotonic()
        outs = (self.setup.stream if self.setup.own_doors else self.doors.stream)(
            door, seq, chunks)
        r = time.monotonic()
        self.ops += n
        what = ("stream", "%.3f-%.3f" % (s, r), repr(chunks), "->",
                [(k, list(a) if a else "") for k, a, _ in outs],
                [x[:100] for _, _, x in outs if x])

        def run(w0):
            states = [w0]
            for c, (kind, answer, _) in zip(chunks, outs):
                nxt_states = []
                for w in self.ids.later(states, s, r):  # its idle time may run out between
                    nxt_states += fits(kind, answer, None, c, self.expect(w, c, s, r, kind))
                states = dedupe(nxt_states)
            return states

        self.ids.check(seq, what, run, s, r)

    def python_run(self, seq):
        """A numbered sequence through the Python package's RunningSum: a
        start and a few chunks, each checked as it is answered (a chunk
        whose answer it lost, it sends again itself: a repeat)."""
        if os.path.join(ROOT, "client", "python", "src") not in sys.path:
            sys.path.append(os.path.join(ROOT, "client", "python", "src"))
        import tally
        door = self.door()
        attrs = self.new_attrs()
        dtype, rank, axis, exclusive, reverse, off = attrs
        rs = tally.Client("http://127.0.0.1:%d" % door[0], shm=False, timeout=5).sequence(
            axis=axis, exclusive=exclusive, reverse=reverse, sequence_id=seq_param(seq),
            retries=1)
        n = self.rng.randint(1, 3)
        for k in range(n):
            last = k == n - 1 and self.rng.random() < 0.3
            c = self.make(attrs, start=k == 0, number=k + 1, end=last)
            self.ids.begin(seq)
            s = time.monotonic()
            try:
                out = rs.cumsum(c.array(), last=last)
                kind, answer, words = OK, flat(out), ""
            except tally.TallyError as e:  # busy or no answer: it may have been added
                words = e.message or ""
                kind = UNKNOWN if e.status in (0, 502, 503, 504) else classify(e.status, words)
                answer = None
            r = time.monotonic()
            self.ops += 1
            self.by_door["python"] = self.by_door.get("python", 0) + 1
            what = self.record(seq, "python", c, kind, answer, words, s, r)
            self.ids.check(seq, what,
                           lambda w: fits(kind, answer, None, c, self.expect(w, c, s, r, kind)),
                           s, r)
            if kind != OK:
                break
        rs.abandon()

    def race(self, seq, w):
        """A start sent while a chunk of the same id is on its way, on
        another connection: the two are decided in the order they arrive,
        which the checker does not know, so both orders are allowed (a
        chunk that arrived first is applied to the old sequence; one that
        arrived after the start, to the new one)."""
        x = self.make(w.attrs, number=w.applied + 1 if w.numbered else None)
        st = self.make(None, start=True, number=1 if self.rng.random() < 0.5 else None,
                       end=self.rng.random() < 0.1)
        pause = self.rng.choice([0.0, 0.0005, 0.002, 0.01])
        kinds = [self.rng.choice(self.setup.early_kinds) for _ in range(2)]
        doors = [self.door(), self.door()]
        res = {}
        self.ids.begin(seq)

        def send_x():
            res["x"] = self.send(kinds[0], doors[0], seq, x)
            res["rx"] = time.monotonic()

        s = time.monotonic()
        t = threading.Thread(target=send_x)
        t.start()
        time.sleep(pause)
        res["s"] = self.send(kinds[1], doors[1], seq, st)
        t.join()
        r = time.monotonic()
        self.ops += 2
        (kx, ax, wx, _), (ks, a_s, ws, _) = res["x"], res["s"]
        what = ("race", "%.3f-%.3f" % (s, r), "pause %.4f" % pause, repr(x), "->", kx,
                list(ax) if ax else "", wx[:100], "and", repr(st), "->", ks,
                list(a_s) if a_s else "", ws[:100])

        # x behind a start on the same tallyd that did not start the
        # sequence (refused, or failed: a 503 may hide either) is an orphan
        same = doors[0][0] == doors[1][0]
        waited = res["rx"] - s >= REORDER_MS / 1000.0 - self.ids.timers.m_lo

        def run(w0):
            out = []
            for (c1, o1), (c2, o2) in (((x, res["x"]), (st, res["s"])),
                                       ((st, res["s"]), (x, res["x"]))):
                k1, a1, _, g1 = o1
                k2, a2, _, g2 = o2
                for w1 in self.ids.later(fits(k1, a1, g1, c1, self.expect(w0, c1, s, r, k1)),
                                         s, r):
                    exp = self.expect(w1, c2, s, r, k2)
                    if c1 is st and same and k1 != OK and k2 != UNKNOWN:
                        # x behind the start in the line, or ahead of it
                        # (waiting early, then decided after it)
                        exp = orphan_outcomes(exp, c2, w1, waited)
                    out += fits(k2, a2, g2, c2, exp)
            return out

        self.ids.check(seq, what, run, s, r)

    def at_expiry(self, seq, w):
        """A start, or a chunk, sent as its sequence's idle time runs out
        (a few ms either side): it finds the sequence, or finds it gone,
        and a start made then is kept (after a restart too)."""
        e = self.ids.timers.expiry(w)
        if e is None:
            return
        at = self.rng.uniform(e[0] - 0.01, e[1] + 0.01)
        wait = at - time.monotonic()
        if 0 < wait < 2.0:
            time.sleep(wait)
        if self.rng.random() < 0.5:
            self.chunk(seq, self.make(None, start=True,
                                      number=1 if self.rng.random() < 0.5 else None))
        else:
            self.chunk(seq, self.make(w.attrs, number=w.applied + 1 if w.numbered else None))

    def early(self, seq, w):
        """Chunk n+2 sent first, then, after a pause within or past
        --sequence-reorder-ms, chunk n+1; or n+2 alone (a gap)."""
        n = w.applied
        a = self.make(w.attrs, number=n + 2)
        b = self.make(w.attrs, number=n + 1) if self.rng.random() < 0.8 else None
        pause = self.rng.choice([0.0, 0.03, 0.1, (REORDER_MS + 200) / 1000.0])
        res = {}
        door_a, door_b = self.door(), self.door()
        kind_a = self.rng.choice(self.setup.early_kinds)
        kind_b = self.rng.choice(self.setup.early_kinds)
        self.ids.begin(seq)

        def send_a():
            res["a"] = self.send(kind_a, door_a, seq, a)
            res["ra"] = time.monotonic()

        s = time.monotonic()
        t = threading.Thread(target=send_a)
        t.start()
        if b is not None:
            time.sleep(pause)
            res["b"] = self.send(kind_b, door_b, seq, b)
            res["rb"] = time.monotonic()
        t.join()
        r = time.monotonic()
        self.ops += 2 if b is not None else 1
        ka, aa, wa, ga = res["a"]
        what = ("early", "%.3f-%.3f" % (s, r), "pause %.3f" % pause, repr(a), "->", ka,
                list(aa) if aa else "", wa[:100], "then", repr(b))
        if b is None:
            self.ids.check(seq, what,
                           lambda w0: fits(ka, aa, ga, a, self.expect(w0, a, s, r, ka)), s, r)
            return
        kb, ab, wb, gb = res["b"]
        what = what + ("->", kb, list(ab) if ab else "", wb[:100])
        # a may have waited reorder_ms (its gap) only if b came that late
        gap_ok = res["rb"] - s >= REORDER_MS / 1000.0 - self.ids.timers.m_lo

        def run(w0):
            out = []
            for w1 in self.ids.later(fits(kb, ab, gb, b, self.expect(w0, b, s, r, kb)), s, r):
                exp = self.expect(w1, a, s, r, ka)
                if gap_ok or kb == UNKNOWN:
                    exp = exp + [(GAP, None, w1)]
                out += fits(ka, aa, ga, a, exp)
            # or a came first, was early, and got its gap, b not yet there;
            # or a was decided as it came (refused: the sequence ended, or
            # gone), and b after it, maybe once its idle time ran out
            for w1 in self.ids.later(fits(ka, aa, ga, a, self.expect(w0, a, s, r, ka)), s, r):
                out += fits(kb, ab, gb, b, self.expect(w1, b, s, r, kb))
            return out

        self.ids.check(seq, what, run, s, r)


# ---------------------------------------------------------------- a run

SETUPS = {"fake": FakeStore, "memory": Memory, "state-dir": StateDir,
          "redis": RedisReplicas, "failover": RedisFailover}


def run(setup_name, seconds, seed, clients=6, fsync="always", out=sys.stdout):
    """One run: the figures, or Failure with the seed and history."""
    print("model checker: setup %s%s, %d clients, %.0f s, seed %d (replay with "
          "TALLY_MODEL_SEED=%d)" % (setup_name, " (%s)" % fsync if setup_name == "state-dir"
                                    else "", clients, seconds, seed, seed), file=out)
    out.flush()
    setup = (StateDir(seed, fsync) if setup_name == "state-dir"
             else SETUPS[setup_name](seed))
    timers = Timers(IDLE_MS / 1000.0, LINGER_MS / 1000.0, REORDER_MS / 1000.0,
                    renew_may_fail=setup_name != "memory")
    ids = Ids(timers, setup, setup.max_sequences())
    errors = []
    stop_at = time.monotonic() + seconds
    faults = threading.Thread(target=setup.fault_loop, daemon=True)
    try:
        cs = [Client(k, setup, ids, seed, stop_at, errors) for k in range(clients)]
        for c in cs:
            c.start()
        faults.start()
        for c in cs:
            c.join(seconds + 120)
        setup.stopping.set()
        faults.join(30)
        if hasattr(setup, "finish"):
            setup.finish()
        if errors:
            raise Failure("seed %d (replay with TALLY_MODEL_SEED=%d), setup %s:\n%s"
                          % (seed, seed, setup_name, errors[0]))
        figures = {"setup": setup_name + (" " + fsync if setup_name == "state-dir" else ""),
                   "seed": seed, "seconds": seconds, "operations": ids.ops,
                   "chunks": sum(c.ops for c in cs), "faults": setup.faults,
                   "faults_by_kind": setup.faults_by_kind,
                   "undecided": ids.unknown, "most_states": ids.max_worlds,
                   "by_door": {k: sum(c.by_door.get(k, 0) for c in cs)
                               for k in sorted({k for c in cs for k in c.by_door})},
                   "set_aside": ids.set_aside}
        print("model checker: %s" % json.dumps(figures), file=out)
        return figures
    except Failure:
        print(setup.logs()[-3000:], file=sys.stderr)
        keep = os.environ.get("TALLY_MODEL_KEEP_LOGS")
        if keep:
            for i, d in enumerate(setup.daemons):
                with open("%s/tallyd-%d.log" % (keep, i), "w") as f:
                    f.write(d.log())
        raise
    finally:
        setup.cleanup()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--setup", choices=sorted(SETUPS), required=True)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--seed", type=int,
                    default=int(os.environ.get("TALLY_MODEL_SEED", random.randrange(1 << 31))))
    ap.add_argument("--clients", type=int, default=6)
    ap.add_argument("--fsync", choices=["always", "everysec"], default="always")
    a = ap.parse_args()
    try:
        run(a.setup, a.seconds, a.seed, a.clients, a.fsync)
    except Failure as e:
        print("model checker: FAILED\n%s" % e, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
