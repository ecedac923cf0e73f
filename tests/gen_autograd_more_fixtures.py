# gen_autograd_more_fixtures.py: PyTorch 1.13's answers for autograd as ports write it (tests/autograd_more_spec.lua):
# torch.autograd.functional (jacobian, hessian, vjp, jvp, vhp, hvp), a custom torch.autograd.Function's gradients,
# tensor and module hooks, and in-place writes under autograd: which torch raises and which it allows (with the
# gradients it gives), and the version counters.
# Run: /usr/bin/python3 tests/gen_autograd_more_fixtures.py  (writes tests/fixtures/autograd_more.json)
import json
import os
import torch
import torch.autograd.functional as AF

torch.set_default_dtype(torch.float64)


def enc(t):
    t = t.detach()
    return {"shape": list(t.shape), "data": t.reshape(-1).tolist()}


def encl(ts):
    return [enc(t) for t in ts]


X3 = [0.5, -1.25, 2.0]
A23 = [[0.3, -0.7, 1.1], [0.9, 0.2, -0.4]]
B32 = [[1.2, -0.5], [0.4, 0.8], [-0.6, 0.3]]
V3 = [1.0, -2.0, 0.5]
V2 = [0.7, -0.3]
out = {"x3": X3, "a23": A23, "b32": B32, "v3": V3, "v2": V2}
T = torch.tensor

# ---- autograd.functional ----
f_sin = lambda x: x.sin() * x                          # (3) -> (3)
f_mm = lambda a, b: (a @ b).tanh()                     # (2,3), (3,2) -> (2,2)
f_multi = lambda x: (x * 2, (x * x).sum())             # (3) -> ((3), ())
f_scalar = lambda x: (x.exp() * x.sum()).sum()         # (3) -> ()
f_scalar2 = lambda a, b: (a * b.t()).sum() + (a ** 2).sum() * b.sum()   # (2,3), (3,2) -> ()
f_lin = lambda x: (x * 3).sum()                        # linear: zero Hessian

x, a, b, v3, v2 = T(X3), T(A23), T(B32), T(V3), T(V2)
out["jacobian_sin"] = enc(AF.jacobian(f_sin, x))
j = AF.jacobian(f_mm, (a, b))
out["jacobian_mm"] = encl(j)
j = AF.jacobian(f_multi, x)
out["jacobian_multi"] = encl(j)
out["hessian_scalar"] = enc(AF.hessian(f_scalar, x))
h = AF.hessian(f_scalar2, (a, b))
out["hessian_scalar2"] = [encl(row) for row in h]
out["hessian_lin"] = enc(AF.hessian(f_lin, x))
o, g = AF.vjp(f_sin, x, v3)
out["vjp_sin"] = {"out": enc(o), "vjp": enc(g)}
o, g = AF.vjp(f_mm, (a, b), T([[1.0, 2.0], [-1.0, 0.5]]))
out["vjp_mm"] = {"out": enc(o), "vjp": encl(g), "v": [[1.0, 2.0], [-1.0, 0.5]]}
o, g = AF.jvp(f_sin, x, v3)
out["jvp_sin"] = {"out": enc(o), "jvp": enc(g)}
o, g = AF.jvp(f_mm, (a, b), (a * 0 + 0.5, b * 0 - 1.0))
out["jvp_mm"] = {"out": enc(o), "jvp": enc(g)}
o, g = AF.vhp(f_scalar, x, v3)
out["vhp_scalar"] = {"out": enc(o), "vhp": enc(g)}
o, g = AF.hvp(f_scalar, x, v3)
out["hvp_scalar"] = {"out": enc(o), "hvp": enc(g)}
o, g = AF.hvp(f_scalar2, (a, b), (a * 0 + 1.0, b * 0 + 2.0))
out["hvp_scalar2"] = {"out": enc(o), "hvp": encl(g)}
# strict: an output independent of an input raises
try:
    AF.jacobian(lambda x, y: x * 2, (x, T([1.0])), strict=True)
    out["strict_raises"] = False
except RuntimeError:
    out["strict_raises"] = True
out["nonstrict_zero"] = enc(AF.jacobian(lambda x, y: x * 2, (x, T([1.0])))[1])


