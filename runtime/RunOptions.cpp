//===- RunOptions.cpp - Command line of kiln-run ---------------------------===//

#include "runtime/RunOptions.h"

#include "runtime/data/DataFormat.h"

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>

namespace kiln::rt {

namespace {

StatusOr<int64_t> parseInt(const std::string &flag, const std::string &text,
                           int64_t min) {
  errno = 0;
  char *end = nullptr;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    return invalidArgument(flag, " expects an integer, got '", text, "'");
  if (value < min)
    return invalidArgument(flag, " must be >= ", min, ", got ", value);
  return static_cast<int64_t>(value);
}

StatusOr<double> parseNumber(const std::string &flag, const std::string &text,
                             double min, double max) {
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    return invalidArgument(flag, " expects a number, got '", text, "'");
  if (!std::isfinite(value) || value < min || value > max)
    return invalidArgument(flag, " must be a finite number in [", min, ", ",
                           max, "], got ", text);
  return value;
}

StatusOr<uint64_t> parseSeed(const std::string &text) {
  errno = 0;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE)
    return invalidArgument("--seed expects a non-negative integer, got '",
                           text, "'");
  return static_cast<uint64_t>(value);
}

using Setter = std::function<Status(RunOptions &, const std::string &)>;

// Setters for the common shapes of flag.
Setter setString(std::string RunOptions::*field) {
  return [field](RunOptions &o, const std::string &v) {
    o.*field = v;
    return okStatus();
  };
}
Setter setInt(const char *flag, int64_t RunOptions::*field, int64_t min) {
  return [=](RunOptions &o, const std::string &v) -> Status {
    KILN_ASSIGN_OR_RETURN(o.*field, parseInt(flag, v, min));
    return okStatus();
  };
}

struct Flag {
  const char *name;  // "--lr"
  const char *value; // "X" for a flag with a value, null for a switch
  const char *help;  // one or more lines ('\n' continues the text)
  bool training;     // meaningless for --check-grads (refused with it)
  Setter set;        // for a switch, called with ""
};

const std::vector<Flag> &flags() {
  constexpr double kInf = HUGE_VAL;
  static const std::vector<Flag> table = {
      // Data.
      {"--data", "SPEC",
       "training data, required when the model has inputs: a file, a glob of\n"
       "shards (quote it: 'dir/train_*.bin'), 'random' (uniform tokens) or\n"
       "tsp:N_MIN-N_MAX (random TSP instances with nearest neighbour + 2-opt\n"
       "tours, for a model with inputs coords, lengths and targets)",
       false, setString(&RunOptions::dataPath)},
      {"--data-format", "F",
       "auto (default: an llm.c magic means a shard, .bin without one is an\n"
       "error, anything else is byte-level text), text, llmc (GPT-2 uint16\n"
       "magic 20240520 or Llama-3 uint32 magic 20240801), nanogpt (raw uint16)",
       false, [](RunOptions &o, const std::string &v) -> Status {
         KILN_RETURN_IF_ERROR(data::parseDataFormat(v).status());
         o.dataFormat = v;
         return okStatus();
       }},
      {"--val-data", "SPEC", "validation data, opened like --data", true,
       setString(&RunOptions::valDataPath)},
      {"--val-fraction", "F",
       "hold out the last fraction F of --data's windows for validation", true,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.valFraction,
                               parseNumber("--val-fraction", v, 0, 0.5));
         return okStatus();
       }},
      {"--val-every", "N",
       "validate every N steps (default 0: after the last step only)", true,
       setInt("--val-every", &RunOptions::valEvery, 0)},
      {"--val-batches", "M",
       "validation loss = mean over M fixed batches (default 20)", true,
       setInt("--val-batches", &RunOptions::valBatches, 1)},
      // Training.
      {"--steps", "N", "number of training steps (>= 1)", true,
       setInt("--steps", &RunOptions::steps, 1)},
      {"--lr", "X", "peak learning rate (default 1e-3)", true,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.schedule.peak, parseNumber("--lr", v, 0, kInf));
         return okStatus();
       }},
      {"--schedule", "S",
       "constant (default), cosine, linear or wsd (warmup-stable-decay); all\n"
       "start with --warmup steps rising linearly to --lr", true,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.schedule.kind, parseLrScheduleKind(v));
         return okStatus();
       }},
      {"--warmup", "N", "linear warmup steps (default 0)", true,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.schedule.warmup, parseInt("--warmup", v, 0));
         return okStatus();
       }},
      {"--decay-steps", "N",
       "step at which the decay reaches the minimum (default --steps)", true,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.schedule.total,
                               parseInt("--decay-steps", v, 1));
         o.decayStepsGiven = true;
         return okStatus();
       }},
      {"--min-lr-ratio", "R", "minimum learning rate / --lr (default 0)", true,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.schedule.minRatio,
                               parseNumber("--min-lr-ratio", v, 0, 1));
         return okStatus();
       }},
      {"--decay-fraction", "F",
       "wsd: fraction of the steps spent decaying at the end (default 0.2)",
       true, [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.schedule.decayFraction,
                               parseNumber("--decay-fraction", v, 0, 1));
         return okStatus();
       }},
      {"--seed", "S",
       "seed of the parameter initialisation and of the data order (default 0)",
       false, [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.seed, parseSeed(v));
         return okStatus();
       }},
      {"--max-skipped-steps", "M",
       "stop after M consecutive steps whose loss or gradient norm is not\n"
       "finite (each skips its update); default 5", true,
       setInt("--max-skipped-steps", &RunOptions::maxSkippedSteps, 1)},
      {"--comm-timeout", "SECONDS",
       "data-parallel runs: end every rank when one has waited SECONDS in a\n"
       "collective for the others (a rank hangs); default 600", true,
       setInt("--comm-timeout", &RunOptions::commTimeout, 1)},
      {"--no-comm-overlap", nullptr,
       "data-parallel runs: run each gradient all-reduce where the schedule\n"
       "puts it, not alongside the rest of the backward (to measure the\n"
       "overlap, or rule it out)", true,
       [](RunOptions &o, const std::string &) {
         o.commOverlap = false;
         return okStatus();
       }},
      // Checkpoints.
      {"--checkpoint-dir", "D",
       "write checkpoints to D/step-NNNNNNNN/ (also at the end, on SIGINT or\n"
       "SIGTERM, and before stopping on non-finite steps)", true,
       setString(&RunOptions::checkpointDir)},
      {"--checkpoint-every", "N", "checkpoint every N steps (default: at the end)",
       true, setInt("--checkpoint-every", &RunOptions::checkpointEvery, 1)},
      {"--keep-checkpoints", "K", "keep the newest K checkpoints (0: all; default 3)",
       true, setInt("--keep-checkpoints", &RunOptions::keepCheckpoints, 0)},
      {"--resume", nullptr,
       "continue from the newest complete checkpoint in --checkpoint-dir\n"
       "(bit-exact on the CPU); starts fresh when there is none", true,
       [](RunOptions &o, const std::string &) {
         o.resume = true;
         return okStatus();
       }},
      {"--init-from", "FILE",
       "start from the parameters in FILE.safetensors (e.g. a checkpoint's\n"
       "model.safetensors) instead of the initialisers", true,
       setString(&RunOptions::initFrom)},
      // Reports.
      {"--metrics", "FILE", "write one JSON object per step to FILE.jsonl", true,
       setString(&RunOptions::metricsPath)},
      {"--tensorboard", "DIR", "write TensorBoard event files to DIR", true,
       setString(&RunOptions::tensorboardDir)},
      {"--log-every", "N",
       "progress line every N steps when stdout is not a terminal (default 10)",
       true, setInt("--log-every", &RunOptions::logEvery, 1)},
      {"--peak-tflops", "X",
       "peak TFLOP/s of this machine, for MFU (GPUs are looked up by name)",
       true, [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(double peak,
                               parseNumber("--peak-tflops", v, 1e-6, 1e9));
         o.peakTflops = peak;
         return okStatus();
       }},
      {"--peak-gbps", "X",
       "peak memory bandwidth of this machine in GB/s, for --profile's roofline\n"
       "(GPUs are looked up by name)", true,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(double peak, parseNumber("--peak-gbps", v, 1e-6, 1e9));
         o.peakGbps = peak;
         return okStatus();
       }},
      {"--quiet", nullptr, "print only errors and the final line", false,
       [](RunOptions &o, const std::string &) {
         o.quiet = true;
         return okStatus();
       }},
      {"--profile", nullptr,
       "time every kernel and GEMM; print the most expensive with their\n"
       "model lines", true, [](RunOptions &o, const std::string &) {
         o.profile = true;
         return okStatus();
       }},
      {"--trace", "FILE",
       "write a timeline of the --trace-steps steps to FILE (Chrome\n"
       "trace-event JSON: open it in ui.perfetto.dev or chrome://tracing);\n"
       "every kernel and GEMM with its model line", true,
       setString(&RunOptions::tracePath)},
      {"--trace-steps", "A..B",
       "the steps --trace records, A to B inclusive, or one step N\n"
       "(default 1..20; on CUDA step 1 times cuDNN against Kiln's attention\n"
       "and is not traced)", true,
       [](RunOptions &o, const std::string &v) -> Status {
         size_t dots = v.find("..");
         std::string first = dots == std::string::npos ? v : v.substr(0, dots);
         std::string last = dots == std::string::npos ? v : v.substr(dots + 2);
         KILN_ASSIGN_OR_RETURN(o.traceFirst, parseInt("--trace-steps", first, 1));
         KILN_ASSIGN_OR_RETURN(o.traceLast, parseInt("--trace-steps", last, 1));
         if (o.traceLast < o.traceFirst)
           return invalidArgument("--trace-steps ", v, ": the last step ", o.traceLast,
                                  " is before the first ", o.traceFirst);
         return okStatus();
       }},
      // Debugging.
      {"--check-grads", "N",
       "instead of training, compare the first batch's gradients with central\n"
       "finite differences on N entries per parameter; exit 0 if all agree\n"
       "(a parameter whose gradients are below what the differences resolve\n"
       "is reported as such), 1 if any does not", false,
       setInt("--check-grads", &RunOptions::checkGrads, 1)},
      {"--grad-step", "H",
       "--check-grads' step: (L(p + H) - L(p - H)) / 2H; default 1e-2. A\n"
       "larger H resolves smaller gradients (the loss's rounding over 2H)\n"
       "at more truncation error", false,
       [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.gradStep, parseNumber("--grad-step", v, 1e-6, 1));
         return okStatus();
       }},
      {"--save-init", "FILE", "write the initial parameters to FILE.safetensors",
       true, setString(&RunOptions::saveInitPath)},
      {"--save-grads", "FILE",
       "write the first step's gradients and its batch (input:tokens,\n"
       "input:targets; TSP data: input:coords/lengths/targets) to\n"
       "FILE.safetensors: every data rank's rows, of the last micro-batch\n"
       "with grad_accum > 1", true,
       setString(&RunOptions::saveGradsPath)},
      {"--save-batches", "FILE",
       "write every micro-batch the run read (step.S.K.tokens/.targets) to\n"
       "FILE.safetensors at the end (for short runs: an oracle rebuilding\n"
       "the run, a look at the data order)", true,
       setString(&RunOptions::saveBatchesPath)},
      // CUDA.
      {"--compile-only", nullptr,
       "compile a CUDA artifact's kernels with NVRTC (no GPU needed), print\n"
       "cold/warm times and registers/spills per kernel; exit 1 if any fails\n"
       "or spills", false, [](RunOptions &o, const std::string &) {
         o.compileOnly = true;
         return okStatus();
       }},
      {"--arch", "LIST",
       "architectures for --compile-only, comma-separated (default: the\n"
       "artifact's, e.g. sm_80,sm_90a)", false,
       [](RunOptions &o, const std::string &v) -> Status {
         o.archs.clear();
         size_t start = 0;
         while (start <= v.size()) {
           size_t end = std::min(v.find(',', start), v.size());
           std::string arch = v.substr(start, end - start);
           if (arch.empty())
             return invalidArgument("--arch: empty architecture in '", v, "'");
           o.archs.push_back(arch);
           start = end + 1;
         }
         return okStatus();
       }},
      {"--attention", "A",
       "CUDA: who runs the attention ops cuDNN supports (plain causal or\n"
       "key-length masks, bf16): auto (default: time both at the first step,\n"
       "keep the faster per op), kiln (the generated kernels), cudnn (cuDNN's\n"
       "fused attention; an error when it cannot)",
       true, [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.attention, parseAttentionDispatch(v));
         return okStatus();
       }},
      {"--gemm-algos", "G",
       "CUDA: which cuBLASLt algorithm each GEMM runs: heuristic (default:\n"
       "the heuristic's first, as cuBLAS and PyTorch) or timed (up to 8 of the\n"
       "heuristic's timed on the real buffers at the first step, the fastest\n"
       "kept when 3% faster; kept in the kernel cache for later runs)",
       true, [](RunOptions &o, const std::string &v) -> Status {
         KILN_ASSIGN_OR_RETURN(o.gemmAlgorithms, parseGemmAlgorithms(v));
         return okStatus();
       }},
      {"--tf32", nullptr,
       "CUDA: run fp32 GEMMs on TF32 tensor cores (faster, ~1e-3 relative\n"
       "error)", true, [](RunOptions &o, const std::string &) {
         o.tf32 = true;
         return okStatus();
       }},
  };
  return table;
}

