#include "readers/model_presets.h"

#include <gtest/gtest.h>

#include "readers/model_resolver.h"

namespace oomdoc {
namespace {

TEST(ModelPresets, AtLeastFortyAndEveryOneParses) {
  const auto& index = preset_index();
  EXPECT_GE(index.size(), 40u);
  for (const auto& p : index) {
    auto spec = find_preset(p.id);
    ASSERT_TRUE(spec.has_value()) << p.id;
    ASSERT_TRUE(spec->ok()) << p.id << ": " << spec->error().message;
    EXPECT_FALSE(p.source.empty()) << p.id;
  }
}

// The count computed from each config must equal the published count to the parameter.
TEST(ModelPresets, ParameterCountMatchesPublishedCount) {
  int checked = 0;
  for (const auto& p : preset_index()) {
    if (!p.reference_params) continue;
    auto spec = find_preset(p.id);
    ASSERT_TRUE(spec && spec->ok()) << p.id;
    EXPECT_EQ((*spec)->total_params, *p.reference_params) << p.id;
    ++checked;
  }
  EXPECT_GE(checked, 40);
}

}  // namespace
}  // namespace oomdoc
