# tpla_cuda.cmake - find the CUDA toolkit, cuBLASLt and NCCL, and set the
# flags of the CUDA executor: sm_90a machine code plus compute_90 PTX.
if(NOT TPLA_CUDA)
  return()
endif()

enable_language(CUDA)
find_package(CUDAToolkit REQUIRED)

# NCCL lives in /usr/{include,lib} on the GPU machines and beside the toolkit
# on the build machines; TPLA_NCCL_ROOT points elsewhere.
find_path(TPLA_NCCL_INCLUDE_DIR nccl.h
  HINTS ${TPLA_NCCL_ROOT}/include $ENV{NCCL_HOME}/include ${CUDAToolkit_INCLUDE_DIRS}
  PATHS /usr/include /usr/local/include)
find_library(TPLA_NCCL_LIBRARY nccl
  HINTS ${TPLA_NCCL_ROOT}/lib $ENV{NCCL_HOME}/lib ${CUDAToolkit_LIBRARY_DIR}
        ${CUDAToolkit_LIBRARY_ROOT}/lib
  PATHS /usr/lib/x86_64-linux-gnu /usr/local/lib /usr/local/cuda/lib)
if(NOT TPLA_NCCL_INCLUDE_DIR OR NOT TPLA_NCCL_LIBRARY)
  message(FATAL_ERROR "TPLA_CUDA=ON needs NCCL (nccl.h and libnccl); set TPLA_NCCL_ROOT "
                      "or configure with -DTPLA_CUDA=OFF")
endif()
message(STATUS "tpla: NCCL ${TPLA_NCCL_LIBRARY}")

set(CMAKE_CUDA_ARCHITECTURES OFF)
set(TPLA_CUDA_FLAGS -gencode=arch=compute_90a,code=sm_90a -gencode=arch=compute_90,code=compute_90)
set(TPLA_CUDA_LINK_LIBS CUDA::cudart CUDA::cublasLt ${TPLA_NCCL_LIBRARY})

function(tpla_cuda_setup target)
  # NCCL's first: the toolkit's include directory may hold another nccl.h (TPLA_NCCL_ROOT)
  target_include_directories(${target} PRIVATE ${TPLA_NCCL_INCLUDE_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  target_compile_definitions(${target} PRIVATE TPLA_HAVE_CUDA=1)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${TPLA_CUDA_FLAGS}>)
endfunction()
