// `oomdoc run --alloc-conf SETTINGS`: the settings are checked before the command starts, the way
// PyTorch's allocator parses PYTORCH_CUDA_ALLOC_CONF, so that a typo is an error now rather than a
// RuntimeError ("Unrecognized CachingAllocator option") when the program first touches CUDA, or
// nothing at all on a run that never does.
#pragma once

#include <string>

#include "core/result.h"

namespace oomdoc {

// Checks "key:value[,key:value...]" against the keys PyTorch's CUDA caching allocator knows and the
// values it accepts (sources in alloc_conf.cpp). Errors start "--alloc-conf: " and name the setting:
// "--alloc-conf: unknown setting 'expandable_segment' (did you mean expandable_segments?) ...".
Status check_alloc_conf(const std::string& settings);

}  // namespace oomdoc
