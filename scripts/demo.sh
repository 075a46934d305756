#!/usr/bin/env bash
# Sets everything up, then runs the demo: a transformer block compiled forward and backward.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
if ! .venv/bin/python -c 'import torch,sys; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  export TRITON_INTERPRET=1
fi
exec .venv/bin/python -m solder demo "$@"
