# The CUDA backend's sources, compiled twice: by nvcc into baton_cuda.so and
# by the host compiler against the SIMT emulator into baton_cuda_emu.so.
# Paths relative to engine/cuda. A file that does not exist yet is left out.
set(_baton_gpu_backend_candidates
  gpu_backend.cu
  gpu_backend_staging.cu
  gpu_backend_elementwise.cu
  gpu_backend_optim.cu
  gpu_backend_norm.cu
  gpu_backend_loss.cu
  gpu_backend_tokens.cu
  gpu_backend_images.cu
  gpu_backend_matmul.cu
  gpu_backend_attention.cu
  gpu_backend_conv.cu
  gpu_backend_cudnn.cu
  cudnn_loader.cu)
set(BATON_GPU_BACKEND_SOURCES "")
foreach(_f IN LISTS _baton_gpu_backend_candidates)
  if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/${_f})
    list(APPEND BATON_GPU_BACKEND_SOURCES ${CMAKE_CURRENT_LIST_DIR}/${_f})
  endif()
endforeach()
