"""deploy/: the Kubernetes manifests, compose, Prometheus, Grafana and
systemd files, checked without a cluster.

- Kubernetes: the kustomize base (rendered by kubectl when it is installed,
  else file by file) validated strictly against Kubernetes' own OpenAPI
  schemas (kubernetes-validate, offline), plus what the schema cannot say:
  the security settings, that the probes' routes answer on a real tallyd,
  that the grace period covers the drain, that every setting in the
  ConfigMap is one tallyd knows and accepts.
- compose.yaml, prometheus.yml, the Grafana dashboard: every file they
  mount exists, and every metric the dashboard plots is one tallyd serves.
- systemd: `systemd-analyze verify` on the unit; its environment file
  starts a real tallyd.
`make test-container` runs the image, and plays the manifests with
`podman kube play`.
"""
import copy
import http.client
import json
import os
import re
import shutil
import subprocess
import time

import kubernetes_validate
import pytest
import yaml

from conftest import ROOT, TALLYD, Daemon, dead_port, free_port

DEPLOY = os.path.join(ROOT, "deploy")
K8S = os.path.join(DEPLOY, "k8s")
K8S_VERSION = "1.30.0"


def rendered_k8s():
    """The kustomize base's documents."""
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "kustomize", K8S], capture_output=True, text=True,
                             check=True).stdout
        return [d for d in yaml.safe_load_all(out) if d]
    with open(os.path.join(K8S, "kustomization.yaml")) as f:
        kustomization = yaml.safe_load(f)
    docs = []
    for name in kustomization["resources"]:
        with open(os.path.join(K8S, name)) as f:
            docs.extend(d for d in yaml.safe_load_all(f) if d)
    return docs


def by_kind(docs, kind):
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, kind
    return found[0]


def tallyd_env_names():
    out = subprocess.run([TALLYD, "--help"], capture_output=True, text=True).stdout
    return set(re.findall(r"\benv (TALLY_[A-Z_]+)", out))


def test_k8s_manifests_are_valid():
    docs = rendered_k8s()
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ConfigMap", "Deployment", "HorizontalPodAutoscaler",
                     "PodDisruptionBudget", "Service"]
    for d in docs:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    # the check itself can fail: a misspelt field is caught
    broken = copy.deepcopy(by_kind(docs, "Deployment"))
    broken["spec"]["template"]["spec"]["containers"][0]["readinessProbes"] = {}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, K8S_VERSION, strict=True)


