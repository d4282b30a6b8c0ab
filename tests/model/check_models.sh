#!/usr/bin/env bash
# Checks the Promela models of knit's concurrency protocols with spin.
#
# For each check: spin -a (with -D flags), gcc pan.c, run pan, parse it.
# A correct model must report "errors: 0" over a complete search (no depth
# or memory truncation); a seeded-bug variant must report errors > 0.
# Prints one line per check and exits non-zero if any check is wrong.
#
# Usage: tests/model/check_models.sh [-j JOBS] [-k]   (-k keeps the work dir)
# Under Bazel (sh_test) it works in $TEST_TMPDIR and finds the models in
# its runfiles; by hand it uses mktemp -d and the directory of the script.
set -u

jobs=2
keep=0
while [ $# -gt 0 ]; do
    case "$1" in
        -j) jobs="$2"; shift 2 ;;
        -k) keep=1; shift ;;
        *) echo "usage: $0 [-j JOBS] [-k]" >&2; exit 2 ;;
    esac
done

if ! command -v spin >/dev/null 2>&1; then
    echo "check_models.sh: spin not found on PATH ($PATH)." >&2
    echo "Install it (Debian: apt-get install spin) and run again." >&2
    exit 1
fi
CC="${CC:-gcc}"
if ! command -v "$CC" >/dev/null 2>&1; then
    echo "check_models.sh: C compiler '$CC' not found (needed to build pan)." >&2
    exit 1
fi

# Where the .pml files are: next to this script (by hand) or in the runfiles.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
models=""
for d in "$here" "${TEST_SRCDIR:-}/${TEST_WORKSPACE:-}/tests/model" \
         "${RUNFILES_DIR:-}/${TEST_WORKSPACE:-}/tests/model"; do
    if [ -f "$d/lane.pml" ]; then models="$d"; break; fi
done
if [ -z "$models" ]; then
    echo "check_models.sh: cannot find lane.pml (looked in $here and runfiles)" >&2
    exit 1
fi

if [ -n "${TEST_TMPDIR:-}" ]; then
    work="$TEST_TMPDIR/models"
    mkdir -p "$work"
else
    work="$(mktemp -d "${TMPDIR:-/tmp}/knit-models.XXXXXX")"
    [ "$keep" = 1 ] || trap 'rm -rf "$work"' EXIT
fi

