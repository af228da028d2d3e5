//===- TensorBoardWriter.h - Scalars as TensorBoard event files -----------===//
//
// `tensorboard --logdir DIR` shows kiln-run's metrics without Python or
// TensorFlow in the run: the writer produces the same event files as
// tf.summary, written by hand. A file is a sequence of TFRecords (see
// TfRecord.h) each holding one `tensorflow.Event` protobuf:
//
//   message Event   { double wall_time = 1; int64 step = 2;
//                     oneof what { string file_version = 3;
//                                  Summary summary = 5; } }
//   message Summary { repeated Value value = 1; }
//   message Value   { string tag = 1; float simple_value = 2; }
//
// The first record carries file_version "brain.Event:2" (TensorBoard checks
// it); then one Event per step holding all of that step's scalars. Only
// these fields are needed, so the protobuf wire format (varints, fixed64
// doubles, fixed32 floats, length-delimited strings and messages) is encoded
// here directly instead of linking protobuf into the runtime.
//
// Every step is flushed to the OS, so a killed run keeps the events it wrote.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_METRICS_TENSORBOARDWRITER_H
#define KILN_RUNTIME_METRICS_TENSORBOARDWRITER_H

#include "runtime/Status.h"

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace kiln::rt {

// (tag, value) pairs, e.g. {"train/loss", 2.31}. Stored as float32, as
// TensorBoard's simple_value is a float.
using TensorBoardScalars = std::vector<std::pair<std::string, double>>;

// The protobuf bytes of the first Event of a file. `step` is always written,
// even when 0 (proto3 would omit it; readers treat both the same).
std::string encodeFileVersionEvent(double wallTime);
// The protobuf bytes of one Event whose summary holds `scalars` in order.
std::string encodeScalarsEvent(double wallTime, int64_t step,
                               const TensorBoardScalars &scalars);

class TensorBoardWriter {
public:
  // Creates `dir` (and parents) and the file
  // DIR/events.out.tfevents.<unix seconds>.<hostname>.<pid>.kiln, and writes
  // the file_version record. Should that name exist already (a second writer
  // in the same second), ".1", ".2", ... is appended.
  static StatusOr<TensorBoardWriter> open(const std::string &dir);
  TensorBoardWriter(TensorBoardWriter &&other) noexcept;
  TensorBoardWriter &operator=(TensorBoardWriter &&) = delete;
  ~TensorBoardWriter();

  // Appends one Event at `step` (>= 0) with the current wall time, and
  // flushes it.
  Status addScalars(int64_t step, const TensorBoardScalars &scalars);
  Status flush();

  const std::string &path() const { return path_; }

private:
  TensorBoardWriter(FILE *file, std::string path)
      : file_(file), path_(std::move(path)) {}
  Status writeRecord(const std::string &payload);

  FILE *file_ = nullptr;
  std::string path_;
};

} // namespace kiln::rt

#endif // KILN_RUNTIME_METRICS_TENSORBOARDWRITER_H
