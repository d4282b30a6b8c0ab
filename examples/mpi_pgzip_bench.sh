#!/usr/bin/env bash
# The issue-16 benchmark: the built-in corpus through mpi_pgzip with
# -np 1 x T threads and -np T x 1 thread (T = the online CPUs), one member
# per rank and --single, and pigz -p T on the same bytes; median MiB/s of
# REPS runs, interleaved, and the target -np T x 1 >= 0.9x -np 1 x T.
#
#   ./bazelw run //examples:mpi_pgzip_bench -- [MIB [REPS]]   (default 256 5)
#
# Uses the single-machine, run-as-root Open MPI settings of the test (README,
# "Beyond one machine"); pigz is skipped if it is not installed.
set -uo pipefail

here=${RUNFILES_DIR:-$0.runfiles}/knit/examples
mpi_pgzip=$here/mpi_pgzip
pgzip=$here/pgzip
mib=${1:-256}
reps=${2:-5}
t=$(nproc)
scratch=$(mktemp -d /tmp/mpi_pgzip_bench.XXXXXX) || exit 1
trap 'rm -rf "$scratch"' EXIT
export TMPDIR=$scratch
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_oob_tcp_if_include=lo OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mpi_yield_when_idle=1 PMIX_MCA_gds=hash

# rate NP THREADS ARGS...: one run's MiB/s (as rank 0 prints it), or "fail".
rate() {
    local np=$1 th=$2
    shift 2
    timeout 900 mpirun -q -np "$np" --bind-to none --oversubscribe "$mpi_pgzip" \
        --threads "$th" "$@" "$scratch/out.gz" | sed -n 's/.*: \([0-9.]*\) MiB\/s$/\1/p' |
        grep . || echo fail
}

median() { sort -g | awk '{v[NR] = $1} END {print (NR ? v[int((NR + 1) / 2)] : "n/a")}'; }

declare -A runs
names=("np 1 x $t threads" "np $t x 1 thread" "np $t x 1 thread, --single")
have_pigz=0
if command -v pigz >/dev/null; then
    have_pigz=1
    names+=("pigz -p $t")
    "$pgzip" --corpus-out "$scratch/corpus" --corpus-mib "$mib" || exit 1
fi
echo "mpi_pgzip_bench: ${mib} MiB corpus, level 6, $reps repetitions, $t CPUs," \
    "load $(cut -d' ' -f1 /proc/loadavg)"
for ((i = 1; i <= reps; i++)); do
    runs[0]+="$(rate 1 "$t" --corpus-mib "$mib") "
    runs[1]+="$(rate "$t" 1 --corpus-mib "$mib") "
    runs[2]+="$(rate "$t" 1 --corpus-mib "$mib" --single) "
    if ((have_pigz)); then
        s=$(date +%s%N)
        pigz -p "$t" -6 -c "$scratch/corpus" >"$scratch/p.gz"
        e=$(date +%s%N)
        runs[3]+="$(awk -v m="$mib" -v ns=$((e - s)) 'BEGIN {printf "%.1f", m / (ns / 1e9)}') "
    fi
done
for i in "${!names[@]}"; do
    m=$(tr ' ' '\n' <<<"${runs[$i]}" | grep -v '^$' | median)
    printf '%-32s %8s MiB/s   (runs: %s)\n' "${names[$i]}" "$m" "${runs[$i]% }"
    meds[i]=$m
done
if [[ ${runs[*]} == *fail* ]]; then
    echo "mpi_pgzip_bench: a run failed"
    exit 1
fi
ratio=$(awk -v a="${meds[1]}" -v b="${meds[0]}" 'BEGIN {printf "%.2f", a / b}')
verdict=$(awk -v r="$ratio" 'BEGIN {print (r >= 0.9 ? "met" : "not met")}')
echo "np $t x 1 / np 1 x $t = ${ratio}x (target >= 0.90x: $verdict)"
