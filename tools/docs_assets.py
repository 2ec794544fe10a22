#!/usr/bin/env python3
"""Copies Swagger UI's files from PyPI's swagger-ui-bundle (which
`make deps` installs) into DIR, where tallyd serves them at /docs:
swagger-ui-bundle.js, swagger-ui.css, and the package's licence.

    python3 tools/docs_assets.py DIR

Copies only what changed. Without the package it says so and exits 0:
the build goes on, and tallyd's /docs answers 404 saying how to get it.
"""
import filecmp
import importlib.metadata
import os
import shutil
import sys

FILES = ("swagger-ui-bundle.js", "swagger-ui.css")


def main():
    dst = sys.argv[1]
    try:
        import swagger_ui_bundle
    except ImportError:
        print("docs-assets: swagger-ui-bundle is not installed (make deps "
              "installs it); /docs will answer 404")
        return
    src = str(swagger_ui_bundle.swagger_ui_path)
    pairs = [(os.path.join(src, f), os.path.join(dst, f)) for f in FILES]
    dist = importlib.metadata.distribution("swagger-ui-bundle")
    for f in dist.files or ():
        if f.name.upper().startswith("LICENSE"):
            pairs.append((str(f.locate()), os.path.join(dst, "LICENSE")))
    os.makedirs(dst, exist_ok=True)
    for a, b in pairs:
        if not (os.path.exists(b) and filecmp.cmp(a, b, shallow=False)):
            shutil.copyfile(a, b)
    print("docs-assets: %s from swagger-ui-bundle %s, in %s"
          % (os.path.basename(src), dist.version, dst))


if __name__ == "__main__":
    main()
