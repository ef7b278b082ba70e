#!/usr/bin/env python3
"""Replays DeBERTa-v2's DebertaV2Layer and ConvLayer op for op (transformers
modeling_deberta_v2.py, 2022: DisentangledSelfAttention.forward, disentangled_attention_bias,
XSoftmax, XDropout, ConvLayer.forward) in plain torch and prints the bytes autograd saves for
backward, de-duplicated by storage, parameters excluded. The numbers check the DeBERTa terms of
src/analyses/estimator.cpp (tests/analyses/estimator_test.cpp quotes them).

  /usr/bin/python3 tools/deberta_replay.py layer BATCH SEQ HIDDEN HEADS INTERMEDIATE ATT_SPAN
  /usr/bin/python3 tools/deberta_replay.py conv BATCH SEQ HIDDEN FROZEN(0|1) ACT(gelu|tanh)
e.g. `layer 2 16 64 4 256 8` prints 196108; `conv 2 16 64 0 gelu` prints 27040.
fp32 on the CPU (e = 4); dropout 0.1 everywhere; c2p and p2c with share_att_key.
"""
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

DT = torch.float32
DROP = 0.1


class XSoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, mask, dim):
        rmask = ~(mask.to(torch.bool))
        out = torch.softmax(x.masked_fill(rmask, torch.finfo(x.dtype).min), dim)
        out.masked_fill_(rmask, 0)
        ctx.save_for_backward(out)
        return out


class XDropout(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p):
        mask = (1 - torch.empty_like(x).bernoulli_(1 - p)).to(torch.bool)
        ctx.save_for_backward(mask)
        return x.masked_fill(mask, 0) * (1 / (1 - p))


def xdropout(x):
    return XDropout.apply(x, DROP)


def saved_bytes(run, params):
    param_storages = {t.data_ptr() for t in params}
    seen = {}

    def pack(t):
        st = t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()
        if st.data_ptr() not in param_storages:
            seen[st.data_ptr()] = st.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        run()
    return sum(seen.values())


def layer(B, s, h, H, I, k):
    lin = lambda a, b: nn.Linear(a, b).to(DT)
    q, kp, v, o, i1, i2 = lin(h, h), lin(h, h), lin(h, h), lin(h, h), lin(h, I), lin(I, h)
    ln1, ln2 = nn.LayerNorm(h).to(DT), nn.LayerNorm(h).to(DT)
    rel = nn.Parameter(torch.randn(2 * k, h, dtype=DT))
    params = [t for m in (q, kp, v, o, i1, i2, ln1, ln2) for t in m.parameters()] + [rel]

    def tfs(x):
        x = x.view(x.size()[:-1] + (H, -1))
        return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

    x = torch.randn(B, s, h, dtype=DT, requires_grad=True)
    mask = torch.ones(B, 1, s, s, dtype=torch.uint8)
    # build_relative_position without log buckets: the same shapes.
    relpos = (torch.arange(s)[:, None] - torch.arange(s)[None, :]).unsqueeze(0).unsqueeze(0)

    def run():
        ql, kl, vl = tfs(q(x)), tfs(kp(x)), tfs(v(x))
        scores = torch.bmm(ql, kl.transpose(-1, -2)) / torch.tensor((ql.size(-1) * 3) ** 0.5, dtype=DT)
        r = xdropout(rel)[0:2 * k, :].unsqueeze(0)
        pq = tfs(q(r)).repeat(ql.size(0) // H, 1, 1)
        pk = tfs(kp(r)).repeat(ql.size(0) // H, 1, 1)
        c2p_pos = torch.clamp(relpos + k, 0, 2 * k - 1)
        c2p = torch.gather(torch.bmm(ql, pk.transpose(-1, -2)), -1,
                           c2p_pos.squeeze(0).expand([ql.size(0), ql.size(1), s]))
        score = 0
        score += c2p / torch.tensor(2.0, dtype=DT)
        p2c_pos = torch.clamp(-relpos + k, 0, 2 * k - 1)
        p2c = torch.gather(torch.bmm(kl, pq.transpose(-1, -2)), -1,
                           p2c_pos.squeeze(0).expand([ql.size(0), s, s])).transpose(-1, -2)
        score += p2c / torch.tensor(2.0, dtype=DT)
        probs = xdropout(XSoftmax.apply((scores + score).view(-1, H, s, s), mask, -1))
        ctx = torch.bmm(probs.view(-1, s, s), vl)
        ctx = ctx.view(-1, H, s, ctx.size(-1)).permute(0, 2, 1, 3).contiguous()
        ctx = ctx.view(ctx.size()[:-2] + (-1,))
        a = ln1(xdropout(o(ctx)) + x)
        ln2(xdropout(i2(F.gelu(i1(a)))) + a)

    return saved_bytes(run, params)


def conv(B, s, h, frozen, act):
    c, ln = nn.Conv1d(h, h, 3, padding=1).to(DT), nn.LayerNorm(h).to(DT)
    params = list(c.parameters()) + list(ln.parameters())
    if frozen:
        for t in params:
            t.requires_grad_(False)
    hs = torch.randn(B, s, h, dtype=DT, requires_grad=True)
    res = torch.randn(B, s, h, dtype=DT, requires_grad=True)
    input_mask = torch.ones(B, s, dtype=torch.long)

    def run():
        out = c(hs.permute(0, 2, 1).contiguous()).permute(0, 2, 1).contiguous()
        rmask = (1 - input_mask).bool()
        out.masked_fill_(rmask.unsqueeze(-1).expand(out.size()), 0)
        out = xdropout(out)
        out = F.gelu(out) if act == "gelu" else torch.tanh(out)
        lni = res + out
        ln(lni).to(lni) * input_mask.unsqueeze(2).to(lni.dtype)

    return saved_bytes(run, params)


if __name__ == "__main__":
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "layer":
        print(layer(*[int(a) for a in args[:6]]))
    elif mode == "conv":
        print(conv(int(args[0]), int(args[1]), int(args[2]), int(args[3]), args[4]))
    else:
        sys.exit("usage: deberta_replay.py layer|conv ...")
