//===- KilnAttrs.td - Attributes of the kiln dialect ------*- tablegen -*-===//
//
// `#kiln.init<...>`: how kiln-run initialises a parameter. The frontend puts
// it on `kiln.role = "param"` function arguments.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_ATTRS_TD
#define KILN_ATTRS_TD

include "ir/KilnDialect.td"
include "mlir/IR/AttrTypeBase.td"

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

#endif // KILN_ATTRS_TD
