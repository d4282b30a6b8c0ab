#!/usr/bin/env bash
# Runs an example with its arguments and fails if it exits non-zero or does
# not print "verified".
set -euo pipefail
out=$("$@")
echo "$out"
grep -q verified <<<"$out"
