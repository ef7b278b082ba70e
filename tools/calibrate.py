#!/usr/bin/env python3
"""Calibrates oomdoc's estimator against real PyTorch.

Runs small transformer configurations of several families (Llama, GPT-2, GPT-NeoX, BERT, T5) through
one training step and measures, with PyTorch's own accounting:
  - parameter, gradient and optimizer-state bytes (AdamW, foreach off),
  - the bytes of tensors saved for backward (torch.autograd.graph.saved_tensors_hooks,
    de-duplicated by storage, parameters and buffers excluded),
  - the step's peak (profiler memory events on CPU; torch.cuda.max_memory_allocated/reserved on
    CUDA).
Each model is written here in plain PyTorch following the Hugging Face implementation
(modeling_llama.py, modeling_gpt2.py, modeling_gpt_neox.py, modeling_bert.py, modeling_t5.py) op for op, so the
CPU run needs only torch (Debian's python3-torch). Results go to a JSON fixture with the
model's config.json, which tests/analyses/calibration_test.cpp feeds to the estimator.

  /usr/bin/python3 tools/calibrate.py --out tests/fixtures/estimate/calibration_cpu.json

On a CUDA machine, --cuda also runs the plain families on the GPU and builds real Hugging Face
models from config (transformers AutoModelForCausalLM.from_config, random weights; PEFT LoRA;
a torchtune-style chunked loss, compiled or not; see HF_CASES), recording max_memory_allocated /
max_memory_reserved over two training steps; the JSON is rewritten after every case, so a run
stopped by a time limit keeps what it measured:

  python3 tools/calibrate.py --cuda --out tests/fixtures/estimate/calibration_cuda.json
  python3 tools/calibrate.py --cuda --only llama_lora,llama_full --out partial.json

Models are initialised on the CPU by transformers before moving to the GPU: the 2.8B-parameter
cases take minutes of CPU time each.
"""
import argparse
import json
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F


# ---------------------------------------------------------------- models (HF op order) -----

class Dropout(nn.Module):  # noqa: the one dropout used below
    """nn.Dropout as it runs on CUDA: F.dropout dispatches to the fused native_dropout there,
    which saves a 1-byte bool mask; the CPU fallback saves a mask in the input's dtype, which is
    not what a GPU job holds."""

    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        return torch.native_dropout(x, self.p, True)[0]


class LlamaRMSNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        return self.weight * x.to(dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def rope(seq, dim, dtype):
    inv = 1.0 / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    t = torch.arange(seq).float()
    freqs = torch.outer(t, inv)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def repeat_kv(x, n_rep):
    b, h, s, d = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(b, h, n_rep, s, d)
    return x.reshape(b, h * n_rep, s, d)


class LlamaBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        h, nh, nkv = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"]
        self.hd = h // nh
        self.nh, self.nkv = nh, nkv
        self.q_proj = nn.Linear(h, nh * self.hd, bias=False)
        self.k_proj = nn.Linear(h, nkv * self.hd, bias=False)
        self.v_proj = nn.Linear(h, nkv * self.hd, bias=False)
        self.o_proj = nn.Linear(nh * self.hd, h, bias=False)
        self.gate_proj = nn.Linear(h, c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(h, c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], h, bias=False)
        self.input_layernorm = LlamaRMSNorm(h)
        self.post_attention_layernorm = LlamaRMSNorm(h)

    def forward(self, x, cos, sin, mask):
        b, s, h = x.shape
        residual = x
        x = self.input_layernorm(x)
        q = self.q_proj(x).view(b, s, self.nh, self.hd).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.nkv, self.hd).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.nkv, self.hd).transpose(1, 2)
        q = (q * cos) + (rotate_half(q) * sin)
        k = (k * cos) + (rotate_half(k) * sin)
        k = repeat_kv(k, self.nh // self.nkv)
        v = repeat_kv(v, self.nh // self.nkv)
        w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
        w = w + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
        out = torch.matmul(w, v).transpose(1, 2).contiguous().reshape(b, s, h)
        x = residual + self.o_proj(out)
        residual = x
        x = self.post_attention_layernorm(x)
        x = self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))
        return residual + x


class LlamaLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList([LlamaBlock(c) for _ in range(c["num_hidden_layers"])])
        self.norm = LlamaRMSNorm(c["hidden_size"])
        self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)

    def forward(self, ids):
        b, s = ids.shape
        x = self.embed_tokens(ids)
        cos, sin = rope(s, self.c["hidden_size"] // self.c["num_attention_heads"], x.dtype)
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def gelu_new(x):
    # transformers.activations.NewGELUActivation
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class GPT2Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["n_embd"]
        self.nh = c["n_head"]
        self.ln_1 = nn.LayerNorm(h)
        self.c_attn = nn.Linear(h, 3 * h)
        self.c_proj = nn.Linear(h, h)
        self.ln_2 = nn.LayerNorm(h)
        self.c_fc = nn.Linear(h, 4 * h)
        self.mlp_proj = nn.Linear(4 * h, h)
        self.attn_dropout = Dropout(c["attn_pdrop"])
        self.resid_dropout = Dropout(c["resid_pdrop"])
        self.mlp_dropout = Dropout(c["resid_pdrop"])

    def forward(self, x, causal):
        b, s, h = x.shape
        hd = h // self.nh
        residual = x
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
        q = q.view(b, s, self.nh, hd).permute(0, 2, 1, 3)
        k = k.view(b, s, self.nh, hd).permute(0, 2, 1, 3)
        v = v.view(b, s, self.nh, hd).permute(0, 2, 1, 3)
        w = torch.matmul(q, k.transpose(-1, -2))
        w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype)
        w = torch.where(causal, w, torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype))
        w = F.softmax(w, dim=-1).type(v.dtype)
        w = self.attn_dropout(w)
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(b, s, h)
        x = residual + self.resid_dropout(self.c_proj(out))
        residual = x
        x = self.mlp_dropout(self.mlp_proj(gelu_new(self.c_fc(self.ln_2(x)))))
        return residual + x


class GPT2LM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["n_embd"]
        self.wte = nn.Embedding(c["vocab_size"], h)
        self.wpe = nn.Embedding(c["n_positions"], h)
        self.drop = Dropout(c["embd_pdrop"])
        self.h = nn.ModuleList([GPT2Block(c) for _ in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(h)
        n = c["n_positions"]
        self.register_buffer("bias", torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n))

    def forward(self, ids):
        b, s = ids.shape
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(s)))
        causal = self.bias[:, :, :s, :s]
        for block in self.h:
            x = block(x, causal)
        return F.linear(self.ln_f(x), self.wte.weight)  # lm_head tied to wte


class NeoXBlock(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.input_layernorm = nn.LayerNorm(h)
        self.post_attention_layernorm = nn.LayerNorm(h)
        self.query_key_value = nn.Linear(h, 3 * h)
        self.dense = nn.Linear(h, h)
        self.dense_h_to_4h = nn.Linear(h, c["intermediate_size"])
        self.dense_4h_to_h = nn.Linear(c["intermediate_size"], h)

    def forward(self, x, mask, cos, sin):
        b, s, h = x.shape
        hd = h // self.nh
        qkv = self.query_key_value(self.input_layernorm(x)).view(b, s, self.nh, 3 * hd).permute(0, 2, 1, 3)
        q, k, v = qkv[..., :hd], qkv[..., hd:2 * hd], qkv[..., 2 * hd:]
        # Rotary on the first rotary_ndims of q and k (apply_rotary_pos_emb + torch.cat): q and k
        # become new tensors while v stays a view of the fused query_key_value output.
        rot = cos.size(-1)
        q = torch.cat((q[..., :rot] * cos + rotate_half(q[..., :rot]) * sin, q[..., rot:]), dim=-1)
        k = torch.cat((k[..., :rot] * cos + rotate_half(k[..., :rot]) * sin, k[..., rot:]), dim=-1)
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        w = w + mask
        w = F.softmax(w, dim=-1, dtype=torch.float32).to(v.dtype)
        out = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(b, s, h)
        attn = self.dense(out)
        mlp = self.dense_4h_to_h(F.gelu(self.dense_h_to_4h(self.post_attention_layernorm(x))))
        return mlp + attn + x  # use_parallel_residual


class NeoXLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.embed_in = nn.Embedding(c["vocab_size"], h)
        self.layers = nn.ModuleList([NeoXBlock(c) for _ in range(c["num_hidden_layers"])])
        self.final_layer_norm = nn.LayerNorm(h)
        self.embed_out = nn.Linear(h, c["vocab_size"], bias=False)
        self.c = c

    def forward(self, ids):
        b, s = ids.shape
        x = self.embed_in(ids)
        mask = torch.full((s, s), torch.finfo(x.dtype).min, dtype=x.dtype).triu(1)
        head_dim = self.c["hidden_size"] // self.c["num_attention_heads"]
        cos, sin = rope(s, int(head_dim * self.c["rotary_pct"]), x.dtype)
        for layer in self.layers:
            x = layer(x, mask, cos, sin)
        return self.embed_out(self.final_layer_norm(x))


class BertLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.nh = c["num_attention_heads"]
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_dense = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h)
        self.intermediate = nn.Linear(h, c["intermediate_size"])
        self.output = nn.Linear(c["intermediate_size"], h)
        self.out_norm = nn.LayerNorm(h)
        self.attn_drop = Dropout(c["attention_probs_dropout_prob"])
        self.hidden_drop1 = Dropout(c["hidden_dropout_prob"])
        self.hidden_drop2 = Dropout(c["hidden_dropout_prob"])

    def forward(self, x):
        b, s, h = x.shape
        hd = h // self.nh
        split = lambda t: t.view(b, s, self.nh, hd).permute(0, 2, 1, 3)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)
        w = self.attn_drop(F.softmax(w, dim=-1))
        ctx = torch.matmul(w, v).permute(0, 2, 1, 3).contiguous().view(b, s, h)
        x = self.attn_norm(self.hidden_drop1(self.attn_dense(ctx)) + x)
        y = self.hidden_drop2(self.output(F.gelu(self.intermediate(x))))
        return self.out_norm(y + x)


