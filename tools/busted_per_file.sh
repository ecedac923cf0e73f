#!/bin/bash
# tools/busted_per_file.sh SECONDS: the suite one spec file per busted process, each under `timeout SECONDS`
# (make test-asan), so a file that hangs is named and ends instead of holding the run. Prints a line per file
# (and a failing file's output), last the total "N passed, N failed"; a timed-out or crashed file counts as one
# failure.
limit=${1:?usage: tools/busted_per_file.sh SECONDS}
log=$(mktemp)
passed=0 failed=0
for spec in tests/*_spec.lua; do
  start=$SECONDS
  timeout "$limit" ${BUSTED:-busted} "$spec" >"$log" 2>&1
  status=$?
  counts=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$log" | tail -n 1)
  # a failing file's output (its failure messages, sanitizer reports) without the progress marks
  [ "$status" = 0 ] || grep -v '^[-+*]*$' "$log" | tail -n 200 | sed 's|^|  |'
  if [ "$status" = 124 ]; then
    echo "$spec: TIMED OUT after $limit s"; failed=$((failed + 1)); continue
  elif [ -z "$counts" ]; then
    echo "$spec: ended with status $status and no summary"; failed=$((failed + 1)); continue
  fi
  echo "$spec: $counts ($((SECONDS - start)) s)"
  set -- $counts
  passed=$((passed + $1)); failed=$((failed + $3))
done
rm -f "$log"
echo
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
