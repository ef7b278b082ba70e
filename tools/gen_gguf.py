#!/usr/bin/env python3
"""Writes the GGUF fixtures of tests/readers/gguf_header_test.cpp: a tiny Llama-shaped file with
real header structure (metadata of every value type, a tokenizer array, tensors of several ggml
types, aligned offsets, zero-filled data), and broken variants for the bad-input tests.

  tools/gen_gguf.py --out tests/fixtures/gguf

Layout follows ggml/docs/gguf.md (version 3, little-endian). Tensor data is zeros: only the header
is read by oomdoc.
"""
import argparse
import os
import struct

# ggml_type ids and (block elements, block bytes)
F32, F16, Q4_0, Q8_0, Q6_K = 0, 1, 2, 8, 14
BLOCK = {F32: (1, 4), F16: (1, 2), Q4_0: (32, 18), Q8_0: (32, 34), Q6_K: (256, 210)}

# metadata value types
U8, I8, U16, I16, U32, I32, F32V, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    fmt = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32V: "<f", BOOL: "<?", U64: "<Q",
           I64: "<q", F64: "<d"}
    if vtype == STRING:
        return out + gstr(value)
    if vtype == ARRAY:
        item_type, items = value
        out += struct.pack("<IQ", item_type, len(items))
        for item in items:
            out += gstr(item) if item_type == STRING else struct.pack(fmt[item_type], item)
        return out
    return out + struct.pack(fmt[vtype], value)


def tensor_bytes(ttype, dims):
    n = 1
    for d in dims:
        n *= d
    elements, size = BLOCK[ttype]
    return n // elements * size


def build(tensors, metadata, alignment=32, version=3, magic=b"GGUF", data=True):
    """tensors: [(name, dims, type)]. Returns the file bytes (without the data section if not data)."""
    header = magic + struct.pack("<IQQ", version, len(tensors), len(metadata))
    for item in metadata:
        header += item
    offset = 0
    infos = b""
    for name, dims, ttype in tensors:
        infos += gstr(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims)
        infos += struct.pack("<IQ", ttype, offset)
        offset += tensor_bytes(ttype, dims)
        offset = (offset + alignment - 1) // alignment * alignment
    header += infos
    pad = (-len(header)) % alignment
    return header + b"\0" * pad + (b"\0" * offset if data else b"")


