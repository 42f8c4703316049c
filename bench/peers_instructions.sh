#!/usr/bin/env bash
# Instructions a turn of the peers' own adapter on one session, counted by
# callgrind: bench/peers_windows.py at 100 and 300 turns, the difference over
# 200 (every thread, the interpreter and SQLite included; start-up cancels).
# Interleave builds in one sitting: a loaded machine moves the clock-driven
# threads' share (lease renewals, polls).
# Run: bench/peers_instructions.sh PYTHON [memory:// | file | URL]
set -euo pipefail
py=$1; store=${2:-memory://}
here="$(cd "$(dirname "$0")" && pwd)"
d=$(mktemp -d); trap 'rm -rf "$d"' EXIT
for t in 100 300; do
  PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=$d/cg.$t.out $py "$here/peers_windows.py" $store $t $t > /dev/null 2>$d/err.$t
done
python3 - "$d" <<'PY'
import glob
import sys

d = sys.argv[1]
def total(t):
    # The first summary (or totals) line of each file callgrind wrote.
    count = 0
    for path in glob.glob(f"{d}/cg.{t}.out*"):
        for line in open(path):
            if line.startswith(("summary:", "totals:")):
                count += int(line.split()[1])
                break
    return count
print(f"{(total(300) - total(100)) / 200:,.0f}")
PY
