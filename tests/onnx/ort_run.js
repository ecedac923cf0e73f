// ort_run.js: run ONNX models in ONNX Runtime (onnxruntime-node, installed by `make onnx` in $ORT_DIR) on inputs
// from a JSON file and write their outputs (and the run time) as JSON. Tensors are their raw little-endian bytes in
// base64 (NaN, inf and int64 past 2^53 cross exactly).
//   node tests/onnx/ort_run.js request.json response.json
// request:  {"runs": [{"model": "m.onnx", "threads": 1, "optimization": "disabled" | "all" | ..., "warmup": 0,
//                      "feeds": [{"x": {"type": "float32", "dims": [2, 3], "base64": "..."}}, ...]}, ...]}
// response: {"runs": [{"outputs": [{"y": {"type", "dims", "base64"}}, ...one per feed], "seconds": s} | {"error": msg}]}
// "seconds" is the wall time of the feeds' session.run calls alone (after "warmup" untimed runs of feed 1).
'use strict';
const fs = require('fs');
const path = require('path');
const ortDir = process.env.ORT_DIR || path.join(__dirname, '..', '..', 'build', 'ort');
const ort = require(path.join(path.resolve(ortDir), 'node_modules', 'onnxruntime-node'));

const ARRAYS = { float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
  bool: Uint8Array, uint8: Uint8Array, float16: Uint16Array, int8: Int8Array }; // float16: the bits

function tensor(t) {
  const A = ARRAYS[t.type];
  if (!A) throw new Error('ort_run: unsupported input type ' + t.type);
  const bytes = Buffer.from(t.base64, 'base64');
  const copy = new ArrayBuffer(bytes.length); // aligned for the typed array
  new Uint8Array(copy).set(bytes);
  return new ort.Tensor(t.type, new A(copy), t.dims);
}

function plain(t) {
  if (!ARRAYS[t.type]) throw new Error('ort_run: unsupported output type ' + t.type);
  const d = t.data;
  return { type: t.type, dims: Array.from(t.dims), base64: Buffer.from(d.buffer, d.byteOffset, d.byteLength).toString('base64') };
}

async function runOne(run) {
  const session = await ort.InferenceSession.create(run.model, {
    graphOptimizationLevel: run.optimization || 'disabled',
    intraOpNumThreads: run.threads || 1,
    interOpNumThreads: 1,
    executionMode: 'sequential',
  });
  const feeds = run.feeds.map((f) => {
    const out = {};
    for (const name of Object.keys(f)) out[name] = tensor(f[name]);
    return out;
  });
  for (let i = 0; i < (run.warmup || 0); i++) await session.run(feeds[0]);
  const results = [];
  const t0 = process.hrtime.bigint();
  for (const feed of feeds) results.push(await session.run(feed));
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const outputs = run.keep === false ? [] : results.map((r) => {
    const o = {};
    for (const name of session.outputNames) o[name] = plain(r[name]);
    return o;
  });
  return { outputs, seconds, output_names: session.outputNames };
}

async function main() {
  const [reqPath, resPath] = process.argv.slice(2);
  const req = JSON.parse(fs.readFileSync(reqPath, 'utf8'));
  const runs = [];
  for (const run of req.runs) {
    try {
      runs.push(await runOne(run));
    } catch (e) {
      runs.push({ error: String(e && e.message ? e.message : e) });
    }
  }
  fs.writeFileSync(resPath, JSON.stringify({ runs }));
}

main().catch((e) => { console.error(e); process.exit(1); });
