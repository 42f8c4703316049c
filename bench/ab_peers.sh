#!/usr/bin/env bash
# Builds side by side on the peers harness: each round runs every build on
# the SQLite file and on memory:// in a shuffled order, so the machine's
# drift falls on all of them alike. One line a run: round, build, store,
# us/turn, sessions/s. Summarise with bench/ab_summary.py.
#
# Each build is a LABEL=PYTHON pair, PYTHON a virtualenv's interpreter with
# that build of turnlog installed (non-editable) and the peers' requirements:
#   python3 -m venv /tmp/ab-x && /tmp/ab-x/bin/pip install \
#       -r ../shared/peers/requirements.txt path/to/a/checkout
# Run: ROUNDS=16 bench/ab_peers.sh old=/tmp/ab-old/bin/python new=/tmp/ab-new/bin/python > runs.txt
set -euo pipefail
peers="$(cd "$(dirname "$0")/../../shared/peers" && pwd)"
cd "$peers"
for round in $(seq 1 "${ROUNDS:-8}"); do
  for pick in $(for build in "$@"; do for store in file mem; do echo "$store:$build"; done; done | shuf); do
    store=${pick%%:*}
    build=${pick#*:}
    label=${build%%=*}
    python=${build#*=}
    if [ "$store" = mem ]; then export TURNLOG_BENCH_STORE=memory://; else unset TURNLOG_BENCH_STORE; fi
    figures=$("$python" run_peers.py --python "$python" --only turnlog --runs 1 -T 200 -S 50 2>/dev/null \
      | python3 -c "import json, sys; d = json.loads(sys.stdin.readline()); print(d.get('us_per_turn'), d.get('sessions_per_s'))")
    echo "$round $label $store $figures"
  done
done
