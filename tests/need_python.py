#!/usr/bin/env python3
"""Says which of the Python packages the tests import are missing, and how
to get them; exits 1 when any is. `make check` runs it first, because it
installs nothing itself (`make deps-test` does, and so does `make test`)."""
import importlib.util
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def needed():
    """module -> pip name, from deploy/install-deps.sh's TEST_PYTHON (the
    one list of them)."""
    with open(os.path.join(ROOT, "deploy", "install-deps.sh")) as f:
        m = re.search(r'^TEST_PYTHON="([^"]*)"', f.read(), re.M)
    pairs = m.group(1).replace("\\\n", " ").split()
    return dict(p.split(":", 1) for p in pairs)


def main():
    missing = [pip for mod, pip in needed().items() if importlib.util.find_spec(mod.split(".")[0]) is None
               or importlib.util.find_spec(mod) is None]
    if missing:
        print("the tests need Python packages that %s lacks: %s\n"
              "run `make deps-test` once (as root), then try again"
              % (sys.executable, " ".join(missing)), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
