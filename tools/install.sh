#!/usr/bin/env bash
# Installs knit for any build system (issue 14), or removes an install.
#
#   ./bazelw run //:install -- --prefix DIR [--libdir DIR] [--destdir DIR]
#   ./bazelw run //:install -- --uninstall --prefix DIR [--libdir DIR] [--destdir DIR]
#
#   --prefix DIR    where knit goes (relative: to the directory bazel was run
#                   from); headers in DIR/include/knit
#   --libdir DIR    libraries, pkgconfig/ and cmake/knit/ (default DIR/lib;
#                   relative: to the prefix, e.g. lib/x86_64-linux-gnu)
#   --destdir DIR   staging root for packagers: files go to DESTDIR/PREFIX/...
#                   while knit.pc and the CMake files still say PREFIX
#   --uninstall     remove exactly what the manifest of the install at these
#                   paths lists, then the directories that install created
#                   and that are empty again
#
# Installs libknit.so.X.Y.Z (SONAME libknit.so.X) with its two symlinks,
# libknit.a (position-independent), include/knit/*.h, pkgconfig/knit.pc,
# cmake/knit/knitConfig.cmake + knitConfigVersion.cmake, and the manifest
# PREFIX/share/knit/install_manifest.txt. As root, with no --destdir, into a
# directory the dynamic loader searches, it then runs ldconfig.
set -euo pipefail

die() { echo "install: $*" >&2; exit 2; }

prefix="" libdir="" destdir="" uninstall=0
while (($#)); do
  case $1 in
    --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
    --prefix=*) prefix=${1#*=}; shift ;;
    --libdir) libdir=${2:?--libdir needs a directory}; shift 2 ;;
    --libdir=*) libdir=${1#*=}; shift ;;
    --destdir) destdir=${2:?--destdir needs a directory}; shift 2 ;;
    --destdir=*) destdir=${1#*=}; shift ;;
    --uninstall) uninstall=1; shift ;;
    -h|--help) sed -n '2,22s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ -n $prefix ]] || die "--prefix DIR is required (see --help)"

# `bazel run` runs us in the runfiles tree; relative paths mean the
# directory the user ran bazel from.
base=${BUILD_WORKING_DIRECTORY:-$PWD}
abs() { case $1 in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$base/$1" ;; esac; }
# Lexical normalisation (no symlinks resolved, the path need not exist).
norm() {
  local IFS=/ part out=()
  for part in $1; do
    case $part in
      ''|.) ;;
      ..) ((${#out[@]})) && unset 'out[${#out[@]}-1]' ;;
      *) out+=("$part") ;;
    esac
  done
  printf '/%s\n' "${out[*]}"
}
prefix=$(norm "$(abs "$prefix")")
case $libdir in
  '') libdir=$prefix/lib ;;
  /*) ;;
  *) libdir=$prefix/$libdir ;;
esac
libdir=$(norm "$libdir")
includedir=$prefix/include
[[ -z $destdir ]] || destdir=$(norm "$(abs "$destdir")")
manifest=$prefix/share/knit/install_manifest.txt

# Runs ldconfig when this is an install into the system: root, no destdir,
# and libdir one of the directories the loader's cache covers.
maybe_ldconfig() {
  [[ $(id -u) == 0 && -z $destdir ]] || return 0
  local ldconfig=${KNIT_LDCONFIG:-ldconfig}  # tools/install_test.sh: a stand-in
  command -v "$ldconfig" >/dev/null || return 0
  local want d
  want=$(readlink -m "$libdir")
  while IFS= read -r d; do
    if [[ $(readlink -m "$d") == "$want" ]]; then
      echo "install: ldconfig ($libdir is a system library directory)"
      "$ldconfig"
      return 0
    fi
  done < <("$ldconfig" -vNX 2>/dev/null | sed -n 's/^\([^[:space:]][^:]*\):.*/\1/p')
}

