//===- EmitArtifactTest.cpp - Structure of the emitted artifact -----------===//
//
// Emits the artifact of a small but complete training step (@step:
// embedding, GEMMs, loss, backward; @update: grad norm, clipping scale,
// AdamW; @eval) and checks the flatbuffer: it verifies, the three programs are
// there, buffers are shared between programs by role and name, reshape
// results are views, AdamW updates the argument buffers in place,
// roles/names/GEMM fields/locations/weight decay are as the contract says,
// and unsupported ops are diagnostics rather than crashes.
//
//===----------------------------------------------------------------------===//

#include "KernelRunner.h"

#include "codegen/Codegen.h"
#include "runtime/Artifact.h"
#include "runtime/schema/artifact_generated.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::test;
namespace schema = kiln::schema;

namespace {

constexpr const char *kStep = R"mlir(
module attributes {kiln.model = "tiny", kiln.train = #kiln.train<batch = 2, seq = 4, grad_accum = 3, clip = 1.0 : f32, optimizer = adamw, beta1 = 0.9 : f32, beta2 = 0.95 : f32, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32>} {
  func.func @step(
      %wte: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte", kiln.init = #kiln.init<normal, std = 0.02>},
      %w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.init = #kiln.init<zeros>},
      %tokens: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
      %targets: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"},
      %lacc: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"},
      %gwacc: tensor<8x16xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"})
      -> (tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"},
          tensor<f32> {kiln.role = #kiln.role<metric>, kiln.name = "Block.0.rms"},
          tensor<16x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "wte"},
          tensor<8x16xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"}) {
    %e = kiln.embedding %wte, %tokens : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32> loc("m.kiln":3:7)
    %att = kiln.matmul %e, %e {transpose_rhs = true} : tensor<2x4x8xf32>, tensor<2x4x8xf32> -> tensor<2x4x4xf32> loc("m.kiln":4:2)
    %logits = kiln.matmul %e, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32> loc(callsite("m.kiln":5:9 at "m.kiln":12:1))
    %loss = kiln.cross_entropy %logits, %targets : tensor<2x4x16xf32>, tensor<2x4xi32> loc("m.kiln":6:1)
    %metric = kiln.sqrt %loss : tensor<f32>
    %one = kiln.constant dense<1.0> : tensor<f32>
    %dl = kiln.cross_entropy_grad %logits, %targets, %one : tensor<2x4x16xf32>, tensor<2x4xi32>
    %h = kiln.reshape %e : tensor<2x4x8xf32> -> tensor<8x8xf32> loc("m.kiln":7:3)
    %dl2 = kiln.reshape %dl : tensor<2x4x16xf32> -> tensor<8x16xf32>
    %dw = kiln.matmul %h, %dl2 {transpose_lhs = true} : tensor<8x8xf32>, tensor<8x16xf32> -> tensor<8x16xf32>
    %dh = kiln.matmul %dl2, %w {transpose_rhs = true} : tensor<8x16xf32>, tensor<8x16xf32> -> tensor<8x8xf32>
    %dh3 = kiln.reshape %dh : tensor<8x8xf32> -> tensor<2x4x8xf32>
    %dwte = kiln.embedding_grad %tokens, %dh3 : tensor<2x4xi32>, tensor<2x4x8xf32> -> tensor<16x8xf32>
    %l1 = kiln.accumulate %lacc, %loss {scale = 0.333333343 : f32} : tensor<f32>
    %dw1 = kiln.accumulate %gwacc, %dw {scale = 0.333333343 : f32} : tensor<8x16xf32>
    return %l1, %metric, %dwte, %dw1 : tensor<f32>, tensor<f32>, tensor<16x8xf32>, tensor<8x16xf32>
  }
  func.func @update(
      %wte: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte", kiln.init = #kiln.init<normal, std = 0.02>, kiln.weight_decay = 0.0 : f32},
      %w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.init = #kiln.init<zeros>, kiln.weight_decay = 0.1 : f32},
      %dwte: tensor<16x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "wte"},
      %dw: tensor<8x16xf32> {kiln.role = #kiln.role<grad>, kiln.name = "w"},
      %loss: tensor<f32> {kiln.role = #kiln.role<loss>, kiln.name = "loss"},
      %m_wte: tensor<16x8xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "wte"},
      %m_w: tensor<8x16xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "w"},
      %v_wte: tensor<16x8xf32> {kiln.role = #kiln.role<adam_v>, kiln.name = "wte"},
      %v_w: tensor<8x16xf32> {kiln.role = #kiln.role<adam_v>, kiln.name = "w"},
      %lr: tensor<f32> {kiln.role = #kiln.role<lr>, kiln.name = "lr"},
      %step: tensor<f32> {kiln.role = #kiln.role<step>, kiln.name = "step"})
      -> (tensor<f32> {kiln.role = #kiln.role<grad_norm>, kiln.name = "grad_norm"},
          tensor<f32> {kiln.role = #kiln.role<update_norm>, kiln.name = "update_norm"},
          tensor<f32> {kiln.role = #kiln.role<param_norm>, kiln.name = "param_norm"},
          tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte"},
          tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w"},
          tensor<16x8xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "wte"},
          tensor<8x16xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "w"},
          tensor<16x8xf32> {kiln.role = #kiln.role<adam_v>, kiln.name = "wte"},
          tensor<8x16xf32> {kiln.role = #kiln.role<adam_v>, kiln.name = "w"}) {
    %sq1 = kiln.mul %dwte, %dwte : tensor<16x8xf32>
    %s1 = kiln.reduce_sum %sq1 dims = [0, 1] : tensor<16x8xf32> -> tensor<f32>
    %sq2 = kiln.mul %dw, %dw : tensor<8x16xf32>
    %s2 = kiln.reduce_sum %sq2 dims = [0, 1] : tensor<8x16xf32> -> tensor<f32>
    %s = kiln.add %s1, %s2 : tensor<f32>
    %gn = kiln.sqrt %s : tensor<f32>
    %scale = kiln.grad_scale %gn, %loss {max_norm = 1.0 : f32}
    %wte1, %mwte1, %vwte1, %du1, %pp1 = kiln.adam %wte, %dwte, %m_wte, %v_wte, %lr, %step, %scale {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true, epsilon = 1.0e-08 : f32, weight_decay = 0.0 : f32} : tensor<16x8xf32>
    %w1, %mw1, %vw1, %du2, %pp2 = kiln.adam %w, %dw, %m_w, %v_w, %lr, %step, %scale {beta1 = 0.9 : f32, beta2 = 0.95 : f32, decoupled_weight_decay = true, epsilon = 1.0e-08 : f32, weight_decay = 0.1 : f32} : tensor<8x16xf32>
    %du = kiln.add %du1, %du2 : tensor<f32>
    %pp = kiln.add %pp1, %pp2 : tensor<f32>
    %un = kiln.sqrt %du : tensor<f32>
    %pn = kiln.sqrt %pp : tensor<f32>
    return %gn, %un, %pn, %wte1, %w1, %mwte1, %mw1, %vwte1, %vw1 : tensor<f32>, tensor<f32>, tensor<f32>, tensor<16x8xf32>, tensor<8x16xf32>, tensor<16x8xf32>, tensor<8x16xf32>, tensor<16x8xf32>, tensor<8x16xf32>
  }
  func.func @eval(
      %wte: tensor<16x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte", kiln.init = #kiln.init<normal, std = 0.02>},
      %w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.init = #kiln.init<zeros>},
      %tokens: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
      %targets: tensor<2x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
      -> (tensor<f32> {kiln.role = #kiln.role<eval_loss>, kiln.name = "eval_loss"}) {
    %e = kiln.embedding %wte, %tokens : tensor<16x8xf32>, tensor<2x4xi32> -> tensor<2x4x8xf32>
    %logits = kiln.matmul %e, %w : tensor<2x4x8xf32>, tensor<8x16xf32> -> tensor<2x4x16xf32>
    %loss = kiln.cross_entropy %logits, %targets : tensor<2x4x16xf32>, tensor<2x4xi32>
    return %loss : tensor<f32>
  }
}
)mlir";

struct Emitted {
  std::unique_ptr<mlir::MLIRContext> context;
  mlir::OwningOpRef<mlir::ModuleOp> module;
  mlir::FailureOr<std::string> bytes = mlir::failure();
  std::string diagnostics;
};

std::unique_ptr<Emitted> emit(const std::string &text) {
  auto e = std::make_unique<Emitted>();
  e->context = makeContext();
  e->context->allowUnregisteredDialects();
  mlir::ScopedDiagnosticHandler handler(e->context.get(),
                                        [&](mlir::Diagnostic &d) {
                                          e->diagnostics += d.str() + "\n";
                                          return mlir::success();
                                        });
  e->module = mlir::parseSourceString<mlir::ModuleOp>(text, e->context.get());
  if (e->module)
    e->bytes = emitArtifact(*e->module);
  return e;
}

int findBuffer(const schema::Artifact *a, schema::BufferRole role,
               const std::string &name) {
  for (unsigned i = 0; i < a->buffers()->size(); ++i) {
    const schema::Buffer *b = a->buffers()->Get(i);
    if (b->role() == role && b->name() && b->name()->str() == name)
      return static_cast<int>(i);
  }
  return -1;
}

TEST(EmitArtifact, WholeStep) {
  auto e = emit(kStep);
  ASSERT_TRUE(e->module) << e->diagnostics;
  ASSERT_TRUE(mlir::succeeded(e->bytes)) << e->diagnostics;
  const std::string &bytes = *e->bytes;

  flatbuffers::Verifier verifier(
      reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  ASSERT_TRUE(schema::VerifyArtifactBuffer(verifier));
  ASSERT_TRUE(schema::ArtifactBufferHasIdentifier(bytes.data()));
  const schema::Artifact *a = schema::GetArtifact(bytes.data());

  EXPECT_EQ(a->version(), rt::kArtifactVersion);
  EXPECT_EQ(a->model()->str(), "tiny");
  EXPECT_EQ(a->target()->str(), "cpu");
  EXPECT_EQ(a->train()->batch(), 2);
  EXPECT_EQ(a->train()->seq(), 4);
  EXPECT_EQ(a->train()->optimizer()->str(), "adamw");
  EXPECT_EQ(a->train()->grad_accum(), 3);
  EXPECT_FLOAT_EQ(a->train()->clip(), 1.0f);
  std::string settings = a->train()->settings()->str();
  EXPECT_NE(settings.find("\"beta2\":0.95"), std::string::npos) << settings;
  EXPECT_NE(settings.find("\"grad_accum\":3"), std::string::npos) << settings;
  EXPECT_NE(settings.find("\"optimizer\":\"adamw\""), std::string::npos)
      << settings;
  ASSERT_EQ(a->programs()->size(), 3u);
  EXPECT_EQ(a->programs()->Get(0)->name()->str(), "step");
  EXPECT_EQ(a->programs()->Get(1)->name()->str(), "update");
  EXPECT_EQ(a->programs()->Get(2)->name()->str(), "eval");
  // wte [16, 8] gathered by the tokens input; 16 classes for the targets.
  EXPECT_EQ(a->train()->vocab_size(), 16);
  EXPECT_NE(a->prelude()->str().find("#include <math.h>"), std::string::npos);

  // Arguments.
  int wte = findBuffer(a, schema::BufferRole_Parameter, "wte");
  int w = findBuffer(a, schema::BufferRole_Parameter, "w");
  int mWte = findBuffer(a, schema::BufferRole_AdamM, "wte");
  int vW = findBuffer(a, schema::BufferRole_AdamV, "w");
  int tokens = findBuffer(a, schema::BufferRole_Input, "tokens");
  int lr = findBuffer(a, schema::BufferRole_LearningRate, "lr");
  int step = findBuffer(a, schema::BufferRole_StepCount, "step");
  ASSERT_GE(wte, 0);
  ASSERT_GE(w, 0);
  ASSERT_GE(mWte, 0);
  ASSERT_GE(vW, 0);
  ASSERT_GE(tokens, 0);
  ASSERT_GE(lr, 0);
  ASSERT_GE(step, 0);
  EXPECT_EQ(a->buffers()->Get(wte)->init()->kind(), schema::InitKind_Normal);
  EXPECT_FLOAT_EQ(a->buffers()->Get(wte)->init()->std(), 0.02f);
  EXPECT_EQ(a->buffers()->Get(w)->init()->kind(), schema::InitKind_Zeros);
  EXPECT_FLOAT_EQ(a->buffers()->Get(w)->weight_decay(), 0.1f);
  EXPECT_FLOAT_EQ(a->buffers()->Get(wte)->weight_decay(), 0.0f);
  // One buffer per role and name, whatever the number of programs using it.
  int params = 0;
  for (const schema::Buffer *b : *a->buffers())
    params += b->role() == schema::BufferRole_Parameter;
  EXPECT_EQ(params, 2);
  EXPECT_EQ(a->buffers()->Get(tokens)->dtype(), schema::DType_I32);
  EXPECT_EQ(a->buffers()->Get(lr)->shape()->size(), 0u);

  // Results: one loss and one w grad (accumulators), the wte grad, a metric,
  // the three norms and the eval loss.
  int loss = findBuffer(a, schema::BufferRole_Loss, "loss");
  int gWte = findBuffer(a, schema::BufferRole_Gradient, "wte");
  int gW = findBuffer(a, schema::BufferRole_Gradient, "w");
  int gn = findBuffer(a, schema::BufferRole_GradNorm, "grad_norm");
  ASSERT_GE(loss, 0);
  ASSERT_GE(gWte, 0);
  ASSERT_GE(gW, 0);
  ASSERT_GE(gn, 0);
  EXPECT_GE(findBuffer(a, schema::BufferRole_Metric, "Block.0.rms"), 0);
  EXPECT_GE(findBuffer(a, schema::BufferRole_UpdateNorm, "update_norm"), 0);
  EXPECT_GE(findBuffer(a, schema::BufferRole_ParamNorm, "param_norm"), 0);
  EXPECT_GE(findBuffer(a, schema::BufferRole_EvalLoss, "eval_loss"), 0);
  EXPECT_EQ(a->buffers()->Get(gW)->alias_of(), -1);

  // Reshape results are views of their input's storage.
  int views = 0;
  for (unsigned i = 0; i < a->buffers()->size(); ++i) {
    const schema::Buffer *b = a->buffers()->Get(i);
    if (b->alias_of() < 0)
      continue;
    ++views;
    ASSERT_LT(b->alias_of(), static_cast<int>(i));
    EXPECT_EQ(a->buffers()->Get(b->alias_of())->alias_of(), -1);
    EXPECT_EQ(a->buffers()->Get(b->alias_of())->role(),
              schema::BufferRole_Activation);
  }
  EXPECT_EQ(views, 3);
  // @step writes loss and the w grad in place (kiln.accumulate), and @update
  // reads the same buffers.
  for (const schema::Step *st : *a->programs()->Get(0)->schedule()) {
    const schema::KernelCall *call = st->op_as_KernelCall();
    if (!call ||
        a->kernels()->Get(call->kernel())->ops()->str() != "kiln.accumulate")
      continue;
    // buffers: acc, value, result
    EXPECT_EQ(call->buffers()->Get(2), call->buffers()->Get(0));
    unsigned acc = call->buffers()->Get(0);
    EXPECT_TRUE(acc == static_cast<unsigned>(loss) ||
                acc == static_cast<unsigned>(gW));
  }
  int h = -1;
  for (unsigned i = 0; i < a->buffers()->size(); ++i)
    if (a->buffers()->Get(i)->name()->str() == "kiln.reshape@m.kiln:7:3")
      h = i;
  ASSERT_GE(h, 0);
  int embeddingOut = a->buffers()->Get(h)->alias_of();
  EXPECT_EQ(a->buffers()->Get(embeddingOut)->name()->str(),
            "kiln.embedding@m.kiln:3:7");

  // Schedules: GEMMs, and AdamW kernels that update the arguments in place.
  double flops = 0;
  int gemms = 0, adamws = 0;
  for (const schema::Step *s : *a->programs()->Get(0)->schedule()) {
    if (auto g = s->op_as_GemmCall())
      flops += 3 * 2.0 * g->m() * g->n() * g->k() * g->batch(); // grad_accum
  }
  for (const schema::Program *program : *a->programs())
  for (const schema::Step *s : *program->schedule()) {
    if (auto g = s->op_as_GemmCall()) {
      ++gemms;
      if (s->location()->str() == "m.kiln:4:2") {
        // [2,4,8] x [2,4,8]^T: two products of [4,8] x [8,4].
        EXPECT_EQ(g->batch(), 2);
        EXPECT_EQ(g->m(), 4);
        EXPECT_EQ(g->n(), 4);
        EXPECT_EQ(g->k(), 8);
        EXPECT_TRUE(g->trans_b());
        EXPECT_EQ(g->stride_a(), 32);
        EXPECT_EQ(g->stride_b(), 32);
        EXPECT_EQ(g->stride_c(), 16);
      } else if (s->location()->str() == "m.kiln:5:9") {
        // [2,4,8] x [8,16] shared rhs: one [8,8] x [8,16] product.
        EXPECT_EQ(g->batch(), 1);
        EXPECT_EQ(g->m(), 8);
        EXPECT_EQ(g->n(), 16);
        EXPECT_EQ(g->k(), 8);
        EXPECT_EQ(g->b(), static_cast<unsigned>(w));
        EXPECT_EQ(g->stride_b(), 0);
      }
      continue;
    }
    const schema::KernelCall *call = s->op_as_KernelCall();
    ASSERT_TRUE(call);
    ASSERT_LT(call->kernel(), a->kernels()->size());
    const schema::Kernel *kernel = a->kernels()->Get(call->kernel());
    if (kernel->ops()->str() != "kiln.adam")
      continue;
    ++adamws;
    ASSERT_EQ(call->buffers()->size(), 12u);
    // buffers: param, grad, m, v, lr, step, scale, new_param, new_m, new_v,
    // update_sq, param_sq
    EXPECT_EQ(call->buffers()->Get(7), call->buffers()->Get(0));
    EXPECT_EQ(call->buffers()->Get(8), call->buffers()->Get(2));
    EXPECT_EQ(call->buffers()->Get(9), call->buffers()->Get(3));
    if (call->buffers()->Get(0) == static_cast<unsigned>(w))
      EXPECT_EQ(call->buffers()->Get(1), static_cast<unsigned>(gW));
    EXPECT_EQ(call->buffers()->Get(4), static_cast<unsigned>(lr));
    EXPECT_EQ(call->buffers()->Get(5), static_cast<unsigned>(step));
    unsigned p = call->buffers()->Get(0);
    EXPECT_TRUE(p == static_cast<unsigned>(wte) || p == static_cast<unsigned>(w));
    if (p == static_cast<unsigned>(wte))
      EXPECT_EQ(call->buffers()->Get(2), static_cast<unsigned>(mWte));
  }
  EXPECT_EQ(gemms, 5); // four in @step, one in @eval (not in the flops)
  EXPECT_EQ(adamws, 2);
  EXPECT_DOUBLE_EQ(a->flops_per_step(), flops);
  EXPECT_DOUBLE_EQ(flops, 3 * 2.0 * (2 * 4 * 4 * 8 + 8 * 16 * 8 + 8 * 16 * 8 +
                                     8 * 8 * 16));

  // Every kernel name is unique, and every kernel compiles as one unit.
  std::vector<std::string> sources;
  for (unsigned i = 0; i < a->kernels()->size(); ++i) {
    for (unsigned j = 0; j < i; ++j)
      EXPECT_NE(a->kernels()->Get(i)->entry()->str(),
                a->kernels()->Get(j)->entry()->str());
    sources.push_back(a->kernels()->Get(i)->source()->str());
  }
  std::string error;
  void *handle = compileKernels(sources, error);
  ASSERT_TRUE(handle) << error;
}

// The runtime's loader (structure, version, then field-by-field contents)
// accepts what codegen writes.
TEST(EmitArtifact, RuntimeLoaderAcceptsTheArtifact) {
  auto e = emit(kStep);
  ASSERT_TRUE(mlir::succeeded(e->bytes)) << e->diagnostics;
  auto loaded = rt::Artifact::loadBytes(
      std::vector<uint8_t>(e->bytes->begin(), e->bytes->end()), "step.kart");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
}

TEST(EmitArtifact, IdenticalKernelsAreEmittedOnce) {
  auto context = makeContext();
  auto module = mlir::parseSourceString<mlir::ModuleOp>(R"mlir(
    func.func @step(%a: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "a"}) -> tensor<4x8xf32> {
      %0 = kiln.gelu %a : tensor<4x8xf32> loc("m.kiln":1:1)
      %1 = kiln.gelu %0 : tensor<4x8xf32> loc("m.kiln":2:1)
      %2 = kiln.exp %1 : tensor<4x8xf32>
      return %2 : tensor<4x8xf32>
    }
    func.func @update() {
      return
    })mlir",
                                                        context.get());
  ASSERT_TRUE(module);
  auto kernels = emitKernels(*module);
  ASSERT_TRUE(mlir::succeeded(kernels));
  ASSERT_EQ(kernels->size(), 2u);
  EXPECT_EQ((*kernels)[0].ops, "kiln.gelu");
  EXPECT_EQ((*kernels)[0].location, "m.kiln:1:1");
  EXPECT_EQ((*kernels)[0].entry.rfind("k_gelu_", 0), 0u);
  EXPECT_NE((*kernels)[0].source.find("extern \"C\" void " +
                                      (*kernels)[0].entry),
            std::string::npos);
  EXPECT_NE((*kernels)[0].source.find("tensor<4x8xf32>"), std::string::npos);
}

TEST(EmitArtifact, UnsupportedOpIsADiagnostic) {
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%a: tensor<4xf32> {kiln.role = #kiln.role<input>, kiln.name = "a"}) -> tensor<4xf32> {
        %0 = "test.frobnicate"(%a) : (tensor<4xf32>) -> tensor<4xf32>
        return %0 : tensor<4xf32>
      }
      func.func @update() {
        return
      }
    })mlir");
  ASSERT_TRUE(e->module);
  EXPECT_TRUE(mlir::failed(e->bytes));
  EXPECT_NE(e->diagnostics.find("codegen does not support 'test.frobnicate'"),
            std::string::npos)
      << e->diagnostics;
}

// A kiln.fusion gemm (--kiln-fuse-gemm-epilogue) is one GemmCall: here
// bias + GELU, the gelu input yielded as the aux output.
TEST(EmitArtifact, GemmFusionIsOneGemmCallWithItsEpilogue) {
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                      %w: tensor<8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "w"},
                      %b: tensor<16xf32> {kiln.role = #kiln.role<input>, kiln.name = "b"})
          -> (tensor<4x16xf32> {kiln.role = #kiln.role<metric>, kiln.name = "y"},
              tensor<4x16xf32> {kiln.role = #kiln.role<metric>, kiln.name = "pre"}) {
        %f:2 = kiln.fusion gemm (%x, %w, %b)
            : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
        ^bb0(%x0: tensor<4x8xf32>, %w0: tensor<8x16xf32>, %b0: tensor<16xf32>):
          %p = kiln.matmul %x0, %w0 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
          %bb = kiln.broadcast %b0 dims = [1] : tensor<16xf32> -> tensor<4x16xf32>
          %s = kiln.add %p, %bb : tensor<4x16xf32>
          %g = kiln.gelu %s : tensor<4x16xf32>
          kiln.yield %g, %s : tensor<4x16xf32>, tensor<4x16xf32>
        }
        return %f#0, %f#1 : tensor<4x16xf32>, tensor<4x16xf32>
      }
      func.func @update() {
        return
      }
    })mlir");
  ASSERT_TRUE(e->module) << e->diagnostics;
  ASSERT_TRUE(mlir::succeeded(e->bytes)) << e->diagnostics;
  const schema::Artifact *a = schema::GetArtifact(e->bytes->data());
  const schema::Program *step = a->programs()->Get(0);
  ASSERT_EQ(step->schedule()->size(), 1u); // no kernel besides the GEMM
  const schema::GemmCall *g = step->schedule()->Get(0)->op_as_GemmCall();
  ASSERT_NE(g, nullptr);
  EXPECT_EQ(g->epilogue(), schema::GemmEpilogue_BiasGelu);
  EXPECT_EQ(g->bias(), findBuffer(a, schema::BufferRole_Input, "b"));
  EXPECT_EQ(g->c(), static_cast<uint32_t>(findBuffer(a, schema::BufferRole_Metric, "y")));
  EXPECT_EQ(g->aux(), findBuffer(a, schema::BufferRole_Metric, "pre"));
  EXPECT_EQ(g->m(), 4);
  EXPECT_EQ(g->n(), 16);
}

// The region verifier allows epilogue ops in shapes no GEMM epilogue
// computes (a sum of the product itself): codegen says so on the fusion.
TEST(EmitArtifact, UnknownGemmEpilogueIsADiagnostic) {
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%x: tensor<4x8xf32> {kiln.role = #kiln.role<input>, kiln.name = "x"},
                      %w: tensor<8x16xf32> {kiln.role = #kiln.role<input>, kiln.name = "w"})
          -> (tensor<16xf32> {kiln.role = #kiln.role<metric>, kiln.name = "s"}) {
        %f:2 = kiln.fusion gemm (%x, %w)
            : (tensor<4x8xf32>, tensor<8x16xf32>) -> (tensor<4x16xf32>, tensor<16xf32>) {
        ^bb0(%x0: tensor<4x8xf32>, %w0: tensor<8x16xf32>):
          %p = kiln.matmul %x0, %w0 : tensor<4x8xf32>, tensor<8x16xf32> -> tensor<4x16xf32>
          %s = kiln.reduce_sum %p dims = [0] : tensor<4x16xf32> -> tensor<16xf32>
          kiln.yield %p, %s : tensor<4x16xf32>, tensor<16xf32>
        }
        return %f#1 : tensor<16xf32>
      }
      func.func @update() {
        return
      }
    })mlir");
  ASSERT_TRUE(e->module) << e->diagnostics;
  EXPECT_TRUE(mlir::failed(e->bytes));
  EXPECT_NE(e->diagnostics.find("codegen knows no GEMM epilogue for kiln.reduce_sum"),
            std::string::npos)
      << e->diagnostics;
}

TEST(EmitArtifact, UnsupportedElementTypeIsADiagnostic) {
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%a: tensor<4xbf16> {kiln.role = #kiln.role<input>, kiln.name = "a"}) -> tensor<4xbf16> {
        %0 = kiln.softmax %a : tensor<4xbf16>
        return %0 : tensor<4xbf16>
      }
      func.func @update() {
        return
      }
    })mlir");
  ASSERT_TRUE(e->module);
  EXPECT_TRUE(mlir::failed(e->bytes));
  EXPECT_NE(e->diagnostics.find("does not support element type 'bf16'"),
            std::string::npos)
      << e->diagnostics;
}

TEST(EmitArtifact, ViewOfAnInPlaceUpdatedValueReadAfterTheUpdateIsAnError) {
  // The grad norm is a reshape view of the parameter that kiln.adam updates
  // in place; returning it would report the updated value.
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%p: tensor<1xf32> {kiln.role = #kiln.role<param>, kiln.name = "p", kiln.init = #kiln.init<ones>})
          -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
        %l = kiln.reshape %p : tensor<1xf32> -> tensor<f32>
        return %l : tensor<f32>
      }
      func.func @update(%p: tensor<1xf32> {kiln.role = #kiln.role<param>, kiln.name = "p", kiln.init = #kiln.init<ones>},
                      %m: tensor<1xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "p"},
                      %v: tensor<1xf32> {kiln.role = #kiln.role<adam_v>, kiln.name = "p"},
                      %lr: tensor<f32> {kiln.role = #kiln.role<lr>, kiln.name = "lr"},
                      %t: tensor<f32> {kiln.role = #kiln.role<step>, kiln.name = "step"})
          -> (tensor<f32> {kiln.role = #kiln.role<grad_norm>}, tensor<1xf32> {kiln.role = #kiln.role<param>, kiln.name = "p"},
              tensor<1xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "p"}, tensor<1xf32> {kiln.role = #kiln.role<adam_v>, kiln.name = "p"}) {
        %l = kiln.reshape %p : tensor<1xf32> -> tensor<f32>
        %g = kiln.constant dense<1.0> : tensor<1xf32>
        %np, %nm, %nv, %du, %pp = kiln.adam %p, %g, %m, %v, %lr, %t, %lr {beta1 = 0.9 : f32, beta2 = 0.999 : f32, decoupled_weight_decay = true, epsilon = 1.0e-08 : f32, weight_decay = 0.0 : f32} : tensor<1xf32>
        return %l, %np, %nm, %nv : tensor<f32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
      }
    })mlir");
  ASSERT_TRUE(e->module) << e->diagnostics;
  EXPECT_TRUE(mlir::failed(e->bytes));
  EXPECT_NE(e->diagnostics.find("reads a value that kiln.adam updates in place earlier"),
            std::string::npos)
      << e->diagnostics;
}

TEST(EmitArtifact, MissingUpdateProgramIsADiagnostic) {
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%a: tensor<4xf32> {kiln.role = #kiln.role<input>, kiln.name = "a"}) -> tensor<4xf32> {
        return %a : tensor<4xf32>
      }
    })mlir");
  ASSERT_TRUE(e->module);
  EXPECT_TRUE(mlir::failed(e->bytes));
  EXPECT_NE(e->diagnostics.find("codegen needs a func.func @update"),
            std::string::npos)
      << e->diagnostics;
}

TEST(EmitArtifact, ResultSharingABufferGetsACopy) {
  // The same zeros constant is the gradient of two parameters.
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%p: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "p", kiln.init = #kiln.init<ones>},
                      %q: tensor<4xf32> {kiln.role = #kiln.role<param>, kiln.name = "q", kiln.init = #kiln.init<ones>})
          -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "p"},
              tensor<4xf32> {kiln.role = #kiln.role<grad>, kiln.name = "q"}) {
        %l = kiln.constant dense<0.0> : tensor<f32>
        %z = kiln.constant dense<0.0> : tensor<4xf32>
        return %l, %z, %z : tensor<f32>, tensor<4xf32>, tensor<4xf32>
      }
      func.func @update() {
        return
      }
    })mlir");
  ASSERT_TRUE(mlir::succeeded(e->bytes)) << e->diagnostics;
  const schema::Artifact *a = schema::GetArtifact(e->bytes->data());
  int gp = findBuffer(a, schema::BufferRole_Gradient, "p");
  int gq = findBuffer(a, schema::BufferRole_Gradient, "q");
  ASSERT_GE(gp, 0);
  ASSERT_GE(gq, 0);
  EXPECT_NE(gp, gq);
  // No data input indexes anything: nothing for the runtime to check.
  EXPECT_EQ(a->train()->vocab_size(), 0);
}

TEST(EmitArtifact, VocabSizeIsTheSmallestBoundOfTheDataIndices) {
  // Token ids index a [64, 8] table (through a reshape view of the input)
  // and the 50 classes of the loss: ids must stay below 50. The [999, 8]
  // table gathered by a computed iota is no bound on the data.
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 4, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%wte: tensor<64x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte", kiln.init = #kiln.init<ones>},
                      %wpe: tensor<999x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wpe", kiln.init = #kiln.init<ones>},
                      %w: tensor<8x50xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.init = #kiln.init<ones>},
                      %tokens: tensor<1x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
                      %targets: tensor<1x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
          -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
        %t = kiln.reshape %tokens : tensor<1x4xi32> -> tensor<4xi32>
        %e = kiln.embedding %wte, %t : tensor<64x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
        %i = kiln.iota : tensor<4xi32>
        %p = kiln.embedding %wpe, %i : tensor<999x8xf32>, tensor<4xi32> -> tensor<4x8xf32>
        %x = kiln.add %e, %p : tensor<4x8xf32>
        %x3 = kiln.reshape %x : tensor<4x8xf32> -> tensor<1x4x8xf32>
        %logits = kiln.matmul %x3, %w : tensor<1x4x8xf32>, tensor<8x50xf32> -> tensor<1x4x50xf32>
        %loss = kiln.cross_entropy %logits, %targets : tensor<1x4x50xf32>, tensor<1x4xi32>
        return %loss : tensor<f32>
      }
      func.func @update() {
        return
      }
    })mlir");
  ASSERT_TRUE(e->module) << e->diagnostics;
  ASSERT_TRUE(mlir::succeeded(e->bytes)) << e->diagnostics;
  EXPECT_EQ(schema::GetArtifact(e->bytes->data())->train()->vocab_size(), 50);
}

TEST(EmitArtifact, PaddedParameterKeepsItsTrueShape) {
  // pad-dims stored wte [200, 8] as [256, 8] and masks classes >= 200: the
  // parameter, its gradient and its Adam state carry logical_shape [200, 8],
  // other buffers none, and token ids must stay below the true 200.
  auto e = emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 4, optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%wte: tensor<256x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte", kiln.init = #kiln.init<ones>,
                                               kiln.true_shape = array<i64: 200, 8>},
                      %tokens: tensor<1x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "tokens"},
                      %targets: tensor<1x4xi32> {kiln.role = #kiln.role<input>, kiln.name = "targets"})
          -> (tensor<f32> {kiln.role = #kiln.role<loss>}, tensor<256x8xf32> {kiln.role = #kiln.role<grad>, kiln.name = "wte"}) {
        %e = kiln.embedding %wte, %tokens : tensor<256x8xf32>, tensor<1x4xi32> -> tensor<1x4x8xf32>
        %logits = kiln.matmul %e, %wte {transpose_rhs = true} : tensor<1x4x8xf32>, tensor<256x8xf32> -> tensor<1x4x256xf32>
        %loss = kiln.cross_entropy %logits, %targets {valid_classes = 200 : i64} : tensor<1x4x256xf32>, tensor<1x4xi32>
        return %loss, %wte : tensor<f32>, tensor<256x8xf32>
      }
      func.func @update(%wte: tensor<256x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "wte", kiln.init = #kiln.init<ones>},
                        %m: tensor<256x8xf32> {kiln.role = #kiln.role<adam_m>, kiln.name = "wte"}) {
        return
      }
    })mlir");
  ASSERT_TRUE(e->module) << e->diagnostics;
  ASSERT_TRUE(mlir::succeeded(e->bytes)) << e->diagnostics;
  const schema::Artifact *a = schema::GetArtifact(e->bytes->data());
  auto logical = [&](schema::BufferRole role) -> std::vector<int64_t> {
    int index = findBuffer(a, role, "wte");
    EXPECT_GE(index, 0) << schema::EnumNameBufferRole(role);
    if (index < 0 || !a->buffers()->Get(index)->logical_shape())
      return {};
    auto *shape = a->buffers()->Get(index)->logical_shape();
    return {shape->begin(), shape->end()};
  };
  const std::vector<int64_t> expected = {200, 8};
  EXPECT_EQ(logical(schema::BufferRole_Parameter), expected);
  EXPECT_EQ(logical(schema::BufferRole_Gradient), expected);
  EXPECT_EQ(logical(schema::BufferRole_AdamM), expected);
  int tokens = findBuffer(a, schema::BufferRole_Input, "tokens");
  ASSERT_GE(tokens, 0);
  EXPECT_FALSE(a->buffers()->Get(tokens)->logical_shape());
  EXPECT_EQ(a->train()->vocab_size(), 200);
}

} // namespace

