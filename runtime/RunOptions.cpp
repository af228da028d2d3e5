//===- RunOptions.cpp - Command line of kiln-run ---------------------------===//

#include "runtime/RunOptions.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>

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

StatusOr<uint64_t> parseSeed(const std::string &text) {
  errno = 0;
  char *end = nullptr;
  unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || *end != '\0' || errno == ERANGE)
    return invalidArgument("--seed expects a non-negative integer, got '",
                           text, "'");
  return static_cast<uint64_t>(value);
}

StatusOr<double> parseLearningRate(const std::string &text) {
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE)
    return invalidArgument("--lr expects a number, got '", text, "'");
  if (!std::isfinite(value) || value < 0)
    return invalidArgument("--lr must be a finite number >= 0, got ", text);
  return value;
}

} // namespace

const char *runUsageText() {
  return "usage: kiln-run OUT.kart [--data PATH] --steps N [options]\n"
         "       kiln-run OUT.kart [--data PATH] --check-grads N [--seed S]\n"
         "\n"
         "Trains with a compiled Kiln artifact on the CPU, or checks its\n"
         "gradients against finite differences.\n"
         "\n"
         "  --data PATH                 training data, required when the model\n"
         "                              has inputs: an llm.c token shard if the\n"
         "                              name ends in .bin (header of 256 int32:\n"
         "                              magic 20240520, version 1, token count;\n"
         "                              then uint16 tokens), otherwise a file\n"
         "                              whose bytes are the tokens (a file that\n"
         "                              starts with the shard magic is a shard)\n"
         "  --steps N                   number of training steps (>= 1)\n"
         "  --check-grads N             instead of training, compare the first\n"
         "                              step's gradients with central finite\n"
         "                              differences on N entries per parameter;\n"
         "                              exit 0 if all agree, 1 if any does not\n"
         "  --lr X                      constant learning rate (default 1e-3)\n"
         "  --seed S                    seed of the parameter initialisation and\n"
         "                              of the batch windows (default 0)\n"
         "  --metrics FILE.jsonl        write one JSON object per step\n"
         "  --save-init FILE.safetensors   write the initial parameters\n"
         "  --save-grads FILE.safetensors  write the first step's gradients and\n"
         "                              its batch (input:tokens, input:targets)\n"
         "  --log-every N               progress line every N steps when stdout\n"
         "                              is not a terminal (default 10)\n"
         "  --quiet                     print only errors and the final line\n"
         "  --profile                   time every kernel and GEMM; print the\n"
         "                              most expensive with their model lines\n"
         "  --help                      show this text\n"
         "\n"
         "Environment: CXX (kernel compiler, default c++), KILN_CACHE_DIR\n"
         "(compiled kernel cache, default ~/.cache/kiln).\n"
         "Exit status: 0 success, 1 error or a failed gradient check,\n"
         "2 bad usage.\n";
}

StatusOr<ParsedCommandLine>
parseRunCommandLine(const std::vector<std::string> &args) {
  ParsedCommandLine parsed;
  RunOptions &o = parsed.options;
  bool haveSteps = false;
  std::vector<std::string> trainingFlags; // given, meaningless for a check
  for (size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (arg == "--help" || arg == "-h") {
      parsed.help = true;
      return parsed;
    }
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0 || arg == "--") {
      if (!arg.empty() && arg[0] == '-' && arg != "-")
        return invalidArgument("unknown option '", arg, "'");
      if (!o.artifactPath.empty())
        return invalidArgument("unexpected argument '", arg,
                               "' (only one artifact may be given)");
      o.artifactPath = arg;
      continue;
    }
    // --flag=value or --flag value.
    std::string flag = arg, value;
    bool inlineValue = false;
    size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flag = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    if (flag == "--quiet" || flag == "--profile") {
      if (inlineValue)
        return invalidArgument(flag, " takes no value");
      if (flag == "--profile")
        trainingFlags.push_back(flag);
      (flag == "--quiet" ? o.quiet : o.profile) = true;
      continue;
    }
    static const char *const kValueFlags[] = {
        "--data",    "--steps",      "--lr",         "--seed",       "--metrics",
        "--save-init", "--save-grads", "--log-every", "--check-grads"};
    bool known = false;
    for (const char *f : kValueFlags)
      known |= flag == f;
    if (!known)
      return invalidArgument("unknown option '", flag, "'");
    if (!inlineValue) {
      if (i + 1 >= args.size())
        return invalidArgument(flag, " expects a value");
      value = args[++i];
    }
    if (value.empty())
      return invalidArgument(flag, " expects a non-empty value");

    if (flag != "--data" && flag != "--seed" && flag != "--check-grads")
      trainingFlags.push_back(flag);
    if (flag == "--data") {
      o.dataPath = value;
    } else if (flag == "--check-grads") {
      KILN_ASSIGN_OR_RETURN(o.checkGrads, parseInt(flag, value, 1));
    } else if (flag == "--steps") {
      KILN_ASSIGN_OR_RETURN(o.steps, parseInt(flag, value, 1));
      haveSteps = true;
    } else if (flag == "--lr") {
      KILN_ASSIGN_OR_RETURN(o.lr, parseLearningRate(value));
    } else if (flag == "--seed") {
      KILN_ASSIGN_OR_RETURN(o.seed, parseSeed(value));
    } else if (flag == "--metrics") {
      o.metricsPath = value;
    } else if (flag == "--save-init") {
      o.saveInitPath = value;
    } else if (flag == "--save-grads") {
      o.saveGradsPath = value;
    } else if (flag == "--log-every") {
      KILN_ASSIGN_OR_RETURN(o.logEvery, parseInt(flag, value, 1));
    }
  }
  if (o.artifactPath.empty())
    return invalidArgument("missing the artifact to run (OUT.kart)");
  if (o.checkGrads > 0) {
    // The check runs one step at lr 0 on the batch of step 0; a flag that
    // shapes training would be silently ignored, so it is refused.
    if (!trainingFlags.empty())
      return invalidArgument(trainingFlags.front(),
                             " does not apply to --check-grads");
    return parsed;
  }
  if (!haveSteps)
    return invalidArgument("missing --steps N (or --check-grads N)");
  return parsed;
}

} // namespace kiln::rt
