#!/usr/bin/env bash
# pgzip end to end: the corpus self-check, round trips through gzip/gunzip
# (files, empty input, stdin to stdout, every discipline), and the failure
# paths (bad discipline, unreadable input, unwritable output, bad values,
# a signal) leaving no output or temporary file behind. A failure must be a
# clean exit (1; 2 for bad usage), never a crash.
#
#   pgzip_test.sh path/to/pgzip
set -uo pipefail

pgzip=$1
tmp=${TEST_TMPDIR:-$(mktemp -d)}
export TMPDIR=$tmp
failures=0

pass() { echo "PASS: $*"; }
fail() { echo "FAIL: $*"; failures=$((failures + 1)); }

# round_trip NAME FILE.gz ORIGINAL: gzip -t accepts it and gunzip gives it back.
round_trip() {
    local name=$1 gz=$2 orig=$3
    if ! gzip -t "$gz" 2>"$tmp/gzip.err"; then
        fail "$name: gzip -t rejects $gz: $(cat "$tmp/gzip.err")"
    elif ! gunzip -c "$gz" | cmp -s - "$orig"; then
        fail "$name: gunzip -c $gz differs from $orig"
    else
        pass "$name"
    fi
}

# no_files DIR PATTERN: nothing in DIR matches PATTERN.
no_files() {
    compgen -G "$1/$2" >/dev/null && return 1
    return 0
}

# A ~3 MiB mix of random bytes and text (text compresses, random does not).
make_mix() {
    local out=$1 i
    : >"$out"
    for i in 1 2 3 4 5 6; do
        head -c 262144 /dev/urandom >>"$out"
        for _ in $(seq 1 2000); do
            echo "line $i.$_: the quick brown fox jumps over the lazy dog" \
                "$((_ * i * 7919 % 10007))"
        done >>"$out"
    done
    head -c 12345 /dev/urandom >>"$out" # an odd tail: the last block is short
}

# (1) The built-in corpus compresses, inflates back and says "verified".
out=$("$pgzip" --corpus-mib 8 2>&1)
rc=$?
echo "$out"
if [[ $rc -eq 0 ]] && grep -q verified <<<"$out"; then
    pass "corpus --corpus-mib 8 verified"
else
    fail "corpus: exit $rc, output above"
fi
if no_files "$tmp" "pgzip-corpus-*"; then
    pass "corpus: temporary file removed"
else
    fail "corpus: temporary file left: $(ls "$tmp"/pgzip-corpus-*)"
fi

# (2) A mixed file, small blocks, two threads (48 blocks).
make_mix "$tmp/mix"
if "$pgzip" --quiet --block 64K --threads 2 "$tmp/mix"; then
    round_trip "mix: --block 64K --threads 2" "$tmp/mix.gz" "$tmp/mix"
else
    fail "mix: pgzip exited $?"
fi
# Explicit output name, level 1 and 9, and 0 (stored), one block size each.
for args in "--level 1 --block 16K" "--level 9 --block 1M" "--level 0 --block 128K"; do
    # shellcheck disable=SC2086
    if "$pgzip" -q $args "$tmp/mix" "$tmp/mix.out.gz"; then
        round_trip "mix: $args" "$tmp/mix.out.gz" "$tmp/mix"
    else
        fail "mix: $args: pgzip exited $?"
    fi
done
# A block-size multiple: the last block is full (read-ahead finds the end).
head -c $((4 * 65536)) "$tmp/mix" >"$tmp/exact"
if "$pgzip" -q --block 64K "$tmp/exact"; then
    round_trip "exact multiple of the block size" "$tmp/exact.gz" "$tmp/exact"
else
    fail "exact: pgzip exited $?"
fi

# (3) Empty input.
printf 'x' >"$tmp/one"
if "$pgzip" -q "$tmp/one"; then
    round_trip "a 1-byte file" "$tmp/one.gz" "$tmp/one"
else
    fail "1-byte: pgzip exited $?"
fi

: >"$tmp/empty"
if "$pgzip" -q "$tmp/empty"; then
    round_trip "empty input" "$tmp/empty.gz" "$tmp/empty"
else
    fail "empty: pgzip exited $?"
fi
# ...also through stdin.
if "$pgzip" -q - - </dev/null >"$tmp/empty2.gz"; then
    round_trip "empty stdin" "$tmp/empty2.gz" "$tmp/empty"
else
    fail "empty stdin: pgzip exited $?"
fi

# (4) stdin to stdout, through a pipe (no size known, short reads).
# shellcheck disable=SC2002 # a pipe, not a file, on purpose
if cat "$tmp/mix" | "$pgzip" -q --block 64K - - >"$tmp/stdio.gz"; then
    round_trip "stdin to stdout" "$tmp/stdio.gz" "$tmp/mix"