def test_k8s_deployment_is_locked_down_and_drains():
    docs = rendered_k8s()
    dep = by_kind(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 10001  # the image's user
    sc = c["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert c["resources"]["requests"] and c["resources"]["limits"]
    # the kernel cache lives in the emptyDir
    env = {e["name"]: e.get("value") for e in c.get("env", [])}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in vols["tmp"] and mounts["tmp"] == "/tmp"
    assert env["POCL_CACHE_DIR"].startswith("/tmp/")
    # the grace period covers the preStop pause and tallyd's drain
    cm = by_kind(docs, "ConfigMap")["data"]
    pre_stop = int(c["lifecycle"]["preStop"]["exec"]["command"][1])
    assert pod["terminationGracePeriodSeconds"] > pre_stop + int(cm["TALLY_DRAIN_TIMEOUT"])
    # the probes, the Service and the HPA point at what exists
    assert c["startupProbe"]["httpGet"]["path"] == "/v2/health/live"
    # liveness through the gRPC door's grpc.health.v1.Health, on its port
    assert c["livenessProbe"]["grpc"]["port"] == int(cm["TALLY_GRPC_LISTEN"].rsplit(":", 1)[1])
    assert c["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert c["ports"][0]["containerPort"] == int(cm["TALLY_LISTEN"].rsplit(":", 1)[1])
    # gRPC's port too, in the pod and the Service
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    assert ports["grpc"] == int(cm["TALLY_GRPC_LISTEN"].rsplit(":", 1)[1])
    svc = by_kind(docs, "Service")
    assert {p["name"]: p["targetPort"] for p in svc["spec"]["ports"]}["grpc"] == "grpc"
    assert svc["spec"]["selector"].items() <= pod.get("labels", dep["spec"]["template"]
                                                       ["metadata"]["labels"]).items()
    assert by_kind(docs, "HorizontalPodAutoscaler")["spec"]["scaleTargetRef"]["name"] == \
        dep["metadata"]["name"]
    pdb = by_kind(docs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] < dep["spec"]["replicas"]


def test_k8s_stateful_set_keeps_its_log_on_a_volume():
    """deploy/k8s/stateful: a StatefulSet of one replica whose --state-dir
    is a PersistentVolumeClaim, locked down like the Deployment, and a
    headless Service; valid against Kubernetes' schemas."""
    with open(os.path.join(K8S, "stateful", "statefulset.yaml")) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for d in docs:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    sts = by_kind(docs, "StatefulSet")
    assert sts["spec"]["replicas"] == 1  # one tallyd per log
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e["value"] for e in c["env"]}
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    claims = {t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]}
    assert "state" in claims and mounts["state"] == env["TALLY_STATE_DIR"]
    assert env["TALLY_STATE_FSYNC"] in ("always", "everysec")
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["fsGroup"] == 10001  # the volume is writable
    svc = by_kind(docs, "Service")
    assert svc["spec"]["clusterIP"] == "None"
    assert sts["spec"]["serviceName"] == svc["metadata"]["name"]
    assert set(env) - {"POCL_CACHE_DIR"} <= tallyd_env_names()


def test_k8s_settings_start_a_real_tallyd(tallyd):
    """Every ConfigMap key is a tallyd setting, and tallyd starts with all of
    them (listening on a free loopback port instead of 0.0.0.0:8080)."""
    cm = by_kind(rendered_k8s(), "ConfigMap")["data"]
    assert set(cm) <= tallyd_env_names(), set(cm) - tallyd_env_names()
    env = {k: v for k, v in cm.items() if k != "TALLY_LISTEN"}
    d = Daemon(env=env)
    try:
        for path in ("/v2/health/live", "/v2/health/ready", "/metrics"):
            assert d.request("GET", path)[0] == 200
    finally:
        d.cleanup()


def test_compose_prometheus_and_grafana(tallyd, tmp_path):
    with open(os.path.join(DEPLOY, "compose.yaml")) as f:
        compose = yaml.safe_load(f)
    svc = compose["services"]
    assert set(svc) == {"tally", "prometheus", "grafana", "jaeger",
                        "redis", "tally-1", "tally-2", "tally-3", "lb"}
    t = svc["tally"]
    # tally sends its traces to the compose file's Jaeger, over OTLP/HTTP
    assert t["environment"]["OTEL_EXPORTER_OTLP_ENDPOINT"] == "http://jaeger:4318"
    assert "4318:4318" in svc["jaeger"]["ports"]
    assert svc["jaeger"]["environment"]["COLLECTOR_OTLP_ENABLED"] == "true"
    assert 0 < float(t["environment"]["TALLY_TRACE_RATIO"]) <= 1
    assert os.path.isfile(os.path.join(DEPLOY, t["build"]["context"], t["build"]["dockerfile"]))
    assert t["read_only"] is True and "/tmp" in t["tmpfs"] and t["cap_drop"] == ["ALL"]
    assert t["healthcheck"]["test"][:3] == ["CMD", "tally", "health"]
    for s in svc.values():
        for v in s.get("volumes", []):
            src = v.split(":")[0]
            assert src in compose.get("volumes", {}) or \
                os.path.exists(os.path.join(DEPLOY, src)), src
    with open(os.path.join(DEPLOY, "prometheus.yml")) as f:
        prom = yaml.safe_load(f)
    (job,) = prom["scrape_configs"]
    assert job["metrics_path"] == "/metrics"
    assert job["static_configs"][0]["targets"] == ["tally:8080"]

    with open(os.path.join(DEPLOY, "grafana", "dashboards", "tally.json")) as f:
        dash = json.load(f)
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    titles = " ".join(p["title"].lower() for p in dash["panels"])
    for topic in ("requests per second", "latency", "queue depth", "device busy",
                  "device states", "host fallback", "grpc", "sequences", "sequence log",
                  "trace exporter"):
        assert topic in titles, topic
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    # every metric plotted is one tallyd declares (histograms by their
    # base name)
    # the alert rules prometheus.yml loads: one for each thing an operator
    # must act on
    assert prom["rule_files"] == ["/etc/prometheus/prometheus-alerts.yml"]
    with open(os.path.join(DEPLOY, "prometheus-alerts.yml")) as f:
        alerts = yaml.safe_load(f)
    rules = [r for g in alerts["groups"] for r in g["rules"]]
    assert {r["alert"] for r in rules} >= {"TallyEveryDeviceLeft", "TallyQueueFull",
                                           "TallySequencesRefused",
                                           "TallyTraceExporterDropping"}
    for r in rules:
        assert r["labels"]["severity"] and r["annotations"]["summary"], r
    exprs += [r["expr"] for r in rules]
    # every metric plotted or watched is one tallyd declares (histograms by
    # their base name; the trace exporter's with tracing on, the sequence
    # log's with --state-dir)
    traced = Daemon("--state-dir", str(tmp_path), env={"TALLY_TRACE_RATIO": "1",
                    "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:%d" % dead_port()})
    body = tallyd.request("GET", "/metrics")[2]
    try:
        body += traced.request("GET", "/metrics")[2]
        if shutil.which("redis-server"):  # the store's, with --state-store
            from seqlib import Redis
            r = Redis()
            try:
                shared = Daemon("--device", "host", "--state-store", r.url())
                try:
                    body += shared.request("GET", "/metrics")[2]
                finally:
                    shared.cleanup()
            finally:
                r.cleanup()
    finally:
        traced.cleanup()
    declared = set(re.findall(r"^# TYPE (tally_[a-z_]+) ", body.decode(), re.M))
    for e in exprs:
        for name in re.findall(r"\btally_[a-z_]+", e):
            assert re.sub(r"_(bucket|sum|count)$", "", name) in declared, (name, e)


def test_systemd_unit(tmp_path):
    unit = open(os.path.join(DEPLOY, "systemd", "tallyd.service")).read()
    for line in ("DynamicUser=yes", "ProtectSystem=strict", "NoNewPrivileges=yes",
                 "EnvironmentFile=-/etc/tally/tallyd.env", "KillSignal=SIGTERM",
                 "Restart=on-failure"):
        assert line in unit, line
    if shutil.which("systemd-analyze"):
        # verify it with ExecStart pointing at this build's tallyd
        local = tmp_path / "tallyd.service"
        local.write_text(re.sub(r"(?m)^ExecStart=.*$", "ExecStart=" + TALLYD, unit))
        r = subprocess.run(["systemd-analyze", "verify", str(local)], capture_output=True,
                           text=True)
        problems = [l for l in (r.stdout + r.stderr).splitlines() if "tallyd.service" in l]
        assert r.returncode == 0 and not problems, r.stdout + r.stderr
    # its environment file holds tallyd settings that tallyd accepts
    env = {}
    for line in open(os.path.join(DEPLOY, "systemd", "tallyd.env")):
        line = line.strip()
        if line and not line.startswith("#"):
            k, v = line.split("=", 1)
            env[k] = v
    assert set(env) <= tallyd_env_names()
    env.pop("TALLY_LISTEN")
    d = Daemon(env=env)
    try:
        assert d.request("GET", "/v2/health/ready")[0] == 200
    finally:
        d.cleanup()


def test_podman_base_image_names_no_package_host():
    """deploy/podman.sh makes its Debian base image from the bookworm source
    apt already uses, and with none, stops with a message saying what to do,
    instead of falling back to a host of its own (podman and apt-get are
    stubbed: nothing is pulled or installed)."""
    script = os.path.join(DEPLOY, "podman.sh")
    with open(script) as f:
        text = f.read()
    assert not re.search(r"https?://", re.sub(r"^\s*#.*$", "", text, flags=re.M)), \
        "podman.sh names a URL"
    stub = r'''
        . "%s"
        podman() { return 1; }               # no image, no registry
        apt-get() { printf '%%s' "$APT_TARGETS"; }
        debootstrap() { echo "debootstrap from $4"; exit 0; }
        podman_base_image
    ''' % script
    none = subprocess.run(["bash", "-c", stub], capture_output=True, text=True,
                          env=dict(os.environ, APT_TARGETS="", CONTAINER_WORK="/nonexistent"),
                          timeout=60)
    assert none.returncode == 1, none
    said = " ".join(none.stderr.split())
    assert "no Debian 12 (bookworm) source" in said and "sources.list" in said, said
    assert "debootstrap from" not in none.stdout
    some = subprocess.run(["bash", "-c", stub], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, CONTAINER_WORK="/nonexistent",
                                   APT_TARGETS="http://apt.example/debian/ bookworm\n"))
    assert "debootstrap from http://apt.example/debian/" in some.stdout, some


