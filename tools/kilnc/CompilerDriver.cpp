//===- CompilerDriver.cpp - model file to training artifact ---------------===//
//
// The compilation, in order:
//   1. frontend: parse, check and lower the model file to the kiln dialect;
//   2. each phase of passes/Pipelines.cpp in turn ("kiln", "autodiff",
//      "optimizer", ...), dumping the IR after each one with --dump-phases-to
//      and stopping early with --compile-to=PHASE;
//   3. codegen for --target (cpu: C++ kernels; cuda: CUDA kernels for the
//      --cuda-arch architectures): kernels and the artifact, written to a
//      temporary file and renamed into place, so a failed compile never leaves
//      a partial artifact; then the memory plan's peak, breakdown and largest
//      live tensors on stdout (and every buffer's placement in
//      DIR/memory-plan.txt).
// Diagnostics from passes print with the model-file line and a caret, like the
// frontend's own.
//
//===----------------------------------------------------------------------===//
#include "tools/kilnc/CompilerDriver.h"

#include "codegen/Codegen.h"
#include "frontend/ByteSize.h"
#include "frontend/Frontend.h"
#include "ir/KilnDialect.h"
#include "ir/KilnOps.h"
#include "ir/StepFunction.h"
#include "passes/AttentionReport.h"
#include "passes/FusionReport.h"
#include "passes/Pipelines.h"
#include "passes/CollectiveReport.h"
#include "passes/RematReport.h"
#include "passes/ShardingReport.h"
#include "runtime/FileIO.h"
#include "runtime/cpu/KernelCompiler.h"
#include "runtime/cuda/Nvrtc.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace kiln {

namespace {
// 1241581568 -> "1,241,581,568".
std::string withThousandsSeparators(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}
} // namespace

namespace {

constexpr const char *kArtifactPhase = "artifact";
// The module attribute naming the last phase that ran (in every dump).
constexpr const char *kPhaseAttrName = "kiln.phase";
constexpr const char *kFusionPhase = "fusion";

/// Writes `contents` to `path` through a temporary file renamed into place
/// (a device such as /dev/null is written in place: runtime/FileIO.h).
LogicalResult writeFileAtomically(StringRef path, StringRef contents) {
  ::kiln::rt::Status written = ::kiln::rt::writeFileAtomically(
      path.str(), {std::string_view(contents.data(), contents.size())});
  if (written.ok())
    return success();
  llvm::errs() << "kilnc: error: " << written.message() << "\n"; // names the path
  return failure();
}

/// Prints `module` to `path` ("-": stdout). `withLocations`: every op's
/// model-file location inline (`loc("models/gpt2.kiln":41:9)`), as the phase
/// dumps print them, so `--compile-from` of a dump reports the model's lines.
LogicalResult printModule(ModuleOp module, StringRef path, bool withLocations = false) {
  std::string text;
  llvm::raw_string_ostream os(text);
  OpPrintingFlags flags;
  if (withLocations) // inline, no #loc aliases: the parser reads them back
    flags.enableDebugInfo(/*enable=*/true, /*prettyForm=*/false).useLocalScope();
  module.print(os, flags);
  os.flush();
  if (path == "-") {
    llvm::outs() << text;
    return success();
  }
  return writeFileAtomically(path, text);
}

/// The artifact path when -o is not given: MODEL.kiln -> MODEL.kart in the cwd.
std::string defaultArtifactPath(StringRef input) {
  llvm::SmallString<128> name(llvm::sys::path::filename(input));
  llvm::sys::path::replace_extension(name, "kart");
  return std::string(name);
}

bool isKnownPhase(StringRef name) {
  return name == kArtifactPhase || mlir::kiln::lookupCompilerPhase(name);
}

/// Whether `module` has a mesh with a data axis of several ranks but no
/// collective over it. In a dump after data-parallel that is a mesh added by
/// hand after the phase that averages the gradients over it: each rank of
/// the artifact would train alone on its rows, without a word.
bool dataAxisWithoutCollectives(ModuleOp module) {
  auto mesh = module->getAttrOfType<DictionaryAttr>(mlir::kiln::kMeshAttrName);
  auto data = mesh ? mesh.getAs<IntegerAttr>(mlir::kiln::kDataAxisName) : nullptr;
  if (!data || data.getInt() < 2)
    return false;
  WalkResult found = module.walk([](Operation *op) -> WalkResult {
    auto axis = op->getAttrOfType<StringAttr>("axis");
    return mlir::kiln::isCollective(op) && axis && axis.getValue() == mlir::kiln::kDataAxisName
               ? WalkResult::interrupt()
               : WalkResult::advance();
  });
  return !found.wasInterrupted();
}

/// Pipeline order: "frontend" 0, the pass phases 1.., "artifact" last.
unsigned phaseIndex(StringRef name) {
  unsigned index = 1;
  if (name == "frontend")
    return 0;
  for (const mlir::kiln::CompilerPhase &phase : mlir::kiln::getCompilerPhases()) {
    if (phase.name == name)
      return index;
    ++index;
  }
  return index; // artifact
}

/// Writes DIR/NAME with what `print` writes.
LogicalResult writeReport(StringRef dir, StringRef name, llvm::function_ref<void(llvm::raw_ostream &)> print) {
  std::string text;
  llvm::raw_string_ostream os(text);
  print(os);
  os.flush();
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, name);
  return writeFileAtomically(path, text);
}