else
    fail "stdin to stdout: pgzip exited $?"
fi

# (4b) Every engine (issue 19): the corpus self-check (its verifier reads
# one member or many), and gzip -t plus a byte-for-byte round trip on the
# empty, 1-byte, exact-block, mixed and corpus inputs.
"$pgzip" --corpus-out "$tmp/corpus" --corpus-mib 4 || fail "--corpus-out exited $?"
for e in "--engine zlib --level 6" "--engine libdeflate --level 6" \
    "--engine libdeflate --level 9" "--engine libdeflate --level 0" \
    "--engine isal --level 1" "--engine isal --level 2" "--fast" "--level 1" "--level 6"; do
    tag=$(tr -c 'a-z0-9\n' _ <<<"$e")
    # shellcheck disable=SC2086
    out=$("$pgzip" -q $e --corpus-mib 4 2>&1)
    rc=$?
    if [[ $rc -eq 0 ]] && grep -q verified <<<"$out"; then
        pass "$e: corpus verified ($(grep -o '[0-9]* gzip member[s]*' <<<"$out"))"
    else
        fail "$e: corpus: exit $rc: $out"
    fi
    for f in empty one exact mix corpus; do
        # shellcheck disable=SC2086
        if "$pgzip" -q $e --block 64K "$tmp/$f" "$tmp/$f.$tag.gz"; then
            round_trip "$e: $f" "$tmp/$f.$tag.gz" "$tmp/$f"
        else
            fail "$e: $f: pgzip exited $?"
        fi
    done
done
# The engines that write a member per block do: 4 blocks, 4 members (the
# verifier counts them); zlib writes one.
for e in "zlib 1" "libdeflate 4" "isal 4"; do
    level=1
    out=$("$pgzip" -q --engine "${e% *}" --level $level --block 1M --corpus-mib 4 2>&1)
    if grep -q "(${e#* } gzip member" <<<"$out"; then
        pass "--engine ${e% *}: ${e#* } member(s) for 4 blocks of 1 MiB"
    else
        fail "--engine ${e% *}: expected ${e#* } member(s): $out"
    fi
done
# The level map: at --level N the output is no larger than pigz -N's on
# the corpus (1 MiB blocks, the default), for every engine that takes N.
if command -v pigz >/dev/null; then
    for n in 1 2 3 4 5 6 7 8 9; do
        pz=$(pigz -p2 -$n -c "$tmp/corpus" | wc -c)
        for e in zlib libdeflate isal; do
            "$pgzip" -q --engine $e --level $n "$tmp/corpus" "$tmp/lv.gz" 2>/dev/null || continue
            sz=$(wc -c <"$tmp/lv.gz")
            if ((sz <= pz)); then
                pass "--engine $e --level $n: $sz bytes <= pigz -$n's $pz"
            else
                fail "--engine $e --level $n: $sz bytes > pigz -$n's $pz"
            fi
        done
    done
else
    echo "SKIP: pigz not installed: the level map is not compared"
fi

# (5) Disciplines: dekker and ticket work; an unknown name lists the valid ones.
for s in "dekker" "ticket" "single --threads 1"; do
    # shellcheck disable=SC2086
    if "$pgzip" -q --sched $s --block 64K "$tmp/mix" "$tmp/mix.${s%% *}.gz"; then
        round_trip "--sched $s" "$tmp/mix.${s%% *}.gz" "$tmp/mix"
    else
        fail "--sched $s: pgzip exited $?"
    fi
done
"$pgzip" -q --sched nope "$tmp/mix" "$tmp/nope.gz" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 2 ]] && grep -q ticket "$tmp/err" && [[ ! -e "$tmp/nope.gz" ]]; then
    pass "--sched nope: exit $rc, $(head -1 "$tmp/err")"
else
    fail "--sched nope: exit $rc, stderr: $(cat "$tmp/err")"
fi

# (6) Unreadable input: an error and no output file.
mkdir -p "$tmp/in"
"$pgzip" -q "$tmp/in/missing" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 1 ]] && [[ -s "$tmp/err" ]] && no_files "$tmp/in" "missing*"; then
    pass "missing input: exit $rc, $(head -1 "$tmp/err")"
else
    fail "missing input: exit $rc, files: $(ls "$tmp/in")"
fi
if [[ $(id -u) -ne 0 ]]; then # root reads anything
    cp "$tmp/mix" "$tmp/in/secret"
    chmod 000 "$tmp/in/secret"
    "$pgzip" -q "$tmp/in/secret" 2>"$tmp/err"
    rc=$?
    if [[ $rc -eq 1 ]] && no_files "$tmp/in" "secret.*"; then
        pass "unreadable input: exit $rc, $(head -1 "$tmp/err")"
    else
        fail "unreadable input: exit $rc, files: $(ls "$tmp/in")"
    fi
