#include "readers/gguf_header.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>

#include "core/text.h"
#include "model/architecture.h"
#include "model/gguf_types.h"

namespace oomdoc {
namespace {

// Limits far beyond any real file, so that a hostile header cannot make us allocate or loop
// without bound (the largest published GGUFs hold a few thousand tensors).
constexpr uint64_t kMaxTensors = 1u << 20;
constexpr uint64_t kMaxMetadata = 1u << 20;
constexpr uint32_t kMaxDims = 8;   // GGML_MAX_DIMS is 4
constexpr uint64_t kMaxHeadBytes = 256ull << 20;

enum ValueType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7,
  kString = 8, kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12,
};

// A bounds-checked little-endian cursor over the header bytes.
class Cursor {
 public:
  Cursor(std::string_view data, const std::string& source) : data_(data), source_(source) {}

  template <typename T>
  Result<T> scalar(const char* what) {
    if (data_.size() - pos_ < sizeof(T)) return truncated(what);
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));   // GGUF is little-endian, as are our targets
    pos_ += sizeof(T);
    return v;
  }
  Result<std::string> string(const char* what) {
    auto length = scalar<uint64_t>(what);
    if (!length) return length.error();
    if (*length > data_.size() - pos_) {
      return make_error(fmt::format("{}: truncated or corrupt GGUF header: {} of {} bytes runs past byte {}", source_,
                                    what, *length, data_.size() + 4));
    }
    std::string s(data_.substr(pos_, *length));
    pos_ += *length;
    return s;
  }
  Status skip(uint64_t bytes, const char* what) {
    if (bytes > data_.size() - pos_) return truncated(what);
    pos_ += bytes;
    return Ok{};
  }
  uint64_t position() const { return pos_; }

 private:
  Error truncated(const char* what) const {
    return Error{fmt::format("{}: truncated GGUF header (in {} at byte {})", source_, what, pos_)};
  }
  std::string_view data_;
  const std::string& source_;
  uint64_t pos_ = 0;
};