class BertClassifier(nn.Module):
    def __init__(self, c):
        super().__init__()
        h = c["hidden_size"]
        self.word = nn.Embedding(c["vocab_size"], h)
        self.position = nn.Embedding(c["max_position_embeddings"], h)
        self.token_type = nn.Embedding(c["type_vocab_size"], h)
        self.norm = nn.LayerNorm(h)
        self.drop = Dropout(c["hidden_dropout_prob"])
        self.layers = nn.ModuleList([BertLayer(c) for _ in range(c["num_hidden_layers"])])
        self.pooler = nn.Linear(h, h)
        self.classifier = nn.Linear(h, 2)

    def forward(self, ids):
        b, s = ids.shape
        x = self.word(ids) + self.position(torch.arange(s)) + self.token_type(torch.zeros_like(ids))
        x = self.drop(self.norm(x))
        for layer in self.layers:
            x = layer(x)
        return self.classifier(torch.tanh(self.pooler(x[:, 0])))


# T5 v1.1 (modeling_t5.py): RMS-style T5LayerNorm without mean subtraction, relative position bias
# computed by the first block of each stack and shared, unscaled scores, fp32 softmax, gated-gelu
# feed-forward, dropout after every sublayer; the decoder adds cross-attention over the encoder
# output (EncDecAttention: q from the decoder, k and v from the encoder output, a zero position
# bias plus the encoder mask).
class T5LayerNorm(nn.Module):
    def __init__(self, h, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(h))
        self.eps = eps

    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.eps)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            x = x.to(self.weight.dtype)
        return self.weight * x


def t5_bucket(relative_position, bidirectional, num_buckets, max_distance):
    buckets = torch.zeros_like(relative_position)
    if bidirectional:
        num_buckets //= 2
        buckets += (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
    else:
        relative_position = -torch.min(relative_position, torch.zeros_like(relative_position))
    max_exact = num_buckets // 2
    is_small = relative_position < max_exact
    large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
                         * (num_buckets - max_exact)).to(torch.long)
    large = torch.min(large, torch.full_like(large, num_buckets - 1))
    return buckets + torch.where(is_small, relative_position, large)


class T5Attention(nn.Module):
    def __init__(self, c, bidirectional, has_bias):
        super().__init__()
        self.nh, self.dk = c["num_heads"], c["d_kv"]
        inner = self.nh * self.dk
        self.q = nn.Linear(c["d_model"], inner, bias=False)
        self.k = nn.Linear(c["d_model"], inner, bias=False)
        self.v = nn.Linear(c["d_model"], inner, bias=False)
        self.o = nn.Linear(inner, c["d_model"], bias=False)
        self.bidirectional = bidirectional
        self.buckets = c["relative_attention_num_buckets"]
        self.max_distance = c.get("relative_attention_max_distance", 128)
        self.dropout = Dropout(c["dropout_rate"])
        self.relative_attention_bias = nn.Embedding(self.buckets, self.nh) if has_bias else None

    def compute_bias(self, q_len, k_len):
        context = torch.arange(q_len)[:, None]
        memory = torch.arange(k_len)[None, :]
        bucket = t5_bucket(memory - context, self.bidirectional, self.buckets, self.max_distance)
        return self.relative_attention_bias(bucket).permute([2, 0, 1]).unsqueeze(0)

    def forward(self, x, mask, position_bias=None, kv=None):
        b, q_len, _ = x.shape
        src = x if kv is None else kv
        k_len = src.shape[1]
        shape = lambda t: t.view(b, -1, self.nh, self.dk).transpose(1, 2)
        q, k, v = shape(self.q(x)), shape(self.k(src)), shape(self.v(src))
        scores = torch.matmul(q, k.transpose(3, 2))
        if position_bias is None:
            if self.relative_attention_bias is None:
                position_bias = torch.zeros((1, self.nh, q_len, k_len), dtype=scores.dtype)
            else:
                position_bias = self.compute_bias(q_len, k_len)
            position_bias = position_bias + mask
        scores += position_bias
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        weights = self.dropout(weights)
        out = torch.matmul(weights, v).transpose(1, 2).contiguous().view(b, -1, self.nh * self.dk)
        return self.o(out), position_bias


