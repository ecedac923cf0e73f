#!/bin/sh
# bench/serve_bench.sh: wrk load tests of examples/serve's models served by ds.serve (bin/ds-serve): the BERT-style endpoint with
# dynamic batching on and off at 1, 16 and 64 connections (texts of mixed lengths), LeNet-5 latency while the
# BERT-style endpoint is saturated on the same two workers, LeNet-5 and /echo alone, model reloads under load
# (10 new versions 0.6 s apart against steady state); requests/s, p50/p99, errors, worker RSS before and after.
# Prints markdown tables. Bounded: about 13 x SECONDS plus model exports and warm-ups.
# usage: bench/serve_bench.sh [SECONDS] [LENET_WEIGHTS]   (from the repo root after `make`; `make serve-bench`)
# ONLY=reload bench/serve_bench.sh SECONDS: the reload rows alone
set -e
SECS=${1:-10}; WEIGHTS=$2
DIR=$(mktemp -d); PORT=$((20000 + $$ % 12000))
chmod 755 $DIR   # nginx workers (user nobody when the master is root) read the models
WRK="timeout $((SECS + 30)) wrk"
# QUIT nginx and wait for its master to exit: a master still draining when the next one starts would delete the
# next one's pid file on its way out (seen once: no RSS, and that nginx outlived the script)
stop() {
  pid=$(cat $DIR/nginx/logs/nginx.pid 2>/dev/null) || return 0
  kill -QUIT "$pid" 2>/dev/null || return 0
  for i in $(seq 1 600); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
}
trap 'stop; rm -rf $DIR' EXIT
if [ -n "$WEIGHTS" ]; then
  luajit examples/serve/export_models.lua $DIR/models --lenet-weights "$WEIGHTS" >/dev/null
else
  luajit examples/serve/export_models.lua $DIR/models >/dev/null
