#!/usr/bin/env bash
# Sets everything up, then runs every test: apple-code's Swift tests, the FoundationModels compile gate, ruff, and
# pytest (which also drives the real apple-code binary, a scripted OpenAI-compatible server and the local llama.cpp
# model).
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

"$ROOT/scripts/setup.sh" --local-model --browser
# The tests' models: the default one (what the agent gets done), the larger one (a real task fixed through
# apple-code) and the tiny one (the fastest real-model tests).
"$ROOT/scripts/local-model.sh" install --model qwen2.5-coder-0.5b --model qwen2.5-coder-1.5b --model smollm2-135m

say "Swift tests (apple_code)"
(cd apple_code && swift test 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\] (Compiling|Emitting|Wrapping|Write|Linking|Applying)'; exit "${PIPESTATUS[0]}")

say "FoundationModels compile gate (AppleCodeFM against Apple's 26.1 and 26.4 declarations)"
"$ROOT/scripts/fm-interface-gate.sh"

say "ruff"
"$VENV/bin/ruff" check src tests scripts

say "pytest"
# The local model is installed above, so its tests must run, not skip.
export APPLE_FLOW_REQUIRE_LOCAL_MODEL=1
# Likewise the browser tests, wherever set-up could give them a Chromium.
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    export APPLE_FLOW_REQUIRE_BROWSER=1
fi
# In parallel (pytest-xdist), each worker with its own temporary folders; servers and daemons take free ports. Most
# tests wait on child processes (apple-code, daemons, scripted servers), so more workers than the 2 cores pay
# (docs/benchmarks.md has the measurement). The tests on the real local model then run alone: llama.cpp's threads
# wait on each other, so beside other work a generation took several times as long. `-n 0` in the arguments runs
# the first phase one test at a time too; APPLE_FLOW_TEST_WORKERS sets the number of workers.
status=0
"$VENV/bin/python" -m pytest -n "${APPLE_FLOW_TEST_WORKERS:-4}" --dist loadgroup --local-model-tests=skip "$@" ||
    status=$?
models=0
"$VENV/bin/python" -m pytest -n 0 --local-model-tests=only "$@" || models=$?
# 5: nothing left to run in that phase (the arguments chose only tests of the other).
[ "$status" -eq 5 ] && [ "$models" -ne 5 ] && status=0
[ "$models" -eq 5 ] && [ "$status" -ne 5 ] && models=0
[ "$status" -ne 0 ] && exit "$status"
exit "$models"