/// Writes DIR/fusion.txt: the kernels fusion chose and the candidates it
/// refused, with reasons (or a note that --no-fusion skipped it).
LogicalResult writeFusionReport(ModuleOp module, StringRef dir, bool skipped) {
  return writeReport(dir, "fusion.txt", [&](llvm::raw_ostream &os) {
    if (skipped)
      os << "# kiln fusion report: fusion skipped (--no-fusion), one kernel per op\n";
    else
      mlir::kiln::printFusionReport(module, os);
  });
}

/// Writes DIR/attention.txt: the kiln.attention ops the match produced and
/// the softmaxes it left alone, with reasons (or why it was skipped).
LogicalResult writeAttentionReport(ModuleOp module, StringRef dir, StringRef skippedBecause) {
  return writeReport(dir, "attention.txt", [&](llvm::raw_ostream &os) {
    if (!skippedBecause.empty())
      os << "# kiln attention report: attention-match skipped (" << skippedBecause << ")\n";
    else
      mlir::kiln::printAttentionReport(module, os);
  });
}

/// Writes every kernel's source to DIR/kernels/ENTRY.cpp (ENTRY.cu with its
/// launch configuration for the cuda target), each including the prelude
/// kiln-run compiles it after (DIR/kernels/prelude.h, prelude.cuh for CUDA),
/// so one kernel compiles on its own; DIR/kernels/COMPILE.txt gives the
/// exact options kiln-run uses (the host compiler's, NVRTC's per arch) and
/// the equivalent command for one dumped file.
LogicalResult dumpKernels(const std::vector<EmittedKernel> &kernels, StringRef dir,
                          const CodegenOptions &codegen) {
  llvm::SmallString<128> kernelDir(dir);
  llvm::sys::path::append(kernelDir, "kernels");
  if (std::error_code ec = llvm::sys::fs::create_directories(kernelDir)) {
    llvm::errs() << "kilnc: error: cannot create '" << kernelDir << "': " << ec.message() << "\n";
    return failure();
  }
  bool cuda = codegen.target == "cuda";
  std::string prelude = cuda ? "prelude.cuh" : "prelude.h";
  auto write = [&](StringRef name, const std::string &text) {
    llvm::SmallString<128> path(kernelDir);
    llvm::sys::path::append(path, name);
    return writeFileAtomically(path, text);
  };
  if (failed(write(prelude, std::string("// The prelude kiln-run compiles every kernel after (Artifact.prelude).\n") +
                                kernelPrelude(codegen.target))))
    return failure();
  std::string how;
  if (cuda) {
    how = "# kiln-run compiles the kernels after the prelude in up to 8 parts side by side (one module\n"
          "# each) with NVRTC, per arch:\n";
    for (const std::string &arch : codegen.cudaArchs)
      how += "#   " + llvm::join(::kiln::rt::cuda::Nvrtc::options(arch), " ") + "\n";
    how += "# One dumped kernel (it includes " + prelude + ") with nvcc, for cuobjdump or Nsight Compute:\n";
    for (const std::string &arch : codegen.cudaArchs)
      how += "nvcc -cubin -arch=" + arch + " --std=c++17 --fmad=false -lineinfo -Xptxas -v KERNEL.cu -o KERNEL." + arch +
             ".cubin\n";
  } else {
    ::kiln::rt::cpu::KernelCompilerOptions host = ::kiln::rt::cpu::KernelCompilerOptions::fromEnvironment();
    how = "# kiln-run compiles the kernels after the prelude in up to 8 parts side by side (one compiler\n"
          "# per core), then links them, with ($CXX, default c++):\n";
    how += "#   " + host.compiler + " " + llvm::join(host.flags, " ") + " UNIT.cpp -o UNIT.so\n";
    how += "# One dumped kernel (it includes " + prelude + "), e.g. to read its assembly:\n";
    how += host.compiler + " " + llvm::join(host.flags, " ") + " KERNEL.cpp -o KERNEL.so\n";
    how += host.compiler + " -O3 -march=native -ffp-contract=off -fopenmp -S KERNEL.cpp -o KERNEL.s\n";
  }
  if (failed(write("COMPILE.txt", how)))
    return failure();
  for (const EmittedKernel &kernel : kernels) {
    std::string text = "// " + kernel.ops + " from " + kernel.location + "\n";
    if (cuda)
      text += llvm::formatv("// launch: grid {0}, block {1}, shared bytes {2}\n", kernel.grid, kernel.block,
                            kernel.sharedBytes)
                  .str();
    if (kernel.inPlace)
      text += "// in place: an output may take the bytes of an input with as many elements and bytes\n";
    if (!kernel.note.empty())
      text += "// " + kernel.note + "\n";
    text += "#include \"" + prelude + "\"\n";
    text += kernel.source;
    if (failed(write(kernel.entry + (cuda ? ".cu" : ".cpp"), text)))
      return failure();
  }
  return success();
}

} // namespace