class T5FF(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi_0 = nn.Linear(c["d_model"], c["d_ff"], bias=False)
        self.wi_1 = nn.Linear(c["d_model"], c["d_ff"], bias=False)
        self.wo = nn.Linear(c["d_ff"], c["d_model"], bias=False)
        self.norm = T5LayerNorm(c["d_model"])
        self.dropout = Dropout(c["dropout_rate"])
        self.inner_dropout = Dropout(c["dropout_rate"])

    def forward(self, x):
        y = self.norm(x)
        y = gelu_new(self.wi_0(y)) * self.wi_1(y)
        y = self.wo(self.inner_dropout(y))
        return x + self.dropout(y)


class T5Block(nn.Module):
    def __init__(self, c, decoder, has_bias):
        super().__init__()
        self.self_norm = T5LayerNorm(c["d_model"])
        self.self_attn = T5Attention(c, not decoder, has_bias)
        self.self_dropout = Dropout(c["dropout_rate"])
        self.decoder = decoder
        if decoder:
            self.cross_norm = T5LayerNorm(c["d_model"])
            self.cross_attn = T5Attention(c, True, False)
            self.cross_dropout = Dropout(c["dropout_rate"])
        self.ff = T5FF(c)

    def forward(self, x, mask, bias, enc=None, enc_mask=None, enc_bias=None):
        out, bias = self.self_attn(self.self_norm(x), mask, bias)
        x = x + self.self_dropout(out)
        if self.decoder:
            out, enc_bias = self.cross_attn(self.cross_norm(x), enc_mask, enc_bias, kv=enc)
            x = x + self.cross_dropout(out)
        return self.ff(x), bias, enc_bias


class T5Stack(nn.Module):
    def __init__(self, c, embed, decoder):
        super().__init__()
        layers = c["num_decoder_layers"] if decoder else c["num_layers"]
        self.embed = embed
        self.blocks = nn.ModuleList([T5Block(c, decoder, i == 0) for i in range(layers)])
        self.final_norm = T5LayerNorm(c["d_model"])
        self.dropout = Dropout(c["dropout_rate"])
        self.decoder = decoder

    def forward(self, ids, enc=None):
        b, s = ids.shape
        x = self.dropout(self.embed(ids))
        dtype = x.dtype
        # Extended masks as transformers builds them from an all-ones attention mask: zeros, and
        # the decoder's causal mask.
        mask = torch.zeros((b, 1, 1, s), dtype=dtype)
        if self.decoder:
            mask = mask + torch.full((s, s), torch.finfo(dtype).min, dtype=dtype).triu(1)[None, None]
        enc_mask = torch.zeros((b, 1, 1, enc.shape[1]), dtype=dtype) if enc is not None else None
        bias = enc_bias = None
        for block in self.blocks:
            x, bias, enc_bias = block(x, mask, bias, enc, enc_mask, enc_bias)
        return self.dropout(self.final_norm(x))


class T5LM(nn.Module):
    """T5ForConditionalGeneration with untied embeddings (v1.1); forward(ids, labels) -> logits."""

    def __init__(self, c):
        super().__init__()
        self.shared = nn.Embedding(c["vocab_size"], c["d_model"])
        self.encoder = T5Stack(c, self.shared, False)
        self.decoder = T5Stack(c, self.shared, True)
        self.lm_head = nn.Linear(c["d_model"], c["vocab_size"], bias=False)

    def forward(self, ids, labels):
        enc = self.encoder(ids)
        decoder_ids = F.pad(labels, (1, 0))[:, :-1]   # _shift_right with decoder_start_token_id 0
        return self.lm_head(self.decoder(decoder_ids, enc))


FAMILIES = {
    "llama": (LlamaLM, {"model_type": "llama", "vocab_size": 512, "hidden_size": 128, "num_hidden_layers": 2,
                        "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 344,
                        "tie_word_embeddings": False, "max_position_embeddings": 256}),
    "gpt2": (GPT2LM, {"model_type": "gpt2", "vocab_size": 512, "n_embd": 128, "n_layer": 2, "n_head": 4,
                      "n_positions": 256, "activation_function": "gelu_new", "resid_pdrop": 0.1,
                      "embd_pdrop": 0.1, "attn_pdrop": 0.1}),
    "gpt_neox": (NeoXLM, {"model_type": "gpt_neox", "vocab_size": 512, "hidden_size": 128, "num_hidden_layers": 2,
                          "num_attention_heads": 4, "intermediate_size": 512, "hidden_act": "gelu", "rotary_pct": 0.25,
                          "use_parallel_residual": True, "tie_word_embeddings": False,
                          "attention_dropout": 0.0, "hidden_dropout": 0.0}),
    "bert": (BertClassifier, {"model_type": "bert", "vocab_size": 512, "hidden_size": 128, "num_hidden_layers": 2,
                              "num_attention_heads": 4, "intermediate_size": 512, "max_position_embeddings": 256,
                              "type_vocab_size": 2, "hidden_act": "gelu", "hidden_dropout_prob": 0.1,
                              "attention_probs_dropout_prob": 0.1}),
    "t5": (T5LM, {"model_type": "t5", "vocab_size": 512, "d_model": 128, "d_kv": 32, "num_heads": 4, "d_ff": 344,
                  "num_layers": 2, "num_decoder_layers": 2, "relative_attention_num_buckets": 32,
                  "relative_attention_max_distance": 128, "dropout_rate": 0.1, "feed_forward_proj": "gated-gelu",
                  "tie_word_embeddings": False, "layer_norm_epsilon": 1e-6, "is_encoder_decoder": True}),
}

# T5 runs its decoder over the labels: a target length per (batch, seq) case, shorter than the input.
T5_TARGET = {64: 8, 128: 16, 256: 32}


# ---------------------------------------------------------------- measurement --------------

def step_loss(family, model, ids, config):
    """One forward: (loss, logits), the loss as the family's Hugging Face model computes it."""
    batch, seq = ids.shape
    if family == "bert":
        out = model(ids)
        return F.cross_entropy(out.float(), torch.zeros(batch, dtype=torch.long, device=ids.device)), out
    if family == "t5":
        # T5ForConditionalGeneration: CrossEntropyLoss on the logits as they are (no upcast).
        gen = torch.Generator().manual_seed(1)
        labels = torch.randint(1, config["vocab_size"], (batch, T5_TARGET[seq]), generator=gen).to(ids.device)
        out = model(ids, labels)
        return F.cross_entropy(out.view(-1, out.size(-1)), labels.reshape(-1), ignore_index=-100), out
    out = model(ids)
    # transformers ForCausalLMLoss: upcast, shift the labels (not the logits).
    labels = F.pad(ids, (0, 1), value=-100)[:, 1:]
    return F.cross_entropy(out.float().view(-1, out.size(-1)), labels.reshape(-1), ignore_index=-100), out


def train_job(family, batch, seq, precision):
    job = {"task": "train_full", "precision": precision, "optimizer": "adamw", "micro_batch_size": batch,
           "seq_len": seq, "gradient_checkpointing": "none", "attention_impl": "eager"}
    if family == "t5":
        job["target_len"] = T5_TARGET[seq]
    return job


def storage_key(t):
    s = t.storage()
    return s.data_ptr(), s.size() * t.element_size()


def measure(family, batch, seq, dtype):
    cls, config = FAMILIES[family]
    torch.manual_seed(0)
    model = cls(config).to(dtype)
    model.train()
    param_ptrs = {p.storage().data_ptr() for p in model.parameters()}
    param_ptrs |= {b.storage().data_ptr() for b in model.buffers()}
    params = sum(p.numel() * p.element_size() for p in model.parameters())
    ids = torch.randint(0, config["vocab_size"], (batch, seq))

    saved = {}

    def pack(t):
        if t.is_floating_point() or t.dtype == torch.bool:
            ptr, nbytes = storage_key(t)
            if ptr not in param_ptrs and nbytes > 0:
                saved[ptr] = max(saved.get(ptr, 0), nbytes)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        loss, _ = step_loss(family, model, ids, config)
    loss.backward()
    grads = sum(p.grad.numel() * p.grad.element_size() for p in model.parameters() if p.grad is not None)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
    opt.step()
    state = sum(v.numel() * v.element_size() for s in opt.state.values() for v in s.values()
                if torch.is_tensor(v) and v.dim() > 0)
    return {
        "family": family,
        "config": config,
        "job": train_job(family, batch, seq, "fp32" if dtype == torch.float32 else "bf16"),
        "measured": {
            "param_bytes": params,
            "grad_bytes": grads,
            "optimizer_state_bytes": state,
            "saved_activation_bytes": sum(saved.values()),
            "step_peak_bytes": step_peak_cpu(family, batch, seq, dtype),
        },
    }


def step_peak_cpu(family, batch, seq, dtype):
    """Peak of the step from the profiler's CPU memory events (allocation +, free -)."""
    cls, config = FAMILIES[family]
    torch.manual_seed(0)
    try:
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            model = cls(config).to(dtype)
            ids = torch.randint(0, config["vocab_size"], (batch, seq))
            loss, logits = step_loss(family, model, ids, config)   # the logits stay referenced, as before
            loss.backward()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)
            opt.step()
        events = sorted((e.start_us(), e.nbytes()) for e in prof.profiler.kineto_results.events()
                        if e.name() == "[memory]")
        live = peak = 0
        for _, nbytes in events:
            live += nbytes
            peak = max(peak, live)
        return peak
    except Exception as error:  # profiler internals differ across versions
        print(f"step peak not measured: {error}", file=sys.stderr)
        return None