def test_compose_replicas_profile_builds_everything_here():
    """The `replicas` profile: three tallyds on one Redis behind nginx,
    every image built from a Dockerfile of the project's (on its Debian
    base), none pulled."""
    with open(os.path.join(DEPLOY, "compose.yaml")) as f:
        compose = yaml.safe_load(f)
    svc = compose["services"]
    profile = {n: s for n, s in svc.items() if "replicas" in s.get("profiles", [])}
    assert set(profile) == {"redis", "tally-1", "tally-2", "tally-3", "lb"}
    for name, s in profile.items():
        b = s["build"]
        df = os.path.join(DEPLOY, b["context"], b.get("dockerfile", "Dockerfile"))
        with open(df) as f:
            text = f.read()
        assert re.search(r"^FROM \$\{BASE\}", text, re.M), name  # the local base
        assert "ARG BASE=debian:bookworm-slim" in text, name
    for n in ("tally-1", "tally-2", "tally-3"):
        env = profile[n]["environment"]
        assert env["TALLY_STATE_STORE"].startswith("redis://:${TALLY_REDIS_PASSWORD")
        assert env["TALLY_STATE_STORE"].endswith("@redis:6379/0")
        assert set(env) <= tallyd_env_names()
    assert profile["redis"]["environment"]["REDIS_PASSWORD"].startswith("${TALLY_REDIS_PASSWORD")
    with open(os.path.join(DEPLOY, "redis", "redis.conf")) as f:
        conf = dict(line.split(None, 1) for line in f.read().splitlines()
                    if line.strip() and not line.startswith("#"))
    assert conf["appendonly"] == "yes" and conf["appendfsync"] == "always"
    assert conf["maxmemory-policy"] == "noeviction"  # a running sum is never evicted
    with open(os.path.join(DEPLOY, "lb", "nginx.conf")) as f:
        lb = f.read()
    for n in ("tally-1", "tally-2", "tally-3"):
        assert "server %s:8080;" % n in lb and "server %s:8001;" % n in lb