std::string compileToPhaseNames() {
  std::string names;
  for (const mlir::kiln::CompilerPhase &phase : mlir::kiln::getCompilerPhases())
    names += phase.name.str() + ", ";
  return names + kArtifactPhase;
}

namespace {

/// What a probe of compileLargestBatch learns: the planned peak, and the
/// memory budget the remat phase planned to (0: none).
struct Probe {
  int64_t peak = 0, budget = 0;
};

/// The compilation of one model file (runCompiler without --largest-batch).
/// With `probe`, the artifact is planned but neither written nor reported
/// (no dumps, no timing, no IR printing), and what it learns stored there.
int compileModel(const DriverOptions &options, Probe *probe) {
  CodegenOptions codegen;
  codegen.target = options.target;
  if (options.target == "cuda")
    for (StringRef arch : llvm::split(options.cudaArchs, ','))
      if (!arch.trim().empty())
        codegen.cudaArchs.push_back(arch.trim().str());
  std::string problem = checkCodegenOptions(codegen);
  if (!problem.empty()) {
    llvm::errs() << "kilnc: error: " << problem << "\n";
    return kUsageError;
  }
  if (!isKnownPhase(options.compileTo)) {
    llvm::errs() << "kilnc: error: unknown phase '" << options.compileTo
                 << "' for --compile-to (phases: " << compileToPhaseNames() << ")\n";
    return kUsageError;
  }
  if (!options.compileFrom.empty() &&
      (options.compileFrom == kArtifactPhase ||
       (options.compileFrom != "frontend" && !isKnownPhase(options.compileFrom)))) {
    llvm::errs() << "kilnc: error: unknown phase '" << options.compileFrom
                 << "' for --compile-from (frontend, or a phase before artifact: "
                 << compileToPhaseNames() << ")\n";
    return kUsageError;
  }
  if (!options.compileFrom.empty() && phaseIndex(options.compileTo) <= phaseIndex(options.compileFrom)) {
    llvm::errs() << "kilnc: error: --compile-to=" << options.compileTo << " is not after --compile-from="
                 << options.compileFrom << "\n";
    return kUsageError;
  }
  bool toArtifact = options.compileTo == kArtifactPhase;
  std::string outputPath = options.outputPath;
  if (outputPath.empty())
    outputPath = toArtifact ? defaultArtifactPath(options.inputPath) : "-";

  MLIRContext context;
  context.loadDialect<mlir::kiln::KilnDialect, func::FuncDialect>();
  // A pass diagnostic points at the model-file line; a dump of the whole op
  // after it would bury that line for users.
  context.printOpOnDiagnostic(false);

  DefaultTimingManager timing;
  if (!probe)
    applyDefaultTimingManagerCLOptions(timing);
  TimingScope rootTimer = timing.getRootScope();

  // --memory-budget and --remat are spellings of their -D settings.
  std::map<std::string, std::string> overrides = options.overrides;
  struct Spelling {
    const char *key, *flag;
    const std::string &value;
  };
  // Their values are checked here, so that a mistake is named as the flag
  // the user typed (the frontend would name the -D it becomes).
  if (!options.memoryBudget.empty() && !parseByteSize(options.memoryBudget)) {
    llvm::errs() << "kilnc: error: --memory-budget=" << options.memoryBudget
                 << ": not a byte size (a whole number of bytes, or a number with a unit: "
                 << byteUnitList() << "; e.g. 60GiB)\n";
    return kUsageError;
  }
  if (!options.remat.empty() &&
      !llvm::is_contained({"auto", "none", "pointwise", "selective", "full"}, options.remat)) {
    llvm::errs() << "kilnc: error: --remat=" << options.remat
                 << ": unknown mode (expected auto, none, pointwise, selective or full)\n";
    return kUsageError;
  }
  for (const Spelling &s : {Spelling{"memory_budget", "--memory-budget", options.memoryBudget},
                            Spelling{"remat", "--remat", options.remat}}) {
    if (s.value.empty())
      continue;
    if (overrides.count(s.key)) {
      llvm::errs() << "kilnc: error: both -D " << s.key << " and " << s.flag << " given\n";
      return kUsageError;
    }
    overrides[s.key] = s.value;
  }

  // 1. Frontend (it prints its own diagnostics with a caret), or with
  // --compile-from=PHASE the IR a phase dump holds, to resume after PHASE.
  OwningOpRef<ModuleOp> module;
  if (!options.compileFrom.empty()) {
    if (!overrides.empty()) {
      llvm::errs() << "kilnc: error: -D, --memory-budget and --remat apply to a model file; a dump "
                      "given to --compile-from has them compiled in already\n";
      return kUsageError;
    }
    TimingScope parseTimer = rootTimer.nest("parse");
    llvm::SourceMgr dumpSource;
    SourceMgrDiagnosticHandler dumpDiagnostics(dumpSource, &context);
    module = parseSourceFile<ModuleOp>(options.inputPath, dumpSource, &context);
    if (!module)
      return kUserError;
    if (failed(verify(*module)))
      return kUserError;
    // Each dump names the phase it follows (kPhaseAttrName). Resuming
    // before it would run phases twice (sharding splits the split parameters
    // again) and build a wrong artifact without a word: an error. Resuming
    // after it skips phases, which is right when their passes were run by
    // hand (kiln-opt --kiln-autodiff on the eval dump) and wrong otherwise:
    // a warning.
    if (auto after = (*module)->getAttrOfType<StringAttr>(kPhaseAttrName);
        after && isKnownPhase(after.getValue().str()) &&
        after.getValue() != options.compileFrom) {
      if (phaseIndex(after.getValue().str()) > phaseIndex(options.compileFrom)) {
        llvm::errs() << "kilnc: error: " << options.inputPath << " is the IR after phase '"
                     << after.getValue() << "', which --compile-from=" << options.compileFrom
                     << " would run again: use --compile-from=" << after.getValue() << "\n";
        return kUsageError;
      }
      llvm::errs() << "kilnc: warning: " << options.inputPath << " is the IR after phase '"
                   << after.getValue() << "'; --compile-from=" << options.compileFrom
                   << " skips the phases between (right only if their passes were run on it "
                      "by hand, e.g. with kiln-opt)\n";
    }
    if (phaseIndex(options.compileFrom) >= phaseIndex("data-parallel") &&
        dataAxisWithoutCollectives(*module)) {
      llvm::errs() << "kilnc: error: " << options.inputPath
                   << " has a mesh with a data axis but no collective over it: phase "
                      "'data-parallel', which averages the gradients over that axis, ran "
                      "before it had one, so each rank would train alone on its rows. Put "
                      "the mesh in the model's train section (or -D mesh=...), or in a dump "
                      "of an earlier phase\n";
      return kUsageError;
    }
  } else {
    FrontendOptions frontendOptions{options.inputPath, overrides};
    TimingScope frontendTimer = rootTimer.nest("frontend");
    module = compileModelFile(context, frontendOptions, llvm::errs());
  }
  if (!module)
    return kUserError;
  // The model's parameter count as written, printed with the memory plan: a
  // parameter pad-dims rounded up (a dump given to --compile-from) counts by
  // its kiln.true_shape.
  int64_t parameterCount = 0;
  if (auto step = module->lookupSymbol<func::FuncOp>(mlir::kiln::kStepFunctionName))
    if (auto params = mlir::kiln::getParameterArguments(step); succeeded(params))
      for (const mlir::kiln::ParameterArgument &p : *params) {
        int64_t count = llvm::cast<RankedTensorType>(p.value.getType()).getNumElements();
        if (auto trueShape = step.getArgAttrOfType<DenseI64ArrayAttr>(
                p.value.getArgNumber(), mlir::kiln::kTrueShapeAttrName)) {
          count = 1;
          for (int64_t d : trueShape.asArrayRef())
            count *= d;
        }
        parameterCount += count;
      }

  // Pass diagnostics carry model-file locations: show the line and a caret.
  llvm::SourceMgr sourceMgr;
  std::string includedPath;
  sourceMgr.AddIncludeFile(options.inputPath, llvm::SMLoc(), includedPath);
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  // Diagnostics about the whole model (an unreachable memory budget) have no
  // line to show: they print as kilnc's own.
  ScopedDiagnosticHandler unlocated(&context, [](Diagnostic &diag) {
    if (!isa<UnknownLoc>(diag.getLocation()) || diag.getSeverity() != DiagnosticSeverity::Error)
      return failure();
    llvm::errs() << "kilnc: error: " << diag.str() << "\n";
    return success();
  });

  auto dumpPath = [&](unsigned index, StringRef name) {
    llvm::SmallString<128> path(options.dumpPhasesTo);
    llvm::sys::path::append(path, llvm::formatv("{0:2}-{1}.mlir", index, name).str());
    return std::string(path);
  };
  if (!options.dumpPhasesTo.empty()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(options.dumpPhasesTo)) {
      llvm::errs() << "kilnc: error: cannot create '" << options.dumpPhasesTo << "': " << ec.message() << "\n";
      return kUserError;
    }
    if (options.compileFrom.empty() &&
        failed(printModule(*module, dumpPath(0, "frontend"), /*withLocations=*/true)))
      return kUserError;
  }