// One GEMM of `precision` (and its operand type): the GemmCall must read
// buffers of that type, write f32, and carry tf32 only for precision = tf32
// with f32 operands; the runtime's verifier must accept it.
std::unique_ptr<Emitted> emitGemm(const std::string &precision,
                                  const std::string &operand) {
  std::string convert =
      operand == "bf16"
          ? "%xb = kiln.convert %x : tensor<4x8xf32> -> tensor<4x8xbf16>\n"
            "%wb = kiln.convert %w : tensor<8x16xf32> -> tensor<8x16xbf16>\n"
          : "";
  std::string x = operand == "bf16" ? "%xb" : "%x";
  std::string w = operand == "bf16" ? "%wb" : "%w";
  return emit(R"mlir(
    module attributes {kiln.train = #kiln.train<batch = 1, seq = 1, precision = ")mlir" + precision + R"mlir(", optimizer = sgd, weight_decay = 0.0 : f32>} {
      func.func @step(%w: tensor<8x16xf32> {kiln.role = #kiln.role<param>, kiln.name = "w", kiln.init = #kiln.init<ones>},
                      %x: tensor<4x8xf32> {kiln.role = #kiln.role<param>, kiln.name = "x", kiln.init = #kiln.init<ones>})
          -> (tensor<f32> {kiln.role = #kiln.role<loss>}) {
        )mlir" + convert +
              "%y = kiln.matmul " + x + ", " + w + " : tensor<4x8x" + operand +
              ">, tensor<8x16x" + operand + R"mlir(> -> tensor<4x16xf32>
        %l = kiln.reduce_sum %y dims = [0, 1] : tensor<4x16xf32> -> tensor<f32>
        return %l : tensor<f32>
      }
      func.func @update() {
        return
      }
    })mlir");
}

const schema::GemmCall *onlyGemm(const schema::Artifact *a) {
  const schema::GemmCall *gemm = nullptr;
  for (const schema::Program *p : *a->programs())
    for (const schema::Step *s : *p->schedule())
      if (auto g = s->op_as_GemmCall())
        gemm = g;
  return gemm;
}

TEST(EmitArtifact, MixedPrecisionGemms) {
  struct Case {
    const char *precision, *operand;
    schema::DType dtype;
    bool tf32;
  } cases[] = {{"fp32", "f32", schema::DType_F32, false},
               {"tf32", "f32", schema::DType_F32, true},
               {"bf16", "bf16", schema::DType_BF16, false}};
  for (const Case &c : cases) {
    SCOPED_TRACE(c.precision);
    auto e = emitGemm(c.precision, c.operand);
    ASSERT_TRUE(mlir::succeeded(e->bytes)) << e->diagnostics;
    const schema::Artifact *a = schema::GetArtifact(e->bytes->data());
    const schema::GemmCall *g = onlyGemm(a);
    ASSERT_NE(g, nullptr);
    EXPECT_EQ(a->buffers()->Get(g->a())->dtype(), c.dtype);
    EXPECT_EQ(a->buffers()->Get(g->b())->dtype(), c.dtype);
    EXPECT_EQ(a->buffers()->Get(g->c())->dtype(), schema::DType_F32);
    EXPECT_EQ(g->tf32(), c.tf32);
    auto loaded = rt::Artifact::loadBytes(
        std::vector<uint8_t>(e->bytes->begin(), e->bytes->end()), "gemm.kart");
    EXPECT_TRUE(loaded.ok()) << loaded.status().message();
  }
}