def test_k8s_replicas_share_one_redis():
    """deploy/k8s/replicas: Redis as a StatefulSet of one primary on a
    volume, reachable only from tally's pods; the base Deployment takes
    TALLY_STATE_STORE from the Secret when there is one."""
    out = subprocess.run(["kubectl", "kustomize", os.path.join(K8S, "replicas")],
                         capture_output=True, text=True, check=True).stdout \
        if shutil.which("kubectl") else open(os.path.join(K8S, "replicas", "redis.yaml")).read()
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert sorted(d["kind"] for d in docs) == ["NetworkPolicy", "Service", "StatefulSet"]
    for d in docs:
        kubernetes_validate.validate(d, K8S_VERSION, strict=True)
    sts = by_kind(docs, "StatefulSet")
    assert sts["spec"]["replicas"] == 1  # one primary: no failover to lose writes
    pod = sts["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert {m["mountPath"] for m in c["volumeMounts"]} == {"/data"}
    assert [t["metadata"]["name"] for t in sts["spec"]["volumeClaimTemplates"]] == ["data"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsUser"] == 10002
    with open(os.path.join(DEPLOY, "redis", "Dockerfile")) as f:
        assert "-u 10002" in f.read()
    pw = [e for e in c["env"] if e["name"] == "REDIS_PASSWORD"][0]
    assert pw["valueFrom"]["secretKeyRef"]["name"] == "tally-redis"
    np_ = by_kind(docs, "NetworkPolicy")
    (rule,) = np_["spec"]["ingress"]
    assert rule["from"] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "tally"}}}]
    dep = by_kind(rendered_k8s(), "Deployment")
    env = {e["name"]: e for e in dep["spec"]["template"]["spec"]["containers"][0]["env"]}
    ref = env["TALLY_STATE_STORE"]["valueFrom"]["secretKeyRef"]
    assert ref == {"name": "tally-redis", "key": "url", "optional": True}
    svc = by_kind(docs, "Service")
    assert by_kind(docs, "Service")["metadata"]["name"] == "tally-redis"
    assert svc["spec"]["ports"][0]["port"] == 6379


NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK)
                                  else None)


@pytest.mark.skipif(not (NGINX and shutil.which("redis-server")),
                    reason="nginx or redis-server is not installed (make deps-test)")
def test_the_load_balancer_spreads_sequences_over_replicas(tmp_path):
    """deploy/lb/nginx.conf, with its three upstreams pointed at three
    local tallyds on one Redis: numbered chunks through it, over REST and
    over gRPC, come back right, and every replica answered some."""
    import numpy as np
    import tritonclient.grpc as grpcclient
    from seqlib import Redis
    r = Redis()
    reps = []
    nginx = None
    try:
        for _ in range(3):  # one by one: those started are stopped if one fails
            reps.append(Daemon("--device", "host", "--state-store", r.url()))
        with open(os.path.join(DEPLOY, "lb", "nginx.conf")) as f:
            conf = f.read()
        http_port, grpc_port = free_port(), free_port()
        for i, d in enumerate(reps):
            conf = conf.replace("tally-%d:8080" % (i + 1), "127.0.0.1:%d" % d.port)
            conf = conf.replace("tally-%d:8001" % (i + 1), "127.0.0.1:%d" % d.grpc_port)
        conf = conf.replace("listen 8080;", "listen 127.0.0.1:%d;" % http_port)
        conf = conf.replace("listen 8001 http2;", "listen 127.0.0.1:%d http2;" % grpc_port)
        conf = conf.replace("events {", "pid %s/nginx.pid;\nerror_log stderr;\nevents {" % tmp_path)
        conf = conf.replace("http {", "http {\n    access_log off;\n"
                            "    client_body_temp_path %s/body;\n    proxy_temp_path %s/proxy;\n"
                            % (tmp_path, tmp_path))
        (tmp_path / "nginx.conf").write_text(conf)
        nginx = subprocess.Popen([NGINX, "-e", "stderr", "-p", str(tmp_path), "-c",
                                  str(tmp_path / "nginx.conf"), "-g", "daemon off;"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        def front(method, path, obj=None):
            conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=30)
            try:
                conn.request(method, path, json.dumps(obj) if obj is not None else None,
                             {"Content-Type": "application/json"})
                resp = conn.getresponse()
                return resp.status, resp.read()
            finally:
                conn.close()

        deadline = time.time() + 10
        while True:
            try:
                if front("GET", "/v2/health/ready")[0] == 200:
                    break
            except OSError:
                pass
            assert time.time() < deadline and nginx.poll() is None, nginx.stdout.read()
            time.sleep(0.05)
        x = np.arange(1, 41, dtype=np.int64)
        want = np.cumsum(x)
        for k in range(10):
            params = {"sequence_id": "lb-1", "sequence_chunk": k + 1}
            if k == 0:
                params["sequence_start"] = True
            st, raw = front("POST", "/v2/models/cumsum/infer", {
                "parameters": params, "inputs": [{"name": "x", "datatype": "INT64", "shape": [4],
                                                  "data": x[4 * k:4 * k + 4].tolist()}]})
            b = json.loads(raw)
            assert st == 200 and b["outputs"][0]["data"] == want[4 * k:4 * k + 4].tolist(), b
        c = grpcclient.InferenceServerClient("127.0.0.1:%d" % grpc_port)
        for k in range(6):
            i = grpcclient.InferInput("x", [4], "INT64")
            i.set_data_from_numpy(x[4 * k:4 * k + 4])
            res = c.infer("cumsum", [i], sequence_id="lb-2", sequence_start=k == 0,
                          parameters={"sequence_chunk": k + 1})
            assert res.as_numpy("y").tolist() == want[4 * k:4 * k + 4].tolist(), k
        c.close()
        applied = [d.metric("tally_sequence_numbered_chunks_total", outcome="applied")
                   for d in reps]
        assert sum(applied) == 16 and all(a > 0 for a in applied), applied
    finally:
        if nginx is not None:
            nginx.terminate()
            nginx.wait()
        for d in reps:
            d.cleanup()
        r.cleanup()
