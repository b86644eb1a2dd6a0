# Shared helpers for the scripts in this folder (sourced, not run).
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV="$ROOT/.venv"
say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }
die() { printf '\033[31merror:\033[0m %s\n' "$*" >&2; exit 1; }

sha() { if command -v sha256sum >/dev/null; then sha256sum "$@" | cut -d' ' -f1; else shasum -a 256 "$@" | cut -d' ' -f1; fi; }

# Runs a long command with its output in LOG, showing elapsed time and the log's last line meanwhile.
with_progress() {
    local label=$1 log=$2; shift 2
    "$@" >"$log" 2>&1 &
    local pid=$! start=$SECONDS
    if [ -t 2 ]; then
        while kill -0 "$pid" 2>/dev/null; do
            printf '\r\033[K    %s  %ds  %s' "$label" $((SECONDS - start)) "$(tail -n 1 "$log" 2>/dev/null | cut -c1-70)" >&2
            sleep 1
        done
        printf '\r\033[K' >&2
    else
        while kill -0 "$pid" 2>/dev/null; do
            sleep 15
            kill -0 "$pid" 2>/dev/null && printf '    %s ... %ds\n' "$label" $((SECONDS - start)) >&2
        done
    fi
    wait "$pid"
}