def measure_cuda_plain(family, batch, seq):
    """The plain-PyTorch families above on the GPU in bf16: the allocator's own peak counters for
    two training steps (the second holds optimizer state), and the saved-tensor bytes."""
    cls, config = FAMILIES[family]
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    model = cls(config).to("cuda", torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config["vocab_size"], (batch, seq), device="cuda")
    for _ in range(2):
        loss, _ = step_loss(family, model, ids, config)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    return {"family": family, "config": config,
            "job": train_job(family, batch, seq, "bf16"),
            "measured": {"max_memory_allocated": torch.cuda.max_memory_allocated(),
                         "max_memory_reserved": torch.cuda.max_memory_reserved(),
                         "torch": torch.__version__}}


# Hugging Face models built from config (random weights) on the GPU, one job each, named after
# what they check. Each job is written with the estimator's keys (docs/estimate.md).
LLAMA_SMALL = {"model_type": "llama", "vocab_size": 32000, "hidden_size": 2048, "intermediate_size": 5632,
               "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4,
               "max_position_embeddings": 4096, "tie_word_embeddings": False, "rms_norm_eps": 1e-5}
LLAMA3_VOCAB = dict(LLAMA_SMALL, vocab_size=128256)
QWEN2_SMALL = {"model_type": "qwen2", "vocab_size": 151936, "hidden_size": 1536, "intermediate_size": 8960,
               "num_hidden_layers": 4, "num_attention_heads": 12, "num_key_value_heads": 2,
               "max_position_embeddings": 4096, "tie_word_embeddings": True, "rms_norm_eps": 1e-6}
