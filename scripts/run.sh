#!/usr/bin/env bash
# Sets everything up and runs the daemon.
#  - macOS: the first run asks a few questions (`apple-flow setup`) while .env names no allowed sender; then
#    iMessage in, apple-code on Apple's on-device model (or the agent chosen in the setup).
#  - anywhere else: the console channel (type a message, get the agent's answer), apple-code on the local
#    model (Qwen2.5-Coder-0.5B on llama.cpp for chat, the 1.5B for approved tasks, unless APPLE_FLOW_LOCAL_MODEL and
#    APPLE_FLOW_LOCAL_TASK_MODEL name others), started here and stopped when you leave.
# Extra arguments go to `apple-flow run`.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

apple_code="$ROOT/apple_code/.build/debug/apple-code"
if [ "$(uname -s)" = Darwin ]; then
    # The value apple-flow will see for a setting: the environment's, else the last line of .env that sets it.
    setting() {
        if printenv "$1" >/dev/null; then printenv "$1"; return; fi
        [ -f "$ROOT/.env" ] || return 0
        { grep -iE "^[[:space:]]*(export[[:space:]]+)?$1[[:space:]]*=" "$ROOT/.env" || true; } | tail -n 1 |
            sed -E 's/^[^=]*=[[:space:]]*//; s/[[:space:]]+#.*$//; s/^["'\'']//; s/["'\'']$//'
    }
    "$ROOT/scripts/setup.sh"
    export PATH="$ROOT/apple_code/.build/debug:$PATH"
    # A daemon without an allowed sender answers nobody: the first run asks for what is needed.
    if [ -z "$(setting APPLE_FLOW_ALLOWED_SENDERS)" ]; then
        if [ -t 0 ] && [ -t 1 ]; then
            say "First run: a few questions (apple-flow setup), then the daemon starts"
            "$VENV/bin/apple-flow" setup
        else
            die "no allowed sender yet (.env is missing or has no APPLE_FLOW_ALLOWED_SENDERS), so the daemon would answer nobody. Run .venv/bin/apple-flow setup in a terminal, or without questions: .venv/bin/apple-flow setup --sender <your phone number or Apple ID email> --workspace <folder> --yes; then ./scripts/run.sh again."
        fi
    fi
    # `service status`: 0 running; 3 running but missing a permission (it says which, and where to give it); else
    # not running. A second daemon would only find the first one's lock, so a running service is the answer either
    # way, and its status is shown as it is: never "runs" alone when it cannot read chat.db.
    status=0
    report=$("$VENV/bin/apple-flow" service status 2>&1) || status=$?
    if [ "$status" = 0 ]; then
        printf '%s\n' "$report" >&2
        say "The login service runs the daemon already (above). .venv/bin/apple-flow service logs -f follows it."
        exit 0
    fi
    if [ "$status" = 3 ]; then
        printf '%s\n' "$report" >&2
        say "The login service runs, but it cannot read or answer messages yet: give it what the fix lines above say (it sees the grants by itself, restarts once to use Full Disk Access, and texts you when it is ready), then check with .venv/bin/apple-flow service status"
        exit 3
    fi
    if "$apple_code" --check --backend fm >/dev/null 2>&1; then
        say "Apple Intelligence is available: running the iMessage daemon (Ctrl-C to stop)"
        exec "$VENV/bin/apple-flow" run "$@"
    fi
    if [ "$(setting APPLE_FLOW_CONNECTOR)" != "" ] && [ "$(setting APPLE_FLOW_CONNECTOR)" != afm ] ||
        [ "$(setting APPLE_FLOW_AFM_BACKEND)" = openai ]; then
        say "Running the iMessage daemon with the agent set up in .env (Ctrl-C to stop)"
        exec "$VENV/bin/apple-flow" run "$@"
    fi
    say "Apple's on-device model is not available here ($("$apple_code" --check --backend fm 2>/dev/null || true)); using the local model and the console"
else
    "$ROOT/scripts/setup.sh" --local-model
fi

port=${APPLE_FLOW_LOCAL_MODEL_PORT:-8765}
task_port=${APPLE_FLOW_LOCAL_TASK_MODEL_PORT:-8766}
trap '"$ROOT/scripts/local-model.sh" stop --port "$port" >/dev/null 2>&1 || true
      "$ROOT/scripts/local-model.sh" stop --port "$task_port" >/dev/null 2>&1 || true' EXIT
"$ROOT/scripts/local-model.sh" start --port "$port" >/dev/null
# Approved tasks on the larger model (APPLE_FLOW_LOCAL_TASK_MODEL; empty: everything on the first): it prints
# nothing when there is none to serve.
task_url=$("$ROOT/scripts/local-model.sh" start --tasks --port "$task_port")
export PATH="$ROOT/apple_code/.build/debug:$PATH"
export APPLE_FLOW_AFM_BACKEND=openai
export APPLE_FLOW_AFM_BASE_URL="http://127.0.0.1:$port/v1"
[ -z "$task_url" ] || export APPLE_FLOW_AFM_TASK_BASE_URL="$task_url"
# No APPLE_FLOW_AFM_MODEL: apple-code takes the model each server lists, whichever APPLE_FLOW_LOCAL_MODEL and
# APPLE_FLOW_LOCAL_TASK_MODEL chose.
# Limits that fit this small model (config.DEMO_PROFILE; the daemon shows them at start).
export APPLE_FLOW_PROFILE=${APPLE_FLOW_PROFILE:-demo}
# The agent may write files: it works on a copy of examples/workspace outside this checkout, never in it.
if [ -z "${APPLE_FLOW_DEFAULT_WORKSPACE:-}" ] && ! grep -qi "^APPLE_FLOW_DEFAULT_WORKSPACE=." "$ROOT/.env" 2>/dev/null; then
    demo="$HOME/.apple-flow/demo-workspace"
    [ -d "$demo" ] || { mkdir -p "$(dirname "$demo")" && cp -R "$ROOT/examples/workspace" "$demo"; }
    export APPLE_FLOW_DEFAULT_WORKSPACE="$demo"
fi
say "Console channel with the local model (above: a small coding model, see docs/connectors.md for what it can do). Type a message; Ctrl-D to quit."
"$VENV/bin/apple-flow" run --channel console "$@"
