"""Shared fixtures of the qmesh Python tests (python/tests, CTest label `python`).

QMESH_CLI is the built qmesh binary and QMESH_SOURCE_DIR the repository (CTest sets both; by hand:
PYTHONPATH=build/python QMESH_CLI=build/qmesh QMESH_SOURCE_DIR=. python3 -m pytest python/tests).
"""
import os
import subprocess

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE_DIR = os.environ.get("QMESH_SOURCE_DIR", os.path.normpath(os.path.join(HERE, "..", "..")))
CLI = os.environ.get("QMESH_CLI", os.path.join(SOURCE_DIR, "build", "qmesh"))


@pytest.fixture
def cli():
    """run(*args) -> CompletedProcess of the built qmesh binary (text mode)."""
    if not os.access(CLI, os.X_OK):
        pytest.fail("the qmesh binary is not at %s (set QMESH_CLI)" % CLI)

    def run(*args, check=True):
        p = subprocess.run([CLI] + [str(a) for a in args], capture_output=True, text=True,
                           timeout=300)
        if check and p.returncode != 0:
            raise AssertionError("qmesh %s: exit %d: %s" % (" ".join(map(str, args)),
                                                           p.returncode, p.stderr))
        return p
    return run


@pytest.fixture
def source_dir():
    return SOURCE_DIR