const Flag *findFlag(const std::string &name) {
  for (const Flag &flag : flags())
    if (name == flag.name)
      return &flag;
  return nullptr;
}

// Levenshtein distance (insert, delete, substitute: 1 each).
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "unknown option '--stepz'; did you mean '--steps'?" when a flag is within
// a third of the name's length of edits (at least 2), like clang's.
Status unknownOption(const std::string &name) {
  const Flag *nearest = nullptr;
  size_t best = 0;
  for (const Flag &flag : flags()) {
    size_t d = editDistance(name, flag.name);
    if (!nearest || d < best) {
      nearest = &flag;
      best = d;
    }
  }
  if (nearest && best <= std::max<size_t>(2, name.size() / 3))
    return invalidArgument("unknown option '", name, "'; did you mean '",
                           nearest->name, "'?");
  return invalidArgument("unknown option '", name, "'");
}

// Combinations that cannot mean anything.
Status checkCombination(const RunOptions &o,
                        const std::vector<std::string> &trainingFlags) {
  if (o.artifactPath.empty())
    return invalidArgument("missing the artifact to run (OUT.kart)");
  if (!o.archs.empty() && !o.compileOnly)
    return invalidArgument("--arch applies to --compile-only (a GPU run "
                           "compiles for its own device)");
  if (o.compileOnly) {
    if (o.checkGrads > 0)
      return invalidArgument("--compile-only and --check-grads exclude each other");
    if (!trainingFlags.empty())
      return invalidArgument(trainingFlags.front(),
                             " does not apply to --compile-only");
    return okStatus();
  }
  if (o.gradStep > 0 && o.checkGrads == 0)
    return invalidArgument("--grad-step applies to --check-grads");
  if (o.checkGrads > 0) {
    // The check runs "step" on the first batch; a flag that shapes
    // training would be silently ignored, so it is refused.
    if (!trainingFlags.empty())
      return invalidArgument(trainingFlags.front(),
                             " does not apply to --check-grads");
    return okStatus();
  }
  if (o.steps == 0)
    return invalidArgument("missing --steps N (or --check-grads N)");
  if (o.resume && o.checkpointDir.empty())
    return invalidArgument("--resume needs --checkpoint-dir D");
  if (o.checkpointEvery > 0 && o.checkpointDir.empty())
    return invalidArgument("--checkpoint-every needs --checkpoint-dir D");
  if (o.resume && !o.initFrom.empty())
    return invalidArgument("--resume and --init-from exclude each other");
  if (!o.valDataPath.empty() && o.valFraction > 0)
    return invalidArgument("--val-data and --val-fraction exclude each other");
  if (o.valEvery > 0 && o.valDataPath.empty() && o.valFraction == 0)
    return invalidArgument("--val-every needs --val-data or --val-fraction");
  if (!o.tracePath.empty() && o.traceFirst > o.steps)
    return invalidArgument("--trace-steps ", o.traceFirst, "..", o.traceLast,
                           " starts after the last step (--steps ", o.steps,
                           "): the trace would be empty");
  // Two outputs in one file: the later write would replace the other.
  const std::pair<const char *, const std::string *> outputs[] = {
      {"--metrics", &o.metricsPath},       {"--trace", &o.tracePath},
      {"--save-init", &o.saveInitPath},    {"--save-grads", &o.saveGradsPath},
      {"--save-batches", &o.saveBatchesPath}};
  for (size_t i = 0; i < std::size(outputs); ++i)
    for (size_t j = i + 1; j < std::size(outputs); ++j)
      if (!outputs[i].second->empty() && *outputs[i].second == *outputs[j].second)
        return invalidArgument(outputs[i].first, " and ", outputs[j].first, " both write ",
                               *outputs[i].second, "; give each its own file");
  return validateLrSchedule(o.schedule);
}

} // namespace

