# Finds every dependency and prints one ✓/✗ line per part, with what to install for each ✗.
# Only Gloo is required: it is the backend every chapter runs on. The rest switch parts on.

function(dist_report ok part detail fix)
  if(ok)
    message(STATUS "dist: ✓ ${part} — ${detail}")
  else()
    message(STATUS "dist: ✗ ${part} — ${detail}; to enable: ${fix}")
  endif()
endfunction()

find_package(Threads REQUIRED)

find_package(Gloo CONFIG QUIET)
if(NOT Gloo_FOUND)
  message(FATAL_ERROR
    "dist: ✗ Gloo (the CPU backend) was not found, and every chapter needs it.\n"
    "Install it with: sudo apt-get install libgloo-dev   (or run ./tutorial doctor)")
endif()
dist_report(TRUE "Gloo ${GLOO_VERSION}" "CPU backend (TCP)" "")

find_package(GTest CONFIG QUIET)
if(NOT GTest_FOUND)
  find_package(GTest QUIET)
endif()
if(GTest_FOUND)
  set(DIST_HAVE_GTEST ON CACHE INTERNAL "")
  dist_report(TRUE "GoogleTest" "unit, multiprocess and launcher tests" "")
else()
  set(DIST_HAVE_GTEST OFF CACHE INTERNAL "")
  dist_report(FALSE "GoogleTest" "tests are not built" "sudo apt-get install libgtest-dev")
endif()

# The PyTorch reference runs under Debian's interpreter, never a virtualenv's: python3-torch
# installs into /usr/lib/python3/dist-packages.
set(DIST_PYTHON "/usr/bin/python3" CACHE FILEPATH "Python interpreter with Debian's python3-torch")
execute_process(
  COMMAND ${DIST_PYTHON} -c "import torch; print(torch.__version__)"
  OUTPUT_VARIABLE _dist_torch_version OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _dist_torch_rc ERROR_QUIET)
if(_dist_torch_rc EQUAL 0)
  set(DIST_HAVE_TORCH ON CACHE INTERNAL "")
  dist_report(TRUE "PyTorch ${_dist_torch_version}" "reference for parity tests" "")
else()
  set(DIST_HAVE_TORCH OFF CACHE INTERNAL "")
  dist_report(FALSE "PyTorch" "parity tests are skipped" "sudo apt-get install python3-torch")
endif()

# torchvision: post A's ResNet50 script, made right (chapters/09_ddp_classifier/fixed.py), runs
# on its FakeData in a test.
execute_process(
  COMMAND ${DIST_PYTHON} -c "import torchvision; print(torchvision.__version__)"
  OUTPUT_VARIABLE _dist_torchvision_version OUTPUT_STRIP_TRAILING_WHITESPACE
  RESULT_VARIABLE _dist_torchvision_rc ERROR_QUIET)
if(DIST_HAVE_TORCH AND _dist_torchvision_rc EQUAL 0)
  set(DIST_HAVE_TORCHVISION ON CACHE INTERNAL "")
  dist_report(TRUE "torchvision ${_dist_torchvision_version}" "post A's script, fixed, runs" "")
else()
  set(DIST_HAVE_TORCHVISION OFF CACHE INTERNAL "")
  dist_report(FALSE "torchvision" "post A's fixed script is not run"
              "sudo apt-get install python3-torchvision")
endif()

# Chapter 09 reads Fashion-MNIST from Debian's dataset-fashion-mnist, gzip-compressed (zlib).
find_package(ZLIB QUIET)
set(DIST_FASHION_MNIST /usr/share/datasets/fashion-mnist)
if(ZLIB_FOUND AND EXISTS ${DIST_FASHION_MNIST}/train-images-idx3-ubyte.gz
   AND EXISTS ${DIST_FASHION_MNIST}/t10k-labels-idx1-ubyte.gz)
  set(DIST_HAVE_FASHION_MNIST ON CACHE INTERNAL "")
  dist_report(TRUE "Fashion-MNIST and zlib" "chapter 09's data set" "")
else()
  set(DIST_HAVE_FASHION_MNIST OFF CACHE INTERNAL "")
  dist_report(FALSE "Fashion-MNIST and zlib" "chapter 09 is not built"
              "sudo apt-get install dataset-fashion-mnist zlib1g-dev")
endif()

find_program(DIST_CLANG_FORMAT clang-format)
if(DIST_CLANG_FORMAT)
  dist_report(TRUE "clang-format" "style check (ctest -L unit)" "")
else()
  dist_report(FALSE "clang-format" "style check is skipped" "sudo apt-get install clang-format")
endif()

if(DIST_WITH_CUDA)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR
      "dist: ✗ the cuda preset needs the CUDA toolkit (nvcc), which was not found.\n"
      "Install the CUDA toolkit into /usr/local/cuda, or use the cpu preset.")
  endif()
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
    # Hopper as real code, plus PTX for it so newer GPUs can JIT-compile the kernels.
    set(CMAKE_CUDA_ARCHITECTURES "90-real;90-virtual")
  endif()
  # CMake 3.25 does not know nvcc's C++20 flag; the kernels need no more than C++17.
  set(CMAKE_CUDA_STANDARD 17)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  dist_report(TRUE "CUDA ${CUDAToolkit_VERSION}" "GPU kernels (${CMAKE_CUDA_ARCHITECTURES})" "")
  find_path(DIST_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(DIST_NCCL_LIBRARY nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(DIST_NCCL_INCLUDE_DIR AND DIST_NCCL_LIBRARY)
    dist_report(TRUE "NCCL" "GPU backend (${DIST_NCCL_LIBRARY})" "")
  else()
    message(FATAL_ERROR
      "dist: ✗ NCCL (the GPU backend) was not found next to the CUDA toolkit, and the cuda "
      "preset needs it.\nInstall NCCL into /usr/local/cuda (nccl.h and libnccl.so), or use the cpu preset.")
  endif()
else()
  if(EXISTS /usr/local/cuda/bin/nvcc)
    dist_report(FALSE "CUDA" "found /usr/local/cuda, but this preset is CPU-only" "use the cuda preset")
  else()
    dist_report(FALSE "CUDA" "GPU path not built" "install the CUDA toolkit, then use the cuda preset")
  endif()
endif()
