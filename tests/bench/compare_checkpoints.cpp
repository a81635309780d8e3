// For the soak benchmark: whether two runs ended with the same parameters.
//   compare_checkpoints CHECKPOINT_DIR_A CHECKPOINT_DIR_B
// Loads each folder's newest valid checkpoint and compares its tensors
// (parameters, buffers, optimizer state) bit for bit. Prints the step and
// "identical (N tensors)" or the first difference; exit 0 identical, 1 not,
// 2 when a folder is missing or has no checkpoint.
#include <baton/core/error.h>
#include <baton/train/checkpoint.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <optional>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: compare_checkpoints CHECKPOINT_DIR_A CHECKPOINT_DIR_B\n");
    return 2;
  }
  try {
    std::optional<baton::CheckpointData> d[2];
    for (int i = 0; i < 2; ++i) {
      // Read only: a CheckpointManager makes its folder when it is absent.
      std::error_code ec;
      if (!std::filesystem::is_directory(argv[1 + i], ec)) {
        std::fprintf(stderr, "%s: not a folder\n", argv[1 + i]);
        return 2;
      }
      d[i] = baton::CheckpointManager(argv[1 + i], 1).load_latest();
      if (!d[i]) {
        std::fprintf(stderr, "%s: no valid checkpoint\n", argv[1 + i]);
        return 2;
      }
    }
    const auto& a = d[0]->tensors;
    const auto& b = d[1]->tensors;
    std::printf("steps %lld and %lld: ", static_cast<long long>(d[0]->step),
                static_cast<long long>(d[1]->step));
    if (d[0]->step != d[1]->step || a.size() != b.size()) {
      std::printf("different (%zu and %zu tensors)\n", a.size(), b.size());
      return 1;
    }
    for (size_t i = 0; i < a.size(); ++i) {
      const bool same = a[i].first == b[i].first && a[i].second.shape() == b[i].second.shape() &&
                        std::memcmp(a[i].second.data(), b[i].second.data(),
                                    sizeof(float) * static_cast<size_t>(a[i].second.numel())) == 0;
      if (!same) {
        std::printf("tensor %s differs\n", a[i].first.c_str());
        return 1;
      }
    }
    std::printf("identical (%zu tensors)\n", a.size());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "compare_checkpoints: %s\n", e.what());
    return 2;
  }
}
