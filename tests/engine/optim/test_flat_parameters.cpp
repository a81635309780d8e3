// Flat parameter buffers (flat_parameters.h): the layout, the views, and
// the optimizer and the gradients' norm over them against the same updates
// per parameter tensor; Tensor::slice's bounds.
#include <baton/core/error.h>
#include <baton/nn/layers.h>
#include <baton/optim/flat_parameters.h>
#include <baton/optim/optimizer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

using baton::FlatLayout;
using baton::Optimizer;
using baton::OptimizerKind;
using baton::OptimizerOptions;
using baton::Param;
using baton::Tensor;

namespace {

// Parameters of awkward sizes (none a multiple of 64, one empty), decayed
// and not interleaved as a model's weights and biases are; values and
// gradients from `seed`.
std::vector<std::unique_ptr<Param>> make_params(int seed) {
  const std::vector<std::vector<int64_t>> shapes = {{5, 3}, {5}, {0}, {7, 11}, {7}, {1}, {3, 1, 2}};
  std::vector<std::unique_ptr<Param>> params;
  for (size_t i = 0; i < shapes.size(); ++i) {
    auto p = std::make_unique<Param>();
    p->name = "p" + std::to_string(i);
    p->value = Tensor(shapes[i]);
    p->grad = Tensor(shapes[i]);
    p->weight_decay = shapes[i].size() > 1;
    for (int64_t k = 0; k < p->value.numel(); ++k) {
      p->value[k] = std::sin(static_cast<float>(seed + 3 * k + static_cast<int64_t>(i)));
    }
    params.push_back(std::move(p));
  }
  return params;
}

std::vector<Param*> pointers(const std::vector<std::unique_ptr<Param>>& params) {
  std::vector<Param*> out;
  for (const auto& p : params) out.push_back(p.get());
  return out;
}

// Step t's gradients: varied signs and sizes.
void set_grads(const std::vector<Param*>& params, int t) {
  for (size_t i = 0; i < params.size(); ++i) {
    for (int64_t k = 0; k < params[i]->grad.numel(); ++k) {
      params[i]->grad[k] = std::cos(static_cast<float>(7 * t + 5 * k + static_cast<int64_t>(i))) *
                           (k % 3 == 0 ? 4.0f : 0.25f);
    }
  }
}

// The elements of a flat buffer outside every piece.
std::vector<float> gaps(const float* base, const std::vector<Param*>& params,
                        const FlatLayout& layout) {
  std::vector<bool> covered(static_cast<size_t>(layout.total), false);
  for (size_t i = 0; i < params.size(); ++i) {
    for (int64_t k = 0; k < params[i]->value.numel(); ++k) {
      covered[static_cast<size_t>(layout.offset[i] + k)] = true;
    }
  }
  std::vector<float> out;
  for (int64_t e = 0; e < layout.total; ++e) {
    if (!covered[static_cast<size_t>(e)]) out.push_back(base[e]);
  }
  return out;
}

TEST(FlatLayout, DecayedPiecesFirstEachAlignedTo256Bytes) {
  auto owned = make_params(1);
  const std::vector<Param*> params = pointers(owned);
  const FlatLayout l = baton::flat_layout(params);
  ASSERT_EQ(l.offset.size(), params.size());
  // Decayed: p0 (15), p3 (77), p6 (6); then p1 (5), p2 (0), p4 (7), p5 (1).
  EXPECT_EQ(l.offset[0], 0);
  EXPECT_EQ(l.offset[3], 64);
  EXPECT_EQ(l.offset[6], 192);
  EXPECT_EQ(l.decayed, 256);
  EXPECT_EQ(l.offset[1], 256);
  EXPECT_EQ(l.offset[2], 320);
  EXPECT_EQ(l.offset[4], 320);
  EXPECT_EQ(l.offset[5], 384);
  EXPECT_EQ(l.total, 448);
}

TEST(FlatParameters, ValuesKeptGradientsZeroedAndViewsOfTwoBuffers) {
  auto owned = make_params(2);
  auto reference = make_params(2);
  const std::vector<Param*> params = pointers(owned);
  set_grads(params, 1);
  baton::FlatParameters flat = baton::flatten_parameters(params, nullptr);
  const FlatLayout& l = flat.layout;
  EXPECT_EQ(l.total, baton::flat_layout(params).total);
  ASSERT_TRUE(baton::is_flat(params, flat));
  const float* values = flat.values.data();
  const float* grads = flat.grads.data();
  EXPECT_EQ(flat.values.numel(), l.total);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_EQ(params[i]->value.shape(), reference[i]->value.shape()) << params[i]->name;
    EXPECT_EQ(params[i]->grad.shape(), reference[i]->value.shape()) << params[i]->name;
    if (params[i]->value.numel() == 0) continue;
    EXPECT_EQ(params[i]->value.data(), values + l.offset[i]) << params[i]->name;
    EXPECT_EQ(params[i]->grad.data(), grads + l.offset[i]) << params[i]->name;
    EXPECT_TRUE(params[i]->value.shares_allocation_with(params[0]->value));
    EXPECT_FALSE(params[i]->value.shares_allocation_with(params[0]->grad));
    for (int64_t k = 0; k < params[i]->value.numel(); ++k) {
      EXPECT_EQ(params[i]->value[k], reference[i]->value[k]) << params[i]->name << "[" << k << "]";
      EXPECT_EQ(params[i]->grad[k], 0.0f) << params[i]->name << "[" << k << "]";
    }
  }
  for (float g : gaps(values, params, l)) EXPECT_EQ(g, 0.0f);
  // A parameter given a buffer of its own breaks the layout.
  params[3]->value = Tensor(params[3]->value.shape());
  EXPECT_FALSE(baton::is_flat(params, flat));
  // Parameters that were never flattened are not flat whatever they look
  // like: one parameter alone, for instance.
  auto lone = make_params(5);
  baton::FlatParameters none;
  EXPECT_FALSE(baton::is_flat({lone[0].get()}, none));
}

