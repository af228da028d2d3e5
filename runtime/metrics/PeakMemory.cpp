//===- PeakMemory.cpp - Peak resident memory of the process ---------------===//

#include "runtime/metrics/PeakMemory.h"

#include <sys/resource.h>

namespace kiln::rt {

int64_t peakResidentBytes() {
  struct rusage usage;
  if (::getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
#if defined(__APPLE__)
  return static_cast<int64_t>(usage.ru_maxrss); // bytes on macOS
#else
  return static_cast<int64_t>(usage.ru_maxrss) * 1024; // KiB on Linux
#endif
}

} // namespace kiln::rt