# ---- uninstall ------------------------------------------------------------
if ((uninstall)); then
  [[ -f $destdir$manifest ]] ||
    die "no install found: $destdir$manifest does not exist"
  dirs=()
  while read -r kind path; do
    case $kind in
      f|l)
        if [[ -e $destdir$path || -L $destdir$path ]]; then
          rm -f -- "$destdir$path"
        else
          echo "install: already gone: $destdir$path" >&2
        fi ;;
      d) dirs+=("$path") ;;
      '#'*|'') ;;
      *) die "bad manifest line: $kind $path" ;;
    esac
  done < "$destdir$manifest"
  rm -f -- "$destdir$manifest"
  # Directories the install created, deepest first, if empty again.
  for ((i = ${#dirs[@]} - 1; i >= 0; i--)); do
    rmdir -- "$destdir${dirs[i]}" 2>/dev/null || true
  done
  maybe_ldconfig
  echo "install: removed knit from $destdir$prefix"
  exit 0
fi

# ---- install --------------------------------------------------------------
# Our files, in the runfiles tree (knit's own workspace or @knit).
runfiles=${RUNFILES_DIR:-$0.runfiles}
src=""
for d in "$runfiles"/*/; do
  if [[ -f $d/knit.version && -f $d/tools/knit.pc.in ]]; then src=${d%/}; break; fi
done
[[ -n $src ]] || die "cannot find knit's files under $runfiles (run me with bazel run //:install)"

version=$(cat "$src/knit.version")
[[ $version =~ ^([0-9]+)\.([0-9]+)\.([0-9]+)$ ]] || die "bad version '$version'"
major=${BASH_REMATCH[1]}
minor=${BASH_REMATCH[2]}
so=libknit.so.$version
soname=libknit.so.$major
archive=$src/libknit_impl.a  # compiled with -fPIC (BUILD)
[[ -f $archive ]] || die "no libknit_impl.a in $src"

# Paths as the installed files see them: under the prefix when possible,
# so that moving the prefix keeps the CMake package working.
rel_to_prefix() {
  case $1 in
    "$prefix") printf '\n' ;;
    "$prefix"/*) printf '%s\n' "${1#"$prefix"/}" ;;
    *) return 1 ;;
  esac
}
if libdir_rel=$(rel_to_prefix "$libdir"); then pc_libdir="\${prefix}/$libdir_rel"; else pc_libdir=$libdir; libdir_rel=""; fi
pc_libdir=${pc_libdir%/}
# knitConfig.cmake finds the prefix from its own directory, LIBDIR/cmake/knit,
# so the installed tree can be moved; a libdir outside the prefix is written
# as is (that tree is not relocatable).
if [[ -n $libdir_rel || $libdir == "$prefix" ]]; then
  up=".."  # cmake/knit -> libdir
  up="$up/.."
  IFS=/ read -ra parts <<<"$libdir_rel"
  for part in "${parts[@]}"; do [[ -z $part ]] || up="$up/.."; done
  cmake_prefix="\${CMAKE_CURRENT_LIST_DIR}/$up"
  cmake_libdir="\${_knit_prefix}${libdir_rel:+/$libdir_rel}"
else
  cmake_prefix=$prefix
  cmake_libdir=$libdir
fi

entries=()
created=()
mkdirs() { # records the directories it creates
  local d=$1 missing=()
  while [[ ! -d $destdir$d ]]; do missing=("$d" "${missing[@]}"); d=$(dirname "$d"); done
  for d in "${missing[@]}"; do mkdir -- "$destdir$d"; created+=("$d"); done
}
put() { # put MODE SOURCE DEST
  mkdirs "$(dirname "$3")"
  install -m "$1" -- "$2" "$destdir$3"
  entries+=("f $3")
}
link() { # link TARGET DEST
  mkdirs "$(dirname "$2")"
  ln -sfn -- "$1" "$destdir$2"
  entries+=("l $2")
}
fill() { # fill TEMPLATE DEST: substitutes the @...@ words
  local tmp
  tmp=$(mktemp)
  sed -e "s|@PREFIX@|$prefix|g" -e "s|@LIBDIR@|$pc_libdir|g" \
      -e "s|@VERSION@|$version|g" -e "s|@MAJOR@|$major|g" -e "s|@MINOR@|$minor|g" \
      -e "s|@SO@|$so|g" -e "s|@SONAME@|$soname|g" \
      -e "s|@CMAKE_PREFIX@|$cmake_prefix|g" -e "s|@CMAKE_LIBDIR@|$cmake_libdir|g" \
      "$1" > "$tmp"
  put 0644 "$tmp" "$2"
  rm -f "$tmp"
}

[[ -z $destdir ]] || mkdir -p -- "$destdir"  # the packager's, not recorded
# Installing over an earlier install: keep the directories it created, so
# that --uninstall still removes them.
if [[ -f $destdir$manifest ]]; then
  while read -r kind path; do
    [[ $kind != d ]] || created+=("$path")
  done < "$destdir$manifest"
fi
put 0755 "$src/libknit.so" "$libdir/$so"
link "$so" "$libdir/$soname"
link "$soname" "$libdir/libknit.so"
put 0644 "$archive" "$libdir/libknit.a"
for h in "$src"/include/knit/*.h; do
  put 0644 "$h" "$includedir/knit/$(basename "$h")"
done
fill "$src/tools/knit.pc.in" "$libdir/pkgconfig/knit.pc"
fill "$src/tools/knitConfig.cmake.in" "$libdir/cmake/knit/knitConfig.cmake"
fill "$src/tools/knitConfigVersion.cmake.in" "$libdir/cmake/knit/knitConfigVersion.cmake"

# The manifest: files and links, then the directories this install made.
mkdirs "$(dirname "$manifest")"
{
  echo "# knit $version: installed by //:install; remove with --uninstall"
  printf '%s\n' "${entries[@]}"
  for d in "${created[@]}"; do echo "d $d"; done
} > "$destdir$manifest"

maybe_ldconfig
echo "install: knit $version into $destdir$prefix (libdir $libdir); manifest $manifest"
