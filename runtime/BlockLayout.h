//===- BlockLayout.h - A tensor-parallel block of a whole tensor ----------===//
//
// With tensor parallelism a parameter (and its gradient and optimizer
// state) is split along one dimension over the ranks of a mesh axis: rank
// r holds block r of that dimension, every other dimension whole
// (Buffer.shard_dim). A block is not contiguous in the whole tensor
// unless the dimension is the first; these copies move between the whole
// tensor (what initialisers and checkpoints see) and the blocks.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_RUNTIME_BLOCKLAYOUT_H
#define KILN_RUNTIME_BLOCKLAYOUT_H

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kiln::rt {

// out = block `rank` of `ranks` along dimension `dim` of `whole` (shape
// `shape`, row-major); shape[dim] is a multiple of `ranks`.
void copyBlock(const float *whole, const std::vector<int64_t> &shape, int dim,
               size_t ranks, size_t rank, float *out);

// whole = the tensor whose blocks along `dim` are `blocks` (every rank's
// block, rank 0's first, each contiguous, as an all-gather delivers them).
void placeBlocks(const float *blocks, const std::vector<int64_t> &shape,
                 int dim, size_t ranks, float *whole);

} // namespace kiln::rt

#endif // KILN_RUNTIME_BLOCKLAYOUT_H
