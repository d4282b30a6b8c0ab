#!/usr/bin/env bash
# The folders depend downward only (DESIGN.md, "Layers"):
#   runtime/  may include  payload/, base/ (it reaches the disciplines in
#             sched/ through the plugin ABI, <knit/sched.h>, only)
#   sched/    may include  runtime/carpet.h (the lane core), base/
#   payload/  may include  base/ (a leaf above it: nothing in runtime/)
#   base/     may include  nothing of knit's but <knit/*.h>
# and no two folders include each other. Reads the sources' #include
# lines; prints every offending line.
set -uo pipefail
root=${TEST_SRCDIR:-}/${TEST_WORKSPACE:-}
[[ -d $root/base ]] || root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

allowed() { # from-folder to-path
  local from=$1 to=$2
  case "$to" in knit/*) return 0 ;; esac
  local dir=${to%%/*}
  [[ $dir == "$from" ]] && return 0
  case "$from" in
    runtime) [[ $dir == base || $dir == payload ]] ;;
    sched) [[ $dir == base || $to == runtime/carpet.h ]] ;;
    payload) [[ $dir == base ]] ;;
    base) return 1 ;;
    *) return 1 ;;
  esac
}

bad=0 edges=0
declare -A pair=()
for f in base/* payload/* runtime/* sched/*; do
  from=${f%%/*}
  while IFS= read -r to; do
    edges=$((edges + 1))
    dir=${to%%/*}
    [[ $dir != knit && $dir != "$from" ]] && pair["$from>$dir"]=1
    if ! allowed "$from" "$to"; then
      echo "layers: $f includes \"$to\": $from/ may not depend on it"
      bad=$((bad + 1))
    fi
  done < <(sed -n 's/^#include "\([^"]*\)".*/\1/p' "$f")
done
for k in "${!pair[@]}"; do
  a=${k%%>*} b=${k##*>}
  if [[ -n ${pair["$b>$a"]:-} ]]; then
    echo "layers: $a/ and $b/ include each other"
    bad=$((bad + 1))
  fi
done
if ((edges < 50)); then
  echo "layers: only $edges #include lines found under $root: wrong directory?"
  exit 1
fi
if ((bad)); then
  echo "layers: $bad problem(s)"
  exit 1
fi
echo "layers: ok ($edges #include lines, folders: ${!pair[*]})"
