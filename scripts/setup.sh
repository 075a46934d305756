#!/usr/bin/env bash
# Creates .venv with everything Solder, its tests and its demo need, and installs Solder
# in editable mode (which registers the "solder" torch.compile backend).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch==2.13.0 is pinned exactly: a looser pin pulls a multi-GB CUDA build on a CPU machine.
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0 triton==3.6.0
.venv/bin/pip install -q --disable-pip-version-check -e '.[test]'
