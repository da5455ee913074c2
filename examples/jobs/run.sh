#!/usr/bin/env bash
# A handful of example jobs end to end on the embedded default (SQLite + in-process
# coordination), in a scratch directory: succeeding, resuming, retrying, permanently failing.
set -euo pipefail
dir=$(mktemp -d)
db="$dir/jobs.sqlite3"
cfg='{"tick_ms": 100, "lease_ticks": 100, "reservation_ticks": 100}'
remora jobs submit greet --db "$db" --config "$cfg" --id greet --payload '{"name": "Ada"}'
remora jobs submit count --db "$db" --id count --payload '{"to": 4}'
remora jobs submit flaky --db "$db" --id flaky
remora jobs submit doomed --db "$db" --id doomed
remora jobs worker --db "$db" --app examples.jobs.app --concurrency 2 --until-idle
remora jobs status --db "$db"
