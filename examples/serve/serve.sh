#!/bin/sh
# examples/serve/serve.sh: render nginx.conf into a prefix dir and run nginx (foreground or daemon).
# usage: serve.sh PREFIX PORT MODELS_DIR [foreground|start|stop]
# DS_SERVE_THREADS: worker threads (and their Lua VMs) per nginx worker, at least the number of models (default 2)
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PREFIX=$1; PORT=$2; MODELS=$(cd "$3" && pwd); MODE=${4:-foreground}
mkdir -p "$PREFIX/logs" "$PREFIX/conf"
PREFIX=$(cd "$PREFIX" && pwd)
THREADS=${DS_SERVE_THREADS:-2}
sed -e "s|@ROOT@|$ROOT|g" -e "s|@PORT@|$PORT|g" -e "s|@MODELS@|$MODELS|g" -e "s|@THREADS@|$THREADS|g" \
  "$ROOT/examples/serve/nginx.conf.in" > "$PREFIX/conf/nginx.conf"
case "$MODE" in
  foreground) exec nginx -p "$PREFIX" -c conf/nginx.conf -g "daemon off;" ;;
  start) nginx -p "$PREFIX" -c conf/nginx.conf ;;
  stop) [ -f "$PREFIX/logs/nginx.pid" ] && kill -QUIT "$(cat "$PREFIX/logs/nginx.pid")" ;;
esac
