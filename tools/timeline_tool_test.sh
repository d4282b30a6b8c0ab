#!/usr/bin/env bash
# //tools:timeline_tool_test: pgzip --timeline writes a trace; the tool
# validates it, summarises it and draws a PNG of the size asked for.
set -uo pipefail
tool="$1"
pgzip="$2"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
pass() { echo "PASS: $*"; }
fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# A small run of the built-in corpus: 2 workers, 64 KiB blocks.
if "$pgzip" -q --threads 2 --corpus-mib 8 --block 64K --timeline "$tmp/t.json" \
    >"$tmp/pgzip.out" 2>&1; then
    pass "pgzip --timeline ran"
else
    fail "pgzip --timeline: $(cat "$tmp/pgzip.out")"
fi

if "$tool" "$tmp/t.json" --check >"$tmp/check.json" 2>"$tmp/err"; then
    pass "--check: the trace is well formed"
else
    fail "--check: $(cat "$tmp/err")"
fi
# Per track counts: both workers ran pipeline items; 128 blocks went
# through 2 stages = 256 stage spans in all.
python3 - "$tmp/check.json" <<'PY' || failures=$((failures + 1))
import json, sys
c = json.load(open(sys.argv[1]))
tracks = c["tracks"].values()
workers = [t for t in tracks if t["name"].startswith("knit w")]
assert len(workers) == 2, f"want 2 worker tracks, got {[t['name'] for t in tracks]}"
stages = sum(t.get("stage", 0) for t in tracks)
assert stages == 128 * 2, f"stage spans: {stages}, want 256"
assert c["otherData"]["dropped"] == 0, c["otherData"]
assert c["counters"] >= 2 * 128, f"in-flight samples: {c['counters']}"
print("PASS: 2 worker tracks, 256 stage spans, nothing dropped")
PY

if "$tool" "$tmp/t.json" --png "$tmp/g.png" --size 900x350 >"$tmp/sum.txt" 2>"$tmp/err"; then
    pass "summary and PNG"
else
    fail "summary: $(cat "$tmp/err")"
fi
cat "$tmp/sum.txt"
for want in "knit w0 (ticket)" "knit w1 (ticket)" "longest tasks" "pipeline 1: input blocked" \
    "stage 0: 128 items" "stage 1: 128 items"; do
    if grep -qF "$want" "$tmp/sum.txt"; then pass "summary shows '$want'"; else fail "summary lacks '$want'"; fi
done
# PNG: the signature and the IHDR width and height.
python3 - "$tmp/g.png" <<'PY' || failures=$((failures + 1))
import struct, sys
b = open(sys.argv[1], "rb").read()
assert b[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
w, h = struct.unpack(">II", b[16:24])
assert (w, h) == (900, 350), f"PNG is {w}x{h}, want 900x350"
assert len(b) > 2000, f"PNG of {len(b)} bytes: empty?"
print(f"PASS: PNG {w}x{h}, {len(b)} bytes")
PY

# A broken trace is rejected with a message.
printf '{"traceEvents":[{"ph":"M","pid":1,"tid":1,"ts":0,"name":"thread_name","args":{"name":"t"}},{"ph":"X","pid":1,"tid":1,"ts":0,"name":"a"}],"otherData":{"knit_version":"x","sched":"s","threads":1,"capacity":16,"dropped":0}}' >"$tmp/bad.json"
if "$tool" "$tmp/bad.json" --check >/dev/null 2>"$tmp/err"; then
    fail "--check accepted a span without dur"
else
    pass "--check rejects a bad trace: $(cat "$tmp/err")"
fi
printf '{"traceEvents":[' >"$tmp/cut.json"
if "$tool" "$tmp/cut.json" --check >/dev/null 2>"$tmp/err"; then
    fail "--check accepted truncated JSON"
else
    pass "--check rejects truncated JSON"
fi

echo "timeline_tool_test: $failures failure(s)"
[[ $failures -eq 0 ]]
