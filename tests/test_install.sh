#!/usr/bin/env bash
# test_install.sh CMAKE BUILD SRCDIR CC -- the installed package works (issue 14 item 2). Label
# package. Installs BUILD into a fresh temporary prefix, builds examples/ against it twice —
# find_package(qmesh) (examples/CMakeLists.txt) and `CC $(pkg-config --cflags --libs --static
# qmesh)` — checks that the installed qmesh.pc's prefix is that temporary prefix, links all of a
# static libqmesh both ways, runs both binaries and compares their stdout byte for byte with
# examples/encode.expected. Nothing here depends on what the example prints. No network, no root;
# the prefix is removed on any exit.
set -u
CMAKE=$1; BUILD=$(cd "$2" && pwd); SRC=$(cd "$3" && pwd); CC=$4
pass=0; fail=0
ok()  { pass=$((pass+1)); echo "ok: $*"; }
bad() { fail=$((fail+1)); echo "FAIL: $*"; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM # through the EXIT trap
P=$T/prefix
# run LOG CMD...: CMD with its output in $T/LOG, shown when it fails
run() { local log=$T/$1; shift; "$@" >"$log" 2>&1 || { cat "$log"; return 1; }; }

if run install.log "$CMAKE" --install "$BUILD" --prefix "$P"; then
  ok "cmake --install $BUILD --prefix <tmp>"
else
  bad "cmake --install"; echo "pass=$pass fail=$fail"; exit 1
fi

# find_package(qmesh)
if run ex-configure.log "$CMAKE" -S "$SRC/examples" -B "$T/ex" -DCMAKE_PREFIX_PATH="$P" \
       -DCMAKE_C_COMPILER="$CC" -DCMAKE_BUILD_TYPE=Release &&
   run ex-build.log "$CMAKE" --build "$T/ex"; then
  ok "examples/ built with find_package(qmesh)"
else
  bad "examples/ with find_package(qmesh)"
fi

# pkg-config, from the installed .pc only (wherever CMAKE_INSTALL_LIBDIR put it)
pc=$(find "$P" -name qmesh.pc -path '*/pkgconfig/*' | head -n 1)
if [ -z "$pc" ]; then
  bad "no qmesh.pc under the prefix"
else
  # the package first, then wherever the caller keeps its dependencies' .pc files
  PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}; export PKG_CONFIG_PATH
  prefix=$(pkg-config --variable=prefix qmesh)
  if [ "$(cd "$prefix" 2>/dev/null && pwd -P)" = "$(cd "$P" && pwd -P)" ]; then
    ok "qmesh.pc's prefix resolves to the install prefix ($prefix)"
  else
    bad "qmesh.pc's prefix is '$prefix', not the install prefix $P"
  fi
  flags=$(pkg-config --cflags --libs --static qmesh)
  echo "pkg-config --cflags --libs --static qmesh: $flags"
  # shellcheck disable=SC2086 # pkg-config's words are split on purpose
  if run pc-build.log "$CC" -o "$T/encode-pc" "$SRC/examples/encode.c" $flags; then
    ok "examples/encode.c built with pkg-config --static"
  else
    bad "examples/encode.c with pkg-config --static"
  fi
fi

# Every object of a static libqmesh links with what the package names (the example above pulls in
# only the members it calls): --whole-archive, through pkg-config and through find_package.
lib=$(find "$P" -name libqmesh.a | head -n 1)
if [ -z "$lib" ]; then
  echo "skip: whole-archive links (libqmesh is not a static library)"
else
  # shellcheck disable=SC2046,SC2086 # pkg-config's words are split on purpose
  if [ -n "${flags:-}" ] &&
     run whole-pc.log "$CC" -o "$T/whole-pc" "$SRC/examples/encode.c" $(pkg-config --cflags qmesh) \
         -Wl,--whole-archive "$lib" -Wl,--no-whole-archive ${flags//-lqmesh/}; then
    ok "all of libqmesh.a links with pkg-config --libs --static"
  else
    bad "libqmesh.a --whole-archive with pkg-config --libs --static"
  fi
  if [ "$(printf '%s\n' 3.24 "$("$CMAKE" --version | sed -n 's/^cmake version //p')" |
        sort -V | head -n 1)" != 3.24 ]; then
    echo "skip: whole-archive link through find_package (needs CMake 3.24's \$<LINK_LIBRARY>)"
  else
    mkdir -p "$T/whole"
    cat >"$T/whole/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.24)
project(qmesh_whole C)
find_package(qmesh REQUIRED)
add_executable(whole "$SRC/examples/encode.c")
target_link_libraries(whole PRIVATE "\$<LINK_LIBRARY:WHOLE_ARCHIVE,qmesh::qmesh>")
CM
    if run whole-configure.log "$CMAKE" -S "$T/whole" -B "$T/whole/b" -DCMAKE_PREFIX_PATH="$P" \
           -DCMAKE_C_COMPILER="$CC" && run whole-build.log "$CMAKE" --build "$T/whole/b"; then
      ok "all of libqmesh.a links through find_package(qmesh)"
    else
      bad "libqmesh.a --whole-archive through find_package(qmesh)"
    fi
  fi
fi

# the installed public headers compile as C++ too (a C++ program is a user as well)
CXX=${CXX:-c++}
if command -v "$CXX" >/dev/null 2>&1; then
  printf '#include <qmesh.h>\n#include <qmesh_dlpack.h>\nint main() { qm_status st; qm_status_clear(&st); return st.code; }\n' \
      > "$T/cxx.cpp"
  if run cxx.log "$CXX" -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$P/include" "$T/cxx.cpp"; then
    ok "include/qmesh.h and qmesh_dlpack.h compile as C++17"
  else
    bad "the installed headers do not compile as C++17"
  fi
fi

# the Python package, when this build has it: importable from where cmake --install put it
if [ -d "$BUILD/python/qmesh" ]; then
  init=$(find "$P" -path '*/qmesh/__init__.py' | head -n 1)
  PY=$(sed -n 's/^Python3_EXECUTABLE:[A-Z]*=//p' "$BUILD/CMakeCache.txt")
  if [ -n "$init" ] && [ -n "$PY" ] &&
     out=$(cd "$T" && PYTHONPATH=$(dirname "$(dirname "$init")") "$PY" -c \
           'import qmesh; print(qmesh.__file__); print(qmesh.encode([3.0, 4.0]).to_numpy().tolist())' 2>&1) &&
     [ "$(echo "$out" | sed -n 2p)" = "[(0.6000000000000001+0j), (0.8+0j)]" ] && # 3 * (1 / 5)
     case "$(echo "$out" | sed -n 1p)" in "$P"/*) true ;; *) false ;; esac; then
    ok "the installed Python package imports from the prefix and encodes [3, 4] to [3 * (1/5), 4 * (1/5)]"
  else
    bad "the installed Python package (init: ${init:-none}, python: ${PY:-none}): $out"
  fi
fi

# both binaries print exactly examples/encode.expected
for exe in "$T/ex/encode" "$T/encode-pc"; do
  [ -x "$exe" ] || continue
  if "$exe" >"$exe.out" 2>"$exe.err" && cmp -s "$exe.out" "$SRC/examples/encode.expected"; then
    ok "$(basename "$exe") prints examples/encode.expected"
  else
    bad "$(basename "$exe"): exit or stdout differs from examples/encode.expected"
    diff "$SRC/examples/encode.expected" "$exe.out" | head -n 20; head -n 20 "$exe.err"
  fi
done
echo "pass=$pass fail=$fail"
[ "$fail" -eq 0 ]
