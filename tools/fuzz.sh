#!/usr/bin/env bash
# Coverage-guided fuzzing of the pure domain's input paths with libFuzzer (tools/Fuzz/Harness.swift).
#
#   tools/fuzz.sh TARGET [SECONDS] [libFuzzer options…]     TARGET: line | json | event
#
# Builds .build-fuzz/fuzz-teamlog (the TeamLog module's sources and the harness, one module, with
# `-sanitize=fuzzer,address`), seeds the corpus .build-fuzz/corpus-TARGET from tools/examples and the
# hostile corpus when it is empty, and runs for SECONDS (default 60). A crash leaves crash-* in the
# current directory; replay one with `FUZZ_TARGET=TARGET .build-fuzz/fuzz-teamlog crash-…`.
set -euo pipefail
cd "$(dirname "$0")/.."
# Swift's crash reporter waits on a fuzzer's crash under ASan (it hung); libFuzzer prints the stack itself.
export SWIFT_BACKTRACE=enable=no
target=${1:?usage: tools/fuzz.sh line|json|event [SECONDS] [libFuzzer options…]}
seconds=${2:-60}
shift $(( $# >= 2 ? 2 : 1 ))
mkdir -p .build-fuzz
binary=.build-fuzz/fuzz-teamlog
sources=$(find Sources/TeamLog -name '*.swift' | sort)
# One build at a time: two targets started together wait for the first one's build.
exec 9>.build-fuzz/build.lock
flock 9
if [ ! -x "$binary" ] || [ -n "$(find Sources/TeamLog tools/Fuzz -name '*.swift' -newer "$binary")" ]; then
    echo "fuzz.sh: building $binary" >&2
    # shellcheck disable=SC2086
    swiftc -O -g -sanitize=fuzzer,address -parse-as-library -module-name TeamLog \
        -enable-upcoming-feature ExistentialAny -enable-upcoming-feature InternalImportsByDefault \
        $sources tools/Fuzz/Harness.swift -o "$binary"
fi
flock -u 9
corpus=.build-fuzz/corpus-$target
mkdir -p "$corpus"
if [ -z "$(ls -A "$corpus")" ]; then
    case $target in
    line | json)
        # One seed per line of every example and hostile input.
        n=0
        for file in tools/examples/*.jsonl Tests/TeamLogStoreTests/Corpus/*.jsonl; do
            [ -f "$file" ] || continue
            while IFS= read -r line; do
                n=$((n + 1))
                printf '%s' "$line" >"$corpus/seed-$n"
            done <"$file"
        done
        ;;
    event)
        # The log's encoding of every line the line target's seeds accept.
        [ -n "$(ls -A .build-fuzz/corpus-line 2>/dev/null)" ] || "$0" line 0 -runs=0 >/dev/null 2>&1
        FUZZ_TARGET=encode FUZZ_OUT="$corpus" "$binary" .build-fuzz/corpus-line/* >/dev/null 2>&1
        ;;
    esac
fi
exec env FUZZ_TARGET="$target" "$binary" "$corpus" -max_total_time="$seconds" -max_len=4096 "$@"