fi
# request bodies: one image; twelve texts of 3 to 120 characters, rotated by the wrk script
export BENCH_DIR=$DIR
luajit -e '
local cjson = require("cjson")
local dir = os.getenv("BENCH_DIR")
local t = {}
for r = 1, 28 do t[r] = {} for c = 1, 28 do t[r][c] = (r * 7 + c * 13) % 256 end end
local head = "wrk.method = \"POST\"\nwrk.headers[\"Content-Type\"] = \"application/json\"\n"
io.open(dir .. "/image.lua", "w"):write(head .. "wrk.body = [==[" .. cjson.encode({ image = t }) .. "]==]\n")
local base = "今天的天气真好我们去公园散步吧这家餐厅的服务太差了我再也不来了听到这个消息我简直不敢相信"
local chars = {}
for ch in base:gmatch("[%z\1-\127\194-\244][\128-\191]*") do chars[#chars + 1] = ch end
local bodies = {}
for i = 1, 12 do
  local n = ({ 3, 8, 12, 16, 20, 24, 30, 40, 50, 64, 90, 120 })[i]
  local s = {}
  for k = 1, n do s[k] = chars[(k + i) % #chars + 1] end
  bodies[i] = string.format("%q", cjson.encode({ text = table.concat(s) }))
end
io.open(dir .. "/text.lua", "w"):write(head .. "local bodies = {" .. table.concat(bodies, ",\n") .. "}\n" ..
  "local i = 0\nrequest = function() i = i % #bodies + 1\n" ..
  "  return wrk.format(nil, nil, nil, bodies[i]) end\n")
'
start() { # serve.json overrides, merged into the exported serve.json -> nginx running with those settings, models loaded
  [ -f $DIR/serve.exported.json ] || cp $DIR/models/serve.json $DIR/serve.exported.json
  luajit - "$1" $DIR/serve.exported.json > $DIR/models/serve.json <<'LUA'
local cjson = require("cjson")
local cfg = cjson.decode(io.open(arg[2]):read("*a"))
for name, s in pairs(cjson.decode(arg[1]).models) do
  for k, v in pairs(s) do cfg.models[name][k] = v end
end
io.write(cjson.encode(cfg))
LUA
  bin/ds-serve $DIR/nginx $PORT $DIR/models start
  for i in $(seq 1 10); do   # /health answers 200 once the models are loaded and warm (it waits up to 30 s)
    [ "$(curl -s --max-time 60 -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/health)" = 200 ] && break
  done
}
rss() { for p in $(pgrep -P "$(cat $DIR/nginx/logs/nginx.pid)" | sort); do
          awk '/VmRSS/ {printf "%.1f ", $2/1024}' /proc/$p/status; done; }
# wrk output file -> "req/s | p50 | p99 | errors"
row() {
  rps=$(awk '/Requests\/sec/ {print $2}' $1)
  p50=$(awk '$1 == "50%" {print $2}' $1); p99=$(awk '$1 == "99%" {print $2}' $1)
  errs=$(awk '/Non-2xx/ {n += $NF} /Socket errors/ {n += $4 + $6 + $8 + $10} END {print n + 0}' $1)
  echo "$rps | $p50 | $p99 | $errs"
}
run() { # connections script path -> row
  t=2; [ "$1" = 1 ] && t=1
  $WRK -t$t -c$1 -d${SECS}s --latency -s $DIR/$2 http://127.0.0.1:$PORT$3 > $DIR/wrk.txt
  row $DIR/wrk.txt
}
bert_rows() { # label -> one table row per connection count
  $WRK -t2 -c64 -d2s -s $DIR/text.lua http://127.0.0.1:$PORT/predict/bert >/dev/null   # warm-up (plans: "warm")
  for c in 1 16 64; do echo "| $1 | $c | $(run $c text.lua /predict/bert) |"; done
}

# Model reloads under load (no HUP: the workers notice new files, load them off the request path, switch):
# steady state, then the same run while all model files flip 10 times, 0.6 s apart, between two exported versions
# (cp over the served names), twice each; BERT-style endpoint at 16 connections, runs of at least 8 s
reload_rows() {
  luajit examples/serve/export_models.lua $DIR/v2 --train-batches 30 --bert-seed 23 >/dev/null
  mkdir -p $DIR/v1 && cp $DIR/models/lenet.json $DIR/models/bert.json $DIR/models/*.safetensors $DIR/v1/
  secs=$SECS; [ "$secs" -lt 8 ] && secs=8
  $WRK -t2 -c16 -d2s -s $DIR/text.lua http://127.0.0.1:$PORT/predict/bert >/dev/null   # warm-up
  for round in 1 2; do
    $WRK -t2 -c16 -d${secs}s --latency -s $DIR/text.lua http://127.0.0.1:$PORT/predict/bert > $DIR/wrk.txt
    echo "| steady | 16 | $(row $DIR/wrk.txt) |"
    (sleep 0.5; for i in $(seq 1 10); do
       v=v$((i % 2 + 1))
       cp $DIR/$v/*.safetensors $DIR/models/ && cp $DIR/$v/lenet.json $DIR/$v/bert.json $DIR/models/
       sleep 0.6
     done) &
    $WRK -t2 -c16 -d${secs}s --latency -s $DIR/text.lua http://127.0.0.1:$PORT/predict/bert > $DIR/wrk.txt
    wait $!
    echo "| 10 reloads 0.6 s apart | 16 | $(row $DIR/wrk.txt) |"
  done
  echo
  echo "reloads (per worker and model; failed: files caught mid-copy, the old version kept serving):"
  curl -s http://127.0.0.1:$PORT/metrics | grep '^ds_reloads_total' || true
}
if [ "$ONLY" = reload ]; then
  start '{"models": {"bert": {"warm": true}, "lenet": {"warm": true}}}'
  echo "| BERT-style endpoint, batching on | connections | requests/s | p50 | p99 | errors |"
  echo "|---|---|---|---|---|---|"
  reload_rows
  exit
fi

echo "| BERT-style endpoint | connections | requests/s | p50 | p99 | errors |"
echo "|---|---|---|---|---|---|"
start '{"models": {"bert": {"max_batch": 1, "warm": true}, "lenet": {"warm": true}}}'
bert_rows "batching off (max_batch 1)"
stop
start '{"models": {"bert": {"warm": true}, "lenet": {"warm": true}}}'
before=$(rss)
bert_rows "batching on (max_batch 32, max_wait 2 ms)"
echo
# LeNet-5 while 64 connections keep the BERT-style endpoint saturated on the same workers
$WRK -t1 -c64 -d$((SECS + 4))s -s $DIR/text.lua http://127.0.0.1:$PORT/predict/bert > $DIR/bert_bg.txt &
bg=$!
sleep 2
lenet_loaded=$(run 4 image.lua /predict)
wait $bg
bert_bg=$(row $DIR/bert_bg.txt)
lenet=$(run 16 image.lua /predict)
echo_row=$(run 16 image.lua /echo)
after=$(rss)
echo "| endpoint | connections | requests/s | p50 | p99 | errors |"
echo "|---|---|---|---|---|---|"
echo "| POST /predict (LeNet-5) while BERT is saturated | 4 | $lenet_loaded |"
echo "| POST /predict/bert (the saturating load, same time) | 64 | $bert_bg |"
echo "| POST /predict (LeNet-5) alone | 16 | $lenet |"
echo "| POST /echo (same parse + reply, no model) | 16 | $echo_row |"
echo
echo "worker RSS MiB (batching on) before -> after: $before-> $after"
echo
echo "| BERT-style endpoint, batching on | connections | requests/s | p50 | p99 | errors |"
echo "|---|---|---|---|---|---|"
reload_rows
