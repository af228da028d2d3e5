"""Summarizes a device simulator trace (KILN_SIM_TRACE=1) of training steps.

Prints how many graphs were launched, how many operations (copies, memsets,
kernels; event records, in a graph or not, are markers and not counted) ran
on their own between the first and the last launch, and the shape of each launch's nodes:
memsets (M), host-to-device copies (C) and everything else (K: kernels,
GEMMs), consecutive ones of a kind counted once. A training step with
grad_accum = G captured whole reads M C K (C K) x G: the accumulators
zeroed, each micro-batch's inputs then its "step", the update's scalars then
"update".
"""
import re
import sys

line_re = re.compile(r"kiln device simulator: ran (graph node )?(.*) in [0-9.]+ ms$")
launches, outside, shapes = 0, 0, []
nodes, pending_outside = [], 0
for line in open(sys.argv[1]):
    m = line_re.match(line.strip())
    if not m:
        continue
    in_graph, what = m.group(1) is not None, m.group(2)
    if what == "graph launch":
        launches += 1
        if launches > 1:
            outside += pending_outside
        pending_outside = 0
        shape = ""
        for node in nodes:
            kind = "M" if node.startswith("cuMemset") else "C" if node.startswith("cuMemcpy") else "K"
            if not shape or shape[-1] != kind:
                shape += kind
        shapes.append(shape)
        nodes = []
    elif what.startswith("cuEventRecord"):
        # Event records (device_ms's nodes, first and last in each graph) mark
        # the timeline; they are no work of their own.
        continue
    elif in_graph:
        nodes.append(what)
    else:
        pending_outside += 1

print(f"graph launches: {launches}")
print(f"operations outside a graph: {outside}")
if shapes and all(s == shapes[0] for s in shapes):
    steps = shapes[0].count("CK") - 1
    expected = "M" + "CK" * (steps + 1)
    if shapes[0] == expected:
        print(f"each launch: {steps} x step, update")
    else:
        print(f"each launch: unexpected shape {shapes[0]}")
else:
    print(f"launch shapes differ: {shapes}")
