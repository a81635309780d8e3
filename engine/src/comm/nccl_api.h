// Private: the resolved functions of baton_cuda.so's NCCL interface
// (engine/cuda/nccl_abi.h, the one header both sides share).
#pragma once

#include <baton/comm/nccl.h>

#include "nccl_abi.h"

namespace baton {

struct NcclLibrary::Api {
  // decltype of the declarations in nccl_abi.h: a signature that drifts
  // from the library's fails to compile here.
  decltype(&baton_nccl_abi_version) abi_version = nullptr;
  decltype(&baton_nccl_last_error) last_error = nullptr;
  decltype(&baton_nccl_load) load = nullptr;
  decltype(&baton_nccl_version) version = nullptr;
  decltype(&baton_nccl_device_count) device_count = nullptr;
  decltype(&baton_nccl_get_unique_id) get_unique_id = nullptr;
  decltype(&baton_nccl_init_rank) init_rank = nullptr;
  decltype(&baton_nccl_init_all) init_all = nullptr;
  decltype(&baton_nccl_destroy) destroy = nullptr;
  decltype(&baton_nccl_abort) abort = nullptr;
  decltype(&baton_nccl_comm_info) comm_info = nullptr;
  decltype(&baton_nccl_allreduce) allreduce = nullptr;
  decltype(&baton_nccl_reduce_scatter) reduce_scatter = nullptr;
  decltype(&baton_nccl_allgather) allgather = nullptr;
  decltype(&baton_nccl_broadcast) broadcast = nullptr;
  decltype(&baton_nccl_send) send = nullptr;
  decltype(&baton_nccl_recv) recv = nullptr;
  decltype(&baton_nccl_sendrecv) sendrecv = nullptr;
  decltype(&baton_nccl_reduce_into) reduce_into = nullptr;
  decltype(&baton_nccl_scale) scale = nullptr;
  decltype(&baton_nccl_synchronize) synchronize = nullptr;
  decltype(&baton_nccl_mem_alloc) mem_alloc = nullptr;
  decltype(&baton_nccl_mem_free) mem_free = nullptr;
  decltype(&baton_nccl_memcpy) memcpy = nullptr;
};

}  // namespace baton
