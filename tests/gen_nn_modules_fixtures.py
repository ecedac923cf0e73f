# tests/gen_nn_modules_fixtures.py: PyTorch 1.13 references for tests/nn_modules_spec.lua: the loss
# modules (options, weights as buffers) and Embedding.from_pretrained.
# Writes tests/fixtures/nn_modules.json. Run: /usr/bin/python3 tests/gen_nn_modules_fixtures.py
import json
import os

import torch
import torch.nn as nn

from gen_nn_module_fixtures import enc, lua_key

torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def losses():
    logits, target = torch.randn(6, 5), torch.tensor([0, 4, 2, 1, 3, 2])
    x, y = torch.randn(4, 3), torch.rand(4, 3)
    cases = []

    def add(name, module, inputs, lua_inputs=None, opts=None, args=None):
        """args: ds's positional constructor arguments (tensors encoded), before the options table opts"""
        ins = [t.clone().requires_grad_() if t.is_floating_point() else t for t in inputs]
        out = module(*ins)
        out.sum().backward()
        cases.append({"name": name, "args": args or [], "opts": opts or {},
                      "inputs": [enc(t) for t in (lua_inputs or inputs)], "output": enc(out), "grad": enc(ins[0].grad)})

    add("CrossEntropyLoss", nn.CrossEntropyLoss(label_smoothing=0.1), [logits, target], [logits, target + 1],
        {"label_smoothing": 0.1})
    add("NLLLoss", nn.NLLLoss(reduction="sum"), [torch.log_softmax(logits, -1), target],
        [torch.log_softmax(logits, -1), target + 1], {"reduction": "sum"})
    add("MSELoss", nn.MSELoss(), [x, y])
    add("L1Loss", nn.L1Loss(reduction="none"), [x, y], None, {"reduction": "none"})
    add("BCEWithLogitsLoss", nn.BCEWithLogitsLoss(pos_weight=torch.tensor([0.5, 1.0, 2.0])), [x * 3, y], None,
        {"pos_weight": enc(torch.tensor([0.5, 1.0, 2.0]))})
    add("BCELoss", nn.BCELoss(), [torch.sigmoid(x), y])
    # PyTorch's positional constructor forms and the remaining loss modules
    w5, w3 = torch.rand(5) + 0.5, torch.rand(3) + 0.5
    add("CrossEntropyLoss", nn.CrossEntropyLoss(w5, reduction="sum"), [logits, target], [logits, target + 1],
        {"reduction": "sum"}, [enc(w5)])
    add("NLLLoss", nn.NLLLoss(w5, None, 2), [torch.log_softmax(logits, -1), target],
        [torch.log_softmax(logits, -1), target + 1], {"ignore_index": 3}, [enc(w5)])
    add("BCELoss", nn.BCELoss(w3), [torch.sigmoid(x), y], None, None, [enc(w3)])
    add("BCEWithLogitsLoss", nn.BCEWithLogitsLoss(w3, reduction="none"), [x * 3, y], None, {"reduction": "none"},
        [enc(w3)])
    add("HuberLoss", nn.HuberLoss("sum", 0.5), [x * 2, y], None, None, ["sum", 0.5])
    add("SmoothL1Loss", nn.SmoothL1Loss(beta=0.3), [x * 2, y], None, {"beta": 0.3})
    add("KLDivLoss", nn.KLDivLoss(reduction="batchmean", log_target=True),
        [torch.log_softmax(x, -1), torch.log_softmax(y, -1)], None, {"reduction": "batchmean", "log_target": True})
    add("KLDivLoss", nn.KLDivLoss(), [torch.log_softmax(x, -1), torch.softmax(y, -1)])
    add("MarginRankingLoss", nn.MarginRankingLoss(0.25), [x[:, 0], x[:, 1], torch.sign(y[:, 2] - 0.5)], None,
        None, [0.25])
    return cases


def activations():
    out = []
    for name, m, lua_opts in [("Softplus", nn.Softplus(beta=2.0, threshold=1.0), {"beta": 2, "threshold": 1}),
                              ("Softplus", nn.Softplus(), {})]:
        x = (torch.randn(3, 5) * 2).requires_grad_()
        y = m(x)
        y.sum().backward()
        out.append({"name": name, "opts": lua_opts, "input": enc(x), "output": enc(y), "grad": enc(x.grad)})
    return out


def from_pretrained():
    w = torch.randn(5, 3)
    ids = torch.tensor([[0, 4], [2, 2]])
    e = nn.Embedding.from_pretrained(w, freeze=False, padding_idx=2)
    out = e(ids)
    out.sum().backward()
    return {"weight": enc(w), "ids": enc(ids + 1), "output": enc(out), "grad": enc(e.weight.grad)}


def transformers():
    out = []
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True)
    enc_stack = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8))
    dec = nn.TransformerDecoderLayer(8, 2, dim_feedforward=12, dropout=0.0, activation="gelu")
    mha = nn.MultiheadAttention(8, 2, kdim=5, vdim=3)
    dec_pre = nn.TransformerDecoderLayer(8, 4, dim_feedforward=12, dropout=0.0, batch_first=True, norm_first=True)
    for m in (enc_stack, dec, dec_pre, mha):
        with torch.no_grad():
            for p in m.parameters():
                if p.dim() == 1:
                    p.uniform_(-0.3, 0.3)
    kpm = torch.tensor([[False, False, False, True], [False, False, False, False]])
    causal = torch.triu(torch.ones(3, 3, dtype=torch.bool), diagonal=1)
    cases = [
        ("encoder_stack", enc_stack, [torch.randn(2, 4, 8)], {"src_key_padding_mask": kpm}),
        ("decoder_layer", dec, [torch.randn(3, 2, 8), torch.randn(4, 2, 8)],
         {"tgt_mask": causal, "memory_key_padding_mask": kpm}),
        ("mha_kdim_vdim", mha, [torch.randn(3, 2, 8), torch.randn(4, 2, 5), torch.randn(4, 2, 3)],
         {"key_padding_mask": kpm}),
        ("decoder_layer_norm_first", dec_pre, [torch.randn(2, 3, 8), torch.randn(2, 4, 8)], {"tgt_mask": causal}),
    ]
    for name, m, inputs, kwargs in cases:
        m.train()  # dropout is 0; train mode keeps PyTorch off its nested-tensor fast path
        ins = [t.clone().requires_grad_() for t in inputs]
        y = m(*ins, **kwargs)
        if isinstance(y, tuple):
            y = y[0]
        r = torch.randn(y.shape)
        (y * r).sum().backward()
        out.append({"name": name, "state_dict": {lua_key(k): enc(v) for k, v in m.state_dict().items()},
                    "inputs": [enc(t) for t in inputs], "masks": {k: enc(v) for k, v in kwargs.items()},
                    "output": enc(y), "r": enc(r), "input_grads": [enc(t.grad) for t in ins],
                    "param_grads": {lua_key(k): enc(p.grad) for k, p in m.named_parameters()}})
    return out


def main():
    with open(os.path.join(HERE, "fixtures", "nn_modules.json"), "w") as f:
        json.dump({"losses": losses(), "activations": activations(), "from_pretrained": from_pretrained(), "transformers": transformers()}, f)


if __name__ == "__main__":
    main()
