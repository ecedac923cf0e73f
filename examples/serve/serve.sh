#!/bin/sh
# examples/serve/serve.sh: serve a model directory with ds.serve; the same as bin/ds-serve (docs/SERVING.md).
# usage: serve.sh PREFIX PORT MODELS_DIR [foreground|start|stop]
exec "$(dirname "$0")/../../bin/ds-serve" "$@"
