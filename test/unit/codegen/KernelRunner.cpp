//===- KernelRunner.cpp - Runs generated CPU kernels in tests -------------===//

#include "KernelRunner.h"

#include "codegen/Codegen.h"
#include "ir/KilnOps.h"
#include "passes/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdlib>
#include <dlfcn.h>
#include <fstream>
#include <list>
#include <map>
#include <optional>
#include <sstream>
#include <unistd.h>

using namespace mlir;

namespace kiln::test {

std::unique_ptr<MLIRContext> makeContext() {
  auto context = std::make_unique<MLIRContext>();
  context->loadDialect<mlir::kiln::KilnDialect, func::FuncDialect>();
  return context;
}

void *compileKernels(const std::vector<std::string> &sources,
                     std::string &error, KernelBackend backend) {
  char dir[] = "/tmp/kiln_codegen_test_XXXXXX";
  if (!mkdtemp(dir)) {
    error = "mkdtemp failed";
    return nullptr;
  }
  std::string src = std::string(dir) + "/kernels.cpp";
  std::string lib = std::string(dir) + "/kernels.so";
  {
    std::ofstream out(src);
    if (backend == KernelBackend::CudaEmulated) {
      // The host has <stdint.h>: drop the prelude's NVRTC-only typedefs.
      out << "#include \"" KILN_SOURCE_DIR
             "/test/unit/codegen/CudaHostEmulation.h\"\n";
      std::istringstream prelude(::kiln::kernelPrelude("cuda"));
      for (std::string line; std::getline(prelude, line);)
        if (line.rfind("typedef ", 0) != 0)
          out << line << "\n";
    } else {
      out << ::kiln::kernelPrelude();
    }
    for (const std::string &s : sources)
      out << "\n" << s;
  }
  const char *cxx = std::getenv("CXX");
  std::string cmd = std::string(cxx ? cxx : "c++") +
                    (backend == KernelBackend::CudaEmulated
                         ? " -std=c++17 -pthread"
                         : "") +
                    " -O1 -fopenmp -shared -fPIC -Wall -Werror -o " + lib +
                    " " + src + " 2>" + dir + "/log.txt";
  if (std::system(cmd.c_str()) != 0) {
    std::ifstream log(std::string(dir) + "/log.txt");
    error = "compiling " + src + " failed:\n" +
            std::string(std::istreambuf_iterator<char>(log), {});
    return nullptr;
  }
  void *handle = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle)
    error = dlerror();
  // A loaded library stays mapped after its file is removed.
  std::system(("rm -rf " + std::string(dir)).c_str());
  return handle;
}

int64_t elementCount(Value v) {
  return cast<RankedTensorType>(v.getType()).getNumElements();
}

namespace {
func::FuncOp stepOf(ModuleOp module) {
  return module.lookupSymbol<func::FuncOp>("step");
}

// The operand whose storage result `i` of an update / accumulate op
// updates in place, as in the artifact.
std::optional<unsigned> inPlaceOperand(Operation *op, unsigned i) {
  std::vector<unsigned> inPlace;
  if (isa<mlir::kiln::AdamOp>(op))
    inPlace = {0, 2, 3}; // param, m, v
  else if (isa<mlir::kiln::SgdMomentumOp>(op))
    inPlace = {0, 2}; // param, momentum buffer
  else if (isa<mlir::kiln::SgdOp, mlir::kiln::AccumulateOp>(op))
    inPlace = {0}; // param / accumulator
  if (i < inPlace.size())
    return inPlace[i];
  return std::nullopt;
}

// One kernel's view of an op of @step: its group (a kiln.fusion's region:
// block arguments in, yielded values out, as StepLowering::planFusion),
// the step values its inputs and outputs stand for, and for each output the
// step value whose storage it updates in place (if any).
struct KernelCallPlan {
  KernelGroup group;
  std::vector<Value> inputs, outputs;
  std::vector<std::optional<Value>> inPlace;
};

KernelCallPlan planCall(Operation &op) {
  KernelCallPlan plan;
  auto fusion = dyn_cast<mlir::kiln::FusionOp>(op);
  if (!fusion) {
    plan.group = KernelGroup::forOp(&op);
    plan.inputs.assign(plan.group.inputs.begin(), plan.group.inputs.end());
    plan.outputs.assign(op.getResults().begin(), op.getResults().end());
    for (unsigned i = 0; i < op.getNumResults(); ++i) {
      std::optional<unsigned> operand = inPlaceOperand(&op, i);
      plan.inPlace.push_back(operand ? std::optional<Value>(op.getOperand(*operand))
                                     : std::nullopt);
    }
    return plan;
  }
  Block &body = fusion.getBody().front();
  for (Operation &member : body.without_terminator())
    plan.group.ops.push_back(&member);
  plan.group.inputs.assign(body.getArguments().begin(), body.getArguments().end());
  auto yield = cast<mlir::kiln::YieldOp>(body.getTerminator());
  plan.group.outputs.assign(yield.getValues().begin(), yield.getValues().end());
  plan.inputs.assign(fusion.getInputs().begin(), fusion.getInputs().end());
  plan.outputs.assign(fusion.getResults().begin(), fusion.getResults().end());
  for (Value yielded : yield.getValues()) {
    Operation *member = yielded.getDefiningOp();
    std::optional<unsigned> operand =
        member ? inPlaceOperand(member, cast<OpResult>(yielded).getResultNumber())
               : std::nullopt;
    if (operand) {
      auto arg = cast<BlockArgument>(member->getOperand(*operand));
      plan.inPlace.push_back(fusion.getInputs()[arg.getArgNumber()]);
    } else {
      plan.inPlace.push_back(std::nullopt);
    }
  }
  return plan;
}
} // namespace

