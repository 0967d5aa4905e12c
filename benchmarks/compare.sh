#!/usr/bin/env bash
# Run one benchmark for two commits in the same hour and print both outputs side by side.
#
#   benchmarks/compare.sh [--current] [--rounds N] BENCHMARK OLD NEW [-- ARGS...]
#
# BENCHMARK is a script name under benchmarks/ (``ui``, ``cloud.py``, ...). OLD and NEW are any
# commits git knows (``3ed8c2c``, ``main``, ``HEAD``). Each commit's tree is exported (``git
# archive``) into a fresh temporary folder and the benchmark runs there with that commit's code
# first on ``PYTHONPATH``, so each side measures its own services, screens and workbench.
# By default each commit runs its own copy of the benchmark; ``--current`` runs this checkout's
# copy against both (for a benchmark the older commit did not have, or has in an older form).
# ARGS after ``--`` go to the benchmark (``-- --runs 3``). ``--rounds N`` alternates the two
# commits N times (OLD, NEW, OLD, NEW, ...), so a load that comes and goes falls on both; every
# round's output is kept. PYTHON picks the interpreter (default: python3 on PATH).
#
# The machine is shared and absolute timings are noisy: read the ratios the benchmarks print
# against their own in-run baseline, and the side-by-side lines of the same round.
set -euo pipefail

usage() {
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
}

current=0
rounds=1
while [ $# -gt 0 ]; do
    case "$1" in
        --current) current=1; shift ;;
        --rounds) [ $# -ge 2 ] || usage; rounds="$2"; shift 2 ;;
        -h|--help) usage ;;
        --) break ;;
        -*) echo "compare.sh: unknown option $1" >&2; usage ;;
        *) break ;;
    esac
done
[ $# -ge 3 ] || usage
bench="${1%.py}.py"
old="$2"
new="$3"
shift 3
if [ $# -gt 0 ]; then
    [ "$1" = "--" ] || usage
    shift
fi
case "$rounds" in
    ''|*[!0-9]*|0) echo "compare.sh: --rounds takes a whole number above 0, not '$rounds'" >&2; exit 2 ;;
esac

here="$(cd "$(dirname "$0")/.." && pwd)"
python="${PYTHON:-python3}"
repo="$(git -C "$here" rev-parse --show-toplevel)"
if [ "$current" = 1 ] && [ ! -f "$here/benchmarks/$bench" ]; then
    echo "compare.sh: no benchmarks/$bench in this checkout" >&2
    exit 2
fi

scratch="$(mktemp -d "${TMPDIR:-/tmp}/compare.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT

export_commit() {  # export_commit REV DIR: the commit's tree in DIR (nothing in the repository changes)
    local rev="$1" dir="$2" sha
    if ! sha="$(git -C "$repo" rev-parse --verify --quiet "$rev^{commit}")"; then
        echo "compare.sh: '$rev' is not a commit of $repo" >&2
        exit 2
    fi
    mkdir -p "$dir"
    git -C "$repo" archive "$sha" | tar -x -C "$dir"
    if [ "$current" = 1 ]; then
        cp "$here/benchmarks/$bench" "$dir/benchmarks/$bench"
    elif [ ! -f "$dir/benchmarks/$bench" ]; then
        echo "compare.sh: $rev has no benchmarks/$bench (--current runs this checkout's copy)" >&2
        exit 2
    fi
    echo "$sha"
}

old_sha="$(export_commit "$old" "$scratch/old")"
new_sha="$(export_commit "$new" "$scratch/new")"

run_side() {  # run_side DIR OUT LABEL ARGS...: LABEL, then the benchmark's output (stdout and stderr), in OUT
    local dir="$1" out="$2" label="$3" status=0
    shift 3
    echo "$label" >"$out"
    (cd "$dir" && PYTHONPATH="$dir${PYTHONPATH:+:$PYTHONPATH}" "$python" "benchmarks/$bench" "$@") \
        >>"$out" 2>&1 || status=$?
    if [ "$status" != 0 ]; then
        echo "(the benchmark exited with status $status)" >>"$out"
    fi
}

width="${COLUMNS:-200}"
half=$(( (width - 3) / 2 ))
for round in $(seq 1 "$rounds"); do
    run_side "$scratch/old" "$scratch/old.$round.txt" "$old ${old_sha:0:9}" "$@"
    run_side "$scratch/new" "$scratch/new.$round.txt" "$new ${new_sha:0:9}" "$@"
    echo "== benchmarks/$bench, round $round of $rounds, $(date -u '+%Y-%m-%d %H:%M UTC')"
    if [ "$(awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }' "$scratch/old.$round.txt")" -gt "$half" ]; then
        # a line wider than half the screen would be cut: the two outputs one after the other, whole
        cat "$scratch/old.$round.txt"
        echo "--"
        cat "$scratch/new.$round.txt"
        continue
    fi
    awk -v half="$half" '
        FNR == NR { a[FNR] = $0; na = FNR; next }
        { b[FNR] = $0; nb = FNR }
        END {
            n = na > nb ? na : nb
            for (i = 1; i <= n; i++) printf "%-*.*s | %s\n", half, half, a[i], b[i]
        }' "$scratch/old.$round.txt" "$scratch/new.$round.txt"
done