std::string runUsageText() {
  std::string text =
      "usage: kiln-run OUT.kart [--data SPEC] --steps N [options]\n"
      "       kiln-run OUT.kart [--data SPEC] --check-grads N [--seed S]\n"
      "       kiln-run OUT.kart --compile-only [--arch sm_80,sm_90a]\n"
      "\n"
      "Trains with a compiled Kiln artifact on the CPU or a CUDA GPU, checks\n"
      "its gradients against finite differences, or only compiles its CUDA\n"
      "kernels.\n\n";
  for (const Flag &flag : flags()) {
    std::string left = std::string("  ") + flag.name;
    if (flag.value)
      left += std::string(" ") + flag.value;
    const size_t column = 24;
    left.resize(std::max(left.size() + 1, column), ' ');
    std::string help = flag.help;
    size_t start = 0;
    bool first = true;
    while (start <= help.size()) {
      size_t end = help.find('\n', start);
      if (end == std::string::npos)
        end = help.size();
      text += (first ? left : std::string(column, ' ')) +
              help.substr(start, end - start) + "\n";
      first = false;
      start = end + 1;
    }
  }
  text += "  --help                show this text\n"
          "  --version             print Kiln's version, the artifact format and CUDA's\n"
          "\n"
          "Environment: CXX (kernel compiler, default c++), KILN_CACHE_DIR\n"
          "(compiled kernel cache, default ~/.cache/kiln), KILN_CUDA_LIB_DIR\n"
          "(where libcuda, NVRTC and cuBLASLt are looked for first),\n"
          "KILN_CUDA_INCLUDE_DIR (CUDA headers for NVRTC, default the include/\n"
          "beside KILN_CUDA_LIB_DIR, then /usr/local/cuda/include), NO_COLOR.\n"
          "Exit status: 0 success (also after SIGINT/SIGTERM, which checkpoint\n"
          "and stop), 1 error, a failed gradient check or a run stopped by\n"
          "non-finite steps, 2 bad usage.\n";
  return text;
}

