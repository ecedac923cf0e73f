# tests/gen_rnn_fixtures.py: PyTorch 1.13 references for tests/rnn_spec.lua: RNN/LSTM/GRU outputs, final
# states and gradients (of sum(out * r) + sum(h_n * rh) [+ sum(c_n * rc)]) on PyTorch-initialized weights
# copied through the state dict. Writes tests/fixtures/rnn.json. Run: /usr/bin/python3 tests/gen_rnn_fixtures.py
import json
import os

import torch
import torch.nn as nn

from gen_nn_module_fixtures import enc

torch.manual_seed(0)
HERE = os.path.dirname(os.path.abspath(__file__))


def case(name, ctor, opts, x, h0=None, c0=None):
    m = getattr(nn, ctor)(*opts["sizes"], **opts.get("kwargs", {}))
    m.eval()  # dropout between layers is random; eval mode runs without it
    sd = {k: enc(v) for k, v in m.state_dict().items()}
    x = x.clone().requires_grad_()
    leaves = [x]
    hx = None
    if h0 is not None:
        h0 = h0.clone().requires_grad_()
        leaves.append(h0)
        hx = h0
        if c0 is not None:
            c0 = c0.clone().requires_grad_()
            leaves.append(c0)
            hx = (h0, c0)
    out, hn = m(x, hx)
    finals = list(hn) if isinstance(hn, tuple) else [hn]
    rs = [torch.randn(t.shape) for t in [out] + finals]
    sum((t * r).sum() for t, r in zip([out] + finals, rs)).backward()
    return {
        "name": name, "ctor": ctor, "sizes": opts["sizes"], "opts": opts.get("kwargs", {}),
        "state_dict": sd, "input": enc(x), "hx": [enc(t) for t in leaves[1:]],
        "output": enc(out), "finals": [enc(t) for t in finals], "r": [enc(r) for r in rs],
        "input_grads": [enc(t.grad) for t in leaves],
        "param_grads": {n: enc(p.grad) for n, p in m.named_parameters()},
    }


def main():
    cases = [
        case("rnn_tanh", "RNN", {"sizes": [3, 5]}, torch.randn(6, 2, 3)),
        case("rnn_relu_2layer_h0", "RNN", {"sizes": [3, 5], "kwargs": {"num_layers": 2, "nonlinearity": "relu"}},
             torch.randn(4, 3, 3), torch.randn(2, 3, 5)),
        case("lstm_h0", "LSTM", {"sizes": [4, 6]}, torch.randn(7, 3, 4), torch.randn(1, 3, 6), torch.randn(1, 3, 6)),
        case("lstm_bi_2layer_batch_first", "LSTM",
             {"sizes": [4, 5], "kwargs": {"num_layers": 2, "bidirectional": True, "batch_first": True, "dropout": 0.5}},
             torch.randn(3, 6, 4)),
        case("lstm_unbatched_nobias", "LSTM", {"sizes": [3, 4], "kwargs": {"bias": False}}, torch.randn(5, 3),
             torch.randn(1, 4), torch.randn(1, 4)),
        case("gru", "GRU", {"sizes": [4, 6]}, torch.randn(5, 2, 4)),
        case("gru_bi_2layer_h0", "GRU", {"sizes": [3, 4], "kwargs": {"num_layers": 2, "bidirectional": True}},
             torch.randn(5, 2, 3), torch.randn(4, 2, 4)),
        case("lstm_f64", "LSTM", {"sizes": [3, 4], "kwargs": {"dtype": torch.float64}},
             torch.randn(4, 2, 3, dtype=torch.float64)),
    ]
    for c in cases:
        if "dtype" in c["opts"]:
            c["opts"]["dtype"] = "f64"
    with open(os.path.join(HERE, "fixtures", "rnn.json"), "w") as f:
        json.dump({"cases": cases}, f)


if __name__ == "__main__":
    main()
