#!/usr/bin/env bash
# //tests/stress:stress_timeline: the stress program (ticket, 3 producers,
# 2 workers) with KNIT_TIMELINE on; then the trace must pass the checker.
set -euo pipefail
stress="$1"
checker="$2"
out="${TEST_TMPDIR:-$(mktemp -d)}/stress.json"
export KNIT_TIMELINE="$out"
export KNIT_TIMELINE_EVENTS=16384
"$stress" --sched ticket --producers 3 --workers 2 --seed 2 --tasks 400000
unset KNIT_TIMELINE KNIT_TIMELINE_EVENTS
python3 "$checker" "$out" --check >"$out.check"
python3 - "$out.check" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
names = sorted(t["name"] for t in c["tracks"].values())
workers = [n for n in names if n.startswith("knit w")]
assert len(workers) == 2, names
assert sum(t.get("task", 0) for t in c["tracks"].values()) > 0, c
print(f"stress_timeline: {len(names)} tracks, {c['otherData']['events']} events kept, "
      f"{c['otherData']['dropped']} dropped: the trace is well formed")
PY
