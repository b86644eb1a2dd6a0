#!/usr/bin/env bash
# Sets up everything this checkout needs: the Python environment (.venv) with apple-flow, and apple-code built
# by SwiftPM. With --local-model also the local model server (machines without Apple Intelligence).
# Idempotent: a second run rebuilds and reinstalls only what changed.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
cd "$ROOT"

local_model=0
browser=0
for arg in "$@"; do
    case $arg in
        --local-model) local_model=1 ;;
        --browser) browser=1 ;;
        *) die "unknown option $arg (usage: scripts/setup.sh [--local-model] [--browser])" ;;
    esac
done

# --- Toolchains ---------------------------------------------------------------------------------------------
# Homebrew's Pythons, also when the shell profile lacks `brew shellenv` (Apple silicon, then Intel prefixes).
brew_bins=${SETUP_BREW_BINS:-/opt/homebrew/bin /usr/local/bin}
python=""
for name in ${PYTHON:-} python3.13 python3.12 python3.11 python3; do
    for candidate in "$(command -v "$name" 2>/dev/null)" $(for dir in $brew_bins; do echo "$dir/$name"; done); do
        if [ -n "$candidate" ] && [ -x "$candidate" ] &&
            "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
            python=$candidate
            break 2
        fi
    done
done
[ -n "$python" ] || die "Python 3.11 or newer is needed (looked on PATH and in ${brew_bins// /, }). macOS: brew install python@3.12; Debian/Ubuntu: apt-get install python3 python3-venv"
version() { "$1" -c 'import platform; print(platform.python_version())'; }
if [ -x "$VENV/bin/python" ]; then
    say "Using Python $(version "$VENV/bin/python") (.venv)"
else
    say "Using Python $(version "$python") ($python)"
fi
command -v swift >/dev/null 2>&1 || die "The Swift toolchain is needed to build apple-code. macOS: xcode-select --install (the Command Line Tools are enough); Linux: install Swift 6.2 or newer from swift.org and put its bin/ on PATH"
# The package's first line names the Swift it needs; an older one fails with a confusing manifest error.
needed=$(sed -n '1s/.*swift-tools-version: *\([0-9][0-9.]*\).*/\1/p' "$ROOT/apple_code/Package.swift" 2>/dev/null || true)
found=$({ swift --version 2>/dev/null || true; } | sed -n 's/.*Swift version \([0-9][0-9]*\.[0-9][0-9]*\).*/\1/p' | head -n 1)
if [ -n "$needed" ] && [ -n "$found" ] &&
    [ "$(printf '%s\n%s\n' "$needed" "$found" | sort -t. -k1,1n -k2,2n | head -n 1)" != "$needed" ]; then
    die "apple-code needs Swift $needed or newer; $(command -v swift) is Swift $found. macOS: update the Command Line Tools (System Settings > General > Software Update; or softwareupdate --list, then softwareupdate --install the \"Command Line Tools for Xcode\" it lists; if none is listed: sudo rm -rf /Library/Developer/CommandLineTools && xcode-select --install). Linux: install Swift $needed or newer from swift.org."
fi

# --- Python environment ---------------------------------------------------------------------------------------
if [ ! -x "$VENV/bin/python" ]; then
    say "Creating the Python environment in .venv"
    rm -rf "$VENV"
    "$python" -m venv "$VENV" || { rm -rf "$VENV"; die "could not create .venv (Debian/Ubuntu: apt-get install python3-venv)"; }
fi
stamp="$VENV/.apple-flow-installed"
extras=dev
[ "$browser" = 1 ] && extras=dev,browser
want="$(sha "$ROOT/pyproject.toml") $extras"
# A set-up with more extras than asked for (the tests' browser driver) is kept as it is.
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] && [ "$(cat "$stamp" 2>/dev/null)" != "$want,browser" ]; then
    say "Installing apple-flow and its Python dependencies"
    if ! with_progress "pip install" "$VENV/install.log" \
        sh -c "'$VENV/bin/python' -m pip install --upgrade pip && '$VENV/bin/python' -m pip install -e '$ROOT[$extras]'"; then
        tail -n 5 "$VENV/install.log" >&2
        die "pip could not install the Python packages (full log: .venv/install.log). Check that PyPI is reachable (proxy, network), then run this again: it resumes where it stopped."
    fi
    echo "$want" >"$stamp"
fi

# --- apple-code -------------------------------------------------------------------------------------------------
say "Building apple-code (swift build; quick when nothing changed)"
if ! (cd "$ROOT/apple_code" && swift build ${SWIFT_BUILD_FLAGS:-} 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\] (Compiling|Emitting|Wrapping|Write|Linking|Applying)' >&2; exit "${PIPESTATUS[0]}"); then
    die "swift build failed (see above). Run 'cd apple_code && swift build' to see the whole output."
fi
# The launcher of Apple Flow.app, built so that its bytes (and so macOS's grants to it) do not change with the folder
# or the time of the build.
if ! "$ROOT/scripts/build-launcher.sh" >/dev/null 2>"$ROOT/apple_code/.build/launcher.log"; then
    tail -n 20 "$ROOT/apple_code/.build/launcher.log" >&2
    die "building apple-flow-launcher failed (see above; whole log: apple_code/.build/launcher.log)."
fi

# --- Debian packages (Linux) --------------------------------------------------------------------------------
# apt_package COMMAND PACKAGE WHAT-IT-IS-FOR WITHOUT-IT: installs PACKAGE when COMMAND is missing and apt can run
# (as root), else says what is missing and what to run.
apt_package() {
    local command=$1 package=$2 purpose=$3 without=$4
    [ "$(uname -s)" = Linux ] && ! command -v "$command" >/dev/null 2>&1 || return 0
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        say "Installing $package ($purpose)"
        (apt-get install -y -q "$package" >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q "$package" >/dev/null 2>&1; }) ||
            say "could not install $package; $without (apt-get install $package)"
    else
        say "$package is not installed; $without until it is (sudo apt-get install $package)"
    fi
}
apt_package bwrap bubblewrap "the sandbox apple-code runs commands in" "apple-code runs commands without an OS sandbox"
if [ "$browser" = 1 ]; then
    apt_package chromium chromium "the browser the web page's tests drive" "the web page's browser tests are skipped"
fi

if [ "$local_model" = 1 ]; then
    "$ROOT/scripts/local-model.sh" install
fi
say "Set-up complete"
