#!/usr/bin/env bash
# Compile gate for the Foundation Models backend: type-checks apple_code/Sources/AppleCodeFM against Apple's own
# FoundationModels declarations, not only against the Linux mirror. For each interface dump in apple_code/Interfaces
# (26.1, and 26.4 with -DFM_SDK_26_4) it builds a real FoundationModels module with
# `swiftc -frontend -compile-module-from-interface`, then runs `swiftc -typecheck` on AppleCodeFM's sources with
# only that module, AppleCodeCore and two stub modules on the search path (never the mirror).
# On macOS there is nothing to do: `swift build` compiles AppleCodeFM against the SDK's framework itself.
#
#   scripts/fm-interface-gate.sh [--sdk 26.1|26.4] [PROBE.swift ...]
#   --sdk: check one variant only (default: both); PROBE files are type-checked with the sources (the tests use
#   them to show the gate fails on a wrong declaration). Exit 0 when every variant type-checks, 1 otherwise.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

sdks=(26.1 26.4)
probes=()
while [ $# -gt 0 ]; do
    case $1 in
        --sdk) sdks=("${2:?--sdk needs 26.1 or 26.4}"); shift 2 ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1 (see --help)" ;;
        *) probes+=("$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"); shift ;;
    esac
done

if [ "$(uname -s)" = Darwin ]; then
    say "FoundationModels gate: nothing to do on macOS (swift build compiles AppleCodeFM against the SDK's framework)"
    exit 0
fi

package="$ROOT/apple_code"
# AppleCodeFM imports AppleCodeCore: use the module SwiftPM builds (a no-op when it is up to date).
swift build --package-path "$package" --target AppleCodeCore >/dev/null 2>&1 ||
    die "swift build --target AppleCodeCore failed; run 'cd apple_code && swift build' to see why"
core="$(swift build --package-path "$package" --show-bin-path)/Modules/AppleCodeCore.swiftmodule"
[ -f "$core" ] || die "no AppleCodeCore module at $core"

work=$(mktemp -d -t fm-gate.XXXXXX)
trap 'rm -rf "$work"' EXIT

# The dumps are SourceKit's rendering of the interface; these edits (mac-edges.md, "Toolchain") make them a
# .swiftinterface the compiler accepts, and change no declaration the backend can use.
interface() {
    printf '%s\n' '// swift-interface-format-version: 1.0' \
        '// swift-module-flags: -enable-library-evolution -swift-version 6 -module-name FoundationModels' \
        'import _Concurrency' 'import _StringProcessing'
    sed -e 's/@objc deinit/deinit/' \
        -e 's/public subscript(index: Transcript\.Index) -> Transcript\.Entry$/& { get }/' "$1"
}

failed=0
for sdk in "${sdks[@]}"; do
    dump="$package/Interfaces/FoundationModels-$sdk.decl.txt"
    [ -f "$dump" ] || die "no interface dump for $sdk at $dump"
    modules="$work/$sdk"
    mkdir -p "$modules"
    cp "$core" "$modules/"
    # The dumps import two Apple-only modules; they need only BackgroundAssets.AssetPack.
    printf 'public final class AssetPack: Sendable {}\n' >"$modules/BackgroundAssets.swift"
    : >"$modules/CoreGraphics.swift"
    for stub in BackgroundAssets CoreGraphics; do
        swiftc -emit-module -parse-as-library -swift-version 6 -module-name "$stub" "$modules/$stub.swift" \
            -emit-module-path "$modules/$stub.swiftmodule" || die "could not build the $stub stub module"
    done
    interface "$dump" >"$modules/FoundationModels.swiftinterface"
    if ! swiftc -frontend -compile-module-from-interface -module-name FoundationModels -I "$modules" \
        "$modules/FoundationModels.swiftinterface" -o "$modules/FoundationModels.swiftmodule"; then
        printf 'FoundationModels %s: the interface dump did not compile into a module\n' "$sdk" >&2
        failed=1
        continue
    fi
    defines=()
    [ "$sdk" = 26.4 ] && defines=(-DFM_SDK_26_4)
    if swiftc -typecheck -swift-version 6 -module-name AppleCodeFM -I "$modules" ${defines[@]+"${defines[@]}"} \
        "$package"/Sources/AppleCodeFM/*.swift ${probes[@]+"${probes[@]}"}; then
        printf 'FoundationModels %s: ok, AppleCodeFM type-checks against the SDK declarations\n' "$sdk" >&2
    else
        printf 'FoundationModels %s: FAILED, AppleCodeFM does not type-check against the SDK declarations\n' "$sdk" >&2
        failed=1
    fi
done
exit $failed
