#!/usr/bin/env bash
# Fuzzing (docs/fuzzing.md): builds the libFuzzer harnesses of tests/fuzz into build-fuzz/ with
# clang (-DQM_FUZZ=ON, CPU-only), replays the committed corpora (ctest -L fuzz), then fuzzes each
# harness over a copy of its corpus in a temporary directory, so the repository is never modified.
# Two modes:
#   QM_FUZZ_RUNS=N (what scripts/test.sh and so CI use): N inputs per harness from the fixed seed
#     QM_FUZZ_SEED (default 1): the same tree meets the same search (up to the few coverage
#     features that depend on the clock, e.g. fuzz_cli's timings), not one that depends on luck
#     or machine speed as a time budget does.
#   QM_FUZZ_SECONDS=S (default 30 when QM_FUZZ_RUNS is unset): S seconds per harness from a random
#     seed, to explore; the seed is printed so a run can be repeated. A finding (crash, sanitizer report, leak, timeout, OOM) fails
# the script and leaves its reproducer under build-fuzz/fuzz-findings/<harness>/, printed at the
# end; replay it with `build-fuzz/tests/fuzz/<harness> FILE`.
# Without a working clang + libFuzzer it says so and exits 0 (scripts/install-deps.sh installs
# them); QM_FUZZ_REQUIRED=1 turns that into a failure. QM_FUZZ_SECONDS=0 only replays.
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${QM_FUZZ_RUNS:-}"
secs="${QM_FUZZ_SECONDS:-30}"
seed="${QM_FUZZ_SEED:-}"
if [ -n "$runs" ]; then
  [[ "$runs" =~ ^[0-9]+$ ]] || { echo "fuzz: QM_FUZZ_RUNS must be a count, got '$runs'" >&2; exit 2; }
  seed="${seed:-1}"
  budget=(-runs="$runs")
  what="$runs inputs, seed $seed"
  [ "$runs" -gt 0 ] || secs=0
else
  [[ "$secs" =~ ^[0-9]+$ ]] || { echo "fuzz: QM_FUZZ_SECONDS must be a count, got '$secs'" >&2; exit 2; }
  seed="${seed:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
  budget=(-max_total_time="$secs")
  what="${secs} s, seed $seed"
fi
[[ "$seed" =~ ^[0-9]+$ ]] || { echo "fuzz: QM_FUZZ_SEED must be a number, got '$seed'" >&2; exit 2; }
harnesses=(fuzz_scenario fuzz_npy fuzz_csv fuzz_cli)

probe_dir="$(mktemp -d)"
trap 'rm -rf "$probe_dir"' EXIT
printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' \
  > "$probe_dir/probe.c"
if ! command -v clang >/dev/null ||
   ! clang -fsanitize=fuzzer,address,undefined "$probe_dir/probe.c" -o "$probe_dir/probe" 2>/dev/null; then
  echo "fuzz: skipped: clang with libFuzzer is not available (Debian: apt-get install clang" \
       "libclang-rt-14-dev, or scripts/install-deps.sh)"
  [ "${QM_FUZZ_REQUIRED:-0}" = 1 ] && exit 1
  exit 0
fi

echo "== fuzz: build (clang, -fsanitize=fuzzer,address,undefined)"
CC=clang cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DQM_FUZZ=ON \
      -DQM_WITH_CUDA=OFF -DQM_WITH_MPI=OFF >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target "${harnesses[@]}"
echo "== fuzz: replay the committed corpora (ctest -L fuzz)"
(cd build-fuzz && ctest --output-on-failure -L fuzz)
[ "$secs" -gt 0 ] || exit 0

work="$(mktemp -d)"
trap 'rm -rf "$probe_dir" "$work"' EXIT
findings="$PWD/build-fuzz/fuzz-findings"
failed=()
for h in "${harnesses[@]}"; do
  echo "== fuzz: $h ($what)"
  cp -r "tests/fuzz/corpus/$h" "$work/$h"
  mkdir -p "$findings/$h"
  flags=("${budget[@]}" -seed="$seed" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=2
         -print_final_stats=1 -artifact_prefix="$findings/$h/")
  [ -f "tests/fuzz/$h.dict" ] && flags+=(-dict="tests/fuzz/$h.dict")
  if ! "build-fuzz/tests/fuzz/$h" "${flags[@]}" "$work/$h" >"$work/$h.log" 2>&1; then
    failed+=("$h")
    tail -n 60 "$work/$h.log"
    cp "$work/$h.log" "$findings/$h/fuzz.log"
  fi
  grep -E '^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)' \
    "$work/$h.log" | tr '\n' ' ' || true
  echo
done
if [ ${#failed[@]} -gt 0 ]; then
  for h in "${failed[@]}"; do
    echo "fuzz: FINDING in $h; reproducer(s):"
    find "$findings/$h" -type f ! -name fuzz.log -newer "$work" -print | sed 's/^/  /'
    echo "  replay: build-fuzz/tests/fuzz/$h FILE; log: $findings/$h/fuzz.log;" \
         "the same search again: QM_FUZZ_SEED=$seed with the same QM_FUZZ_RUNS/QM_FUZZ_SECONDS"
  done
  exit 1
fi
echo "fuzz: no findings (${#harnesses[@]} harnesses, $what each)"