# ---- a custom autograd.Function ----
class MulSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, scale, flag):
        ctx.save_for_backward(x, w)
        ctx.scale = scale
        ctx.flag = flag
        return x * w * scale, (x + w).sum()

    @staticmethod
    def backward(ctx, gy, gz):
        x, w = ctx.saved_tensors
        nig = list(ctx.needs_input_grad)
        out["custom_needs_input_grad"] = nig
        gx = gy * w * ctx.scale + gz
        gw = gy * x * ctx.scale + gz
        return gx, gw, None, None


x = T(X3, requires_grad=True)
w = T(V3, requires_grad=True)
c = T([1.5, -0.5, 2.0])
y, z = MulSum.apply(x, w, 2.5, True)
((y * c).sum() + z * 2).backward()
out["custom"] = {"y": enc(y), "z": enc(z), "gx": enc(x.grad), "gw": enc(w.grad), "c": [1.5, -0.5, 2.0]}


class STRound(torch.autograd.Function):   # straight-through rounding
    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, g):
        return g


x = T(X3, requires_grad=True)
(STRound.apply(x) * c).sum().backward()
out["custom_st"] = {"gx": enc(x.grad)}


class Lazy(torch.autograd.Function):      # set_materialize_grads(False): an unused output's grad is None
    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, ga, gb):
        out["custom_lazy_gb_is_none"] = gb is None
        return ga * 2 if gb is None else ga * 2 + gb * 3


x = T(X3, requires_grad=True)
ya, yb = Lazy.apply(x)
ya.sum().backward()
out["custom_lazy"] = {"gx": enc(x.grad)}

# ---- hooks ----
x = T(X3, requires_grad=True)
y = x * x
y.register_hook(lambda g: g * 3)
x.register_hook(lambda g: g + 1)
(y * c).sum().backward()
out["tensor_hooks"] = {"gx": enc(x.grad)}

lin = torch.nn.Linear(3, 2)
with torch.no_grad():
    lin.weight.copy_(T(A23))
    lin.bias.copy_(T(V2))
seen = {}


def pre(m, gout):
    seen["pre_gout"] = enc(gout[0])
    return (gout[0] * 2,)


def full(m, gin, gout):
    seen["gin"] = enc(gin[0])
    seen["gout"] = enc(gout[0])
    return (gin[0] * 10,)


# torch 1.13 has no register_full_backward_pre_hook (torch 2 does): a hook on the output's gradient is the same
# change of grad_output before the module's backward
lin.register_full_backward_hook(full)
xin = T([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.25], [0.0, 1.0, -2.0], [2.0, -1.0, 1.0]], requires_grad=True)
cc = T([[1.0, -1.0], [0.5, 2.0], [-0.5, 1.0], [1.5, 0.25]])
yl = lin(xin)
yl.register_hook(lambda g: pre(lin, (g,))[0])
(yl * cc).sum().backward()
seen.update({"x": xin.tolist(), "c": cc.tolist(), "gx": enc(xin.grad), "gw": enc(lin.weight.grad),
             "gb": enc(lin.bias.grad)})
out["module_hooks"] = seen

lin2 = torch.nn.Linear(3, 2)
with torch.no_grad():
    lin2.weight.copy_(T(A23))
    lin2.bias.copy_(T(V2))
lin2.register_forward_pre_hook(lambda m, args: (args[0] + 1,))
lin2.register_forward_hook(lambda m, args, o: o * 2)
out["forward_hooks"] = enc(lin2(T([[1.0, 2.0, 3.0]])))


# ---- in-place writes under autograd: raise or allow (and the gradients) ----
def case(name, fn):
    x = T(X3, requires_grad=True)
    try:
        grads = fn(x)
        out.setdefault("inplace", {})[name] = {"raises": False, "grads": encl(grads)}
    except RuntimeError as e:
        msg = str(e)
        out.setdefault("inplace", {})[name] = {"raises": True, "message": msg[:120]}


def mul_saved_input(x):
    a = x * 2; b = a * a; a.add_(1); b.sum().backward(); return [x.grad]


def add_no_save(x):
    a = x * 2; c = a + 1; a.add_(1); (c * c.detach()).sum().backward(); return [x.grad]


def relu_result_modified(x):
    c = (x * 2).relu(); c.mul_(2); c.sum().backward(); return [x.grad]


def relu_input_modified(x):
    a = x * 2; c = a.relu(); a.mul_(-1); (c * T([1.0, 2.0, 3.0])).sum().backward(); return [x.grad]


def relu_inplace(x):
    h = x * 2; h.relu_(); (h * h).sum().backward(); return [x.grad]


