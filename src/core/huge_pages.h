// Asks the kernel to back a large, not yet touched buffer with transparent huge pages (where THP
// is in "madvise" mode, the Debian default). Readers of multi-GB inputs fill arrays of hundreds of
// MB: with 4 KiB pages every first touch is a page fault, which dominates on virtual machines.
#pragma once

#include <cstddef>

namespace oomdoc {

// No-op for buffers under 4 MiB or where madvise is unavailable; never fails.
void advise_huge_pages(const void* data, size_t bytes);

template <typename Vector>
void reserve_huge(Vector& v, size_t count) {
  v.reserve(count);
  advise_huge_pages(v.data(), v.capacity() * sizeof(typename Vector::value_type));
}

}  // namespace oomdoc
