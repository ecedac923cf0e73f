#!/bin/sh
# examples/serve/serve.sh: render nginx.conf into a prefix dir and run nginx (foreground or daemon).
# usage: serve.sh PREFIX PORT MODELS_DIR [foreground|start|stop]
# DS_SERVE_THREADS: worker threads (and their Lua VMs) per nginx worker, at least the number of models (default 2)
# Started by root, nginx runs its workers as the owner of MODELS_DIR (nginx's `user`); otherwise as the caller.
# Before starting, the workers' user must be able to read the code, libds and every model file: if not, this
# stops with the path it cannot read and the fix (docs/SERVING.md "Who runs the models").
set -e
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
PREFIX=$1; PORT=$2; MODELS=$(cd "$3" && pwd); MODE=${4:-foreground}
mkdir -p "$PREFIX/logs" "$PREFIX/conf" "$PREFIX/temp"
PREFIX=$(cd "$PREFIX" && pwd)
if [ "$MODE" = stop ]; then
  [ -f "$PREFIX/logs/nginx.pid" ] && kill -QUIT "$(cat "$PREFIX/logs/nginx.pid")"
  exit
fi
THREADS=${DS_SERVE_THREADS:-2}

fail() { printf 'serve.sh: %s\n' "$1" >&2; exit 1; }

# the workers' user, the nginx `user` line, and the command prefix that runs a command as that user
if [ "$(id -u)" = 0 ]; then
  OWNER_UID=$(stat -c %u "$MODELS")
  WORKER=$(getent passwd "$OWNER_UID" | cut -d: -f1)
  [ -n "$WORKER" ] || fail "the owner of $MODELS (uid $OWNER_UID) has no user name, and nginx's workers run as \
the model directory's owner: chown $MODELS to a user who can read the checkout $ROOT"
  WORKER_GROUP=$(id -gn "$WORKER")
  USER_LINE="user $WORKER $WORKER_GROUP;  # started by root: the workers run as the model directory's owner"
  AS_WORKER="setpriv --reuid=$WORKER --regid=$WORKER_GROUP --init-groups"
  WHO="$WORKER (the owner of $MODELS)"
else
  WORKER=$(id -un)
  USER_LINE="# started by $WORKER: the workers run as $WORKER"
  AS_WORKER=
  WHO="$WORKER"
fi

# what the workers read: ds's Lua code and header, the serving code, libds (where lua/ds/ffi.lua looks for it;
# nginx passes no DS_LIB to the workers) and everything in the model directory
LIB=
for candidate in "$ROOT/lua/ds/libds.so" "$ROOT/build/libds.so"; do
  if [ -e "$candidate" ]; then LIB=$candidate; break; fi
done
[ -n "$LIB" ] || fail "no libds.so in $ROOT/build: run make in $ROOT"
# run as the workers' user, for each path given: a directory must let the user in, a file must be readable.
# The first one that fails: "BLOCKER<TAB>PATH", BLOCKER being the first directory on the way the user cannot
# enter, or PATH itself.
CHECK='for path; do
  if [ -d "$path" ]; then [ -x "$path" ] && continue; elif [ -r "$path" ]; then continue; fi
  blocker=; IFS=/; set -f
  for part in ${path#/}; do
    blocker="$blocker/$part"
    if [ -d "$blocker" ] && [ ! -x "$blocker" ]; then break; fi
  done
  printf "%s\t%s\n" "$blocker" "$path"; exit 1
done'
UNREADABLE=$(find "$ROOT/lua" "$ROOT/examples/serve" "$ROOT/src/ds.h" "$LIB" "$MODELS" -print0 |
  xargs -0 $AS_WORKER sh -c "$CHECK" sh | head -n 1)
if [ -n "$UNREADABLE" ]; then
  BLOCKER=$(printf '%s' "$UNREADABLE" | cut -f1)
  UNREAD_PATH=$(printf '%s' "$UNREADABLE" | cut -f2)
  # the permission the workers' user lacks: search (x) a directory, read (r) a file, in the class it falls in
  if [ -d "$BLOCKER" ]; then PERM=x; else PERM=r; fi
  if [ "$(stat -c %u "$BLOCKER")" = "$(id -u "$WORKER")" ]; then CLASS=u
  elif id -Gn "$WORKER" | tr ' ' '\n' | grep -qx "$(stat -c %G "$BLOCKER")"; then CLASS=g
  else CLASS=o; fi
  FIX="chmod $CLASS+$PERM '$BLOCKER' (serve.sh then names the next path, if any)"
  if [ -n "$AS_WORKER" ]; then FIX="$FIX, or chown the model directory to a user who can read $ROOT"; fi
  fail "nginx's workers run as $WHO, who cannot read $UNREAD_PATH:
  $(ls -ld "$BLOCKER") keeps them out.
  Fix: $FIX."
fi

sed -e "s|@ROOT@|$ROOT|g" -e "s|@PORT@|$PORT|g" -e "s|@MODELS@|$MODELS|g" -e "s|@THREADS@|$THREADS|g" \
  -e "s|@USER@|$USER_LINE|" "$ROOT/examples/serve/nginx.conf.in" > "$PREFIX/conf/nginx.conf"
case "$MODE" in
  foreground) exec nginx -p "$PREFIX" -c conf/nginx.conf -g "daemon off;" ;;
  start) nginx -p "$PREFIX" -c conf/nginx.conf ;;
  *) fail "unknown mode '$MODE' (foreground, start or stop)" ;;
esac