  // 2. The pass phases, each dumped and each a possible stopping point.
  unsigned index = 1;
  mlir::kiln::PhaseOptions phaseOptions;
  phaseOptions.fuseLinearCrossEntropy = options.fusedCrossEntropy;
  phaseOptions.crossEntropyChunkRows = options.crossEntropyChunkRows;
  phaseOptions.rematSweep = options.memoryBudgetSweep;
  phaseOptions.bucketBytes = options.bucketBytes;
  // The remat phase plans against the artifact's own peak: the rest of the
  // pipeline (the remat phase's later passes, fusion unless --no-fusion) and
  // codegen's lowering to the step program, run on the copy of the module
  // it is given. Without the later passes, ZeRO-3's @step would still read
  // whole parameters that @update already keeps as slices.
  phaseOptions.lowerToStepProgram = [&](ModuleOp copy) -> FailureOr<StepProgram> {
    PassManager pm(&context);
    mlir::kiln::buildRematFollowers(pm);
    if (!options.noFusion)
      mlir::kiln::buildFusionPhase(pm);
    if (failed(pm.run(copy)))
      return failure();
    return ::kiln::lowerToStepProgram(copy, codegen);
  };
  // sharding.txt's first part, taken when the sharding phase has run.
  std::string shardingValues;
  // --compile-from=PHASE: the phases up to PHASE ran before the dump.
  bool resumed = options.compileFrom.empty() || options.compileFrom == "frontend";
  for (const mlir::kiln::CompilerPhase &phase : mlir::kiln::getCompilerPhases()) {
    if (!resumed) {
      resumed = phase.name == options.compileFrom;
      ++index;
      continue;
    }
    PassManager pm(&context);
    if (!probe && failed(applyPassManagerCLOptions(pm)))
      return kUsageError;
    TimingScope phaseTimer = rootTimer.nest(phase.name);
    pm.enableTiming(phaseTimer);
    // --no-fusion and --no-pad-dims keep their phase (its dump and
    // --compile-to stop) but run nothing in it: the references for fused =
    // unfused and padded = unpadded.
    // Both targets have kiln.attention kernels (CPU flash loops, CUDA flash
    // kernels), so the match runs unless --no-attention-match.
    bool attentionMatch = options.attentionMatch;
    bool skipped =
        (options.noFusion && phase.name == kFusionPhase) ||
        (!options.padDims && phase.name == mlir::kiln::kPadDimsPhaseName) ||
        (!attentionMatch && phase.name == mlir::kiln::kAttentionMatchPhaseName);
    if (!skipped)
      phase.build(pm, phaseOptions);
    if (failed(pm.run(*module)))
      return kUserError;
    (*module)->setAttr(kPhaseAttrName, StringAttr::get(&context, phase.name));
    if (!options.dumpPhasesTo.empty() &&
        failed(printModule(*module, dumpPath(index, phase.name), /*withLocations=*/true)))
      return kUserError;
    if (!options.dumpPhasesTo.empty() && phase.name == kFusionPhase && failed(writeFusionReport(*module, options.dumpPhasesTo, skipped)))
      return kUserError;
    if (!options.dumpPhasesTo.empty() && phase.name == mlir::kiln::kRematPhaseName &&
        failed(writeReport(options.dumpPhasesTo, "remat.txt", [&](llvm::raw_ostream &os) {
          mlir::kiln::printRematReport(*module, os);
        })))
      return kUserError;
    if (!options.dumpPhasesTo.empty() && phase.name == mlir::kiln::kShardingPhaseName)
      shardingValues = mlir::kiln::shardingValuesReport(*module);
    if (!options.dumpPhasesTo.empty() && phase.name == mlir::kiln::kAttentionMatchPhaseName &&
        failed(writeAttentionReport(*module, options.dumpPhasesTo,
                                    skipped ? "--no-attention-match" : "")))
      return kUserError;
    ++index;
    if (phase.name == options.compileTo)
      return succeeded(printModule(*module, outputPath)) ? kSuccess : kUserError;
  }

