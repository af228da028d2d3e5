//===- KilnAttrs.td - Attributes of the kiln dialect ------*- tablegen -*-===//
//
// `#kiln.init<...>`: how kiln-run initialises a parameter. The frontend puts
// it on `kiln.role = #kiln.role<param>` function arguments.
// FusionKind: how codegen lays out the kernel of a kiln.fusion.
// `#kiln.role<...>`: what an argument or result of a step function is.
// Reduction: what a collective computes over a mesh axis's ranks.
// `#kiln.train<...>`: the model file's train section (the module attribute
// kiln.train), with its enums Precision, OptimizerKind and RematMode.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ATTRS_TD
#define KILN_ATTRS_TD

include "ir/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

class Kiln_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Kiln_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Kiln_InitializerAttr : Kiln_Attr<"Initializer", "init"> {
  let summary = "Parameter initializer (kind and standard deviation).";
  let description = [{
    `kind` is one of "normal", "zeros", "ones"; `std` is the standard
    deviation of a "normal" initializer (0 otherwise, and then not printed).

    ```mlir
    #kiln.init<normal, std = 0.02>
    #kiln.init<zeros>
    ```
  }];
  let parameters = (ins StringRefParameter<"initializer kind">:$kind,
                        AttrParameter<"double", "standard deviation">:$std);
  // llvm::hash_value has no double overload, so the storage (which hashes
  // the bit pattern of `std`) is written by hand in KilnDialect.cpp.
  let genStorageClass = 0;
  // Custom form so the kind is a bare keyword and `std` is optional:
  // `#kiln.init<normal, std = 0.02>`, `#kiln.init<zeros>`.
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

def Kiln_FusionKind : I32EnumAttr<"FusionKind",
    "how codegen lays out the kernel of a kiln.fusion", [
      I32EnumAttrCase<"Pointwise", 0, "pointwise">,
      I32EnumAttrCase<"Row", 1, "row">,
      I32EnumAttrCase<"Optimizer", 2, "optimizer">,
      I32EnumAttrCase<"Sum", 3, "sum">,
      I32EnumAttrCase<"Gemm", 4, "gemm">]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_FusionKindAttr : EnumAttr<Kiln_Dialect, Kiln_FusionKind,
                                   "fusion_kind"> {
  let summary = "How codegen lays out the kernel of a kiln.fusion.";
  let description = [{
    One of `pointwise`, `row`, `optimizer`, `sum`, `gemm` (kiln.fusion's
    description says what each means). In kiln.fusion's own syntax it is a
    bare keyword: `kiln.fusion row (%x) ...`; elsewhere
    `#kiln<fusion_kind row>`.
  }];
  // No space before the keyword (the op's printer has written one).
  let assemblyFormat = "`` $value";
}

def Kiln_Role : I32EnumAttr<"Role",
    "kiln.role of a step function's argument or result", [
      I32EnumAttrCase<"Param", 0, "param">,
      I32EnumAttrCase<"Input", 1, "input">,
      I32EnumAttrCase<"Loss", 2, "loss">,
      I32EnumAttrCase<"Grad", 3, "grad">,
      I32EnumAttrCase<"GradNorm", 4, "grad_norm">,
      I32EnumAttrCase<"AdamM", 5, "adam_m">,
      I32EnumAttrCase<"AdamV", 6, "adam_v">,
      I32EnumAttrCase<"Momentum", 7, "momentum">,
      I32EnumAttrCase<"LearningRate", 8, "lr">,
      I32EnumAttrCase<"Step", 9, "step">,
      I32EnumAttrCase<"Metric", 10, "metric">,
      I32EnumAttrCase<"UpdateNorm", 11, "update_norm">,
      I32EnumAttrCase<"ParamNorm", 12, "param_norm">,
      I32EnumAttrCase<"EvalLoss", 13, "eval_loss">,
      I32EnumAttrCase<"DropoutRng", 14, "dropout_rng">]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_RoleAttr : EnumAttr<Kiln_Dialect, Kiln_Role, "role"> {
  let summary = "What an argument or result of a step function is.";
  let description = [{
    The `kiln.role` of an argument or result of `@step`, `@update` or
    `@eval` (ir/StepFunction.h): `param`, `input`, `loss`, `grad`,
    `grad_norm`, `adam_m`, `adam_v`, `momentum`, `lr`, `step`, `metric`,
    `update_norm`, `param_norm`, `eval_loss` or `dropout_rng`. Programs
    share a buffer through its role and `kiln.name`.

    ```mlir
    func.func @step(%w: tensor<4x8xf32> {kiln.role = #kiln.role<param>,
                                         kiln.name = "w"})
        -> (tensor<f32> {kiln.role = #kiln.role<loss>})
    ```
  }];
  let assemblyFormat = "`<` $value `>`";
}

def Kiln_Reduction : I32EnumAttr<"Reduction",
    "reduction across ranks (sum or mean)", [
      I32EnumAttrCase<"Sum", 0, "sum">,
      I32EnumAttrCase<"Mean", 1, "mean">]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_ReductionAttr : EnumAttr<Kiln_Dialect, Kiln_Reduction,
                                  "reduction"> {
  let summary = "What a collective computes over a mesh axis's ranks.";
  let description = [{
    `sum` or `mean`. In the collectives' own syntax a bare keyword:
    `kiln.all_reduce mean %g over "data"`; elsewhere
    `#kiln<reduction mean>`.
  }];
  // No space before the keyword (the op's printer has written one).
  let assemblyFormat = "`` $value";
}

def Kiln_Precision : I32EnumAttr<"Precision",
    "kiln.train precision (fp32, tf32 or bf16)", [
      I32EnumAttrCase<"Fp32", 0, "fp32">,
      I32EnumAttrCase<"Tf32", 1, "tf32">,
      I32EnumAttrCase<"Bf16", 2, "bf16">]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_OptimizerKind : I32EnumAttr<"OptimizerKind",
    "kiln.train optimizer (adamw, adam or sgd)", [
      I32EnumAttrCase<"AdamW", 0, "adamw">,
      I32EnumAttrCase<"Adam", 1, "adam">,
      I32EnumAttrCase<"Sgd", 2, "sgd">]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_RematMode : I32EnumAttr<"RematMode",
    "kiln.train remat (auto, none, pointwise, selective or full)", [
      I32EnumAttrCase<"Auto", 0, "auto">,
      I32EnumAttrCase<"None", 1, "none">,
      I32EnumAttrCase<"Selective", 2, "selective">,
      I32EnumAttrCase<"Full", 3, "full">,
      I32EnumAttrCase<"Pointwise", 4, "pointwise">]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_TrainConfigAttr : Kiln_Attr<"TrainConfig", "train"> {
  let summary = "The train section: what changes the step's kernels.";
  let description = [{
    The module attribute `kiln.train`, written by the frontend from the
    model file's `train { ... }` (after `-D` overrides) and read by the
    passes and codegen through its typed accessors. Parameters:

    - `batch`, `seq`: the micro-batch's shape (required, positive);
    - `grad_accum`: micro-batches per step (default 1);
    - `clip`: the global gradient-norm threshold (absent or 0: none);
    - `precision`: `fp32` (default), `tf32` or `bf16`;
    - `memory_budget`: the peak bytes the step may use (0: none);
    - `zero`: the ZeRO stage over the data axis, 0 to 3 (default 0);
    - `remat`: `auto` (default), `none`, `pointwise`, `selective` or `full`;
    - `optimizer`: `adamw` (default), `adam` or `sgd`; adamw and adam take
      `beta1`, `beta2` and `epsilon`; sgd takes `momentum`, `dampening`
      (absent: 0) and `nesterov` (absent: false); none takes another's
      settings; `weight_decay` applies to all. --kiln-optimizer needs the
      chosen optimizer's settings and the weight decay;
    - `decay_norms`, `decay_biases`, `decay_embeddings`: whether those
      parameters are decayed (absent: false).

    Floats are f32 attributes, kept bit for bit. A parameter left at its
    default is not printed.

    ```mlir
    module attributes {kiln.train = #kiln.train<batch = 8, seq = 128,
        clip = 1.000000e+00 : f32, precision = bf16, optimizer = adamw,
        beta1 = 0.899999976 : f32, beta2 = 0.949999988 : f32,
        epsilon = 9.99999993E-9 : f32, weight_decay = 1.000000e-01 : f32,
        decay_norms = false, decay_biases = false,
        decay_embeddings = false>} {
    }
    ```
  }];
  let parameters = (ins
    "int64_t":$batch,
    "int64_t":$seq,
    DefaultValuedParameter<"int64_t", "1">:$grad_accum,
    OptionalParameter<"::mlir::FloatAttr">:$clip,
    DefaultValuedParameter<"::mlir::kiln::Precision",
                           "::mlir::kiln::Precision::Fp32">:$precision,
    DefaultValuedParameter<"int64_t", "0">:$memory_budget,
    DefaultValuedParameter<"int64_t", "0">:$zero,
    DefaultValuedParameter<"::mlir::kiln::RematMode",
                           "::mlir::kiln::RematMode::Auto">:$remat,
    DefaultValuedParameter<"::mlir::kiln::OptimizerKind",
                           "::mlir::kiln::OptimizerKind::AdamW">:$optimizer,
    OptionalParameter<"::mlir::FloatAttr">:$beta1,
    OptionalParameter<"::mlir::FloatAttr">:$beta2,
    OptionalParameter<"::mlir::FloatAttr">:$epsilon,
    OptionalParameter<"::mlir::FloatAttr">:$momentum,
    OptionalParameter<"::mlir::FloatAttr">:$dampening,
    OptionalParameter<"::mlir::BoolAttr">:$nesterov,
    OptionalParameter<"::mlir::FloatAttr">:$weight_decay,
    OptionalParameter<"::mlir::BoolAttr">:$decay_norms,
    OptionalParameter<"::mlir::BoolAttr">:$decay_biases,
    OptionalParameter<"::mlir::BoolAttr">:$decay_embeddings);
  let assemblyFormat = "`<` struct(params) `>`";
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The clip threshold (0: none) and the decay flags, absent as 0/false.
    double getClipValue() const;
    bool decaysNorms() const;
    bool decaysBiases() const;
    bool decaysEmbeddings() const;
    /// Every setting as one JSON object, keys sorted (TrainConfig.settings).
    std::string toJson() const;
  }];
}

