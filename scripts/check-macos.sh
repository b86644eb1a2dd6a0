#!/usr/bin/env bash
# The first thing to run on a Mac: builds apple-code in release mode, tests its command sandbox
# (`apple-code --sandbox-check`: a write outside the workspace refused, the hidden paths unreadable, `open`,
# `osascript`, `launchctl` and a denied loopback port refused, `swift build` of a tiny package inside the workspace
# works), asks whether Apple's on-device model is available (`apple-code --check`),
# then runs one small real task on it in a temporary workspace and says what worked. Exit 0 when all of that
# worked, 3 when the model is not available, 1 for anything else.
#
#   scripts/check-macos.sh [--timeout SECONDS] [--tests] [--bench]
#   --timeout: for the task (default 180); --tests: also run the backend's tests that use the real framework;
#   --bench: then run scripts/bench_tasks on Apple's model (its report: reports/bench_tasks-mac.md)
set -u
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

timeout=180
run_tests=0
run_bench=0
tests_failed=0
sandbox_failed=0
while [ $# -gt 0 ]; do
    case $1 in
        --timeout) timeout=${2:?--timeout needs a number of seconds}; shift 2 ;;
        --tests) run_tests=1; shift ;;
        --bench) run_bench=1; shift ;;
        -h|--help) sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown option $1 (see --help)" ;;
    esac
done

results=()
pass() { results+=("ok    $*"); printf '\033[32m  ok\033[0m  %s\n' "$*" >&2; }
miss() { results+=("FAIL  $*"); printf '\033[31m  FAIL\033[0m %s\n' "$*" >&2; }
summary() {
    printf '\nSummary\n' >&2
    printf '  %s\n' ${results[@]+"${results[@]}"} >&2
}

say "Checking this Mac"
os=$(uname -s); arch=$(uname -m)
[ "$os" = Darwin ] || die "this is $os, not macOS: Apple's on-device model needs macOS 26 on Apple silicon (elsewhere use the openai backend: docs/connectors.md)"
version=$(sw_vers -productVersion 2>/dev/null || echo 0)
if [ "${version%%.*}" -ge 26 ] 2>/dev/null; then pass "macOS $version"; else miss "macOS $version (needs 26 or later)"; fi
if [ "$arch" = arm64 ]; then pass "Apple silicon ($arch)"; else miss "not Apple silicon ($arch): Apple Intelligence needs an M-series Mac"; fi

# The 26.4 SDK adds SystemLanguageModel.contextSize; the backend reads it only when told the SDK has it.
flags=()
sdk=$(xcrun --sdk macosx --show-sdk-version 2>/dev/null || echo "")
# "26" (no minor number) is 26.0.
sdk_major=${sdk%%.*}
case $sdk in *.*) sdk_minor=${sdk#*.}; sdk_minor=${sdk_minor%%.*} ;; *) sdk_minor=0 ;; esac
if [ -z "$sdk" ]; then
    miss "no macOS SDK found: install the Command Line Tools (xcode-select --install)"
    summary; exit 1
fi
if [ "$sdk_major" -gt 26 ] 2>/dev/null || { [ "$sdk_major" -eq 26 ] && [ "${sdk_minor:-0}" -ge 4 ]; } 2>/dev/null; then
    flags=(-Xswiftc -DFM_SDK_26_4)
fi
pass "macOS SDK $sdk${flags:+ (building with FM_SDK_26_4)}"

# Like lib.sh's with_progress, but polls every second so a quick (incremental) build returns at once.
build_with_progress() {
    local log=$1; shift
    "$@" >"$log" 2>&1 &
    local pid=$! start=$SECONDS
    while kill -0 "$pid" 2>/dev/null; do
        sleep 1
        if [ -t 2 ]; then
            printf '\r\033[K    swift build  %ds  %s' $((SECONDS - start)) "$(tail -n 1 "$log" 2>/dev/null | cut -c1-70)" >&2
        elif [ $(((SECONDS - start) % 15)) -eq 0 ]; then
            printf '    swift build ... %ds\n' $((SECONDS - start)) >&2
        fi
    done
    [ -t 2 ] && printf '\r\033[K' >&2
    wait "$pid"
}

say "Building apple-code (swift build -c release, a few minutes the first time)"
log=$(mktemp -t apple-code-build.XXXXXX)
if build_with_progress "$log" swift build --package-path "$ROOT/apple_code" -c release ${flags[@]+"${flags[@]}"}; then
    pass "release build"
else
    tail -n 30 "$log" >&2
    miss "release build failed (full log: $log)"
    summary; exit 1
fi
bin="$(swift build --package-path "$ROOT/apple_code" -c release ${flags[@]+"${flags[@]}"} --show-bin-path)/apple-code"
[ -x "$bin" ] || { miss "no binary at $bin"; summary; exit 1; }

# swift test needs Swift Testing. Xcode has it on its default paths. The Command Line Tools (26 and later) ship
# Testing.framework too, but on no default search path: -F to compile, and rpaths to load the framework and the
# lib_TestingInterop.dylib it links (mac-edges.md, "Toolchain"). Older Command Line Tools have no Swift Testing.
testing_flags() {
    local developer frameworks
    developer=$(xcode-select -p 2>/dev/null) || return 0
    case $developer in */CommandLineTools) ;; *) return 0 ;; esac
    frameworks="$developer/Library/Developer/Frameworks"
    [ -d "$frameworks/Testing.framework" ] || return 1
    test_flags=(-Xswiftc -F -Xswiftc "$frameworks" -Xlinker -rpath -Xlinker "$frameworks"
        -Xlinker -rpath -Xlinker "$developer/Library/Developer/usr/lib")
    printf '    using Swift Testing from the Command Line Tools (%s)\n' "$frameworks" >&2
}

