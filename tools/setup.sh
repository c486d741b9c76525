#!/bin/bash
# From a fresh Debian machine to a working clinfer: install the packages, build, and show the
# OpenCL devices clinfer will use, then fetch the default model and ask it a question.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash tools/install_packages.sh
cmake -S . -B build
cmake --build build -j"${CLINFER_JOBS:-2}"
build/clinfer devices
# The default model (SmolLM2-135M-Instruct, 98 MB) answers a question on the default device.
bash tools/fetch_model.sh >/dev/null
build/clinfer run --chat -p "What is the capital of France?" -n 64 --temp 0