# model  consumers  variant  expect  mode   -D flags for spin
# expect: pass (errors: 0, complete search) or fail (errors > 0).
# fork_deque: BUG_SLOT_REUSE is the join of a stolen frame as first
# written (ts reset before the wait; found by this model), fixed by the
# pre-leap wait.
# submit_credits: FUTEX is the C futex wait at the bound, without its
# 1 ms timeout (see the header of submit_credits.pml); 3 callers at MAX 4
# without LATE_DESTROY do not fit in 4 GB, so the pass rows are 2 callers
# at MAX 2 (where one refill fills the bound) and 3 with LATE_DESTROY.
# carpet_handover: NO_TIMEOUT is not a seeded bug of the model but the C
# code without the 1 ms bound of its carpet wait: it must hang (see the
# header of carpet_handover.pml).
# mode:   safety (assertions, invalid end states) or np (non-progress
#         cycles under weak fairness).
checks=$(cat <<'LIST'
lane      1 ok                  pass safety
lane      2 ok                  pass safety
lane      3 ok                  pass safety
lane      1 BUG_PUBLISH_FIRST   fail safety -DBUG_PUBLISH_FIRST
lane      3 BUG_PUBLISH_FIRST   fail safety -DBUG_PUBLISH_FIRST
lane      1 BUG_RETIRE_FIRST    fail safety -DBUG_RETIRE_FIRST
lane      3 BUG_RETIRE_FIRST    fail safety -DBUG_RETIRE_FIRST
ticket    1 ok                  pass safety
ticket    2 ok                  pass safety
ticket    3 ok                  pass safety
ticket    1 close               pass safety -DCLOSE
ticket    2 close               pass safety -DCLOSE
ticket    1 BUG_TAIL_FIRST      fail safety -DBUG_TAIL_FIRST
ticket    3 BUG_TAIL_FIRST      fail safety -DBUG_TAIL_FIRST
dekker    1 ok                  pass safety
dekker    2 ok                  pass safety
dekker    3 ok,npub=3           pass safety -DNPUB=3
dekker    1 rl=2                pass safety -DRL=2
dekker    2 rl=2                pass safety -DRL=2
dekker    2 death               pass safety -DDEATH
dekker    2 hint,progress       pass np     -DHINT
dekker    2 BUG_NOFENCE         fail safety -DBUG_NOFENCE
dekker    3 BUG_NOFENCE         fail safety -DBUG_NOFENCE
dekker    2 BUG_STALE_LIVE      fail safety -DDEATH -DBUG_STALE_LIVE
doorbell  1 ok                  pass safety
doorbell  2 ok                  pass safety
doorbell  3 ok,npub=2           pass safety -DNPUB=2
doorbell  1 BUG_RECHECK_FIRST   fail safety -DBUG_RECHECK_FIRST
doorbell  2 BUG_RECHECK_FIRST   fail safety -DBUG_RECHECK_FIRST
doorbell  3 BUG_RECHECK_FIRST   fail safety -DBUG_RECHECK_FIRST
doorbell  1 asym                pass safety -DASYM
doorbell  2 asym                pass safety -DASYM
doorbell  3 asym,npub=2         pass safety -DASYM -DNPUB=2
doorbell  1 BUG_NO_MEMBARRIER   fail safety -DASYM -DBUG_NO_MEMBARRIER
doorbell  2 BUG_NO_MEMBARRIER   fail safety -DASYM -DBUG_NO_MEMBARRIER
doorbell  2 blocking            pass safety -DBLOCKING
doorbell  2 asym,blocking       pass safety -DASYM -DBLOCKING
doorbell  2 asym,blocking,npub=3 pass safety -DASYM -DBLOCKING -DNPUB=3
doorbell  2 BUG_SPIN_NO_FENCE   fail safety -DASYM -DBLOCKING -DBUG_SPIN_NO_FENCE
carpet_handover 1 ok                  pass safety
carpet_handover 1 full                pass safety -DPRE=4 -DNA=0 -DNB=2
carpet_handover 1 ok,progress         pass np
carpet_handover 1 BUG_NO_HOLD         fail safety -DBUG_NO_HOLD
carpet_handover 1 BUG_EARLY_RELEASE   fail safety -DBUG_EARLY_RELEASE
carpet_handover 1 BUG_NO_TAKER        fail np     -DBUG_NO_TAKER
carpet_handover 1 full,BUG_NO_TAKER   fail np     -DPRE=4 -DNA=0 -DNB=2 -DBUG_NO_TAKER
carpet_handover 1 NO_TIMEOUT          fail safety -DNO_TIMEOUT
fork_deque 1 preleap            pass safety
fork_deque 2 preleap            pass safety
fork_deque 2 preleap,cap=2      pass safety -DCAP=2
fork_deque 2 BUG_SLOT_REUSE     fail safety -DFIX=0
fork_deque 2 BUG_SHRINK_STORE   fail safety -DBUG=1
fork_deque 2 BUG_RESET_NOCAS    fail safety -DBUG=2
fork_deque 2 BUG_CELL_FIRST     fail safety -DBUG=3
group_wait 1 ok                 pass safety -DNM=1
group_wait 2 ok                 pass safety -DNM=2
group_wait 3 ok                 pass safety -DNM=3
group_wait 2 BUG_PLAIN_DROP     fail safety -DNM=2 -DBUG_PLAIN_DROP
group_wait 2 BUG_WATCHED_FIRST  fail safety -DNM=2 -DBUG_WATCHED_FIRST
group_wait 2 kept,nw=1           pass safety -DNM=1 -DNW=1 -DKM=2
group_wait 3 kept,nw=2           pass safety -DNM=1 -DNW=2 -DKM=2
group_wait 2 kept,km=3           pass safety -DNM=0 -DNW=2 -DKM=3
group_wait 2 BUG_LAST_IS_ONE     fail safety -DNM=1 -DNW=1 -DKM=2 -DBUG_LAST_IS_ONE
group_wait 2 BUG_KEEP_ACROSS_OTHER fail safety -DNM=1 -DNW=1 -DKM=2 -DBUG_KEEP_ACROSS_OTHER
group_wait 2 BUG_KEEP_WHEN_IDLE  fail safety -DNM=1 -DNW=1 -DKM=2 -DBUG_KEEP_WHEN_IDLE
group_wait 2 kept,BUG_WATCHED_FIRST fail safety -DNM=0 -DNW=2 -DKM=2 -DBUG_WATCHED_FIRST
pool_enter 1 ok                 pass safety
pool_enter 2 ok                 pass safety
pool_enter 3 ok                 pass safety
pool_enter 2 overflow           pass safety -DSLOTS=0
pool_enter 2 BUG_STATE_FIRST    fail safety -DBUG_STATE_FIRST
pool_enter 2 BUG_FLAT_DEPTH     fail safety -DBUG_FLAT_DEPTH
submit_credits 2 ok              pass safety -DR=2 -DS=1
submit_credits 2 r1,s2           pass safety -DR=1 -DS=2
submit_credits 3 ok              pass safety -DR=1 -DS=1
submit_credits 2 late            pass safety -DR=2 -DS=1 -DLATE_DESTROY
submit_credits 3 idle,late       pass safety -DR=1 -DS=1 -DLATE_DESTROY
submit_credits 3 no-half,no-reclaim pass safety -DR=1 -DS=1 -DLATE_DESTROY -DNO_HALF -DNO_RECLAIM
submit_credits 2 no-reclaim      pass safety -DR=2 -DS=1 -DNO_RECLAIM
submit_credits 2 BUG_REVOKE_INSIDE fail safety -DR=2 -DS=1 -DBUG_REVOKE_INSIDE
submit_credits 2 BUG_EXIT_DROPS  fail safety -DR=2 -DS=1 -DBUG_EXIT_DROPS
submit_credits 2 BUG_NO_STATE_CHECK fail safety -DR=2 -DS=1 -DBUG_NO_STATE_CHECK
submit_credits 2 BUG_NO_ROOM     fail safety -DR=2 -DS=1 -DMAX=2 -DBUG_NO_ROOM
submit_credits 2 BUG_CAS_RELOAD  fail safety -DR=2 -DS=1 -DBUG_CAS_RELOAD
submit_credits 2 futex,max2      pass safety -DR=1 -DS=1 -DMAX=2 -DFUTEX
submit_credits 2 futex,max2,s2   pass safety -DR=1 -DS=2 -DMAX=2 -DFUTEX
submit_credits 3 futex,late      pass safety -DR=1 -DS=1 -DFUTEX -DLATE_DESTROY
submit_credits 2 BUG_NO_STATE_RECHECK fail safety -DR=1 -DS=1 -DMAX=2 -DFUTEX -DBUG_NO_STATE_RECHECK
submit_credits 3 BUG_NO_STATE_RECHECK fail safety -DR=1 -DS=1 -DFUTEX -DBUG_NO_STATE_RECHECK
LIST
)

