//===- kilnc.cpp - the Kiln compiler command line -------------------------===//
//
//   kilnc MODEL.kiln -o OUT.kart [-D name=value]... [--target=cpu|cuda]
//         [--cuda-arch=sm_80,sm_90a] [--dump-phases-to=DIR] [--compile-to=PHASE]
//         [--no-fusion] [--no-pad-dims] [--no-attention-match]
//         [--no-fused-cross-entropy] [--cross-entropy-chunk-rows=N]
//         [--memory-budget=SIZE] [--remat=MODE] [--memory-budget-sweep] [--largest-batch=SIZE]
//         [--bucket-mib=N] [--mlir-timing] ...
//   kilnc --compile-from=PHASE DIR/NN-PHASE.mlir -o OUT.kart   (a phase dump, maybe edited)
//
// Parses flags (MLIR's --mlir-print-ir-* and --mlir-timing families included)
// and calls the one library entry point, kiln::runCompiler.
//
//===----------------------------------------------------------------------===//
#include "tools/kilnc/CompilerDriver.h"

#include "runtime/Version.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

namespace cl = llvm::cl;

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // --help shows these and MLIR's debugging flags, not the ~300 flags of
  // LLVM's backends that libLLVM registers (hidden from every help list).
  static cl::OptionCategory kilnCategory("Kiln options");
  static cl::OptionCategory mlirCategory("MLIR debugging options (IR printing, timing)");
  static cl::opt<std::string> input(cl::Positional, cl::desc("<model.kiln | dump.mlir with --compile-from>"), cl::Required, cl::cat(kilnCategory));
  static cl::opt<std::string> output("o", cl::desc("Output artifact (or IR with --compile-to; '-' for stdout)"),
                                     cl::value_desc("path"), cl::cat(kilnCategory));
  static cl::list<std::string> defines("D", cl::Prefix, cl::desc("Override a config constant: -D name=value"),
                                       cl::value_desc("name=value"), cl::cat(kilnCategory));
  static cl::opt<std::string> target("target", cl::desc("Code generation target (cpu, cuda)"), cl::init("cpu"), cl::cat(kilnCategory));
  static cl::opt<std::string> cudaArchs("cuda-arch",
                                        cl::desc("CUDA architectures the kernels are generated and checked for"),
                                        cl::value_desc("sm_80,sm_90a,..."), cl::init("sm_80,sm_90a"), cl::cat(kilnCategory));
  static cl::opt<std::string> dumpPhasesTo("dump-phases-to",
                                           cl::desc("Write the IR after each phase and every kernel's source here"),
                                           cl::value_desc("dir"), cl::cat(kilnCategory));
  static cl::opt<std::string> compileTo("compile-to", cl::desc("Stop after this phase and print its IR"),
                                        cl::value_desc("phase"), cl::init("artifact"), cl::cat(kilnCategory));
  static cl::opt<std::string> compileFrom(
      "compile-from",
      cl::desc("The input is IR after this phase (a --dump-phases-to file, maybe edited): run the "
               "phases after it"),
      cl::value_desc("phase"), cl::cat(kilnCategory));
  static cl::opt<bool> noFusion("no-fusion", cl::desc("Skip the fusion phase: one kernel per op"),
                                cl::init(false), cl::cat(kilnCategory));
  static cl::opt<bool> noPadDims("no-pad-dims",
                                  cl::desc("Do not pad parameter dims to the tensor-core multiple (pad-dims phase)"),
                                  cl::init(false), cl::cat(kilnCategory));
  static cl::opt<bool> noAttentionMatch(
      "no-attention-match",
      cl::desc("Keep hand-written softmax(q @ kT) @ v as separate ops (skip the attention-match phase)"),
      cl::init(false), cl::cat(kilnCategory));
  static cl::opt<bool> noFusedCrossEntropy(
      "no-fused-cross-entropy",
      cl::desc("Keep cross_entropy(x @ transpose(w)) as a GEMM and a loss over stored [N, V] logits"),
      cl::init(false), cl::cat(kilnCategory));
  static cl::opt<int64_t> crossEntropyChunkRows(
      "cross-entropy-chunk-rows",
      cl::desc("Fuse cross_entropy(x @ transpose(w)) with this many rows of logits per chunk "
               "(default: fused with ceil(N / ceil(V / D)) rows, at least 4096, when the logits exceed 64 MiB)"),
      cl::value_desc("N"), cl::init(0), cl::cat(kilnCategory));
  static cl::opt<std::string> memoryBudget(
      "memory-budget",
      cl::desc("Peak memory the step may use (e.g. 60GiB, 512MiB, 80GB): activations are recomputed "
               "in the backward as little as it allows (-D memory_budget=...)"),
      cl::value_desc("size"), cl::cat(kilnCategory));
  static cl::opt<std::string> remat("remat",
                                    cl::desc("Activation recompute: auto (to the budget), none, pointwise "
                                             "(norms, RoPE, SwiGLU products, bf16 weight copies), selective "
                                             "(those and attention) or full (every block) (-D remat=...)"),
                                    cl::value_desc("mode"), cl::cat(kilnCategory));
  static cl::opt<int64_t> bucketMiB(
      "bucket-mib",
      cl::desc("Data parallelism: most gradient MiB in one all-reduce bucket (default 25, as "
               "PyTorch DDP); smaller buckets start communicating earlier in the backward"),
      cl::value_desc("N"), cl::init(25), cl::cat(kilnCategory));
  static cl::opt<bool> memoryBudgetSweep(
      "memory-budget-sweep", cl::desc("Print the planned peak and recompute of every remat plan"), cl::init(false), cl::cat(kilnCategory));
  static cl::opt<std::string> largestBatch(
      "largest-batch",
      cl::desc("Compile at the largest batch whose planned peak is at most this size (e.g. 80GB, "
               "139GiB): the memory plan searched over batches, the batch and its neighbour's "
               "peak printed"),
      cl::value_desc("size"), cl::cat(kilnCategory));
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  mlir::registerDefaultTimingManagerCLOptions();
  for (auto &[name, option] : cl::getRegisteredOptions())
    if (name.starts_with("mlir-"))
      option->addCategory(mlirCategory);
  cl::HideUnrelatedOptions({&kilnCategory, &mlirCategory});
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << kiln::rt::versionText("kilnc") << "  LLVM / MLIR " LLVM_VERSION_STRING "\n";
  });

  std::string overview = "Kiln model compiler\n\n  phases for --compile-to: " + kiln::compileToPhaseNames() + "\n";
  if (!cl::ParseCommandLineOptions(argc, argv, overview, &llvm::errs()))
    return kiln::kUsageError;

  kiln::DriverOptions options;
  options.inputPath = input;
  options.outputPath = output;
  options.target = target;
  options.cudaArchs = cudaArchs;
  options.dumpPhasesTo = dumpPhasesTo;
  options.compileTo = compileTo;
  options.compileFrom = compileFrom;
  options.noFusion = noFusion;
  options.padDims = !noPadDims;
  options.attentionMatch = !noAttentionMatch;
  options.fusedCrossEntropy = !noFusedCrossEntropy;
  if (crossEntropyChunkRows < 0) {
    llvm::errs() << "kilnc: error: --cross-entropy-chunk-rows must be positive, got "
                 << crossEntropyChunkRows << "\n";
    return kiln::kUsageError;
  }
  if (noFusedCrossEntropy && crossEntropyChunkRows > 0) {
    llvm::errs() << "kilnc: error: --cross-entropy-chunk-rows contradicts --no-fused-cross-entropy\n";
    return kiln::kUsageError;
  }
  options.crossEntropyChunkRows = crossEntropyChunkRows;
  if (bucketMiB < 1 || bucketMiB > (int64_t(1) << 20)) {
    llvm::errs() << "kilnc: error: --bucket-mib must be between 1 and 1048576, got " << bucketMiB
                 << "\n";
    return kiln::kUsageError;
  }
  options.bucketBytes = bucketMiB << 20;
  options.memoryBudget = memoryBudget;
  options.remat = remat;
  options.memoryBudgetSweep = memoryBudgetSweep;
  options.largestBatch = largestBatch;
  for (const std::string &define : defines) {
    size_t eq = define.find('=');
    if (eq == std::string::npos || eq == 0) {
      llvm::errs() << "kilnc: error: -D expects name=value, got '" << define << "'\n";
      return kiln::kUsageError;
    }
    options.overrides[define.substr(0, eq)] = define.substr(eq + 1);
  }
  return kiln::runCompiler(options);
}
