#include "gradient_buckets.h"

#include <algorithm>
#include <cstring>

namespace baton {

int64_t GradientBuckets::plan(const std::vector<Param*>& params) {
  buckets_.clear();
  const int64_t cap = std::max<int64_t>(1, bucket_bytes_ / static_cast<int64_t>(sizeof(float)));
  Bucket b{params.size(), params.size(), 0};
  for (size_t i = params.size(); i-- > 0;) {
    const int64_t n = params[i]->grad.numel();
    if (b.count > 0 && b.count + n > cap) {
      buckets_.push_back(b);
      b = Bucket{i + 1, i + 1, 0};
    }
    b.first = i;
    b.count += n;
  }
  if (b.count > 0) buckets_.push_back(b);
  int64_t largest = 0;
  for (const auto& bk : buckets_) largest = std::max(largest, bk.count);
  return largest;
}

void GradientBuckets::allreduce(const std::vector<Param*>& params, Communicator& comm,
                                float* flat) const {
  for (const Bucket& b : buckets_) {
    int64_t off = 0;
    for (size_t i = b.first; i < b.last; ++i) {
      const Tensor& g = params[i]->grad;
      std::memcpy(flat + off, g.data(), sizeof(float) * g.numel());
      off += g.numel();
    }
    comm.allreduce(flat, b.count, ReduceOp::kSum);
    off = 0;
    for (size_t i = b.first; i < b.last; ++i) {
      Tensor& g = params[i]->grad;
      std::memcpy(g.data(), flat + off, sizeof(float) * g.numel());
      off += g.numel();
    }
  }
}

}  // namespace baton
