#!/usr/bin/env bash
# test_bad_inputs.sh QMESH SRCDIR [HDF5] — every file under tests/bad-inputs/ through the CLI (label cli):
# exit 1, nothing on stdout, coded one-line errors (exactly one line for a data file; each of a
# scenario's errors once), the code and message fragment that tests/bad-inputs/EXPECT names, and
# no file left behind (neither the requested output nor a temporary, in the output directory or
# the working directory). Every run is under `timeout`, so a hang fails with the file's name.
set -u
QMESH=$1; SRC=$2; HDF5=${3:-ON}  # OFF: a build without HDF5 must refuse the .h5 files instead
DIR=$SRC/tests/bad-inputs
. "$(dirname "$0")/testlib.sh"
declare -A code frag
while IFS=$'\t' read -r f c m; do
  case $f in ''|'#'*) continue;; esac
  code[$f]=$c; frag[$f]=$m
done < "$DIR/EXPECT"
if [ "$HDF5" != ON ]; then
  for path in "$DIR"/*.h5; do
    f=$(basename "$path"); code[$f]=E-UNSUPPORTED; frag[$f]="HDF5 input was not compiled in"
  done
fi
n=0
for path in "$DIR"/*; do
  f=$(basename "$path")
  [ "$f" = EXPECT ] && continue
  n=$((n+1))
  if [ -z "${code[$f]:-}" ]; then bad "$f: no line in EXPECT"; continue; fi
  mkdir -p "$T/work" "$T/out"
  cp "$path" "$T/work/$f"
  case $f in
    *.yaml) (cd "$T/work" && timeout 60 "$QMESH" plan --scenario "$f" --qubits 4 > "$T/stdout" 2> "$T/stderr");;
    *) (cd "$T/work" && timeout 60 "$QMESH" encode --input "$f" --scenario "$SRC/scenarios/dgx-h100.yaml" \
                                    --out "$T/out/out.npy" > "$T/stdout" 2> "$T/stderr");;
  esac
  rc=$?
  why=""
  [ $rc -eq 124 ] && why="hung (killed after 60 s)"
  [ -z "$why" ] && [ $rc -ne 1 ] && why="exit $rc, expected 1"
  [ -z "$why" ] && [ -s "$T/stdout" ] && why="printed on stdout: $(head -c 200 "$T/stdout")"
  lines=$(wc -l < "$T/stderr")
  case $f in
    *.yaml)
      [ -z "$why" ] && grep -vqE "^[^ ]+:[0-9]+:[0-9]+: error\[E-[A-Z0-9-]+\]: " "$T/stderr" && why="an uncoded line: $(grep -vE '^[^ ]+:[0-9]+:[0-9]+: error\[' "$T/stderr" | head -1)"
      [ -z "$why" ] && [ "$(sort "$T/stderr" | uniq -d | wc -l)" -ne 0 ] && why="a line printed twice: $(sort "$T/stderr" | uniq -d | head -1)"
      ;;
    *)
      [ -z "$why" ] && [ "$lines" -ne 1 ] && why="$lines lines on stderr, expected 1"
      [ -z "$why" ] && ! grep -qE "^error\[E-[A-Z0-9-]+\]: " "$T/stderr" && why="not a coded line"
      ;;
  esac
  [ -z "$why" ] && ! grep -F "error[${code[$f]}]: " "$T/stderr" | grep -qF -- "${frag[$f]}" && \
    why="expected error[${code[$f]}] with '${frag[$f]}'"
  left=$(ls -A "$T/out"; ls -A "$T/work" | grep -vxF "$f")
  [ -z "$why" ] && [ -n "$left" ] && why="left behind: $left"
  if [ -z "$why" ]; then ok "$f: $(tail -1 "$T/stderr" | head -c 160)"; else bad "$f: $why"; cat "$T/stderr"; fi
  rm -rf "$T/work" "$T/out"
done
[ $n -ge 40 ] || bad "only $n files in $DIR"
echo "test_bad_inputs: $pass passed, $fail failed"
[ $fail -eq 0 ]
