/* predict.c: run a graph saved by ds.save from C, with no Lua: the C embedding API of libds.
   usage: predict dir/name input1.raw [input2.raw ...] [-o output.raw]
   Each input file holds the raw little-endian values of one input; the plan (one per input shape the
   model was saved with) whose input sizes match the files runs (the shapes are printed when none does);
   the first output is printed (up to 16 values) and, with -o, written raw.
   Build: make embed (-> $(BUILD)/predict). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ds.h"

static const char *dtype_name[] = {"f32", "f64", "i64", "i32", "u8", "bool"};

static void print_spec(const char *what, int i, const ds_tensor *s) {
  fprintf(stderr, "  %s %d: %s (", what, i + 1, dtype_name[s->dtype]);
  for (int d = 0; d < s->ndim; d++) fprintf(stderr, d ? ",%lld" : "%lld", (long long)s->shape[d]);
  fprintf(stderr, ")\n");
}

static double value_at(const ds_tensor *t, int64_t i) {
  switch (t->dtype) {
    case DS_F32: return ((const float *)t->data)[i];
    case DS_F64: return ((const double *)t->data)[i];
    case DS_I64: return (double)((const int64_t *)t->data)[i];
    case DS_I32: return ((const int32_t *)t->data)[i];
    default: return ((const uint8_t *)t->data)[i];
  }
}

int main(int argc, char **argv) {
  const char *out_path = NULL;
  const char *files[64];
  int nfiles = 0;
  for (int i = 2; i < argc; i++) {
    if (strcmp(argv[i], "-o") == 0 && i + 1 < argc) out_path = argv[++i];
    else if (nfiles < 64) files[nfiles++] = argv[i];
  }
  if (argc < 2) { fprintf(stderr, "usage: %s dir/name input1.raw [...] [-o output.raw]\n", argv[0]); return 2; }
  ds_model *m = ds_model_load(argv[1]);
  if (!m) { fprintf(stderr, "predict: %s\n", ds_last_error()); return 1; }
  int nin = ds_model_num_inputs(m), nout = ds_model_num_outputs(m), nplans = ds_model_num_plans(m);
  /* the plan (one per input shape the model was saved with) whose input sizes match the files */
  int plan = -1;
  for (int k = 0; k < nplans && plan < 0 && nfiles == nin; k++) {
    int ok = 1;
    for (int i = 0; i < nin && ok; i++) {
      const ds_tensor *s = ds_model_input_spec(m, k, i);
      FILE *f = fopen(files[i], "rb");
      long size = -1;
      if (f && fseek(f, 0, SEEK_END) == 0) size = ftell(f);
      if (f) fclose(f);
      ok = size == (long)(s->numel * ds_dtype_size(s->dtype));
    }
    if (ok) plan = k;
  }
  if (plan < 0) {
    fprintf(stderr, "predict: the model takes %d inputs (%d files given) of one of these shapes:\n", nin, nfiles);
    for (int k = 0; k < nplans; k++)
      for (int i = 0; i < nin; i++) print_spec("input", i, ds_model_input_spec(m, k, i));
    ds_model_free(m);
    return 2;
  }
  ds_tensor *in[64], *out[64];
  int rc = 1;
  for (int i = 0; i < nin; i++) {
    const ds_tensor *s = ds_model_input_spec(m, plan, i);
    in[i] = ds_tensor_new(s->dtype, s->ndim, s->shape);
    int64_t bytes = s->numel * ds_dtype_size(s->dtype);
    FILE *f = fopen(files[i], "rb");
    size_t got = f ? fread(in[i]->data, 1, (size_t)bytes, f) : 0;
    if (f) fclose(f);
    if ((int64_t)got != bytes) { fprintf(stderr, "predict: cannot read %s\n", files[i]); return 2; }
  }
  for (int i = 0; i < nout; i++) {
    const ds_tensor *s = ds_model_output_spec(m, plan, i);
    out[i] = ds_tensor_new(s->dtype, s->ndim, s->shape);
  }
  if (ds_model_run(m, (const ds_tensor *const *)in, out) != 0) {
    fprintf(stderr, "predict: %s\n", ds_last_error());
  } else {
    const ds_tensor *y = out[0];
    printf("output 1: %s (", dtype_name[y->dtype]);
    for (int d = 0; d < y->ndim; d++) printf(d ? ",%lld" : "%lld", (long long)y->shape[d]);
    printf(")\n");
    for (int64_t i = 0; i < y->numel && i < 16; i++) printf("%s%.9g", i ? " " : "", value_at(y, i));
    printf("%s\n", y->numel > 16 ? " ..." : "");
    rc = 0;
    if (out_path) {
      FILE *f = fopen(out_path, "wb");
      int64_t bytes = y->numel * ds_dtype_size(y->dtype);
      if (!f || fwrite(y->data, 1, (size_t)bytes, f) != (size_t)bytes) { fprintf(stderr, "predict: cannot write %s\n", out_path); rc = 1; }
      if (f) fclose(f);
    }
  }
  for (int i = 0; i < nin; i++) ds_tensor_free(in[i]);
  for (int i = 0; i < nout; i++) ds_tensor_free(out[i]);
  ds_model_free(m);
  return rc;
}