StatusOr<ParsedCommandLine>
parseRunCommandLine(const std::vector<std::string> &args) {
  ParsedCommandLine parsed;
  RunOptions &o = parsed.options;
  std::vector<std::string> trainingFlags; // given, meaningless for a check
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string &arg = args[i];
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      return parsed;
    }
    if (arg == "--version") {
      parsed.version = true;
      return parsed;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0 || arg == "--") {
      if (!arg.empty() && arg[0] == '-' && arg != "-")
        return unknownOption(arg);
      if (!o.artifactPath.empty())
        return invalidArgument("unexpected argument '", arg,
                               "' (only one artifact may be given)");
      o.artifactPath = arg;
      continue;
    }
    // --flag=value or --flag value.
    std::string name = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    const Flag *flag = findFlag(name);
    if (!flag)
      return unknownOption(name);
    if (!flag->value) {
      if (inlineValue)
        return invalidArgument(name, " takes no value");
    } else {
      if (!inlineValue) {
        if (i + 1 >= args.size())
          return invalidArgument(name, " expects a value");
        value = args[++i];
      }
      if (value.empty())
        return invalidArgument(name, " expects a non-empty value");
    }
    if (flag->training)
      trainingFlags.push_back(name);
    KILN_RETURN_IF_ERROR(flag->set(o, value));
  }
  if (!o.decayStepsGiven)
    o.schedule.total = o.steps;
  KILN_RETURN_IF_ERROR(checkCombination(o, trainingFlags));
  return parsed;
}

} // namespace kiln::rt
