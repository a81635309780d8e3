// A small, fast, fully reproducible random generator (xoshiro256**, seeded
// by splitmix64). Its whole state is four words, so it goes into
// checkpoints, and its streams are the same on every platform — which
// std::normal_distribution does not promise.
#pragma once

#include <array>
#include <cstdint>

namespace baton {

class Rng {
 public:
  using State = std::array<uint64_t, 4>;

  explicit Rng(uint64_t seed = 0) { reseed(seed); }
  void reseed(uint64_t seed);

  uint64_t next_u64();
  // Uniform in [0, 1).
  float uniform() { return static_cast<float>(next_u64() >> 40) * 0x1.0p-24f; }
  // Uniform integer in [0, n). n must be > 0.
  uint64_t below(uint64_t n);
  // Standard normal (Box-Muller, both values used).
  float normal();

  State state() const { return s_; }
  void set_state(const State& s) {
    s_ = s;
    has_spare_ = false;
  }

  // A seed derived from a base seed and stream ids, for independent streams
  // (per epoch, per replica, per layer).
  static uint64_t derive(uint64_t seed, uint64_t a, uint64_t b = 0);

 private:
  State s_{};
  bool has_spare_ = false;
  float spare_ = 0.0f;
};

}  // namespace baton
