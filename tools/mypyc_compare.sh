#!/bin/sh
# Interpreted against compiled, back to back: the built-in demo, two bench scenarios
# and the simulator's small peak, ROUNDS times each (default 3), alternating.
# Usage (from the repository root, after tools/mypyc_build.py; SRC= the interpreted tree):
#   tools/mypyc_compare.sh [BUILD_DIR] [ROUNDS]
# Each line: which build, what ran, wall and CPU seconds of the whole process, then the
# run's own figures. The compiled demo's CSVs are compared with the interpreted one's.
set -eu
BUILD=${1:-build/compiled}
ROUNDS=${2:-3}
PY=${PY:-.venv/bin/python}
OUT=${OUT:-/tmp/pumice-mypyc-compare}
mkdir -p "$OUT"

run() { # label pythonpath tag args...
    label=$1 path=$2 tag=$3
    shift 3
    /usr/bin/time -f '%e %U %S' -o "$OUT/$label-$tag.time" \
        env PYTHONPATH="$path" "$PY" -m pumice.cli "$@" >"$OUT/$label-$tag.log" 2>&1
    set -- $(cat "$OUT/$label-$tag.time")
    printf '%-11s %-16s wall %6.1f s  cpu %6.1f s\n' "$label" "$tag" "$1" "$(awk "BEGIN { print $2 + $3 }")"
}

for i in $(seq "$ROUNDS"); do
    for label in interpreted compiled; do
        if [ "$label" = compiled ]; then path=$BUILD; else path=${SRC:-src}; fi
        run "$label" "$path" "demo-$i" simulate --out "$OUT/demo-$label-$i" --no-progress
        grep -i 'wall time' "$OUT/$label-demo-$i.log" | sed 's/^/    /'
        run "$label" "$path" "bench-$i" bench basic gang --repeat 3
        grep -E '^(scenario|basic|gang) ' "$OUT/$label-bench-$i.log" | sed 's/^/    /'
        run "$label" "$path" "peak-$i" bench sim-peak-small
        grep -E '^(scenario|sim-peak-small) ' "$OUT/$label-peak-$i.log" | sed 's/^/    /'
    done
    for f in jobs.csv timeseries.csv queues.csv; do
        cmp -s "$OUT/demo-interpreted-$i/$f" "$OUT/demo-compiled-$i/$f" ||
            echo "    round $i: $f differs between the builds"
    done
done
