#!/usr/bin/env python3
"""Writes proto/openapi.json, the JSON form of proto/openapi.yaml, which
tallyd serves at /openapi.json (built in, like the YAML).

The JSON is kept in the tree so that building tallyd needs no Python;
`make openapi-json` runs this after the YAML changes, and
tests/integration/test_docs.py fails while the two disagree.

    python3 tools/openapi_json.py [--check]
"""
import json
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "proto", "openapi.yaml")
DST = os.path.join(ROOT, "proto", "openapi.json")


def render():
    """The JSON text for the YAML description, stable from run to run."""
    with open(SRC, encoding="utf-8") as f:
        spec = yaml.safe_load(f)
    return json.dumps(spec, indent=1, ensure_ascii=False) + "\n"


def main():
    text = render()
    if sys.argv[1:] == ["--check"]:
        with open(DST, encoding="utf-8") as f:
            if f.read() != text:
                sys.exit("proto/openapi.json is older than proto/openapi.yaml: "
                         "run make openapi-json")
        return
    if os.path.exists(DST):
        with open(DST, encoding="utf-8") as f:
            if f.read() == text:
                return  # unchanged: its time stays, so nothing made from it is rebuilt
    with open(DST, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
