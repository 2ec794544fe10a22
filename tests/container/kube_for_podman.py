"""Turns `kubectl kustomize deploy/k8s` (stdin) into what `podman kube
play` can run on one machine (stdout): the ConfigMap and the Deployment
only, one replica, the given image, tallyd on 127.0.0.1:PORT (host
networking), gRPC on 127.0.0.1:GRPC_PORT (or off without one). The
probes go: podman would run them as curl inside the
container, and the image has no curl; Kubernetes runs them itself.

usage: kube_for_podman.py IMAGE PORT [GRPC_PORT] < rendered.yaml > play.yaml
"""
import sys

import yaml

image, port = sys.argv[1], sys.argv[2]
grpc_port = sys.argv[3] if len(sys.argv) > 3 else None
out = []
for doc in yaml.safe_load_all(sys.stdin):
    if not doc:
        continue
    if doc["kind"] == "ConfigMap":
        doc["data"]["TALLY_LISTEN"] = "127.0.0.1:%s" % port
        doc["data"]["TALLY_GRPC_LISTEN"] = "127.0.0.1:%s" % grpc_port if grpc_port else ""
        out.append(doc)
    elif doc["kind"] == "Deployment":
        doc["spec"]["replicas"] = 1
        pod = doc["spec"]["template"]["spec"]
        for c in pod["containers"]:
            c["image"] = image
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                c.pop(probe, None)
            c.pop("lifecycle", None)
            c.pop("ports", None)  # host networking: tallyd binds PORT itself
        out.append(doc)
yaml.safe_dump_all(out, sys.stdout, sort_keys=False)