if [ $run_tests = 1 ]; then
    say "Running the backend's tests on the real framework (schemas of the seven tools, availability texts)"
    test_flags=()
    if ! testing_flags; then
        miss "the backend's tests need Swift Testing, which the selected Command Line Tools ($(xcode-select -p)) \
do not have: install Xcode and select it (sudo xcode-select -s /Applications/Xcode.app), or install the Command \
Line Tools 26 or later (xcode-select --install)"
        tests_failed=1
    elif build_with_progress "$log" swift test --package-path "$ROOT/apple_code" ${flags[@]+"${flags[@]}"} \
        ${test_flags[@]+"${test_flags[@]}"} --filter 'PlatformTests|LogicTests|MirrorDeclarationTests'; then
        pass "Foundation Models backend tests"
    else
        tail -n 30 "$log" >&2
        miss "Foundation Models backend tests failed (full log: $log)"
        tests_failed=1
    fi
fi

say "Testing the command sandbox (apple-code --sandbox-check; swift build takes a minute the first time)"
while IFS= read -r line; do
    case $line in
        "ok    "*) pass "sandbox: ${line#ok    }" ;;
        "FAIL  "*) miss "sandbox: ${line#FAIL  }"; sandbox_failed=1 ;;
        "skip  "*) printf '    sandbox: skipped %s\n' "${line#skip  }" >&2 ;;
        "exit 0") ;;
        "exit "*) [ $sandbox_failed = 1 ] || miss "sandbox: apple-code --sandbox-check ended with ${line}"
                  sandbox_failed=1 ;;
        *) printf '    %s\n' "$line" >&2 ;;
    esac
done < <("$bin" --sandbox-check 2>&1; echo "exit $?")

say "Asking for Apple's on-device model (apple-code --check --backend fm)"
check=$("$bin" --check --backend fm 2>&1); check_status=$?
printf '    %s\n' "$check" >&2
if [ $check_status -eq 0 ]; then
    pass "Apple's on-device model is available"
else
    miss "Apple's on-device model is not available (exit $check_status): the reason above says what to do"
    summary; exit 3
fi

say "Running one small task in a temporary workspace"
workspace=$(mktemp -d -t apple-code-check.XXXXXX)
printf 'apples\npears\nplums\n' >"$workspace/fruit.txt"
# The event log stays outside the workspace, where the model would see it.
events=$(mktemp -t apple-code-events.XXXXXX)
task_start=$SECONDS
"$bin" --backend fm --cwd "$workspace" --timeout "$timeout" --output-format stream-json --verbose \
    "Read fruit.txt, then write the number of lines it has (just the number) to count.txt." \
    >"$events" 2>"$events.stderr"
task_status=$?
tool_calls=$(grep -c '"type":"tool_call"' "$events" 2>/dev/null || true)
if [ $task_status -eq 0 ]; then pass "task finished (exit 0) in $((SECONDS - task_start)) s"; else miss "task ended with exit $task_status: $(tail -n 1 "$events" 2>/dev/null | cut -c1-300)"; fi
if [ "${tool_calls:-0}" -gt 0 ]; then pass "the model called tools ($tool_calls calls)"; else miss "the model called no tool"; fi
if [ "$(tr -d '[:space:]' <"$workspace/count.txt" 2>/dev/null)" = 3 ]; then
    pass "count.txt says 3"
else
    miss "count.txt is missing or wrong (a 3B model can get this wrong; see $events)"
fi
printf '    workspace kept for inspection: %s\n    events: %s (diagnostics: %s.stderr)\n' \
    "$workspace" "$events" "$events" >&2

bench_failed=0
if [ $run_bench = 1 ]; then
    say "Running the task benchmark on Apple's model (scripts/bench_tasks; up to an hour)"
    if "$ROOT/scripts/bench_tasks" --apple-code "$bin" --backend fm --report "$ROOT/reports/bench_tasks-mac.md" >&2; then
        pass "task benchmark: reports/bench_tasks-mac.md"
    else
        miss "the task benchmark did not finish (see its output above)"
        bench_failed=1
    fi
fi

summary
[ $task_status -eq 0 ] && [ $tests_failed = 0 ] && [ $sandbox_failed = 0 ] && [ $bench_failed = 0 ] || exit 1
exit 0
