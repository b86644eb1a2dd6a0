#!/usr/bin/env bash
# Builds apple-flow-launcher, the executable of Apple Flow.app, so that the same source and toolchain give the same
# bytes wherever the checkout lies and whenever it is built:
#
#     scripts/build-launcher.sh [PACKAGE_DIR]     # default: this checkout's apple_code
#
# macOS keys the app's grants (Full Disk Access, Automation) on its ad-hoc code signature, a hash of these bytes. A
# debug build embeds the absolute paths of its objects and sources (and the linker's times in its debug map): a
# clean rebuild, a moved clone or a new folder gave a new signature, and macOS stopped applying the grants while
# System Settings still showed "Apple Flow" switched on. So: release, no debug info, source paths mapped to ".",
# local symbols stripped, archive times zeroed, in a scratch folder of its own (a `swift build -c release` of the
# whole package, as scripts/check-macos.sh runs, must not overwrite it with other flags). Prints the binary's path.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
package="$(cd "${1:-$ROOT/apple_code}" && pwd)"
scratch="$package/.build/launcher"

flags=(-c release --product apple-flow-launcher --package-path "$package" --scratch-path "$scratch"
       -Xswiftc -gnone -Xswiftc -Xfrontend -Xswiftc -disable-incremental-llvm-codegen
       -Xswiftc -file-prefix-map -Xswiftc "$package=."
       -Xswiftc -debug-prefix-map -Xswiftc "$package=.")
case "$(uname -s)" in
    Darwin) flags+=(-Xlinker -S -Xlinker -x) ;;  # ld64: no debug map (object paths, times), no local symbols
    *) flags+=(-Xlinker -s) ;;  # GNU ld / gold / lld: strip all symbols
esac

export ZERO_AR_DATE=1  # ar on macOS writes each member's modification time otherwise
swift build "${flags[@]}" >&2
echo "$(swift build "${flags[@]}" --show-bin-path)/apple-flow-launcher"
