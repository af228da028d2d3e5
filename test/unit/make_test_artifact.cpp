//===- make_test_artifact.cpp - Write the unit tests' bigram .kart --------===//
//
// Until codegen produces artifacts, this lets people run kiln-run by hand:
//   make-test-artifact bigram.kart [batch seq vocab]
//   kiln-run bigram.kart --data input.txt --steps 100 --lr 0.05
//
//===----------------------------------------------------------------------===//

#include "TestArtifact.h"

#include <cstdio>
#include <cstdlib>

int main(int argc, char **argv) {
  if (argc != 2 && argc != 5) {
    std::fprintf(stderr, "usage: make-test-artifact OUT.kart [batch seq vocab]\n");
    return 2;
  }
  int64_t batch = argc == 5 ? std::atoll(argv[2]) : 4;
  int64_t seq = argc == 5 ? std::atoll(argv[3]) : 64;
  int64_t vocab = argc == 5 ? std::atoll(argv[4]) : 256;
  kiln::rt::test::writeFile(
      argv[1], kiln::rt::test::serializeArtifact(
                   kiln::rt::test::bigramArtifact(batch, seq, vocab)));
  return 0;
}