KernelRunner::KernelRunner(const std::string &moduleText,
                           KernelBackend backend, bool fuse,
                           int64_t attentionSharedBudget)
    : context(makeContext()), backend(backend) {
  std::string diagnostics;
  ScopedDiagnosticHandler handler(context.get(), [&](Diagnostic &d) {
    diagnostics += d.str() + "\n";
    return success();
  });
  module = parseSourceString<ModuleOp>(moduleText, context.get());
  if (!module) {
    message = "parse failed: " + diagnostics;
    return;
  }
  if (fuse) {
    PassManager pm(context.get());
    // As kilnc's fusion phase (the GEMM epilogues aside).
    pm.addPass(mlir::kiln::createKilnFuseRope());
    pm.addPass(mlir::kiln::createKilnFusion());
    if (failed(pm.run(*module))) {
      message = "kiln-fuse-rope / kiln-fusion failed: " + diagnostics;
      return;
    }
  }
  func::FuncOp step = stepOf(*module);
  if (!step) {
    message = "no @step";
    return;
  }
  std::vector<std::string> sources;
  for (Operation &op : step.getBody().front()) {
    if (isa<func::ReturnOp, mlir::kiln::ReshapeOp>(op))
      continue;
    FailureOr<CpuKernel> kernel = failure();
    KernelGroup group = planCall(op).group;
    if (backend == KernelBackend::CudaEmulated) {
      FailureOr<CudaKernel> cuda =
          CudaKernelEmitter::emit(group, attentionSharedBudget);
      if (succeeded(cuda)) {
        kernel = CpuKernel{cuda->entry, cuda->source, cuda->ops};
        kernel->scratch = cuda->scratch;
        launches.push_back(cuda->launch);
      }
    } else {
      kernel = CpuKernelEmitter::emit(group);
    }
    if (failed(kernel)) {
      message = "emit failed: " + diagnostics;
      return;
    }
    emitted.push_back(*kernel);
    bool seen = false;
    for (const std::string &s : sources)
      seen |= s == kernel->source;
    if (!seen)
      sources.push_back(kernel->source);
  }
  handle = compileKernels(sources, message, backend);
}

// The library stays loaded: unloading it could unload libgomp while its
// worker threads are parked.
KernelRunner::~KernelRunner() = default;

std::vector<HostTensor> KernelRunner::run(std::vector<HostTensor> args) {
  using Entry = void (*)(void *const *);
  func::FuncOp step = stepOf(*module);
  std::map<void *, std::shared_ptr<HostTensor>> owners;
  llvm::DenseMap<Value, std::shared_ptr<HostTensor>> storage;
  for (auto [arg, tensor] : llvm::zip(step.getArguments(), args))
    storage[arg] = std::make_shared<HostTensor>(std::move(tensor));
  size_t kernelIndex = 0;
  std::vector<HostTensor> results;
  std::list<std::vector<uint64_t>> scratch; // kernels' scratch buffers
  for (Operation &op : step.getBody().front()) {
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        results.push_back(*storage[v]);
      break;
    }
    if (isa<mlir::kiln::ReshapeOp>(op)) {
      storage[op.getResult(0)] = storage[op.getOperand(0)];
      continue;
    }
    KernelCallPlan plan = planCall(op);
    std::vector<void *> pointers;
    for (Value v : plan.inputs)
      pointers.push_back(storage[v]->data());
    // In place, as in the artifact: an updated result shares its operand's
    // storage.
    for (auto [v, inPlace] : llvm::zip(plan.outputs, plan.inPlace)) {
      if (inPlace) {
        storage[v] = storage[*inPlace];
      } else {
        auto t = std::make_shared<HostTensor>();
        Type element = cast<RankedTensorType>(v.getType()).getElementType();
        if (element.isF32())
          t->f.assign(elementCount(v), -12345.0f);
        else
          t->i.assign(elementCount(v), -12345);
        storage[v] = t;
      }
      pointers.push_back(storage[v]->data());
    }
    const CpuKernel &kernel = emitted[kernelIndex];
    // Scratch after the outputs, as the artifact's planned buffers: a
    // Workspace arrives holding garbage (0xff bytes: NaN as float and
    // double), so a kernel that reads scratch it did not initialise fails
    // the comparison; a WorkspaceCounter arrives zero, as the runtime's
    // zeroed arena gives it.
    for (const KernelScratch &buffer : kernel.scratch) {
      size_t bytes = static_cast<size_t>(buffer.elements) *
                     (buffer.dtype == schema::DType_I64 ? 8 : 4);
      scratch.emplace_back(
          (bytes + 7) / 8,
          buffer.role == schema::BufferRole_WorkspaceCounter ? 0 : ~0ull);
      pointers.push_back(scratch.back().data());
    }
    auto entry = reinterpret_cast<Entry>(dlsym(handle, kernel.entry.c_str()));
    if (!entry) {
      message = "missing entry " + kernel.entry;
      return {};
    }
    if (backend == KernelBackend::CudaEmulated) {
      using Launch = void (*)(Entry, void *const *, unsigned, unsigned);
      auto launch =
          reinterpret_cast<Launch>(dlsym(handle, "kiln_emulate_launch"));
      const CudaLaunch &config = launches[kernelIndex];
      launch(entry, pointers.data(), config.grid, config.block);
    } else {
      entry(pointers.data());
    }
    ++kernelIndex;
  }
  return results;
}

} // namespace kiln::test
