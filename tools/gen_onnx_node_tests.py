# tools/gen_onnx_node_tests.py: writes ONNX's backend conformance node tests (model.onnx + test_data_set_0/*.pb
# per case) into OUTDIR from the generators Debian's python3-onnx ships (their data is not packaged).
# usage: /usr/bin/python3 tools/gen_onnx_node_tests.py OUTDIR   (make onnx-node-tests)
# ONNX 1.12's generators use NumPy aliases that NumPy 1.24 removed (np.float, np.object, ...): restored here.
import sys
import warnings

import numpy as np

warnings.simplefilter("ignore")
for alias, builtin in (("float", float), ("object", object), ("bool", bool), ("int", int)):
    if alias not in np.__dict__:
        setattr(np, alias, builtin)

import argparse  # noqa: E402

from onnx.backend.test.cmd_tools import generate_data  # noqa: E402

if len(sys.argv) != 2:
    sys.exit("usage: gen_onnx_node_tests.py OUTDIR")
generate_data(argparse.Namespace(output=sys.argv[1], op_type=None))