fi
"$pgzip" -q "$tmp/in" "$tmp/dir.gz" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 1 ]] && [[ ! -e "$tmp/dir.gz" ]] && no_files "$tmp" "dir.gz*"; then
    pass "directory input: exit $rc, $(head -1 "$tmp/err")"
else
    fail "directory input: exit $rc"
fi

# (7) Output in a directory that does not exist: an error, no stray file.
"$pgzip" -q "$tmp/mix" "$tmp/nodir/out.gz" 2>"$tmp/err"
rc=$?
if [[ $rc -eq 1 ]] && [[ ! -e "$tmp/nodir" ]] && [[ -s "$tmp/err" ]]; then
    pass "output in a missing directory: exit $rc, $(head -1 "$tmp/err")"
else
    fail "output in a missing directory: exit $rc"
fi
# A write failure mid-stream (/dev/full as stdout) is reported, not ignored.
if [[ -w /dev/full ]]; then
    "$pgzip" -q "$tmp/mix" - >/dev/full 2>"$tmp/err"
    rc=$?
    if [[ $rc -eq 1 ]] && grep -q "No space" "$tmp/err"; then
        pass "write failure: exit $rc, $(head -1 "$tmp/err")"
    else
        fail "write failure: exit $rc, stderr: $(cat "$tmp/err")"
    fi
fi

# (8) Bad values are rejected with exit 2 before anything is written.
for args in "--level 10" "--level -1" "--level x" "--block 1" "--block 65M" \
    "--block 12Q" "--threads 0" "--threads 9999" "--bogus" "--corpus-mib x" \
    "--level" "--engine" "--engine nope" "--engine ZLIB" "--engine isal --level 3" \
    "--engine isal --level 9" "--fast --level 1" "--fast --engine zlib" \
    "--fast --engine libdeflate"; do
    # shellcheck disable=SC2086
    "$pgzip" -q $args "$tmp/mix" "$tmp/bad.gz" 2>"$tmp/err"
    rc=$?
    if [[ $rc -eq 2 ]] && [[ -s "$tmp/err" ]] && [[ ! -e "$tmp/bad.gz" ]]; then
        pass "rejected $args: $(head -1 "$tmp/err")"
    else
        fail "$args: exit $rc (want 2), stderr: $(cat "$tmp/err")"
    fi
done
# The messages say what is valid.
"$pgzip" -q --engine nope "$tmp/mix" "$tmp/bad.gz" 2>"$tmp/err"
if grep -q "zlib, libdeflate, isal" "$tmp/err"; then
    pass "--engine nope lists the engines: $(head -1 "$tmp/err")"
else
    fail "--engine nope: $(cat "$tmp/err")"
fi
"$pgzip" -q --engine isal --level 6 "$tmp/mix" "$tmp/bad.gz" 2>"$tmp/err"
if grep -q "pigz -6" "$tmp/err" && grep -q -- "--fast" "$tmp/err"; then
    pass "--engine isal --level 6 says why: $(head -1 "$tmp/err")"
else
    fail "--engine isal --level 6: $(cat "$tmp/err")"
fi
if "$pgzip" --help | grep -q -- --block; then
    pass "--help"
else
    fail "--help"
fi

# (9) Interrupted mid-stream (input from a FIFO that stays open): SIGTERM
# stops it, it says so and dies of the signal (exit 143), and neither the
# output nor its temporary file is left.
mkdir -p "$tmp/int"
mkfifo "$tmp/int/fifo"
"$pgzip" -q --block 16K "$tmp/int/fifo" "$tmp/int/out.gz" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/int/fifo"
head -c 100000 "$tmp/mix" >&3
for _ in $(seq 1 50); do # until the temporary file exists (or 5 s)
    compgen -G "$tmp/int/out.gz.*" >/dev/null && break
    sleep 0.1
done
kill -TERM "$pid"
wait "$pid"
rc=$?
exec 3>&-
if [[ $rc -eq 143 ]] && grep -q interrupted "$tmp/err" &&
    no_files "$tmp/int" "out.gz*"; then
    pass "interrupted: exit $rc, $(head -1 "$tmp/err"), nothing left"
else
    fail "interrupted: exit $rc, files: $(ls "$tmp/int")"
fi

# No temporary file anywhere in the scratch directory.
if no_files "$tmp" "*.gz.??????" && no_files "$tmp/in" "*.??????"; then
    pass "no temporary files left"
else
    fail "temporary files left: $(ls "$tmp" "$tmp/in")"
fi

echo "pgzip_test: $failures failure(s)"
[[ $failures -eq 0 ]]