def mul_inplace_chain(x):
    h = x * 1; h.mul_(x); h.add_(3); h.div_(2); (h * T([1.0, 2.0, 3.0])).sum().backward(); return [x.grad]


def view_inplace(x):
    h = (x * 1).reshape(1, 3).expand(2, 3).contiguous()
    h[0].mul_(3)
    (h * T([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])).sum().backward(); return [x.grad]


def view_inplace_then_read_old_view(x):
    h = x * 1; v = h[1:]; h.mul_(2); (v * T([1.0, 2.0])).sum().backward(); return [x.grad]


def sigmoid_out_modified(x):
    s = (x * 1).sigmoid(); s.add_(1); s.sum().backward(); return [x.grad]


def exp_input_zeroed(x):
    a = x * 1; e = a.exp(); a.zero_(); e.sum().backward(); return [x.grad]


def setitem_view_twice(x):
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    h = x * 2; v = h[0:2]; v[torch.tensor([1])] = w[0] * w[1]; v[v < 0] = 0
    (h * torch.tensor([1.0, 2.0, 3.0])).sum().backward(); return [x.grad, w.grad, h]


def view_written_then_read(x):
    h = x * 2; v = h[0:2]; v.mul_(3); v.copy_(torch.where(v < 0, torch.zeros(1), v))
    (h * torch.tensor([1.0, 2.0, 3.0])).sum().backward(); return [x.grad, h]


def zero_then_grad(x):
    h = x * 2; h.zero_(); g, = torch.autograd.grad((h + x).sum(), x); return [g, torch.tensor([float(h.requires_grad)])]


def leaf_inplace(x):
    x.add_(1); return [x]


def view_of_leaf_inplace(x):
    x[0].mul_(2); return [x]


def nograd_write_saved(x):
    y = torch.ones(3); b = x * y
    with torch.no_grad():
        y.add_(1)
    b.sum().backward(); return [x.grad]


def nograd_write_unsaved(x):
    y = torch.ones(3); b = x + y
    with torch.no_grad():
        y.add_(1)
    b.sum().backward(); return [x.grad]


def plain_written_with_grad_input(x):
    z = torch.zeros(3); z.add_(x * 2); z.mul_(x); z.sum().backward(); return [x.grad]


def matmul_weight_modified(x):
    W = torch.ones(3, 2); y = x.reshape(1, 3) @ W
    with torch.no_grad():
        W.mul_(2)
    y.sum().backward(); return [x.grad]


def div_denominator_modified(x):
    a = x * 1 + 2; q = x / a; a.add_(1); q.sum().backward(); return [x.grad]


def setitem_after_use(x):
    y = x * 2; z = y * y; y[0] = 0; z.sum().backward(); return [x.grad]


def setitem_unsaved(x):
    y = x * 2; z = y + 1; y[0] = 0; (z + y).sum().backward(); return [x.grad]


for f in [mul_saved_input, add_no_save, relu_result_modified, relu_input_modified, relu_inplace, mul_inplace_chain,
          view_inplace, view_inplace_then_read_old_view, sigmoid_out_modified, exp_input_zeroed, zero_then_grad,
          setitem_view_twice, view_written_then_read, leaf_inplace, view_of_leaf_inplace, nograd_write_saved,
          nograd_write_unsaved, plain_written_with_grad_input, matmul_weight_modified, div_denominator_modified,
          setitem_after_use, setitem_unsaved]:
    case(f.__name__, f)

# version counters
t = torch.zeros(3)
vs = [t._version]
t.add_(1); vs.append(t._version)
t[0] = 5; vs.append(t._version)
v = t[1:]
v.mul_(2); vs.append(t._version); vs.append(v._version)
t.zero_(); vs.append(v._version)
u = t + 1; vs.append(u._version)
out["versions"] = vs

# retain_graph and backward's inputs
x = T(X3, requires_grad=True)
l = (x * x).sum()
l.backward(retain_graph=True)
l.backward()
out["retain_twice"] = enc(x.grad)
a = T(X3, requires_grad=True)
b = T(V3, requires_grad=True)
(a * b).sum().backward(inputs=[a])
out["backward_inputs"] = {"ga": enc(a.grad), "gb_is_none": b.grad is None}
# double backward (create_graph)
x = T(X3, requires_grad=True)
g, = torch.autograd.grad((x ** 3).sum(), x, create_graph=True)
gg, = torch.autograd.grad((g * T(V3)).sum(), x)
out["double_backward"] = enc(gg)

path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "autograd_more.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1)
print("wrote", path)
