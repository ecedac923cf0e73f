/* conv_ep.h: a conv2d epilogue (fused.c's conv2d_ep): a callback the conv2d forward kernels (nn_conv.c's im2col
   path, the direct and the depthwise paths) call on each block of output they have just written -- images
   [n0, n0 + m), channels [c0, c0 + nc), whole OH x OW planes -- so the fused elementwise chain runs on cache-hot
   values, on the thread that wrote them. A chain that is one activation alone on the conv's output (act: hardswish)
   may instead be applied by the kernel itself (the direct path: on each register tile just stored, still in L1,
   or as it puts out the columns; no later pass over the output, no barrier before it); a kernel doing so does not
   call apply for those values. The elementwise kernel's ops, so the same bits. */
#ifndef DS_CONV_EP_H
#define DS_CONV_EP_H
#include "ds.h"

typedef struct conv_ep conv_ep;
struct conv_ep {
  void (*apply)(const conv_ep *ep, int64_t n0, int64_t m, int64_t c0, int64_t nc);
  int act;   /* CONV_ACT_*: the chain as one activation a kernel may apply itself, or CONV_ACT_NONE */
};
#define CONV_ACT_NONE 0
#define CONV_ACT_HARDSWISH 1   /* el_hardswish_f32: x * min(max(x + 3, 0), 6) / 6 */
#define CONV_ACT_RELU 2        /* el_relu_f32: x < 0 ? 0 : x (NaN and -0.0 stay) */

/* pooling applied to a conv's output (after its bias and act) before it is stored: conv2d_pool (conv_pool.c).
   The pool kernels' bits (nn_pool_kernels.h): max starts from the window's first value, takes v when v > m,
   and a NaN in the window gives the window's last NaN; avg sums the window from +0 in row-major order, then
   divides by kh * kw (include_pad) or by the count of the window's positions inside the plane. */
#define CONV_POOL_MAX 1
#define CONV_POOL_AVG 2
typedef struct { int kind, include_pad; int64_t kh, kw, sh, sw, ph, pw; } conv_pool;

/* conv2d (t = out, x, w, b; attrs: stride, padding, dilation, groups), calling ep per block when not NULL */
int ds_conv2d_ep_run_f32(ds_tensor *const *t, const double *attrs, const conv_ep *ep);
int ds_conv2d_ep_run_f64(ds_tensor *const *t, const double *attrs, const conv_ep *ep);
#endif
