#include "readers/llama_cpp_flags.h"

#include <string>
#include <unordered_map>

namespace oomdoc {
namespace {

struct FlagEntry {
  std::string_view spellings;   // space-separated, as common/arg.cpp lists them
  int values;
  bool changes_memory;
};

// From common/arg.cpp and the generated tables of tools/server/README.md (current builds), plus
// the spellings 2024 builds had that newer ones dropped (--mlock, --no-mmap, -cnv, -p, --draft, ...):
// a flag one build knows is read, never refused. The flags the estimate sizes (-m, -c, -ngl, -b,
// -ub, -np, -fa, -ctk, -ctv) are read by readers/llama_cpp_args.cpp before this table is asked.
constexpr FlagEntry kFlags[] = {
    // Read by the parser itself.
    {"-m --model", 1, false}, {"-c --ctx-size", 1, false}, {"-ngl --gpu-layers --n-gpu-layers", 1, false},
    {"-b --batch-size", 1, false}, {"-ub --ubatch-size", 1, false}, {"-np --parallel", 1, false},
    {"-fa --flash-attn", -1, false}, {"-ctk --cache-type-k", 1, false}, {"-ctv --cache-type-v", 1, false},
    {"-hf -hfr --hf-repo", 1, false},
    // Change GPU memory, not sized: offload and placement, draft models, adapters, projectors.
    {"-kvo --kv-offload -nkvo --no-kv-offload", 0, true}, {"-ot --override-tensor", 1, true},
    {"-cmoe --cpu-moe", 0, true}, {"-ncmoe --n-cpu-moe", 1, true}, {"--moe-cache-mib", 1, true},
    {"-ncffn --n-cpu-ffn", 1, true}, {"-sm --split-mode", 1, true}, {"-ts --tensor-split", 1, true},
    {"-mg --main-gpu", 1, true}, {"-dev --device", 1, true}, {"--rpc", 1, true}, {"--swa-full", 0, true},
    {"-kvu --kv-unified -no-kvu --no-kv-unified", 0, true}, {"--kv-unified-per-slot", 1, true},
    {"-fit --fit", -1, true}, {"-fitt --fit-target", 1, true}, {"-fitc --fit-ctx", 1, true},
    {"--lora", 1, true}, {"--lora-scaled", 1, true}, {"--control-vector", 1, true},
    {"--control-vector-scaled", 1, true}, {"-mm --mmproj", 1, true}, {"-mmu --mmproj-url", 1, true},
    {"-mv --model-vocoder", 1, true}, {"-hfv --hf-repo-v", 1, true}, {"-hffv --hf-file-v", 1, true},
    {"--spec-draft-model -md --model-draft", 1, true}, {"--spec-draft-hf -hfd -hfrd --hf-repo-draft", 1, true},
    {"--spec-draft-ngl -ngld --gpu-layers-draft --n-gpu-layers-draft", 1, true},
    {"-cd --ctx-size-draft", 1, true}, {"--spec-draft-device -devd --device-draft", 1, true},
    {"--spec-draft-type-k -ctkd --cache-type-k-draft", 1, true},
    {"--spec-draft-type-v -ctvd --cache-type-v-draft", 1, true},
    {"--spec-draft-override-tensor -otd --override-tensor-draft", 1, true},
    {"--spec-draft-cpu-moe -cmoed --cpu-moe-draft", 0, true},
    {"--spec-draft-n-cpu-moe --spec-draft-ncmoe -ncmoed --n-cpu-moe-draft", 1, true},
    {"--spec-replace", 2, true}, {"--spec-type", 1, true}, {"--spec-default", 0, true},
    // No effect on GPU memory: CPU threads and placement, host memory, sampling, the HTTP server,
    // logging, chat templates, downloads.
    {"-h --help --usage", 0, false}, {"--version", 0, false}, {"-cl --cache-list", 0, false},
    {"--completion-bash", 0, false}, {"--verbose-prompt", 0, false}, {"--display-prompt --no-display-prompt", 0, false},
    {"-t --threads", 1, false}, {"-tb --threads-batch", 1, false}, {"-C --cpu-mask", 1, false},
    {"-Cr --cpu-range", 1, false}, {"--cpu-strict", 1, false}, {"--prio", 1, false}, {"--poll", 1, false},
    {"-Cb --cpu-mask-batch", 1, false}, {"-Crb --cpu-range-batch", 1, false}, {"--cpu-strict-batch", 1, false},
    {"--prio-batch", 1, false}, {"--poll-batch", 1, false}, {"-n --predict --n-predict", 1, false},
    {"--keep", 1, false}, {"--perf --no-perf", 0, false}, {"-e --escape --no-escape", 0, false},
    {"--rope-scaling", 1, false}, {"--rope-scale", 1, false}, {"--rope-freq-base", 1, false},
    {"--rope-freq-scale", 1, false}, {"--yarn-orig-ctx", 1, false}, {"--yarn-ext-factor", 1, false},
    {"--yarn-attn-factor", 1, false}, {"--yarn-beta-slow", 1, false}, {"--yarn-beta-fast", 1, false},
    {"-gan --grp-attn-n", 1, false}, {"-gaw --grp-attn-w", 1, false},
    {"--repack -nr --no-repack", 0, false}, {"--no-host", 0, false}, {"-dt --defrag-thold", 1, false},
    {"-lm --load-mode", 1, false}, {"-lzm --lazy-mode", 1, false}, {"--mlock", 0, false},
    {"--mmap --no-mmap", 0, false}, {"-dio --direct-io -ndio --no-direct-io", 0, false}, {"--numa", 1, false},
    {"--list-devices", 0, false}, {"--check-tensors", 0, false}, {"--override-kv", 1, false},
    {"--op-offload --no-op-offload", 0, false}, {"--control-vector-layer-range", 2, false},
    {"-mu --model-url", 1, false}, {"-dr --docker-repo", 1, false}, {"-hff --hf-file", 1, false},
    {"-hft --hf-token", 1, false}, {"--offline", 0, false}, {"--log-disable", 0, false}, {"--log-file", 1, false},
    {"--log-jsonl --no-log-jsonl", 0, false}, {"--log-colors", -1, false}, {"--log-format", 1, false},
    {"-v --verbose --log-verbose", 0, false}, {"-lv --verbosity --log-verbosity", 1, false},
    {"--log-prefix --no-log-prefix", 0, false}, {"--log-timestamps --no-log-timestamps", 0, false},
    {"-co --color", -1, false},
    // Sampling.
    {"--samplers", 1, false}, {"-s --seed", 1, false}, {"--sampler-seq --sampling-seq", 1, false},
    {"--ignore-eos", 0, false}, {"--temp --temperature", 1, false}, {"--top-k", 1, false}, {"--top-p", 1, false},
    {"--min-p", 1, false}, {"--top-nsigma --top-n-sigma", 1, false}, {"--xtc-probability", 1, false},
    {"--xtc-threshold", 1, false}, {"--typical --typical-p", 1, false}, {"--repeat-last-n", 1, false},
    {"--repeat-penalty", 1, false}, {"--presence-penalty", 1, false}, {"--frequency-penalty", 1, false},
    {"--dry-multiplier", 1, false}, {"--dry-base", 1, false}, {"--dry-allowed-length", 1, false},
    {"--dry-penalty-last-n", 1, false}, {"--dry-sequence-breaker", 1, false}, {"--adaptive-target", 1, false},
    {"--adaptive-decay", 1, false}, {"--dynatemp-range", 1, false}, {"--dynatemp-exp", 1, false},
    {"--mirostat", 1, false}, {"--mirostat-lr", 1, false}, {"--mirostat-ent", 1, false},
    {"-l --logit-bias", 1, false}, {"--grammar", 1, false}, {"--grammar-file", 1, false},
    {"-j --json-schema", 1, false}, {"-jf --json-schema-file", 1, false}, {"-bs --backend-sampling", 0, false},
    // Prompts and the interactive CLI (llama-cli, main).
    {"-p --prompt", 1, false}, {"-f --file", 1, false}, {"-bf --binary-file", 1, false},
    {"-sys --system-prompt", 1, false}, {"-sysf --system-prompt-file", 1, false}, {"--in-prefix", 1, false},
    {"--in-suffix", 1, false}, {"--in-prefix-bos", 0, false}, {"-r --reverse-prompt", 1, false},
    {"-cnv --conversation -no-cnv --no-conversation", 0, false}, {"-i --interactive", 0, false},
    {"-if --interactive-first", 0, false}, {"-mli --multiline-input", 0, false}, {"-st --single-turn", 0, false},
    {"--simple-io", 0, false}, {"--prompt-cache", 1, false}, {"--prompt-cache-all", 0, false},
    {"--prompt-cache-ro", 0, false}, {"-ptc --print-token-count", 1, false}, {"-sp --special", 0, false},
    {"--warmup --no-warmup", 0, false}, {"--spm-infill", 0, false}, {"--image", 1, false}, {"--audio", 1, false},
    // The server.
    {"-lcs --lookup-cache-static", 1, false}, {"-lcd --lookup-cache-dynamic", 1, false},
    {"-ctxcp --ctx-checkpoints --swa-checkpoints", 1, false}, {"-cms --checkpoint-min-step", 1, false},
    {"-cram --cache-ram", 1, false}, {"--cache-idle-slots --no-cache-idle-slots", 0, false},
    {"--context-shift --no-context-shift", 0, false}, {"--pooling", 1, false}, {"--attention", 1, false},
    {"-cb --cont-batching -nocb --no-cont-batching", 0, false},
    {"--mmproj-auto --no-mmproj --no-mmproj-auto", 0, false}, {"--mmproj-offload --no-mmproj-offload", 0, false},
    {"-mmdev --mmproj-device", 1, false}, {"--image-min-tokens", 1, false}, {"--image-max-tokens", 1, false},
    {"--mtmd-batch-max-tokens", 1, false}, {"--video-fps", 1, false}, {"--video-timestamp-interval", 1, false},
    {"--video-ffmpeg-dir", 1, false}, {"-a --alias", 1, false}, {"--tags", 1, false}, {"--embd-normalize", 1, false},
    {"--embd-output-format", 1, false}, {"--embd-separator", 1, false}, {"--cls-separator", 1, false},
    {"--host", 1, false}, {"--port", 1, false}, {"--reuse-port", 0, false}, {"--path", 1, false},
    {"--cors-origins", 1, false}, {"--cors-methods", 1, false}, {"--cors-headers", 1, false},
    {"--cors-credentials --no-cors-credentials", 0, false}, {"--api-prefix", 1, false},
    {"--ui-config --webui-config", 1, false}, {"--ui-config-file --webui-config-file", 1, false},
    {"--ui-mcp-proxy --webui-mcp-proxy --no-ui-mcp-proxy --no-webui-mcp-proxy", 0, false}, {"--tools", 1, false},
    {"--tools-runtime", 1, false}, {"--mcp-servers-config", 1, false}, {"--mcp-servers-json", 1, false},
    {"-ag --agent -no-ag --no-agent", 0, false}, {"--ui --webui --no-ui --no-webui", 0, false},
    {"--embedding --embeddings", 0, false}, {"--rerank --reranking", 0, false}, {"--api-key", 1, false},
    {"--api-key-file", 1, false}, {"--ssl-key-file", 1, false}, {"--ssl-cert-file", 1, false},
    {"--chat-template-kwargs", 1, false}, {"-to --timeout", 1, false}, {"--sse-ping-interval", 1, false},
    {"--threads-http", 1, false}, {"--cache-prompt --no-cache-prompt", 0, false}, {"--cache-reuse", 1, false},
    {"--metrics", 0, false}, {"--props", 0, false}, {"--slots --no-slots", 0, false}, {"--slot-save-path", 1, false},
    {"--media-path", 1, false}, {"--models-dir", 1, false}, {"--models-preset", 1, false}, {"--models-max", 1, false},
    {"--models-autoload --no-models-autoload", 0, false}, {"--jinja --no-jinja", 0, false},
    {"--reasoning-format", 1, false}, {"-rea --reasoning", -1, false}, {"--reasoning-effort", 1, false},
    {"--reasoning-budget", 1, false}, {"--reasoning-budget-message", 1, false},
    {"--reasoning-preserve --no-reasoning-preserve", 0, false}, {"--chat-template", 1, false},
    {"--chat-template-file", 1, false}, {"--skip-chat-parsing --no-skip-chat-parsing", 0, false},
    {"--prefill-assistant --no-prefill-assistant", 0, false}, {"-sps --slot-prompt-similarity", 1, false},
    {"--lora-init-without-apply", 0, false}, {"--sleep-idle-seconds", 1, false}, {"--log-prompts-dir", 1, false},
    // Speculative decoding's CPU side and draft lengths (the draft model's memory is above).
    {"--spec-draft-threads -td --threads-draft", 1, false},
    {"--spec-draft-threads-batch -tbd --threads-batch-draft", 1, false},
    {"--spec-draft-cpu-mask -Cd --cpu-mask-draft", 1, false}, {"--spec-draft-cpu-range -Crd --cpu-range-draft", 1, false},
    {"--spec-draft-cpu-strict --cpu-strict-draft", 1, false}, {"--spec-draft-prio --prio-draft", 1, false},
    {"--spec-draft-poll --poll-draft", 1, false}, {"--spec-draft-cpu-mask-batch -Cbd --cpu-mask-batch-draft", 1, false},
    {"--spec-draft-cpu-strict-batch --cpu-strict-batch-draft", 1, false},
    {"--spec-draft-prio-batch --prio-batch-draft", 1, false}, {"--spec-draft-poll-batch --poll-batch-draft", 1, false},
    {"--spec-draft-n-max --draft --draft-n --draft-max", 1, false}, {"--spec-draft-n-min --draft-min --draft-n-min", 1, false},
    {"--spec-synth-len", 1, false}, {"--spec-synth-rates", 1, false}, {"--spec-draft-p-split --draft-p-split -ps --p-split", 1, false},
    {"--spec-draft-p-min --draft-p-min", 1, false}, {"--spec-draft-backend-sampling --no-spec-draft-backend-sampling", 0, false},
    {"--spec-draft-sampling", 1, false}, {"--spec-ngram-mod-n-min", 1, false}, {"--spec-ngram-mod-n-max", 1, false},
    {"--spec-ngram-mod-n-match", 1, false}, {"--spec-ngram-simple-size-n", 1, false},
    {"--spec-ngram-simple-size-m", 1, false}, {"--spec-ngram-simple-min-hits", 1, false},
    {"--spec-ngram-map-k-size-n", 1, false}, {"--spec-ngram-map-k-size-m", 1, false},
    {"--spec-ngram-map-k-min-hits", 1, false}, {"--spec-ngram-map-k4v-size-n", 1, false},
    {"--spec-ngram-map-k4v-size-m", 1, false}, {"--spec-ngram-map-k4v-min-hits", 1, false},
    {"--spec-ngram-size-n", 1, false}, {"--spec-ngram-size-m", 1, false}, {"--spec-ngram-min-hits", 1, false},
    // Presets that download a model: -hf's refusal covers what they would load.
    {"--embd-gemma-default", 0, false}, {"--embd-bge-small-en-default", 0, false},
    {"--embd-e5-small-en-default", 0, false}, {"--embd-gte-small-default", 0, false},
    {"--fim-qwen-1.5b-default", 0, false}, {"--fim-qwen-3b-default", 0, false}, {"--fim-qwen-7b-default", 0, false},
    {"--fim-qwen-7b-spec", 0, false}, {"--fim-qwen-14b-spec", 0, false}, {"--fim-qwen-30b-default", 0, false},
    {"--gpt-oss-20b-default", 0, false}, {"--gpt-oss-120b-default", 0, false},
    {"--vision-gemma-4b-default", 0, false}, {"--vision-gemma-12b-default", 0, false},
    {"--tts-oute-default", 0, false}, {"--tts-use-guide-tokens", 0, false},
};

struct FlagIndex {
  std::unordered_map<std::string, LlamaCppFlag> by_spelling;
  std::vector<std::string> spellings;
};

const FlagIndex& flag_index() {
  static const FlagIndex index = [] {
    FlagIndex out;
    for (const FlagEntry& entry : kFlags) {
      std::string_view rest = entry.spellings;
      while (!rest.empty()) {
        const size_t space = rest.find(' ');
        std::string spelling(rest.substr(0, space));
        rest = space == std::string_view::npos ? std::string_view() : rest.substr(space + 1);
        out.by_spelling.emplace(spelling, LlamaCppFlag{entry.values, entry.changes_memory});
        out.spellings.push_back(std::move(spelling));
      }
    }
    return out;
  }();
  return index;
}

}  // namespace

std::optional<LlamaCppFlag> find_llama_cpp_flag(std::string_view spelling) {
  const auto& index = flag_index().by_spelling;
  auto it = index.find(std::string(spelling));
  if (it == index.end()) return std::nullopt;
  return it->second;
}

const std::vector<std::string>& llama_cpp_flag_spellings() { return flag_index().spellings; }

}  // namespace oomdoc
