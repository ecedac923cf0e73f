# tests/onnx/exports/torch_models.py: small everyday torch.nn models, as users export them, for
# tests/onnx/gen_export_models.py (eval mode; weights random after the caller's manual_seed).
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def randomize_batch_norms(model):
    """running statistics and affine parameters that are not the defaults, so BatchNorm's inference form matters"""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.2, 0.2)
    return model


class MobileNetBlock(nn.Module):
    """stem conv + BN + hardswish, depthwise conv + BN + relu6, squeeze-excite (global average pool, 1x1 convs,
    hardsigmoid), pointwise conv + BN, residual, BN kept as BatchNormalization, mean-pooled linear head.
    x (B, 3, 16, 16) -> logits (B, 10)"""

    def __init__(self, c=16, squeeze=8, classes=10):
        super().__init__()
        self.stem, self.stem_bn = nn.Conv2d(3, c, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(c)
        self.dw, self.dw_bn = nn.Conv2d(c, c, 3, padding=1, groups=c, bias=False), nn.BatchNorm2d(c)
        self.se_reduce, self.se_expand = nn.Conv2d(c, squeeze, 1), nn.Conv2d(squeeze, c, 1)
        self.pw, self.pw_bn = nn.Conv2d(c, c, 1, bias=False), nn.BatchNorm2d(c)
        self.out_bn = nn.BatchNorm2d(c)  # after the residual sum: not folded into a Conv
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        x = F.hardswish(self.stem_bn(self.stem(x)))                     # (B, c, 8, 8)
        y = F.relu6(self.dw_bn(self.dw(x)))
        s = F.adaptive_avg_pool2d(y, 1)                                 # (B, c, 1, 1)
        y = y * F.hardsigmoid(self.se_expand(F.relu(self.se_reduce(s))))
        y = F.hardswish(self.out_bn(self.pw_bn(self.pw(y)) + x))
        return self.head(y.mean((2, 3)))


class UNetDecoder(nn.Module):
    """transposed convs (stride 2; output_padding), skip concats, convs, nearest and bilinear upsampling
    (align_corners False and True). bottom (B, 32, 4, 4), skip1 (B, 16, 8, 8), skip2 (B, 8, 16, 16)
    -> (B, 2, 96, 96)"""

    def __init__(self):
        super().__init__()
        self.up1 = nn.ConvTranspose2d(32, 16, 2, stride=2)
        self.conv1 = nn.Conv2d(32, 16, 3, padding=1)
        self.up2 = nn.ConvTranspose2d(16, 8, 3, stride=2, padding=1, output_padding=1)
        self.conv2 = nn.Conv2d(16, 8, 3, padding=1)
        self.conv3 = nn.Conv2d(8, 8, 3, padding=1)
        self.conv4 = nn.Conv2d(8, 4, 3, padding=1)
        self.out = nn.Conv2d(4, 2, 1)

    def forward(self, bottom, skip1, skip2):
        x = F.relu(self.conv1(torch.cat([self.up1(bottom), skip1], 1)))            # (B, 16, 8, 8)
        x = F.relu(self.conv2(torch.cat([self.up2(x), skip2], 1)))                 # (B, 8, 16, 16)
        x = F.relu(self.conv3(F.interpolate(x, scale_factor=2, mode="nearest")))  # (B, 8, 32, 32)
        x = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)  # (B, 8, 64, 64)
        x = F.relu(self.conv4(x))
        x = F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=True)  # (B, 4, 96, 96)
        return self.out(x)


class LSTMClassifier(nn.Module):
    """embedding, 2-layer bidirectional LSTM (batch_first), linear head on the last step. ids (B, T) -> (B, 5)"""

    def __init__(self, vocab=40, emb=16, hidden=24, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, classes)

    def forward(self, ids):
        out, _ = self.rnn(self.emb(ids))  # (B, T, 2 * hidden)
        return self.head(out[:, -1])


