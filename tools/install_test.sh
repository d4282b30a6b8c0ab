#!/usr/bin/env bash
# The install, tested as a user outside Bazel would use it (issue 14).
#
#   bash tools/install_test.sh        (from the repository; .ci/run calls it)
#
# Installs with `./bazelw run //:install` into a temporary prefix, checks the
# shared library (SONAME, NEEDED, no RPATH, exports = the functions the
# installed headers declare), builds tests/install/app.c with cc +
# pkg-config (shared; fully static with --static; clang too; ASan), with
# CMake find_package(knit) from a moved copy of the prefix (knit::knit and
# knit::knit_static), compiles the headers as C++ with g++ and clang++,
# checks the default thread count under taskset, installs again through
# --destdir and --libdir, and uninstalls both, checking that each tree is as
# it was. Each check is one case; the last line is
# "install: N passed, M failed"; the exit status is non-zero on a failure.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

passed=0
failed=0
pass() { echo "install: PASS $1"; passed=$((passed + 1)); }
fail() { echo "install: FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
# check NAME COMMAND...: one case, passed iff the command succeeds.
check() {
  local name=$1 out
  shift
  if out=$("$@" 2>&1); then pass "$name"; else fail "$name" "$(tail -5 <<<"$out")"; fi
}
finish() {
  echo "install: $passed passed, $failed failed"
  ((failed == 0))
  exit $?
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/knit-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
export CC=${CC:-cc}

# A prefix that already holds someone else's files: uninstall must leave
# them, and only them.
mkdir -p "$prefix/lib/pkgconfig" "$prefix/share/doc/other"
echo other > "$prefix/lib/pkgconfig/other.pc"
echo other > "$prefix/share/doc/other/README"
before=$(cd "$prefix" && find . | sort)

# ---- install ----
if ./bazelw run //:install -- --prefix "$prefix" > "$tmp/install.log" 2>&1; then
  pass "install --prefix"
else
  fail "install --prefix" "$(tail -20 "$tmp/install.log")"
  finish
fi
lib=$prefix/lib
hdr=$prefix/include/knit/knit.h
v() { sed -n "s/^#define KNIT_VERSION_$1 \([0-9][0-9]*\)$/\1/p" "$hdr"; }
version="$(v MAJOR).$(v MINOR).$(v PATCH)"
major=$(v MAJOR)
so=$lib/libknit.so.$version

files_ok() {
  local f
  for f in "$so" "$lib/libknit.a" "$lib/pkgconfig/knit.pc" \
           "$lib/cmake/knit/knitConfig.cmake" \
           "$lib/cmake/knit/knitConfigVersion.cmake" \
           "$prefix/include/knit/knit.h" "$prefix/include/knit/sched.h" \
           "$prefix/include/knit/error.h" \
           "$prefix/share/knit/install_manifest.txt"; do
    [[ -f $f ]] || { echo "missing $f"; return 1; }
  done
  [[ $(readlink "$lib/libknit.so.$major") == "libknit.so.$version" ]] || { echo "libknit.so.$major"; return 1; }
  [[ $(readlink "$lib/libknit.so") == "libknit.so.$major" ]] || { echo "libknit.so"; return 1; }
  [[ $(readlink -f "$lib/libknit.so") == "$(readlink -f "$so")" ]]
  # The installed headers are exactly the public ones.
  diff <(cd "$repo/include/knit" && ls) <(cd "$prefix/include/knit" && ls)
}
check "files and symlinks (version $version)" files_ok

dyn=$(readelf -d "$so")
check "SONAME is libknit.so.$major" grep -q "(SONAME).*\[libknit.so.$major\]" <<<"$dyn"
check "NEEDED has libjemalloc" grep -q "(NEEDED).*\[libjemalloc.so" <<<"$dyn"
check "NEEDED has no libstdc++" bash -c '! grep -q "(NEEDED).*libstdc++" <<<"$1"' _ "$dyn"
check "no RPATH/RUNPATH" bash -c '! grep -Eq "\((RPATH|RUNPATH)\)" <<<"$1"' _ "$dyn"

# The exported functions, and the functions the installed headers declare
# (preprocessed, so comments and macros are gone; a name followed by "(" is
# a declaration, "(*name)(" a function pointer type).
# Global symbols only (an upper-case type): a hidden thread-local stays in
# the dynamic table as a LOCAL symbol for its TLS relocation, not exported.
nm -D --defined-only "$so" | awk '$2 ~ /^[A-Z]$/ {print $3}' | sed 's/@.*//' | sort -u > "$tmp/exports"
printf '#include <knit/knit.h>\n' |
  $CC -std=c11 -E -P -I"$prefix/include" -x c - |
  grep -o '[(*[:space:]]knit_[a-z][a-z0-9_]*[[:space:]]*(' |
  grep -v '^(' | sed 's/^[*[:space:]]//; s/[[:space:]]*($//' | sort -u > "$tmp/declared"
exports_ok() {
  [[ -s $tmp/declared ]] || { echo "no declarations found"; return 1; }
  diff "$tmp/declared" "$tmp/exports"
}
check "exports ($(wc -l < "$tmp/exports")) = the headers' functions ($(wc -l < "$tmp/declared"))" exports_ok

# libknit.a holds an object for every library source file...
archive_ok() {
  diff <(cd "$repo" && ls base/*.c payload/*.c runtime/*.c sched/*.c | xargs -n1 basename | sed 's/\.c$/.o/' | sort) \
       <(ar t "$lib/libknit.a" | sed 's/\.pic\.o$/.o/' | sort)
}
check "libknit.a: one object per library source" archive_ok
# ...and is position-independent: it links into a shared object.
check "libknit.a is PIC (links into a .so)" \
  $CC -shared -o "$tmp/libwhole.so" -Wl,--whole-archive "$lib/libknit.a" \
  -Wl,--no-whole-archive -ljemalloc -pthread -Wl,-z,defs

export PKG_CONFIG_PATH=$lib/pkgconfig
check "pkg-config --modversion knit = $version" \
  bash -c '[[ $(pkg-config --modversion knit) == "$1" ]]' _ "$version"

app_srcs=("$repo/tests/install/app.c" "$repo/examples/lock_sched.c")
cflags=(-std=c11 -Wall -Wextra -Werror -pedantic -I"$repo")
# run_app NAME EXE [env...]: runs it, checks the result line.
expect=""
run_app() {
  local name=$1 exe=$2 out
  shift 2
  if ! out=$(env "$@" "$exe" 2>&1); then fail "$name runs" "$(tail -5 <<<"$out")"; return 1; fi
  local sum
  sum=$(sed -n 's/^install_app: ok knit \([^ ]*\) checksum \(.*\)$/\1 \2/p' <<<"$out")
  if [[ -z $sum ]]; then fail "$name runs" "no result line: $(tail -3 <<<"$out")"; return 1; fi
  if [[ -z $expect ]]; then expect=$sum; fi
  if [[ $sum == "$expect" && $sum == "$version "* ]]; then
    pass "$name runs ($sum)"
  else
    fail "$name runs" "got '$sum', want '$expect'"
  fi
}

# ---- shared, through pkg-config ----
shared_build() {
  # shellcheck disable=SC2046
  $CC "${cflags[@]}" "${app_srcs[@]}" $(pkg-config --cflags --libs knit) -o "$tmp/app_so" &&
    readelf -d "$tmp/app_so" | grep -q "(NEEDED).*\[libknit.so.$major\]"
}
if check "cc + pkg-config knit: shared build, NEEDED libknit.so.$major" shared_build; then
  run_app "shared app" "$tmp/app_so" LD_LIBRARY_PATH="$lib"
  # The point of the allocator audit: this app's malloc is glibc's, not
  # jemalloc's, and it still passed (nothing crossed between them).
  check "shared app: malloc is glibc's (jemalloc only serves the arena)" \
    bash -c '[[ $(LD_LIBRARY_PATH=$1 $2 --malloc) == libc.so.6 ]]' _ "$lib" "$tmp/app_so"
  check "threads = 0 under taskset -c 0: one worker" \
    bash -c '[[ $(LD_LIBRARY_PATH=$1 taskset -c 0 $2 --threads) == 1 ]]' _ "$lib" "$tmp/app_so"
  check "threads = 0: the affinity CPUs ($(nproc)), or fewer under a cgroup quota" \
    bash -c 'n=$(LD_LIBRARY_PATH=$1 $2 --threads); ((n >= 1 && n <= $(nproc)))' _ "$lib" "$tmp/app_so"
fi

clang_build() {
  # shellcheck disable=SC2046
  clang "${cflags[@]}" "${app_srcs[@]}" $(pkg-config --cflags --libs knit) -o "$tmp/app_clang"
}
if check "clang + pkg-config knit: shared build" clang_build; then
  run_app "clang app" "$tmp/app_clang" LD_LIBRARY_PATH="$lib"
fi

asan_build() {
  # shellcheck disable=SC2046
  $CC "${cflags[@]}" -g -fsanitize=address -fno-omit-frame-pointer "${app_srcs[@]}" \
    $(pkg-config --cflags --libs knit) -o "$tmp/app_asan"
}
if check "cc -fsanitize=address + pkg-config knit: shared build" asan_build; then
  run_app "ASan app" "$tmp/app_asan" LD_LIBRARY_PATH="$lib" ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
fi

# ---- static, through pkg-config --static ----
static_build() {
  # shellcheck disable=SC2046
  $CC "${cflags[@]}" -static "${app_srcs[@]}" $(pkg-config --cflags --libs --static knit) \
    -o "$tmp/app_static" &&
    ! readelf -d "$tmp/app_static" | grep -q "(NEEDED).*libknit"
}
if check "cc -static + pkg-config --static knit: no libknit in NEEDED" static_build; then
  run_app "static app" "$tmp/app_static"
fi

# ---- C++ ----
cat > "$tmp/cxx.cc" <<'EOF'
#include <knit/knit.h>
int main() {
    knit_pool_options o = KNIT_POOL_OPTIONS_INIT;
    knit_pipeline_options p = KNIT_PIPELINE_OPTIONS_INIT;
    return o.size == sizeof o && p.size == sizeof p ? 0 : 1;
}
EOF
for cxx in g++ clang++; do
  check "$cxx -Wall -Wextra -Werror -pedantic: <knit/knit.h> as C++, INIT macros" \
    bash -c '$1 -std=c++17 -Wall -Wextra -Werror -pedantic -I"$2" "$3" -o "$4" && "$4"' _ \
    $cxx "$prefix/include" "$tmp/cxx.cc" "$tmp/cxx_$cxx"
done

# ---- CMake, from a moved copy of the prefix (relocatable) ----
moved=$tmp/moved
cp -a "$prefix" "$moved"
cmake_build() {
  cmake -S "$repo/tests/install" -B "$tmp/cmake" -DCMAKE_PREFIX_PATH="$moved" \
    -DKNIT_SRC="$repo" -DCMAKE_BUILD_TYPE=Release &&
    cmake --build "$tmp/cmake" &&
    grep -q "knit_DIR:PATH=$moved/lib/cmake/knit" "$tmp/cmake/CMakeCache.txt"
}
if check "cmake find_package(knit) from a moved prefix: both targets build" cmake_build; then
  check "knit::knit: NEEDED libknit.so.$major" \
    bash -c 'readelf -d "$1" | grep -q "(NEEDED).*\[libknit.so.$2\]"' _ "$tmp/cmake/app_cmake_shared" "$major"
  check "knit::knit_static: no libknit in NEEDED" \
    bash -c '! readelf -d "$1" | grep -q "(NEEDED).*libknit"' _ "$tmp/cmake/app_cmake_static"
  run_app "CMake knit::knit app" "$tmp/cmake/app_cmake_shared" LD_LIBRARY_PATH="$moved/lib"
  run_app "CMake knit::knit_static app" "$tmp/cmake/app_cmake_static"
fi
version_reject() {
  mkdir -p "$tmp/cmv" && cat > "$tmp/cmv/CMakeLists.txt" <<EOF
cmake_minimum_required(VERSION 3.13)
project(v C)
find_package(knit $((major + 1)).0 QUIET)
if(knit_FOUND)
  message(FATAL_ERROR "knit $((major + 1)).0 accepted by $version")
endif()
find_package(knit $version EXACT REQUIRED)
EOF
  cmake -S "$tmp/cmv" -B "$tmp/cmv/b" -DCMAKE_PREFIX_PATH="$moved"
}
check "knitConfigVersion.cmake: accepts $version exactly, refuses $((major + 1)).0" version_reject

# ---- uninstall (after installing a second time over the first) ----
uninstall_ok() {
  ./bazelw run //:install -- --prefix "$prefix" &&
    ./bazelw run //:install -- --uninstall --prefix "$prefix" &&
    diff <(echo "$before") <(cd "$prefix" && find . | sort) &&
    ! ./bazelw run //:install -- --uninstall --prefix "$prefix"  # nothing left to remove
}
check "reinstall, then uninstall leaves the prefix as it was" uninstall_ok

# ---- ldconfig: only as root, without --destdir, into a loader directory ----
# A stand-in ldconfig ($KNIT_LDCONFIG; not PATH, which would make Bazel
# rebuild everything): `-vNX` lists $FAKE_LDSO_DIR as the loader's
# one directory; any other call is logged.
if [[ $(id -u) == 0 ]]; then
  mkdir -p "$tmp/fakebin"
  printf '%s\n' '#!/bin/sh' \
    'if [ "$1" = -vNX ]; then echo "$FAKE_LDSO_DIR: (from fake.conf:1)"; exit 0; fi' \
    'echo "ldconfig $*" >> "$FAKE_LDSO_LOG"' > "$tmp/fakebin/ldconfig"
  chmod +x "$tmp/fakebin/ldconfig"
  ldconfig_cases() {
    local p=$tmp/sys
    export FAKE_LDSO_LOG=$tmp/ldconfig.log
    : > "$FAKE_LDSO_LOG"
    run_with() { FAKE_LDSO_DIR=$1 KNIT_LDCONFIG=$tmp/fakebin/ldconfig ./bazelw run //:install -- "${@:2}"; }
    calls() { [[ $(wc -l < "$FAKE_LDSO_LOG") == "$1" ]] || { echo "ldconfig ran $(wc -l < "$FAKE_LDSO_LOG") times, want $1"; return 1; }; }
    # A loader directory: ldconfig runs after install and after uninstall.
    run_with "$p/lib" --prefix "$p" && calls 1 &&
      run_with "$p/lib" --uninstall --prefix "$p" && calls 2 &&
      # Not a loader directory, or staged with --destdir: no ldconfig.
      run_with /nowhere --prefix "$p" && run_with /nowhere --uninstall --prefix "$p" &&
      run_with "$p/lib" --destdir "$tmp/st2" --prefix "$p" && calls 2
  }
  check "ldconfig runs as root into a loader directory, not otherwise" ldconfig_cases
else
  echo "install: SKIP the ldconfig case (not root)"
fi

# ---- --destdir and --libdir (a packager's staging install) ----
stage=$tmp/stage
staged() {
  local p=/opt/knit-test multi=lib/x86_64-linux-gnu
  ./bazelw run //:install -- --destdir "$stage" --prefix $p --libdir $multi &&
    [[ -f $stage$p/$multi/libknit.so.$version && -f $stage$p/include/knit/knit.h ]] &&
    [[ ! -e $p ]] &&
    grep -qx "prefix=$p" "$stage$p/$multi/pkgconfig/knit.pc" &&
    grep -qx "libdir=\${prefix}/$multi" "$stage$p/$multi/pkgconfig/knit.pc" &&
    # The staged tree is found by CMake where it lies (relocatable).
    mkdir -p "$tmp/cms" && cat > "$tmp/cms/CMakeLists.txt" <<'EOF' &&
cmake_minimum_required(VERSION 3.13)
project(s C)
find_package(knit REQUIRED)
get_target_property(loc knit::knit IMPORTED_LOCATION)
if(NOT EXISTS "${loc}")
  message(FATAL_ERROR "knit::knit points at ${loc}")
endif()
message(STATUS "knit::knit at ${loc}")
EOF
    cmake -S "$tmp/cms" -B "$tmp/cms/b" -DCMAKE_PREFIX_PATH="$stage$p" > "$tmp/cms/log" &&
    grep -q "knit::knit at $stage$p/$multi/libknit.so.$version" "$tmp/cms/log" &&
    ./bazelw run //:install -- --uninstall --destdir "$stage" --prefix $p --libdir $multi &&
    [[ -z $(ls -A "$stage") ]]
}
check "--destdir + --libdir: staged, pkg-config and CMake paths, uninstalled to empty" staged

finish
