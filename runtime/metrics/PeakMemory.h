//===- PeakMemory.h - Peak resident memory of the process -----------------===//
//
// The CPU backend's "peak memory" metric: the most physical memory the
// process has held so far (the high-water mark the kernel keeps in
// getrusage's ru_maxrss), which includes the arena, the data set, the
// compiled kernels and the runtime itself. The CUDA backend reports device
// memory instead.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_PEAKMEMORY_H
#define KILN_RUNTIME_METRICS_PEAKMEMORY_H

#include <cstdint>

namespace kiln::rt {

// Peak resident set size of this process in bytes; 0 if the OS will not say.
int64_t peakResidentBytes();

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_PEAKMEMORY_H
