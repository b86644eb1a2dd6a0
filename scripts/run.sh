#!/usr/bin/env bash
# Sets everything up and runs the daemon.
#  - macOS 26 with Apple Intelligence: iMessage in, apple-code on Apple's on-device model.
#  - anywhere else: the console channel (type a message, get the agent's answer), apple-code on the local
#    demo model (SmolLM2-135M on llama.cpp), started here and stopped when you leave.
# Extra arguments go to `apple-flow run`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

apple_code="$ROOT/apple_code/.build/debug/apple-code"
if [ "$(uname -s)" = Darwin ]; then
    "$ROOT/scripts/setup.sh"
    if "$apple_code" --check --backend fm >/dev/null 2>&1; then
        say "Apple Intelligence is available: running the iMessage daemon (Ctrl-C to stop)"
        export PATH="$ROOT/apple_code/.build/debug:$PATH"
        exec "$VENV/bin/apple-flow" run "$@"
    fi
    say "Apple's on-device model is not available here ($("$apple_code" --check --backend fm 2>/dev/null || true)); using the local model and the console"
else
    "$ROOT/scripts/setup.sh" --local-model
fi

port=${APPLE_FLOW_LOCAL_MODEL_PORT:-8765}
"$ROOT/scripts/local-model.sh" start --port "$port" >/dev/null
trap '"$ROOT/scripts/local-model.sh" stop --port "$port" >/dev/null 2>&1 || true' EXIT
export PATH="$ROOT/apple_code/.build/debug:$PATH"
export APPLE_FLOW_AFM_BACKEND=openai
export APPLE_FLOW_AFM_BASE_URL="http://127.0.0.1:$port/v1"
export APPLE_FLOW_AFM_MODEL=smollm2-135m
# The agent may write files: it works on a copy of examples/workspace outside this checkout, never in it.
if [ -z "${APPLE_FLOW_DEFAULT_WORKSPACE:-}" ] && ! grep -qi "^APPLE_FLOW_DEFAULT_WORKSPACE=." "$ROOT/.env" 2>/dev/null; then
    demo="$HOME/.apple-flow/demo-workspace"
    [ -d "$demo" ] || { mkdir -p "$(dirname "$demo")" && cp -R "$ROOT/examples/workspace" "$demo"; }
    export APPLE_FLOW_DEFAULT_WORKSPACE="$demo"
fi
say "Console channel with the local demo model (SmolLM2-135M: real, fast, not a capable coding agent). Type a message; Ctrl-D to quit."
"$VENV/bin/apple-flow" run --channel console "$@"
