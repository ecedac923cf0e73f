/* plan_fuzz.c: libFuzzer target for the C loader: an input is a plan file and a params file
   (u32 little-endian plan length, the plan bytes, the params bytes), loaded with ds_model_load_bytes and,
   when it loads, run on zero-filled inputs of its specs. The first byte's low bit chooses whether the
   harness first reseals the plan (its body size and checksum, and the params size and checksum it names),
   so mutations reach the checks past the checksums. Built and run by `make fuzz` (ASan + UBSan). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "ds.h"

static void reseal(uint8_t *plan, size_t plan_len, const uint8_t *params, size_t params_len) {
  ds_planfile_header h;
  if (plan_len < sizeof h) return;
  memcpy(&h, plan, sizeof h);
  h.body_bytes = (int64_t)(plan_len - sizeof h);
  h.body_crc32 = ds_crc32(plan + sizeof h, h.body_bytes);
  h.params_bytes = (int64_t)params_len;
  h.params_crc32 = ds_crc32(params, (int64_t)params_len);
  memcpy(plan, &h, sizeof h);
}

/* run plan 0 on zero inputs when its tensors and its arena are small (a plan may ask for up to 1 TiB of
   arena, which ds allocates on the first run or refuses with DS_ENOMEM; past libFuzzer's memory limit) */
static void run(ds_model *m) {
  int ni = ds_model_num_inputs(m), no = ds_model_num_outputs(m);
  ds_tensor *in[64] = {0}, *out[64] = {0};
  int ok = ni <= 64 && no <= 64 && ds_model_arena_bytes(m, 0) <= (INT64_C(1) << 28);
  for (int i = 0; ok && i < ni; i++) {
    const ds_tensor *s = ds_model_input_spec(m, 0, i);
    ok = s && s->numel <= (1 << 16) && (in[i] = ds_tensor_new(s->dtype, s->ndim, s->shape)) != NULL;
    if (ok) memset(in[i]->data, 0, (size_t)(s->numel * ds_dtype_size(s->dtype)));
  }
  for (int i = 0; ok && i < no; i++) {
    const ds_tensor *s = ds_model_output_spec(m, 0, i);
    ok = s && s->numel <= (1 << 16) && (out[i] = ds_tensor_new(s->dtype, s->ndim, s->shape)) != NULL;
  }
  if (ok) ds_model_run(m, (const ds_tensor *const *)in, out);
  for (int i = 0; i < 64; i++) { ds_tensor_free(in[i]); ds_tensor_free(out[i]); }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 5) return 0;
  uint32_t plan_len;
  memcpy(&plan_len, data + 1, 4);
  if (plan_len > size - 5) return 0;
  uint8_t *plan = malloc(plan_len + 1);
  if (!plan) return 0;
  memcpy(plan, data + 5, plan_len);
  const uint8_t *params = data + 5 + plan_len;
  size_t params_len = size - 5 - plan_len;
  if (data[0] & 1) reseal(plan, plan_len, params, params_len);
  ds_model *m = ds_model_load_bytes(plan, plan_len, params, (int64_t)params_len);
  if (m) { run(m); ds_model_free(m); }
  free(plan);
  return 0;
}
