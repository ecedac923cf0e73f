#!/bin/sh
# bench/serve_bench.sh: wrk load test of the nginx-served LeNet-5 (/predict) vs the same JSON parse and reply
# without a model (/echo); requests/s, p50/p99, errors, worker RSS before and after. Prints a markdown table.
# usage: bench/serve_bench.sh [SECONDS] [LENET_WEIGHTS]   (run from the repo root after `make`)
set -e
SECS=${1:-30}; WEIGHTS=$2
DIR=$(mktemp -d); PORT=$((20000 + $$ % 20000))
ROOT=$(pwd)
trap 'examples/serve/serve.sh $DIR/nginx $PORT $DIR/models stop >/dev/null 2>&1; sleep 0.5; rm -rf $DIR' EXIT
if [ -n "$WEIGHTS" ]; then
  luajit examples/serve/export_models.lua $DIR/models --lenet-weights "$WEIGHTS" >/dev/null
else
  luajit examples/serve/export_models.lua $DIR/models >/dev/null
fi
examples/serve/serve.sh $DIR/nginx $PORT $DIR/models start
sleep 1
OUT=$DIR/post.lua luajit -e '
local cjson = require("cjson")
local t = {}
for r = 1, 28 do t[r] = {} for c = 1, 28 do t[r][c] = (r * 7 + c * 13) % 256 end end
local body = cjson.encode({ image = t })
io.open(os.getenv("OUT"), "w"):write("wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\nwrk.body = [==[" .. body .. "]==]\n")
'
rss() { for p in $(pgrep -P "$(cat $DIR/nginx/logs/nginx.pid)" | sort); do
          awk '/VmRSS/ {printf "%.1f ", $2/1024}' /proc/$p/status; done; }
run() { # path -> "req/s p50 p99 errors"
  wrk -t2 -c16 -d${SECS}s --latency -s $DIR/post.lua http://127.0.0.1:$PORT$1 > $DIR/wrk.txt
  rps=$(awk '/Requests\/sec/ {print $2}' $DIR/wrk.txt)
  p50=$(awk '$1 == "50%" {print $2}' $DIR/wrk.txt); p99=$(awk '$1 == "99%" {print $2}' $DIR/wrk.txt)
  errs=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {n += 1} END {print n + 0}' $DIR/wrk.txt)
  echo "$rps | $p50 | $p99 | $errs"
}
wrk -t2 -c16 -d3s -s $DIR/post.lua http://127.0.0.1:$PORT/predict >/dev/null   # warm-up
before=$(rss)
model=$(run /predict)
after=$(rss)
echo_row=$(run /echo)
echo "| endpoint | requests/s | p50 | p99 | errors | worker RSS MiB before -> after |"
echo "|---|---|---|---|---|---|"
echo "| POST /predict (LeNet-5) | $model | $before-> $after|"
echo "| POST /echo (same parse + reply, no model) | $echo_row | |"