  // The values' shardings (after the sharding phase) and every collective
  // the finished pipeline holds.
  if (!options.dumpPhasesTo.empty() && !shardingValues.empty() &&
      failed(writeReport(options.dumpPhasesTo, "sharding.txt", [&](llvm::raw_ostream &os) {
        mlir::kiln::printShardingReport(shardingValues, *module, os);
      })))
    return kUserError;

  // 3. Codegen and the artifact.
  TimingScope codegenTimer = rootTimer.nest("codegen");
  FailureOr<CompiledArtifact> artifact = compileArtifact(*module, codegen);
  if (failed(artifact))
    return kUserError;
  if (probe) {
    probe->peak = artifact->peakBytes;
    if (auto remat = (*module)->getAttrOfType<DictionaryAttr>(mlir::kiln::kRematAttrName))
      if (auto budget = remat.getAs<IntegerAttr>("budget"))
        probe->budget = budget.getInt();
    return kSuccess;
  }
  if (!options.dumpPhasesTo.empty() &&
      failed(dumpKernels(artifact->kernels, options.dumpPhasesTo, codegen)))
    return kUserError;
  codegenTimer.stop();
  TimingScope writeTimer = rootTimer.nest("write");
  if (outputPath == "-") {
    llvm::errs() << "kilnc: error: refusing to write a binary artifact to stdout; use -o FILE.kart\n";
    return kUsageError;
  }
  if (!options.dumpPhasesTo.empty()) {
    llvm::SmallString<128> planPath(options.dumpPhasesTo);
    llvm::sys::path::append(planPath, "memory-plan.txt");
    if (failed(writeFileAtomically(planPath, artifact->memoryPlan)))
      return kUserError;
  }
  if (failed(writeFileAtomically(outputPath, artifact->bytes)))
    return kUserError;
  // Peak memory is known before anything runs: say it with every compile.
  llvm::outs() << "parameters: " << withThousandsSeparators(parameterCount) << "\n";
  llvm::outs() << artifact->memorySummary;
  llvm::outs() << mlir::kiln::rematSummary(*module);
  llvm::outs() << mlir::kiln::rematSweepTable(*module);
  llvm::outs() << mlir::kiln::collectiveSummary(*module);
  return kSuccess;
}

