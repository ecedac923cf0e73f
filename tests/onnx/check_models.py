# tests/onnx/check_models.py: onnx.checker.check_model(full_check=True) and strict shape inference on every
# model file listed (one path a line) in argv[1]; prints "path<TAB>ok" or "path<TAB>error text" per model.
import sys
import onnx

for path in open(sys.argv[1]).read().split("\n"):
    if not path:
        continue
    try:
        model = onnx.load(path)
        onnx.checker.check_model(model, full_check=True)
        onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
        print(path + "\tok")
    except Exception as e:  # the verdict of this model; the next one is checked too
        print(path + "\t" + " ".join(str(e).split()))
