#!/usr/bin/env bash
# Fetches the handwritten digits data set (1797 samples x 64 features + a label column) that
# Debian's python3-sklearn package ships as digits.csv.gz, without installing the package or its
# dependencies: apt-get download + dpkg -x into a temporary folder. Writes data/digits.csv.gz.
set -euo pipefail
cd "$(dirname "$0")/.."
out=data/digits.csv.gz
if [ -s "$out" ]; then
  exit 0
fi
mkdir -p data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1) || {
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  (cd "$tmp" && apt-get download python3-sklearn >/dev/null 2>&1)
}
dpkg -x "$tmp"/python3-sklearn_*.deb "$tmp/x"
src=$(find "$tmp/x" -name digits.csv.gz | head -n 1)
[ -n "$src" ] || { echo "fetch-digits: digits.csv.gz not found in python3-sklearn" >&2; exit 1; }
cp "$src" "$out.tmp" && mv "$out.tmp" "$out"
echo "fetch-digits: wrote $out ($(stat -c %s "$out") bytes)"
