//===- nvtx_recorder.cpp - An NVTX tool that writes the ranges to a file -===//
//
// A test tool, loaded the way Nsight Systems loads its own: the NVTX v3
// header in kiln-run dlopens the library NVTX_INJECTION64_PATH names and
// calls its InitializeInjectionNvtx2, which installs these callbacks for
// nvtxRangePushA / nvtxRangePushEx / nvtxRangePop. Each push and pop
// becomes one line of $KILN_NVTX_LOG, indented by the depth: what a
// timeline would nest. Never shipped; test/e2e/nvtx.test reads the file.
//
//===----------------------------------------------------------------------===//

#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

FILE *logFile = nullptr;
int depth = 0;

void line(const std::string &text) {
  if (!logFile)
    return;
  std::fprintf(logFile, "%*s%s\n", 2 * depth, "", text.c_str());
  std::fflush(logFile);
}

int pushA(const char *message) {
  line(std::string("push ") + (message ? message : "(null)"));
  return ++depth;
}

int pushEx(const nvtxEventAttributes_t *attributes) {
  const char *message = attributes && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII
                            ? attributes->message.ascii
                            : "(not ascii)";
  return pushA(message);
}

int pop() {
  if (depth == 0) {
    line("pop WITHOUT A PUSH");
    return -1;
  }
  --depth;
  line("pop");
  return depth;
}

} // namespace

extern "C" __attribute__((visibility("default"))) int
InitializeInjectionNvtx2(NvtxGetExportTableFunc_t getExportTable) {
  const char *path = std::getenv("KILN_NVTX_LOG");
  logFile = std::fopen(path ? path : "/dev/stderr", "w");
  auto *callbacks =
      static_cast<const NvtxExportTableCallbacks *>(getExportTable(NVTX_ETID_CALLBACKS));
  if (!logFile || !callbacks)
    return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) ||
      size <= NVTX_CBID_CORE_RangePop)
    return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(pushA);
  *table[NVTX_CBID_CORE_RangePushEx] = reinterpret_cast<NvtxFunctionPointer>(pushEx);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(pop);
  return 1;
}
