#!/usr/bin/env bash
# //tools:timeline: runs tools/timeline.py (python3) on a knit timeline.
#   ./bazelw run //tools:timeline -- trace.json [--png out.png] [--check]
# Under `bazel run` relative paths are the caller's: go back to its directory.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
script=""
for c in "${RUNFILES_DIR:-$0.runfiles}/knit/tools/timeline.py" \
    "$0.runfiles/knit/tools/timeline.py" "$here/timeline.py"; do
    if [[ -f "$c" ]]; then
        script="$c"
        break
    fi
done
if [[ -z "$script" ]]; then
    echo "timeline: cannot find timeline.py next to $0" >&2
    exit 1
fi
if [[ -n "${BUILD_WORKING_DIRECTORY:-}" ]]; then cd "$BUILD_WORKING_DIRECTORY"; fi
exec python3 "$script" "$@"
