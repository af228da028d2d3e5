//===- Nvtx.cpp - NVTX ranges for Nsight Systems --------------------------===//

#include "runtime/metrics/Nvtx.h"

#include "runtime/metrics/ScheduleProfile.h"

#include <nvtx3/nvToolsExt.h>

namespace kiln::rt::nvtx {

void push(const char *name) { nvtxRangePushA(name); }

void pop() { nvtxRangePop(); }

std::vector<std::string> entryRangeNames(const Artifact &artifact, ProgramKind program) {
  std::vector<std::string> names;
  const schema::Program *p = artifact.program(program);
  if (!p)
    return names;
  for (const schema::Step *step : *p->schedule()) {
    std::string name = describeScheduleEntry(artifact, *step).what;
    if (step->location() && step->location()->size() > 0)
      name += " " + step->location()->str();
    names.push_back(std::move(name));
  }
  return names;
}

} // namespace kiln::rt::nvtx
