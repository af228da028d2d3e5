# lit configuration for Kiln: FileCheck tests of the frontend, the dialect, the
# passes, codegen and end-to-end runs (kilnc -> artifact -> kiln-run).
import glob
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".kiln", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "test")

# Generated kernels are compiled once per content hash; share one cache across
# the whole run so repeated compiles of the same model are cache hits.
config.environment["KILN_CACHE_DIR"] = os.path.join(config.kiln_obj_root, "kernel-cache")
for var in ["HOME", "CXX", "OMP_NUM_THREADS"]:
    if var in os.environ:
        config.environment[var] = os.environ[var]

llvm_config.with_system_environment(["PATH"])
llvm_config.with_environment("PATH", config.kiln_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

config.substitutions.append(("%kilnc", os.path.join(config.kiln_tools_dir, "kilnc")))
config.substitutions.append(("%kiln-run", os.path.join(config.kiln_tools_dir, "kiln-run")))
# Multi-process runs: Open MPI's mpirun, allowed to run as root (CI runs as
# root) and to put more ranks than cores on the machine (4 ranks on CI's 2).
config.substitutions.append(("%mpirun", "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                             "OMPI_MCA_rmaps_base_oversubscribe=1 OMP_NUM_THREADS=1 mpirun"))
config.substitutions.append(("%models", os.path.join(config.kiln_src_root, "models")))
# An NVTX tool that logs kiln-run's ranges (test/unit/nvtx_recorder.cpp).
config.substitutions.append(("%nvtx-recorder",
                             os.path.join(config.kiln_obj_root, "lib", "libkiln_nvtx_recorder.so")))
config.substitutions.append(("%src", config.kiln_src_root))
# Debian's python3-torch lives under the system interpreter, not a pyenv one.
config.substitutions.append(("%torch-python", "/usr/bin/python3"))
# The venv tools/setup.sh makes: Hugging Face safetensors and TensorBoard's
# reader (plus Debian's torch, through --system-site-packages).
config.substitutions.append(("%reader-python", os.path.join(config.kiln_obj_root, "pyenv", "bin", "python")))

# Tests that compile CUDA kernels (kiln-run --compile-only) need NVRTC where
# kiln-run looks for it ($KILN_CUDA_LIB_DIR or the toolkit's lib64).
nvrtc_dirs = [os.environ.get("KILN_CUDA_LIB_DIR", ""), "/usr/local/cuda/lib64"]
if any(d and glob.glob(os.path.join(d, "libnvrtc.so*")) for d in nvrtc_dirs):
    config.available_features.add("nvrtc")
    if "KILN_CUDA_LIB_DIR" in os.environ:
        config.environment["KILN_CUDA_LIB_DIR"] = os.environ["KILN_CUDA_LIB_DIR"]

# nvcc, for the test that a dumped CUDA kernel compiles on its own.
nvcc = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")
if os.access(nvcc, os.X_OK):
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", nvcc))

# The device simulator (test/sim): `%sim-run` is kiln-run with the simulator's
# libcuda, NVRTC and cuBLASLt in front of any real ones and a kernel cache of
# its own (its "CUBINs" are host libraries, never to be mixed with real ones).
if config.kiln_sim_lib_dir and os.path.isdir(config.kiln_sim_lib_dir):
    config.available_features.add("cuda-sim")
    # The simulator's environment alone, for scripts that run kiln-run themselves.
    sim_env = "env KILN_CUDA_LIB_DIR={} KILN_CACHE_DIR={}".format(
        config.kiln_sim_lib_dir, os.path.join(config.kiln_obj_root, "sim-kernel-cache"))
    sim_run = sim_env + " " + os.path.join(config.kiln_tools_dir, "kiln-run")
    config.substitutions.append(("%sim-env", sim_env))
    config.substitutions.append(("%sim-run", sim_run))
    # test/e2e/cuda_sim/Inputs/parity.sh with its tools: %sim-parity DIR MODEL ...
    sim_inputs = os.path.join(config.kiln_src_root, "test", "e2e", "cuda_sim", "Inputs")
    config.substitutions.append(("%sim-parity", "env KILNC={} KILN_RUN={} 'SIM_RUN={}' PYTHON={} COMPARE={} sh {}".format(
        os.path.join(config.kiln_tools_dir, "kilnc"), os.path.join(config.kiln_tools_dir, "kiln-run"),
        sim_run, "/usr/bin/python3", os.path.join(config.kiln_src_root, "tools", "gpu", "compare_metrics.py"),
        os.path.join(sim_inputs, "parity.sh"))))

llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(["kiln-opt", "kilnc", "kiln-run"], [config.kiln_tools_dir])