# run_check INDEX MODEL CONSUMERS VARIANT EXPECT MODE FLAGS...
# Writes one result line to $work/result.INDEX.
run_check() {
    local idx="$1" model="$2" ncons="$3" variant="$4" expect="$5" mode="$6"
    shift 6
    local dir="$work/$idx-$model-$ncons-${variant//,/_}"
    mkdir -p "$dir"
    cp "$models/$model.pml" "$dir/"
    local ccflags="-O2 -w -DMEMLIM=4096" panflags="-m1000000"
    if [ "$mode" = np ]; then
        ccflags="$ccflags -DNP"
        panflags="$panflags -l -f"
    else
        ccflags="$ccflags -DSAFETY"
    fi
    local start end verdict states errors note
    start=$(date +%s.%N)
    if ! (cd "$dir" && spin -a -DNCONS="$ncons" "$@" "$model.pml") \
            >"$dir/spin.log" 2>&1; then
        verdict=FAIL; states=-; errors=-; note="spin -a failed: $(tail -n 1 "$dir/spin.log")"
    elif ! (cd "$dir" && $CC $ccflags -o pan pan.c) >"$dir/cc.log" 2>&1; then
        verdict=FAIL; states=-; errors=-; note="pan does not compile: $(head -n 1 "$dir/cc.log")"
    else
        (cd "$dir" && ./pan $panflags) >"$dir/pan.log" 2>&1
        errors=$(sed -n 's/.*errors: \([0-9][0-9]*\).*/\1/p' "$dir/pan.log" | tail -n 1)
        states=$(sed -n 's/^ *\([0-9.e+]*\) states, stored.*/\1/p' "$dir/pan.log" | tail -n 1)
        [ -n "$errors" ] || errors=-
        [ -n "$states" ] || states=-
        local truncated=""
        if grep -qiE "max search depth too small|search not completed|MEMLIM|out of memory|depth-limit" \
                "$dir/pan.log"; then
            truncated=$(grep -iE "max search depth too small|search not completed|MEMLIM|out of memory|depth-limit" \
                "$dir/pan.log" | head -n 1)
        fi
        local first
        first=$(grep -m 1 -E "^pan:[0-9]+: " "$dir/pan.log" | sed 's/^pan:[0-9]*: //; s/ (at depth [0-9]*)//')
        if [ "$errors" = - ]; then
            verdict=FAIL; note="no result from pan: $(tail -n 1 "$dir/pan.log")"
        elif [ "$expect" = pass ]; then
            if [ "$errors" = 0 ] && [ -z "$truncated" ]; then
                verdict=PASS; note="complete search"
            elif [ "$errors" != 0 ]; then
                verdict=FAIL; note="unexpected: $first (trail in $dir)"
            else
                verdict=FAIL; note="incomplete search: $truncated"
            fi
        else
            if [ "$errors" != 0 ]; then
                verdict=PASS; note="seeded bug found: $first"
            else
                verdict=FAIL; note="seeded bug NOT found${truncated:+ ($truncated)}"
            fi
        fi
    fi
    end=$(date +%s.%N)
    printf '%-15s consumers=%s %-18s %-6s states=%-10s errors=%-2s %-4s %5.1fs  %s\n' \
        "$model" "$ncons" "$variant" "$mode" "$states" "$errors" "$verdict" \
        "$(echo "$end - $start" | bc)" "$note" >"$work/result.$idx"
}

t0=$(date +%s)
idx=0
running=0
while read -r model ncons variant expect mode flags; do
    [ -n "$model" ] || continue
    idx=$((idx + 1))
    # shellcheck disable=SC2086  # flags are separate words on purpose
    run_check "$(printf %02d $idx)" "$model" "$ncons" "$variant" "$expect" "$mode" $flags &
    running=$((running + 1))
    if [ "$running" -ge "$jobs" ]; then
        wait -n
        running=$((running - 1))
    fi
done <<<"$checks"
wait
t1=$(date +%s)

status=0
total=0
failed=0
for f in "$work"/result.*; do
    cat "$f"
    total=$((total + 1))
    if ! grep -q " PASS " "$f"; then failed=$((failed + 1)); status=1; fi
done
[ "$total" -eq "$idx" ] || { echo "only $total of $idx checks reported"; status=1; }
echo "spin models: $((total - failed)) of $idx checks as expected, $((t1 - t0))s (spin $(spin -V 2>/dev/null | sed -n 's/Spin Version \([^ ]*\).*/\1/p'), $jobs jobs)"
[ "$keep" = 1 ] && echo "work dir: $work"
exit $status