class GRUClassifier(nn.Module):
    """embedding, GRU (batch_first), linear head on the last step. ids (B, T) -> (B, 5)"""

    def __init__(self, vocab=40, emb=16, hidden=24, classes=5):
        super().__init__()
        self.emb = nn.Embedding(vocab, emb)
        self.rnn = nn.GRU(emb, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, ids):
        out, _ = self.rnn(self.emb(ids))  # (B, T, hidden)
        return self.head(out[:, -1])


class KeywordSpotter(nn.Module):
    """a small keyword head over audio features: Conv1d + BatchNorm1d + ReLU, MaxPool1d, dilated Conv1d, mean over
    time, linear, log_softmax. feats (B, 10, T) -> (B, 6)"""

    def __init__(self, feats=10, c=16, words=6):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv1d(feats, c, 3, padding=1), nn.BatchNorm1d(c)
        self.conv2 = nn.Conv1d(c, c, 3, padding=2, dilation=2)
        self.bn2 = nn.BatchNorm1d(c)  # after the ReLU: not folded into the Conv
        self.head = nn.Linear(c, words)

    def forward(self, feats):
        x = F.max_pool1d(F.relu(self.bn1(self.conv1(feats))), 2)  # (B, c, T // 2)
        x = self.bn2(F.relu(self.conv2(x)))
        return F.log_softmax(self.head(F.adaptive_avg_pool1d(x, 1).squeeze(-1)), dim=-1)


class CRNN(nn.Module):
    """an OCR line recognizer (CRNN): convs and poolings to a height of 1, the width as the sequence,
    bidirectional LSTM, per-step class log-probabilities and their greedy argmax.
    image (B, 1, 8, W) -> log_probs (W / 4, B, 12), best (W / 4, B) int64"""

    def __init__(self, c=16, hidden=16, classes=12):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, c, 3, padding=1), nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)
        self.rnn = nn.LSTM(c, hidden, bidirectional=True)
        self.fc = nn.Linear(2 * hidden, classes)

    def forward(self, image):
        x = F.max_pool2d(F.relu(self.conv1(image)), 2)                 # (B, c, 4, W / 2)
        x = F.max_pool2d(F.relu(self.bn(self.conv2(x))), (4, 2))       # (B, c, 1, W / 4)
        seq = x.squeeze(2).permute(2, 0, 1)                            # (W / 4, B, c)
        out, _ = self.rnn(seq)
        log_probs = F.log_softmax(self.fc(out), dim=-1)
        return log_probs, log_probs.argmax(-1)


class CausalTransformer(nn.Module):
    """token + position embedding, a triu mask of -inf, attention by matmul/softmax, LayerNorm, GELU MLP,
    top-3 of the last position's logits. ids (B, T) -> logits (B, T, V), values (B, 3), indices (B, 3)"""

    def __init__(self, vocab=40, d=32, heads=4, layers=2, max_len=16):
        super().__init__()
        self.heads = heads
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(max_len, d)
        self.blocks = nn.ModuleList(nn.ModuleDict(dict(
            ln1=nn.LayerNorm(d), qkv=nn.Linear(d, 3 * d), proj=nn.Linear(d, d),
            ln2=nn.LayerNorm(d), fc1=nn.Linear(d, 4 * d), fc2=nn.Linear(4 * d, d))) for _ in range(layers))
        self.ln_f, self.lm = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, ids):
        B, T = ids.shape
        x = self.tok(ids) + self.pos(torch.arange(T))
        mask = torch.triu(torch.full((T, T), float("-inf")), diagonal=1)  # (T, T)
        d = x.shape[-1]
        hd = d // self.heads
        for b in self.blocks:
            q, k, v = b["qkv"](b["ln1"](x)).split(d, dim=-1)
            q, k, v = [t.reshape(B, T, self.heads, hd).transpose(1, 2) for t in (q, k, v)]
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + mask
            x = x + b["proj"](torch.matmul(s.softmax(-1), v).transpose(1, 2).reshape(B, T, d))
            x = x + b["fc2"](F.gelu(b["fc1"](b["ln2"](x))))
        logits = self.lm(self.ln_f(x))
        values, indices = torch.topk(logits[:, -1], 3)
        return logits, values, indices