struct Case {
  OptimizerKind kind;
  float momentum;
  float weight_decay;
  const char* name;
};

class FlatOptimizer : public ::testing::TestWithParam<Case> {};

// Five steps with clipping over flat buffers (two tensors a step) against
// the same steps per parameter tensor: the same values, and the gaps stay
// zero.
TEST_P(FlatOptimizer, MatchesPerTensorUpdatesAndKeepsTheGapsZero) {
  const Case c = GetParam();
  auto flat_owned = make_params(3);
  auto each_owned = make_params(3);
  const std::vector<Param*> flat = pointers(flat_owned);
  const std::vector<Param*> each = pointers(each_owned);
  baton::FlatParameters buffers = baton::flatten_parameters(flat, nullptr);
  OptimizerOptions o;
  o.kind = c.kind;
  o.momentum = c.momentum;
  o.weight_decay = c.weight_decay;
  o.lr = 0.05f;
  Optimizer flat_opt(o, flat, baton::cpu_backend(), &buffers);
  Optimizer each_opt(o, each);
  EXPECT_TRUE(flat_opt.updates_flat());
  EXPECT_FALSE(each_opt.updates_flat());
  baton::GradientSlots flat_clip, each_clip;
  for (int t = 1; t <= 5; ++t) {
    set_grads(flat, t);
    set_grads(each, t);
    const double n1 =
        baton::clip_global_norm(flat, 2.0f, baton::cpu_backend(), &flat_clip, &buffers);
    const double n2 = baton::clip_global_norm(each, 2.0f, baton::cpu_backend(), &each_clip);
    EXPECT_NEAR(n1, n2, 1e-6 * n2) << "step " << t;  // float sums within a tensor
    EXPECT_EQ(flat_clip.each.size(), 1u);
    EXPECT_EQ(each_clip.each.size(), each.size());
    flat_opt.step(0.05f);
    each_opt.step(0.05f);
  }
  EXPECT_EQ(flat_opt.last_step_tensors(), 2u);
  EXPECT_EQ(each_opt.last_step_tensors(), each.size());
  EXPECT_NE(flat_opt.describe_update().find("flat parameter buffers"), std::string::npos)
      << flat_opt.describe_update();
  EXPECT_NE(each_opt.describe_update().find("per parameter tensor"), std::string::npos)
      << each_opt.describe_update();
  for (size_t i = 0; i < flat.size(); ++i) {
    for (int64_t k = 0; k < flat[i]->value.numel(); ++k) {
      const float want = each[i]->value[k];
      EXPECT_NEAR(flat[i]->value[k], want, 1e-6f * (1.0f + std::fabs(want)))
          << flat[i]->name << "[" << k << "]";
    }
  }
  const FlatLayout& l = buffers.layout;
  for (float g : gaps(buffers.values.data(), flat, l)) ASSERT_EQ(g, 0.0f);
  for (float g : gaps(buffers.grads.data(), flat, l)) ASSERT_EQ(g, 0.0f);
  // The state is laid out as the parameters are; its gaps stay zero too.
  auto state = flat_opt.state();
  if (!state.empty()) {
    // m0 is the first parameter's piece, at the start of the buffer.
    ASSERT_EQ(l.offset[0], 0);
    for (float g : gaps(state[0].second->data(), flat, l)) ASSERT_EQ(g, 0.0f);
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, FlatOptimizer,
                         ::testing::Values(Case{OptimizerKind::kAdamW, 0.0f, 0.1f, "adamw"},
                                           Case{OptimizerKind::kAdam, 0.0f, 0.01f, "adam"},
                                           Case{OptimizerKind::kSgd, 0.9f, 0.05f, "sgd_momentum"},
                                           Case{OptimizerKind::kSgd, 0.0f, 0.0f, "sgd"}),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(FlatOptimizer, FallsBackPerTensorWhenAParameterLeavesTheBuffers) {
  auto owned = make_params(4);
  const std::vector<Param*> params = pointers(owned);
  baton::FlatParameters buffers = baton::flatten_parameters(params, nullptr);
  OptimizerOptions o;
  o.kind = OptimizerKind::kAdamW;
  o.weight_decay = 0.1f;
  Optimizer opt(o, params, baton::cpu_backend(), &buffers);
  set_grads(params, 1);
  opt.step(0.01f);
  EXPECT_EQ(opt.last_step_tensors(), 2u);
  // A parameter given a buffer of its own (its values copied) is still
  // updated: the step falls back to one tensor per parameter.
  Tensor own = params[3]->value;
  params[3]->value = std::move(own);
  const float before = params[3]->value[0];
  set_grads(params, 2);
  opt.step(0.01f);
  EXPECT_EQ(opt.last_step_tensors(), params.size());
  EXPECT_FALSE(opt.updates_flat());
  EXPECT_NE(params[3]->value[0], before);
}

TEST(TensorSlice, PiecesWithinTheCapacityOnly) {
  Tensor flat({10});
  for (int64_t i = 0; i < 10; ++i) flat[i] = static_cast<float>(i);
  Tensor piece = flat.slice(4, {2, 3});
  EXPECT_EQ(piece.numel(), 6);
  EXPECT_EQ(piece.capacity(), 6);
  EXPECT_EQ(piece.at(1, 0), 7.0f);
  piece.at(0, 0) = -1.0f;
  EXPECT_EQ(flat[4], -1.0f) << "a view writes through";
  EXPECT_TRUE(piece.shares_allocation_with(flat));
  EXPECT_FALSE(piece.shares_storage_with(flat)) << "another start";
  EXPECT_THROW(piece.set_rows(3), baton::RuntimeError) << "a piece's capacity is its own";
  EXPECT_THROW((void)flat.slice(5, {6}), baton::RuntimeError);
  EXPECT_THROW((void)flat.slice(-1, {1}), baton::RuntimeError);
  EXPECT_THROW((void)piece.slice(5, {2}), baton::RuntimeError);
  EXPECT_FALSE(Tensor({3}).shares_allocation_with(flat));
  {
    // The piece keeps the whole allocation alive.
    Tensor keep = Tensor({4}, 2.0f).slice(3, {1});
    EXPECT_EQ(keep[0], 2.0f);
  }
}

}  // namespace
