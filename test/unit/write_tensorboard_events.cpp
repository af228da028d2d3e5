//===- write_tensorboard_events.cpp - Event file for the Python reader ----===//
//
// Writes a known run into DIR (argv[1]) through the same path kiln-run uses
// (StepMetrics -> tensorBoardScalars -> TensorBoardWriter), so
// read_tensorboard_events.py can check it with TensorBoard's own reader.
// The values here and in the script must agree.
//
//===----------------------------------------------------------------------===//

#include "runtime/Metrics.h"
#include "runtime/metrics/TensorBoardWriter.h"

#include <cstdio>

using namespace kiln::rt;

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: write-tensorboard-events DIR\n");
    return 2;
  }
  StatusOr<TensorBoardWriter> writer = TensorBoardWriter::open(argv[1]);
  if (!writer.ok()) {
    std::fprintf(stderr, "%s\n", writer.status().message().c_str());
    return 1;
  }
  // Steps chosen to exercise varint lengths: 1 byte, 2 bytes, 6 bytes.
  const long long steps[] = {1, 2, 300, 1LL << 40};
  for (long long step : steps) {
    StepMetrics m;
    m.step = step;
    m.loss = 5.5 / double(step % 1000 + 1); // not float32-exact: rounding
    m.lr = 3e-4;
    m.gradNorm = 1.0 + 0.1 * double(step % 7);
    m.modelMetrics = {{"blocks.0.attn", 0.25 * double(step % 5 + 1)}};
    m.stepMs = 12.5;
    m.tokensPerStep = 4096;
    m.tokensPerSecond = 4096 / 0.0125;
    m.peakMemoryBytes = int64_t(1) << 30;
    m.skipped = step == 2;
    if (step == 300)
      m.valLoss = 2.31;
    Status status = writer->addScalars(m.step, tensorBoardScalars(m));
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.message().c_str());
      return 1;
    }
  }
  std::printf("%s\n", writer->path().c_str());
  return 0;
}
