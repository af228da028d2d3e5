//===- LaunchEnvTest.cpp - Ranks from launcher environments ---------------===//

#include "runtime/comm/LaunchEnv.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>

using namespace kiln::rt;
using ::testing::HasSubstr;

namespace {

StatusOr<LaunchEnv> readFrom(const std::map<std::string, std::string> &vars) {
  return readLaunchEnv([&](const char *name) -> const char * {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnvTest, NoLauncherIsOneProcess) {
  StatusOr<LaunchEnv> env = readFrom({});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->launcher, "none");
  EXPECT_EQ(env->size, 1);
  EXPECT_FALSE(env->distributed());
}

TEST(LaunchEnvTest, EachLauncher) {
  StatusOr<LaunchEnv> mpi = readFrom({{"OMPI_COMM_WORLD_SIZE", "4"},
                                      {"OMPI_COMM_WORLD_RANK", "3"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}});
  ASSERT_TRUE(mpi.ok());
  EXPECT_EQ(mpi->launcher, "mpirun");
  EXPECT_EQ(mpi->rank, 3);
  EXPECT_EQ(mpi->size, 4);
  EXPECT_EQ(mpi->localRank, 1);

  StatusOr<LaunchEnv> slurm = readFrom(
      {{"SLURM_NTASKS", "8"}, {"SLURM_PROCID", "5"}, {"SLURM_LOCALID", "1"}});
  ASSERT_TRUE(slurm.ok());
  EXPECT_EQ(slurm->launcher, "slurm");
  EXPECT_EQ(slurm->rank, 5);

  StatusOr<LaunchEnv> torch =
      readFrom({{"WORLD_SIZE", "2"}, {"RANK", "1"}, {"LOCAL_RANK", "1"},
                {"MASTER_ADDR", "node0"}, {"MASTER_PORT", "29500"}});
  ASSERT_TRUE(torch.ok());
  EXPECT_EQ(torch->launcher, "torchrun");
  EXPECT_EQ(torch->masterAddr, "node0");
  EXPECT_EQ(torch->masterPort, 29500);
  EXPECT_EQ(torch->described, "WORLD_SIZE=2, RANK=1");
  EXPECT_TRUE(torch->rendezvous());
  EXPECT_TRUE(mpi->masterAddr.empty());
  EXPECT_FALSE(mpi->rendezvous());
}

// Where the ranks meet: torchrun's MASTER_ADDR:MASTER_PORT, the next port
// under torchrun's agent store (which holds MASTER_PORT itself), Slurm's
// when the job script sets them, none without them.
TEST(LaunchEnvTest, Rendezvous) {
  StatusOr<LaunchEnv> agent =
      readFrom({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "node0"},
                {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"}});
  ASSERT_TRUE(agent.ok());
  EXPECT_EQ(agent->masterPort, 29501);
  StatusOr<LaunchEnv> slurm = readFrom({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"},
                                        {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "29400"}});
  ASSERT_TRUE(slurm.ok());
  EXPECT_TRUE(slurm->rendezvous());
  EXPECT_EQ(slurm->masterAddr, "10.0.0.1");
  EXPECT_EQ(slurm->masterPort, 29400);
  StatusOr<LaunchEnv> bare = readFrom({{"SLURM_NTASKS", "2"}, {"SLURM_PROCID", "1"}});
  ASSERT_TRUE(bare.ok());
  EXPECT_FALSE(bare->rendezvous());
  EXPECT_THAT(readFrom({{"WORLD_SIZE", "2"}, {"RANK", "0"}, {"MASTER_ADDR", "h"},
                        {"MASTER_PORT", "70000"}})
                  .status()
                  .message(),
              HasSubstr("MASTER_PORT=70000 is not a TCP port"));
}

// mpirun inside a Slurm allocation sets both: mpirun's describe the process.
TEST(LaunchEnvTest, MpirunWinsOverSlurm) {
  StatusOr<LaunchEnv> env = readFrom({{"SLURM_NTASKS", "1"},
                                      {"SLURM_PROCID", "0"},
                                      {"OMPI_COMM_WORLD_SIZE", "2"},
                                      {"OMPI_COMM_WORLD_RANK", "1"}});
  ASSERT_TRUE(env.ok());
  EXPECT_EQ(env->launcher, "mpirun");
  EXPECT_EQ(env->size, 2);
}

TEST(LaunchEnvTest, MalformedIsAnError) {
  EXPECT_THAT(readFrom({{"WORLD_SIZE", "2"}}).status().message(),
              HasSubstr("WORLD_SIZE is set but RANK is not"));
  EXPECT_THAT(readFrom({{"WORLD_SIZE", "2"}, {"RANK", "2"}}).status().message(),
              HasSubstr("names rank 2 of 2 processes"));
  EXPECT_THAT(readFrom({{"WORLD_SIZE", "0"}, {"RANK", "0"}}).status().message(),
              HasSubstr("names rank 0 of 0 processes"));
  EXPECT_THAT(readFrom({{"PMI_SIZE", "2"}, {"PMI_RANK", "-1"}}).status().message(),
              HasSubstr("PMI_RANK=-1 is not a non-negative integer"));
}

} // namespace