class BertClassifier(nn.Module):
    """BERT-style encoder (word + position + token-type embeddings, 2 post-norm layers, hidden 64), pooler,
    classifier; logits and their argmax. input_ids, attention_mask (B, T) int64 -> logits (B, 3), labels (B)"""

    def __init__(self, vocab=60, hidden=64, heads=4, layers=2, ffn=128, labels=3, max_len=32):
        super().__init__()
        self.heads = heads
        self.word, self.pos = nn.Embedding(vocab, hidden), nn.Embedding(max_len, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(nn.ModuleDict(dict(
            q=nn.Linear(hidden, hidden), k=nn.Linear(hidden, hidden), v=nn.Linear(hidden, hidden),
            out=nn.Linear(hidden, hidden), n1=nn.LayerNorm(hidden, eps=1e-12), f1=nn.Linear(hidden, ffn),
            f2=nn.Linear(ffn, hidden), n2=nn.LayerNorm(hidden, eps=1e-12))) for _ in range(layers))
        self.pool, self.cls = nn.Linear(hidden, hidden), nn.Linear(hidden, labels)

    def forward(self, input_ids, attention_mask):
        B, T = input_ids.shape
        pos = torch.arange(T).unsqueeze(0)
        x = self.norm(self.word(input_ids) + self.pos(pos) + self.token_type(torch.zeros_like(input_ids)))
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        H = x.shape[-1]
        hd = H // self.heads

        def heads(t):
            return t.view(B, T, self.heads, hd).permute(0, 2, 1, 3)

        for l in self.layers:
            q, k, v = heads(l["q"](x)), heads(l["k"](x)), heads(l["v"](x))
            s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd) + bias
            ctx = torch.matmul(F.softmax(s, dim=-1), v).permute(0, 2, 1, 3).contiguous().view(B, T, H)
            x = l["n1"](x + l["out"](ctx))
            x = l["n2"](x + l["f2"](F.gelu(l["f1"](x))))
        logits = self.cls(torch.tanh(self.pool(x[:, 0])))
        return logits, logits.argmax(-1)


class NormActivations(nn.Module):
    """InstanceNorm2d (affine and not), PReLU (per channel and single), LeakyReLU. x (B, 3, 8, 8) -> (B, 8, 8, 8)"""

    def __init__(self, c=8):
        super().__init__()
        self.conv1, self.in1, self.prelu1 = nn.Conv2d(3, c, 3, padding=1), nn.InstanceNorm2d(c, affine=True), nn.PReLU(c)
        self.conv2, self.in2, self.prelu2 = nn.Conv2d(c, c, 3, padding=1), nn.InstanceNorm2d(c), nn.PReLU()
        with torch.no_grad():
            self.prelu1.weight.uniform_(0.05, 0.5)
            self.in1.weight.uniform_(0.5, 1.5)
            self.in1.bias.uniform_(-0.2, 0.2)

    def forward(self, x):
        x = self.prelu1(self.in1(self.conv1(x)))
        return self.prelu2(F.leaky_relu(self.in2(self.conv2(x)), 0.1))


class GatherScatter(nn.Module):
    """torch.gather (GatherElements) with given indices, index assignment x[:, idx] = v (ScatterND).
    x (B, T) f32, idx (B, K) int64 in [0, T) -> gathered (B, K), assigned (B, T)"""

    def forward(self, x, idx):
        gathered = torch.gather(x, 1, idx)
        y = x.clone()
        y[:, torch.tensor([0, 2])] = x[:, :2] * 2.0
        return gathered, y


class RoundingScan(nn.Module):
    """floor, cumsum, clamp (both bounds; lower only). x (B, T) -> four (B, T)"""

    def forward(self, x):
        return torch.floor(x * 3.0), torch.cumsum(x, dim=1), torch.clamp(x, -0.5, 0.5), torch.clamp(x, min=0.0)