def Kiln_AttentionLayout : I32EnumAttr<"AttentionLayout",
    "memory order of attention's per-head tensors", [
      I32EnumAttrCase<"Bhtd", 0, "bhtd">,
      I32EnumAttrCase<"Bthd", 1, "bthd">]> {
  let cppNamespace = "::mlir::kiln";
  let genSpecializedAttr = 0;
}

def Kiln_AttentionLayoutAttr : EnumAttr<Kiln_Dialect, Kiln_AttentionLayout,
                                        "attention_layout"> {
  let summary = "Memory order of kiln.attention's q, k, v, out and gradients.";
  let description = [{
    `bhtd` (the default): `[batch, heads, tokens, head_dim]`; `bthd`:
    `[batch, tokens, heads, head_dim]`, the order a `[B, T, H*D]` projection
    already has, so that attention reads the GEMM's output and writes what
    the next GEMM reads without a transpose (the
    `--kiln-attention-layout` pass chooses it). The op's semantics are the
    same; only the dims of the tensor types are ordered differently.

    ```mlir
    %o, %lse = kiln.attention %q, %k, %v
        {layout = #kiln<attention_layout bthd>, scale = 0.125 : f32}
        : (tensor<2x37x4x64xf32>, tensor<2x53x2x64xf32>,
           tensor<2x53x2x64xf32>)
        -> (tensor<2x37x4x64xf32>, tensor<2x4x37xf32>)
    ```
  }];
  let assemblyFormat = "$value";
}

#endif // KILN_ATTRS_TD