uint64_t scalar_size(uint32_t type) {
  switch (type) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

Result<GgufValue> read_value(Cursor& c, uint32_t type, const std::string& key, const std::string& source) {
  GgufValue v;
  switch (type) {
    case kU8: { auto x = c.scalar<uint8_t>("a value"); if (!x) return x.error(); v.u = *x; break; }
    case kU16: { auto x = c.scalar<uint16_t>("a value"); if (!x) return x.error(); v.u = *x; break; }
    case kU32: { auto x = c.scalar<uint32_t>("a value"); if (!x) return x.error(); v.u = *x; break; }
    case kU64: { auto x = c.scalar<uint64_t>("a value"); if (!x) return x.error(); v.u = *x; break; }
    case kI8: { auto x = c.scalar<int8_t>("a value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kSigned; v.i = *x; break; }
    case kI16: { auto x = c.scalar<int16_t>("a value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kSigned; v.i = *x; break; }
    case kI32: { auto x = c.scalar<int32_t>("a value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kSigned; v.i = *x; break; }
    case kI64: { auto x = c.scalar<int64_t>("a value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kSigned; v.i = *x; break; }
    case kF32: { auto x = c.scalar<float>("a value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kFloat; v.f = *x; break; }
    case kF64: { auto x = c.scalar<double>("a value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kFloat; v.f = *x; break; }
    case kBool: { auto x = c.scalar<uint8_t>("a value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kBool; v.u = *x != 0; break; }
    case kString: { auto x = c.string("a string value"); if (!x) return x.error(); v.kind = GgufValue::Kind::kString; v.s = std::move(*x); break; }
    case kArray: {
      auto item = c.scalar<uint32_t>("an array's item type");
      if (!item) return item.error();
      auto n = c.scalar<uint64_t>("an array's length");
      if (!n) return n.error();
      v.kind = GgufValue::Kind::kArray;
      v.array_length = *n;
      if (*item == kString) {
        for (uint64_t k = 0; k < *n; ++k) {
          auto s = c.scalar<uint64_t>("an array string");
          if (!s) return s.error();
          if (auto skipped = c.skip(*s, "an array string"); !skipped) return skipped.error();
        }
      } else if (uint64_t size = scalar_size(*item); size > 0) {
        if (*n > UINT64_MAX / size) return make_error(fmt::format("{}: {}: array of {} items overflows", source, key, *n));
        const bool integers = *item != kF32 && *item != kF64 && *item != kBool;
        if (integers && *n <= (1u << 16)) {
          for (uint64_t k = 0; k < *n; ++k) {
            auto x = read_value(c, *item, key, source);
            if (!x) return x.error();
            v.ints.push_back(x->kind == GgufValue::Kind::kSigned ? x->i : static_cast<int64_t>(std::min<uint64_t>(x->u, INT64_MAX)));
          }
        } else if (auto skipped = c.skip(*n * size, "an array"); !skipped) {
          return skipped.error();
        }
      } else {
        return make_error(fmt::format("{}: {}: arrays of type {} are not supported", source, key, *item));
      }
      break;
    }
    default:
      return make_error(fmt::format("{}: {}: unknown value type {}", source, key, type));
  }
  return v;
}

std::optional<uint64_t> unsigned_value(const GgufHeader& h, const std::string& key) {
  auto it = h.metadata.find(key);
  if (it == h.metadata.end()) return std::nullopt;
  const GgufValue& v = it->second;
  if (v.kind == GgufValue::Kind::kUnsigned) return v.u;
  if (v.kind == GgufValue::Kind::kSigned && v.i >= 0) return static_cast<uint64_t>(v.i);
  return std::nullopt;   // floats, strings, arrays (per-layer values are read where they matter)
}

// "blk.12.attn_q.weight" -> 12.
std::optional<uint64_t> block_of(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return std::nullopt;
  uint64_t n = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(static_cast<unsigned char>(name[i]))) return std::nullopt;
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i) {
    if (n > (1u << 20)) return std::nullopt;
    n = n * 10 + static_cast<uint64_t>(name[i] - '0');
  }
  if (i >= name.size() || name[i] != '.') return std::nullopt;
  return n;
}

// GGUF architecture names to the Hugging Face model_type the rest of oomdoc knows.
std::string model_type_for(const std::string& arch) {
  if (arch == "deepseek2") return "deepseek_v3";
  if (arch == "qwen2moe") return "qwen2_moe";
  if (arch == "qwen3moe") return "qwen3_moe";
  if (arch == "gptneox") return "gpt_neox";
  if (arch == "starcoder") return "gpt_bigcode";
  return arch;   // llama, qwen2, qwen3, gemma, gemma2, gemma3, phi3, falcon, gpt2, ...
}

}  // namespace

bool is_gguf_file(const std::string& path) {
  if (path.size() > 5 && to_lower(path.substr(path.size() - 5)) == ".gguf") return true;
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  return in.read(magic, 4) && std::string_view(magic, 4) == "GGUF";
}

Result<GgufHeader> parse_gguf_header(std::string_view head, uint64_t file_size, const std::string& source) {
  if (head.size() < 4 || head.substr(0, 4) != "GGUF") {
    return make_error(fmt::format("{}: not a GGUF file (no \"GGUF\" magic)", source));
  }
  Cursor c(head.substr(4), source);
  GgufHeader h;
  auto version = c.scalar<uint32_t>("the version");
  if (!version) return version.error();
  if (*version >= (1u << 16)) {
    return make_error(fmt::format("{}: a big-endian GGUF file (oomdoc reads little-endian ones)", source));
  }
  if (*version < 2 || *version > 3) {
    return make_error(fmt::format("{}: GGUF version {} (oomdoc reads versions 2 and 3)", source, *version));
  }
  h.version = *version;
  auto tensors = c.scalar<uint64_t>("the tensor count");
  if (!tensors) return tensors.error();
  auto entries = c.scalar<uint64_t>("the metadata count");
  if (!entries) return entries.error();
  if (*tensors > kMaxTensors) return make_error(fmt::format("{}: implausible tensor count {}", source, *tensors));
  if (*entries > kMaxMetadata) return make_error(fmt::format("{}: implausible metadata count {}", source, *entries));
  for (uint64_t k = 0; k < *entries; ++k) {
    auto key = c.string("a metadata key");
    if (!key) return key.error();
    auto type = c.scalar<uint32_t>("a metadata type");
    if (!type) return type.error();
    // A corrupt length makes the key a run of binary bytes: messages show it escaped and short.
    auto value = read_value(c, *type, printable(*key, 80), source);
    if (!value) return value.error();
    if (!h.metadata.emplace(*key, std::move(*value)).second) {
      return make_error(fmt::format("{}: metadata key {} appears twice", source, printable(*key, 80)));
    }
  }
  h.tensors.reserve(static_cast<size_t>(*tensors));
  for (uint64_t k = 0; k < *tensors; ++k) {
    GgufTensor t;
    auto name = c.string("a tensor name");
    if (!name) return name.error();
    t.name = std::move(*name);
    auto dims = c.scalar<uint32_t>("a tensor's dimension count");
    if (!dims) return dims.error();
    if (*dims == 0 || *dims > kMaxDims) {
      return make_error(fmt::format("{}: tensor {} has {} dimensions", source, printable(t.name, 80), *dims));
    }
    uint64_t elements = 1;
    for (uint32_t d = 0; d < *dims; ++d) {
      auto n = c.scalar<uint64_t>("a tensor dimension");
      if (!n) return n.error();
      if (*n == 0 || *n > (1ull << 40) || elements > (1ull << 48) / *n) {
        return make_error(fmt::format("{}: tensor {} has an implausible shape (dimension {} is {})", source, printable(t.name, 80), d, *n));
      }
      elements *= *n;
      t.dims.push_back(*n);
    }
    auto type = c.scalar<uint32_t>("a tensor type");
    if (!type) return type.error();
    t.type = *type;
    auto offset = c.scalar<uint64_t>("a tensor offset");
    if (!offset) return offset.error();
    t.offset = *offset;
    if (auto info = ggml_type_by_id(t.type)) {
      // Rows are whole blocks (ggml checks ne[0], the row length).
      if (t.dims[0] % info->block_elements != 0) {
        return make_error(fmt::format("{}: tensor {} has rows of {}, not whole {} blocks", source, printable(t.name, 80), t.dims[0], info->name));
      }
      t.bytes = elements / info->block_elements * info->block_bytes;
    }
    h.tensors.push_back(std::move(t));
  }
  {
    std::vector<std::string_view> names;
    for (const auto& t : h.tensors) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    if (auto dup = std::adjacent_find(names.begin(), names.end()); dup != names.end()) {
      return make_error(fmt::format("{}: tensor {} appears twice", source, printable(*dup, 80)));
    }
  }
  if (auto a = h.metadata.find("general.alignment"); a != h.metadata.end() && a->second.kind != GgufValue::Kind::kUnsigned) {
    return make_error(fmt::format("{}: general.alignment is not an unsigned integer", source));
  }
  uint64_t alignment = unsigned_value(h, "general.alignment").value_or(32);
  if (alignment == 0 || alignment > (1u << 20) || (alignment & (alignment - 1)) != 0) {
    return make_error(fmt::format("{}: general.alignment {} is not a power of two", source, alignment));
  }
  const uint64_t header_end = 4 + c.position();
  h.data_offset = (header_end + alignment - 1) / alignment * alignment;
  if (h.data_offset > file_size) {
    return make_error(fmt::format("{}: the header ends at byte {}, past the end of the file ({} bytes)", source,
                                  h.data_offset, file_size));
  }
  // Every tensor inside the data section; a type oomdoc does not know takes the room up to the
  // next tensor.
  const uint64_t data_size = file_size - h.data_offset;
  std::vector<size_t> order(h.tensors.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return h.tensors[a].offset < h.tensors[b].offset; });
  for (size_t k = 0; k < order.size(); ++k) {
    GgufTensor& t = h.tensors[order[k]];
    const uint64_t end = k + 1 < order.size() ? h.tensors[order[k + 1]].offset : data_size;
    if (t.offset > data_size || end < t.offset) {
      return make_error(fmt::format("{}: tensor {} starts at {} of a {}-byte data section", source, printable(t.name, 80), t.offset, data_size));
    }
    if (t.offset % alignment != 0) {
      return make_error(fmt::format("{}: tensor {} starts at {}, not a multiple of the alignment {}", source, printable(t.name, 80),
                                    t.offset, alignment));
    }
    if (t.bytes == 0) t.bytes = end - t.offset;
    if (t.bytes > end - t.offset) {
      return make_error(fmt::format("{}: tensor {} needs {} bytes but the file has {} for it (truncated or overlapping)",
                                    source, printable(t.name, 80), t.bytes, end - t.offset));
    }
  }
  return h;
}

Result<GgufHeader> read_gguf_header(const std::string& path) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) return make_error(fmt::format("{}: cannot read ({})", path, ec.message()));
  std::ifstream in(path, std::ios::binary);
  if (!in) return make_error(fmt::format("{}: cannot open", path));
  // Start small and read more while the header runs past what was read (a tokenizer of 250k
  // tokens is a few MiB; the tensor data after the header is never read).
  std::string head;
  for (uint64_t want = std::min<uint64_t>(size, 8ull << 20);; want = std::min<uint64_t>(std::min(size, kMaxHeadBytes), want * 4)) {
    const uint64_t have = head.size();
    head.resize(static_cast<size_t>(want));
    in.read(head.data() + have, static_cast<std::streamsize>(want - have));
    head.resize(static_cast<size_t>(have + static_cast<uint64_t>(in.gcount())));
    auto h = parse_gguf_header(head, size, path);
    const bool cut = !h && head.size() < size &&
                     (h.error().message.find("truncated") != std::string::npos ||
                      h.error().message.find("runs past byte") != std::string::npos ||
                      h.error().message.find("past the end of the file") != std::string::npos);
    if (!cut) return h;
    if (head.size() >= kMaxHeadBytes) {
      return make_error(fmt::format("{}: GGUF header larger than {} MiB", path, kMaxHeadBytes >> 20));
    }
  }
}

Result<ModelSpec> model_from_gguf_header(const GgufHeader& h, const std::string& source) {
  auto arch_it = h.metadata.find("general.architecture");
  if (arch_it == h.metadata.end() || arch_it->second.kind != GgufValue::Kind::kString) {
    return make_error(fmt::format("{}: no general.architecture in the GGUF metadata", source));
  }
  const std::string arch = arch_it->second.s;
  // Encoders keep no KV cache, and recurrent/hybrid models a fixed state per sequence that
  // oomdoc does not size: refused, as for Hugging Face configs (docs/serve.md, "Not done").
  static const std::set<std::string> kNotSized = {
      "bert", "nomic-bert", "nomic-bert-moe", "jina-bert-v2", "modern-bert", "neo-bert", "t5", "t5encoder",
      "mamba", "mamba2", "rwkv6", "rwkv6qwen2", "rwkv7", "arwkv7", "jamba", "falcon-h1", "granitehybrid",
      "nemotron_h", "qwen3next", "lfm2", "plamo2"};
  if (kNotSized.count(arch)) {
    return make_error(fmt::format("{}: architecture {} is an encoder or keeps a recurrent state: oomdoc does not size it",
                                  source, arch));
  }
  auto key = [&](const char* name) { return unsigned_value(h, arch + "." + name); };
  ModelSpec m;
  m.source = source;
  auto name = h.metadata.find("general.name");
  m.id = name != h.metadata.end() && name->second.kind == GgufValue::Kind::kString ? name->second.s
                                                                                   : std::filesystem::path(source).filename().string();
  m.model_type = model_type_for(arch);
  m.num_layers = key("block_count").value_or(0);
  m.hidden_size = key("embedding_length").value_or(0);
  m.num_attention_heads = key("attention.head_count").value_or(0);
  m.num_kv_heads = key("attention.head_count_kv").value_or(m.num_attention_heads);
  // Per-layer KV head counts (an array): a zero marks a layer without attention (hybrid models,
  // refused); different counts are sized at the largest.
  if (auto kv = h.metadata.find(arch + ".attention.head_count_kv"); kv != h.metadata.end() && kv->second.kind == GgufValue::Kind::kArray) {
    const auto& per_layer = kv->second.ints;
    if (per_layer.empty()) return make_error(fmt::format("{}: {}.attention.head_count_kv is an array oomdoc cannot read", source, arch));
    if (std::find(per_layer.begin(), per_layer.end(), 0) != per_layer.end()) {
      return make_error(fmt::format("{}: {} has layers without attention (head_count_kv 0): a hybrid model oomdoc does not size",
                                    source, arch));
    }
    m.num_kv_heads = static_cast<uint64_t>(std::max<int64_t>(0, *std::max_element(per_layer.begin(), per_layer.end())));
    if (std::adjacent_find(per_layer.begin(), per_layer.end(), std::not_equal_to<>()) != per_layer.end()) {
      m.notes.push_back("per-layer KV head counts: every layer sized at the largest");
    }
  }
  m.head_dim = key("attention.key_length").value_or(0);
  m.v_head_dim = key("attention.value_length").value_or(0);
  m.max_position_embeddings = key("context_length").value_or(0);
  m.num_experts = key("expert_count").value_or(0);
  m.experts_per_token = key("expert_used_count").value_or(0);
  m.intermediate_size = key("feed_forward_length").value_or(0);
  m.moe_intermediate_size = key("expert_feed_forward_length").value_or(m.num_experts ? m.intermediate_size : 0);
  m.first_dense_layers = key("leading_dense_block_count").value_or(0);
  // Sliding-window layers as llama.cpp marks them (set_swa_pattern: layer il slides when
  // il % n < n - 1): Gemma 2 every other layer, Gemma 3 five of six, Cohere2 three of four. Other
  // architectures run every layer with full attention in llama.cpp.
  static const std::map<std::string, uint64_t> kSwaPattern = {{"gemma2", 2}, {"gemma3", 6}, {"cohere2", 4}, {"gpt-oss", 2}};
  if (auto window = key("attention.sliding_window"); window && *window > 0 && kSwaPattern.count(arch)) {
    const uint64_t n = kSwaPattern.at(arch);
    m.sliding_window = *window;
    for (uint64_t il = 0; il < std::min<uint64_t>(m.num_layers, 1u << 12); ++il) m.layer_is_sliding.push_back(il % n < n - 1);
  }
  // MLA's compressed cache only for files converted with it (attention.key_length_mla present);
  // older DeepSeek conversions run in llama.cpp with full per-head keys and values.
  if (auto rank = key("attention.kv_lora_rank"); rank && *rank > 0 && key("attention.key_length_mla")) {
    m.attention = AttentionKind::kMultiLatent;
    m.kv_lora_rank = *rank;
    m.qk_rope_head_dim = key("rope.dimension_count").value_or(0);
    m.q_lora_rank = key("attention.q_lora_rank").value_or(0);
  }
  // The vocabulary: <arch>.vocab_size, else the tokenizer's token list.
  m.vocab_size = key("vocab_size").value_or(0);
  if (m.vocab_size == 0) {
    auto tokens = h.metadata.find("tokenizer.ggml.tokens");
    if (tokens != h.metadata.end() && tokens->second.kind == GgufValue::Kind::kArray) m.vocab_size = tokens->second.array_length;
  }

  for (auto [value, what] : {std::pair{m.num_layers, "block_count"}, std::pair{m.hidden_size, "embedding_length"},
                             std::pair{m.num_attention_heads, "attention.head_count"}}) {
    if (value == 0) return make_error(fmt::format("{}: the GGUF metadata has no {}.{}", source, arch, what));
  }
  // validate_shape's bound, before the per-block table is sized by it.
  if (m.num_layers > (1u << 12)) {
    return make_error(fmt::format("{}: {}.block_count {} is implausibly large", source, arch, m.num_layers));
  }
  if (m.head_dim == 0) m.head_dim = m.hidden_size / m.num_attention_heads;
  if (m.intermediate_size == 0) m.intermediate_size = m.moe_intermediate_size;

  ModelSpec::GgufWeights w;
  const auto ftype = unsigned_value(h, "general.file_type");
  w.file_type = ftype ? gguf_file_type_name(*ftype) : "unknown type";
  w.layer_bytes.assign(m.num_layers, 0);
  uint64_t elements = 0;
  for (const GgufTensor& t : h.tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.dims) n *= d;
    elements += n;
    if (auto b = block_of(t.name)) {
      if (*b >= m.num_layers) {
        return make_error(fmt::format("{}: tensor {} is past {}.block_count {}", source, printable(t.name, 80), arch, m.num_layers));
      }
      w.layer_bytes[*b] += t.bytes;
    } else if (t.name == "token_embd.weight") {
      w.token_embd_bytes += t.bytes;
      // ne = [n_embd, n_vocab]: the vocabulary when the metadata does not give it.
      if (m.vocab_size == 0 && t.dims.size() == 2) m.vocab_size = t.dims[1];
    } else if (t.name.rfind("token_embd", 0) == 0 || t.name.rfind("per_layer_token_embd", 0) == 0 ||
               t.name.rfind("position_embd", 0) == 0 || t.name.rfind("token_types", 0) == 0) {
      w.input_bytes += t.bytes;   // llama.cpp's input layer: host memory, like the embeddings
    } else if (t.name == "output.weight") {
      w.output_bytes = t.bytes;
    } else {
      w.other_bytes += t.bytes;
    }
  }
  m.tie_word_embeddings = w.output_bytes == 0;
  m.total_params = elements;
  // For engines that load the file as it is (vLLM's GGUF support keeps the quantized blocks).
  m.quantization = "gguf";
  m.checkpoint_bytes = w.token_embd_bytes + w.input_bytes + w.output_bytes + w.other_bytes;
  for (uint64_t b : w.layer_bytes) m.checkpoint_bytes += b;
  m.gguf = std::move(w);
  if (m.vocab_size == 0) {
    return make_error(fmt::format("{}: the GGUF metadata has no {}.vocab_size (or tokenizer.ggml.tokens)", source, arch));
  }
  // The same checks as a config.json (no zero widths, heads dividing, bounds that keep every
  // product inside 64 bits).
  if (auto valid = validate_shape(m, source); !valid) return valid.error();
  return m;
}

Result<ModelSpec> model_from_gguf(const std::string& path) {
  auto h = read_gguf_header(path);
  if (!h) return h.error();
  // A split file (gguf-split: NAME-00001-of-00003.gguf) holds its tensors across every shard, the
  // metadata in the first: read every shard's tensor table, or fail naming the missing one.
  const uint64_t splits = unsigned_value(*h, "split.count").value_or(1);
  if (splits > 1) {
    static const std::regex kShard(R"((.*)-(\d{5})-of-(\d{5})\.gguf$)");
    std::smatch match;
    if (splits > 10000 || !std::regex_match(path, match, kShard)) {
      return make_error(fmt::format("{}: split.count {} but the name is not NAME-NNNNN-of-NNNNN.gguf", path, splits));
    }
    GgufHeader merged;
    for (uint64_t k = 1; k <= splits; ++k) {
      const std::string shard = fmt::format("{}-{:05d}-of-{:05d}.gguf", match[1].str(), k, splits);
      std::error_code ec;
      if (!std::filesystem::exists(shard, ec)) {
        return make_error(fmt::format("{}: split {} of {} is missing: {}", path, k, splits, shard));
      }
      auto part = shard == path ? std::move(h) : read_gguf_header(shard);
      if (!part) return part.error();
      if (merged.metadata.empty() || part->metadata.count("general.architecture")) {
        if (part->metadata.count("general.architecture")) merged.metadata = part->metadata;
      }
      for (auto& t : part->tensors) merged.tensors.push_back(std::move(t));
      merged.version = part->version;
    }
    return model_from_gguf_header(merged, path);
  }
  return model_from_gguf_header(*h, path);
}

}  // namespace oomdoc
