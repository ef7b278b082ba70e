// Shared by the vLLM serve tests: a parsed command line, its model and a card of `memory` bytes,
// and the startup prediction for them (the test fails on an error).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "analyses/vllm_serve.h"
#include "readers/model_resolver.h"
#include "readers/vllm_args.h"

namespace oomdoc::serve_test {

inline ServeInputs inputs(const std::vector<std::string>& command, uint64_t memory, const std::string& version = "") {
  ServeInputs in;
  auto config = parse_vllm_command_line(command);
  EXPECT_TRUE(config.ok()) << config.error().message;
  in.config = config.value();
  auto model = resolve_model(in.config.model);
  EXPECT_TRUE(model.ok()) << model.error().message;
  in.model = model.value();
  in.target = serve_target_memory(memory);
  in.version = parse_vllm_version(version).value();
  return in;
}

inline ServePrediction predict(const ServeInputs& in) {
  auto p = predict_vllm_startup(in);
  EXPECT_TRUE(p.ok()) << p.error().message;
  return p.ok() ? p.value() : ServePrediction{};
}

}  // namespace oomdoc::serve_test