def tiny_llama():
    """2 blocks, hidden 64, 4 heads of 16, 2 KV heads, feed-forward 128, vocabulary 256."""
    n_embd, n_ff, n_vocab, n_layer = 64, 128, 256, 2
    metadata = [
        kv("general.architecture", STRING, "llama"),
        kv("general.name", STRING, "tiny-llama-test"),
        kv("general.file_type", U32, 7),  # LLAMA_FTYPE_MOSTLY_Q8_0
        kv("general.alignment", U32, 32),
        kv("llama.block_count", U32, n_layer),
        kv("llama.context_length", U32, 2048),
        kv("llama.embedding_length", U32, n_embd),
        kv("llama.feed_forward_length", U32, n_ff),
        kv("llama.attention.head_count", U32, 4),
        kv("llama.attention.head_count_kv", U32, 2),
        kv("llama.rope.freq_base", F32V, 10000.0),
        kv("llama.attention.layer_norm_rms_epsilon", F32V, 1e-5),
        kv("test.every.i8", I8, -3), kv("test.every.u16", U16, 7), kv("test.every.i64", I64, -9),
        kv("test.every.f64", F64, 0.5), kv("test.every.bool", BOOL, True), kv("test.every.u8", U8, 1),
        kv("test.every.i16", I16, -2), kv("test.every.i32", I32, -1), kv("test.every.u64", U64, 1 << 40),
        kv("tokenizer.ggml.model", STRING, "llama"),
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["<t%d>" % i for i in range(n_vocab)])),
        kv("tokenizer.ggml.scores", ARRAY, (F32V, [0.0] * n_vocab)),
    ]
    tensors = [("token_embd.weight", [n_embd, n_vocab], Q8_0)]
    for b in range(n_layer):
        tensors += [
            ("blk.%d.attn_norm.weight" % b, [n_embd], F32),
            ("blk.%d.attn_q.weight" % b, [n_embd, n_embd], Q8_0),
            ("blk.%d.attn_k.weight" % b, [n_embd, 32], Q8_0),
            ("blk.%d.attn_v.weight" % b, [n_embd, 32], Q4_0),
            ("blk.%d.attn_output.weight" % b, [n_embd, n_embd], Q8_0),
            ("blk.%d.ffn_norm.weight" % b, [n_embd], F32),
            ("blk.%d.ffn_gate.weight" % b, [n_embd, n_ff], Q8_0),
            ("blk.%d.ffn_up.weight" % b, [n_embd, n_ff], Q8_0),
            ("blk.%d.ffn_down.weight" % b, [n_ff, n_embd], F16),
        ]
    tensors += [("output_norm.weight", [n_embd], F32), ("output.weight", [n_embd, n_vocab], Q8_0)]
    return tensors, metadata


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    out = parser.parse_args().out
    os.makedirs(out, exist_ok=True)
    tensors, metadata = tiny_llama()
    good = build(tensors, metadata)
    files = {
        "tiny_llama_q8_0.gguf": good,
        # The same model with tied embeddings: no output.weight.
        "tiny_llama_tied.gguf": build([t for t in tensors if t[0] != "output.weight"], metadata),
        "truncated.gguf": good[:300],
        "bad_magic.gguf": b"GGML" + good[4:],
        "version_1.gguf": build(tensors, metadata, version=1),
        "huge_tensor_count.gguf": b"GGUF" + struct.pack("<IQQ", 3, 1 << 40, 0),
        "string_past_end.gguf": b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1 << 60) + b"key",
        "data_cut_short.gguf": good[:-4096],
        "no_architecture.gguf": build(tensors, [m for m in metadata if b"general.architecture" not in m]),
    }
    # Gemma 2 with a 64-token window: llama.cpp slides every other layer.
    gemma = [kv("general.architecture", STRING, "gemma2")] + [
        kv(k.replace("llama.", "gemma2."), t, v) for k, t, v in [
            ("llama.block_count", U32, 2), ("llama.context_length", U32, 8192), ("llama.embedding_length", U32, 64),
            ("llama.feed_forward_length", U32, 128), ("llama.attention.head_count", U32, 4),
            ("llama.attention.head_count_kv", U32, 2), ("llama.attention.key_length", U32, 16),
            ("llama.attention.sliding_window", U32, 64)]] + [
        kv("tokenizer.ggml.tokens", ARRAY, (STRING, ["<t%d>" % i for i in range(256)]))]
    files["tiny_gemma2_swa.gguf"] = build([t for t in tensors if t[0] != "output.weight"], gemma)
    # gguf-split shards: the metadata and the first tensors in shard 1, the rest in shard 2.
    split_meta = lambda no, count: [kv("split.no", U16, no), kv("split.count", U16, count), kv("split.tensors.count", I32, len(tensors))]
    half = len(tensors) // 2
    files["tiny_llama-00001-of-00002.gguf"] = build(tensors[:half], metadata + split_meta(0, 2))
    files["tiny_llama-00002-of-00002.gguf"] = build(tensors[half:], split_meta(1, 2))
    files["lonely-00001-of-00003.gguf"] = build(tensors[:half], metadata + split_meta(0, 3))
    # Duplicates llama.cpp rejects: a tensor name and a metadata key given twice.
    files["dup_tensor.gguf"] = build(tensors + [tensors[1]], metadata)
    files["dup_key.gguf"] = build(tensors, metadata + [kv("llama.block_count", U32, 2)])
    # Per-layer KV head counts: equal (read as 2), and with a 0 (a layer without attention: hybrid).
    without_kv = [m for m in metadata if b"head_count_kv" not in m]
    files["kv_array.gguf"] = build(tensors, without_kv + [kv("llama.attention.head_count_kv", ARRAY, (U32, [2, 2]))])
    files["hybrid_kv_array.gguf"] = build(tensors, without_kv + [kv("llama.attention.head_count_kv", ARRAY, (U32, [0, 2]))])
    files["bert.gguf"] = build(tensors, [kv("general.architecture", STRING, "bert")] + metadata[1:])
    # A tensor with an absurd shape (2^40 x 2^40 elements).
    files["absurd_shape.gguf"] = build([("blk.0.attn_q.weight", [1 << 40, 1 << 40], F32)], metadata, data=False)
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        print(name, len(data))


if __name__ == "__main__":
    main()