/// --largest-batch=SIZE: the largest batch whose planned peak is at most
/// SIZE, found by planning the step at batches 1, 2, 4, ... until one does
/// not fit and bisecting between the last two; then the ordinary
/// compilation at that batch (artifact, dumps and report as without the
/// flag). The plan is the artifact's own (the arena kiln-run allocates), so
/// the answer is exact for that arena; the CUDA context and library
/// workspaces beside it are the caller's to leave room for.
int compileLargestBatch(const DriverOptions &options) {
  std::optional<int64_t> size = parseByteSize(options.largestBatch);
  if (!size || *size <= 0) {
    llvm::errs() << "kilnc: error: --largest-batch=" << options.largestBatch
                 << ": not a byte size (a whole number of bytes, or a number with a unit: "
                 << byteUnitList() << "; e.g. 80GB)\n";
    return kUsageError;
  }
  if (options.overrides.count("batch")) {
    llvm::errs() << "kilnc: error: both -D batch and --largest-batch given (the search sets the batch)\n";
    return kUsageError;
  }
  if (!options.memoryBudget.empty() || options.overrides.count("memory_budget")) {
    llvm::errs() << "kilnc: error: --largest-batch plans without a memory budget; recompute "
                    "comes from --remat=pointwise|selective|full or the model's per-block remat\n";
    return kUsageError;
  }
  if (!options.compileFrom.empty() || options.compileTo != kArtifactPhase ||
      options.memoryBudgetSweep) {
    llvm::errs() << "kilnc: error: --largest-batch plans whole artifacts from a model file: "
                    "not with --compile-from, --compile-to or --memory-budget-sweep\n";
    return kUsageError;
  }
  if (options.outputPath == "-") {
    llvm::errs() << "kilnc: error: refusing to write a binary artifact to stdout; use -o FILE.kart\n";
    return kUsageError;
  }
  // Bounds the doubling for a model whose plan does not grow with the batch.
  constexpr int64_t kMostBatch = int64_t(1) << 20;
  std::map<int64_t, int64_t> peaks; // batch -> planned peak bytes
  int failedWith = kSuccess;        // compileModel's exit code when a probe fails
  int64_t budgetOfFirst = -1;       // the memory budget batch 1 was planned to
  auto plan = [&](int64_t batch) -> std::optional<int64_t> {
    DriverOptions probeOptions = options;
    probeOptions.largestBatch.clear();
    probeOptions.dumpPhasesTo.clear();
    probeOptions.overrides["batch"] = std::to_string(batch);
    Probe probe;
    failedWith = compileModel(probeOptions, &probe);
    if (failedWith != kSuccess) {
      if (failedWith == kUserError)
        llvm::errs() << "kilnc: error: --largest-batch: the model does not compile at batch "
                     << batch << " (above)\n";
      return std::nullopt;
    }
    peaks[batch] = probe.peak;
    if (budgetOfFirst < 0)
      budgetOfFirst = probe.budget;
    return probe.peak;
  };
  std::optional<int64_t> first = plan(1);
  if (!first)
    return failedWith;
  // A budget the train section sets shows only in a plan: the first one's.
  if (budgetOfFirst > 0) {
    llvm::errs() << "kilnc: error: --largest-batch plans without a memory budget, and the "
                    "model's train section sets one: remove it, or give -D batch=N with the "
                    "budget instead\n";
    return kUsageError;
  }
  if (*first > *size) {
    llvm::errs() << "kilnc: error: --largest-batch=" << options.largestBatch << " (" << mlir::kiln::formatMiB(*size)
                 << "): batch 1 already plans " << mlir::kiln::formatMiB(*first)
                 << " (kilnc at batch 1 prints what the plan holds)\n";
    return kUserError;
  }
  int64_t fits = 1, tooBig = 0;
  while (!tooBig && fits < kMostBatch) {
    std::optional<int64_t> peak = plan(fits * 2);
    if (!peak)
      return failedWith;
    if (*peak > *size)
      tooBig = fits * 2;
    else
      fits *= 2;
  }
  while (tooBig && tooBig - fits > 1) {
    int64_t mid = fits + (tooBig - fits) / 2;
    std::optional<int64_t> peak = plan(mid);
    if (!peak)
      return failedWith;
    (*peak > *size ? tooBig : fits) = mid;
  }
  llvm::outs() << "largest batch: " << fits << " (planned peak " << mlir::kiln::formatMiB(peaks[fits]) << " of "
               << mlir::kiln::formatMiB(*size);
  if (tooBig)
    llvm::outs() << "; batch " << tooBig << " plans " << mlir::kiln::formatMiB(peaks[tooBig]) << ")\n";
  else
    llvm::outs() << "; the search stops at " << kMostBatch << ")\n";
  DriverOptions chosen = options;
  chosen.largestBatch.clear();
  chosen.overrides["batch"] = std::to_string(fits);
  return compileModel(chosen, nullptr);
}

} // namespace

int runCompiler(const DriverOptions &options) {
  return options.largestBatch.empty() ? compileModel(options, nullptr)
                                      : compileLargestBatch(options);
}

} // namespace kiln