GEMMA_SMALL = {"model_type": "gemma", "vocab_size": 256000, "hidden_size": 2048, "intermediate_size": 16384,
               "num_hidden_layers": 2, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 256,
               "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh",
               "max_position_embeddings": 4096, "tie_word_embeddings": True}
GPT2_SMALL = {"model_type": "gpt2", "vocab_size": 50257, "n_embd": 1024, "n_layer": 6, "n_head": 16,
              "n_positions": 1024, "activation_function": "gelu_new"}
LORA_ALL = {"r": 16, "alpha": 32, "target_modules": "all_linear"}
LORA_QV = {"r": 16, "alpha": 32, "target_modules": ["q_proj", "v_proj"]}
# Llama-3-8B's blocks: two of them with a small vocabulary (the recomputed block outweighs the
# loss), and eight with Llama-3's (a realistically sized run for the allocator's reserve).
LLAMA8B_BLOCKS = {"model_type": "llama", "vocab_size": 8000, "hidden_size": 4096, "intermediate_size": 14336,
                  "num_hidden_layers": 2, "num_attention_heads": 32, "num_key_value_heads": 8,
                  "max_position_embeddings": 8192, "tie_word_embeddings": False, "rms_norm_eps": 1e-5}
LLAMA8B_EIGHT = dict(LLAMA8B_BLOCKS, vocab_size=128256, num_hidden_layers=8)
# Small vocabularies, long sequences: the first block's backward outweighs the loss.
GPT2_WIDE = dict(GPT2_SMALL, vocab_size=2048, n_embd=1536, n_layer=4, n_head=12, n_positions=4096,
                 resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
QWEN2_NARROW_VOCAB = dict(QWEN2_SMALL, vocab_size=4096)

HF_CASES = [
    # name, config, job (estimator keys), harness: "hf" (the model's own loss) or "chunked"
    ("llama_full", LLAMA_SMALL, {"micro_batch_size": 2, "seq_len": 1024}, "hf"),
    ("llama_full_checkpointed", LLAMA_SMALL, {"micro_batch_size": 2, "seq_len": 1024, "gradient_checkpointing": "full"}, "hf"),
    ("llama3_vocab_full", LLAMA3_VOCAB, {"micro_batch_size": 2, "seq_len": 2048}, "hf"),
    ("qwen2_full", QWEN2_SMALL, {"micro_batch_size": 2, "seq_len": 1024}, "hf"),
    ("gemma_full", GEMMA_SMALL, {"micro_batch_size": 1, "seq_len": 1024}, "hf"),
    ("gpt2_full", GPT2_SMALL, {"micro_batch_size": 4, "seq_len": 1024}, "hf"),
    ("llama_lora", LLAMA_SMALL, {"task": "train_lora", "lora": LORA_ALL, "micro_batch_size": 2, "seq_len": 2048}, "hf"),
    ("llama_lora_checkpointed", LLAMA_SMALL, {"task": "train_lora", "lora": LORA_ALL, "micro_batch_size": 2,
                                              "seq_len": 2048, "gradient_checkpointing": "full"}, "hf"),
    ("llama3_vocab_chunked", LLAMA3_VOCAB, {"micro_batch_size": 2, "seq_len": 2048, "loss_impl": "chunked"}, "chunked"),
    ("llama3_vocab_chunked_compiled", LLAMA3_VOCAB, {"micro_batch_size": 2, "seq_len": 2048, "loss_impl": "chunked",
                                                    "compile": True}, "chunked"),
    ("llama8b_blocks_lora_checkpointed", LLAMA8B_BLOCKS, {"task": "train_lora", "lora": LORA_QV, "micro_batch_size": 1,
                                                          "seq_len": 8192, "gradient_checkpointing": "full"}, "hf"),
    ("llama_full_checkpointed_sgd", LLAMA_SMALL, {"optimizer": "sgd", "micro_batch_size": 4, "seq_len": 2048,
                                                  "gradient_checkpointing": "full"}, "hf"),
    ("llama8b_eight_full_checkpointed", LLAMA8B_EIGHT, {"micro_batch_size": 1, "seq_len": 4096,
                                                        "gradient_checkpointing": "full"}, "hf"),
    ("gpt2_wide_full_checkpointed", GPT2_WIDE, {"optimizer": "sgd", "micro_batch_size": 2, "seq_len": 4096,
                                                "gradient_checkpointing": "full"}, "hf"),
    ("qwen2_lora_checkpointed", QWEN2_NARROW_VOCAB, {"task": "train_lora", "lora": LORA_ALL, "micro_batch_size": 2,
                                                     "seq_len": 4096, "gradient_checkpointing": "full"}, "hf"),
    ("llama8b_eight_lora_checkpointed", LLAMA8B_EIGHT, {"task": "train_lora", "lora": LORA_ALL, "micro_batch_size": 2,
                                                        "seq_len": 4096, "gradient_checkpointing": "full"}, "hf"),
]


def hf_model(config_dict, base_only=False):
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM
    # No KV cache in training (the Trainer's models run with use_cache off under checkpointing).
    config = AutoConfig.for_model(**config_dict, use_cache=False)
    cls = AutoModel if base_only else AutoModelForCausalLM
    try:
        model = cls.from_config(config, dtype=torch.bfloat16, attn_implementation="sdpa")
    except TypeError:  # transformers < 4.56 names it torch_dtype
        model = cls.from_config(config, torch_dtype=torch.bfloat16, attn_implementation="sdpa")
    return model.cuda(), config


def chunked_loss(compiled):
    """torchtune's CEWithChunkedOutputLoss: cross-entropy chunk by chunk on the fp32 upcast."""
    def ce(logits, labels):
        return F.cross_entropy(logits.float(), labels, ignore_index=-100, reduction="sum")
    return torch.compile(ce) if compiled else ce


def measure_cuda_case(name, config_dict, job_keys, harness):
    job = {"task": "train_full", "precision": "bf16", "optimizer": "adamw", "optimizer_impl": "foreach",
           "gradient_checkpointing": "none", "attention_impl": "sdpa", "loss_impl": "standard"}
    job.update(job_keys)
    batch, seq = job["micro_batch_size"], job["seq_len"]
    torch.manual_seed(0)
    torch.cuda.empty_cache()
    baseline = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    if harness == "chunked":
        # A trained output head used once per chunk (torchtune TransformerDecoder.chunked_output).
        base, config = hf_model(config_dict, base_only=True)
        head = torch.nn.Linear(config.hidden_size, config.vocab_size, bias=False, device="cuda", dtype=torch.bfloat16)
        params = list(base.parameters()) + list(head.parameters())
        loss_fn = chunked_loss(job.get("compile", False))
        model = base
    else:
        model, config = hf_model(config_dict)
        if job["gradient_checkpointing"] == "full":
            model.config.use_cache = False
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if job["task"] == "train_lora":
            from peft import LoraConfig, get_peft_model
            lora = job["lora"]
            targets = "all-linear" if lora["target_modules"] == "all_linear" else lora["target_modules"]
            model = get_peft_model(model, LoraConfig(r=lora["r"], lora_alpha=lora["alpha"], lora_dropout=0.0,
                                                     target_modules=targets, task_type="CAUSAL_LM"))
        params = [p for p in model.parameters() if p.requires_grad]
    model.train()
    if job["optimizer"] == "sgd":
        opt = torch.optim.SGD(params, lr=1e-4, foreach=True)
    else:
        opt = torch.optim.AdamW(params, lr=1e-4, foreach=True)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")
    for _ in range(2):  # the second step holds optimizer state
        if harness == "chunked":
            hidden = model(input_ids=ids).last_hidden_state
            logits = [head(chunk) for chunk in hidden.chunk(8, dim=1)]
            labels = F.pad(ids, (0, 1), value=-100)[:, 1:].chunk(8, dim=1)
            loss = sum(loss_fn(lg.reshape(-1, lg.size(-1)), lb.reshape(-1)) for lg, lb in zip(logits, labels)) / ids.numel()
            del logits, hidden  # torchtune: "free logits otherwise it peaks backward memory"
        else:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        del loss
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    measured = {"max_memory_allocated": torch.cuda.max_memory_allocated(),
                "max_memory_reserved": torch.cuda.max_memory_reserved(),
                "baseline_allocated": baseline}
    del model, opt, params
    if harness == "chunked":
        del head
    torch.cuda.empty_cache()
    return {"name": name, "config": config_dict, "job": job, "harness": harness, "measured": measured}


def measure_cuda(only=None, save=lambda results: None):
    """Real Hugging Face models from config on a GPU (needs transformers; LoRA cases peft)."""
    import transformers  # noqa: F401 (its version is recorded)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__,
                "gpu": torch.cuda.get_device_name()}
    try:
        import peft
        versions["peft"] = peft.__version__
    except ImportError:
        pass
    results = []
    for name, config, job, harness in HF_CASES:
        if only and name not in only:
            continue
        try:
            r = measure_cuda_case(name, config, job, harness)
            r["measured"].update(versions)
            print(f"{name}: max allocated {r['measured']['max_memory_allocated']}, reserved "
                  f"{r['measured']['max_memory_reserved']}", flush=True)
            results.append(r)
            save(results)
        except Exception as error:  # one case's failure must not lose the others
            import traceback
            traceback.print_exc()
            print(f"{name}: not measured: {error}", file=sys.stderr, flush=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True)
    parser.add_argument("--cuda", action="store_true", help="run real HF models on the GPU (needs transformers)")
    parser.add_argument("--only", help="comma-separated case names: run only these Hugging Face cases")
    args = parser.parse_args()
    def save(results):
        with open(args.out, "w") as f:
            json.dump({"tool": "tools/calibrate.py", "torch": torch.__version__, "device": "cuda" if args.cuda else "cpu",
                       "results": results}, f, indent=1)
            f.write("\n")

    if args.cuda:
        if not torch.cuda.is_available():
            sys.exit("calibrate.py: --cuda given but torch.cuda.is_available() is False")
        results = []
        for family in FAMILIES if not args.only else []:
            for batch, seq in ((1, 64), (8, 256)):
                try:
                    with torch.device("cuda"):  # the plain models build their rotary tables on the default device
                        results.append(measure_cuda_plain(family, batch, seq))
                except Exception as error:
                    print(f"{family}: not measured: {error}", file=sys.stderr, flush=True)
        try:
            import transformers  # noqa: F401
        except ImportError:
            print("transformers not installed: only the plain-PyTorch families were measured", file=sys.stderr)
        else:
            plain = list(results)
            results += measure_cuda(args.only.split(",") if args.only else None,
                                    save=lambda measured: save(plain + measured))
    else:
        results = []
        for family in FAMILIES:
            for batch, seq in ((1, 64), (2, 128)):
                results.append(measure(family, batch, seq, torch.float32))
    save(results)
    print(f"wrote {len(results)} measurements to {args.out}")


if __name__ == "__main__":
    main()
