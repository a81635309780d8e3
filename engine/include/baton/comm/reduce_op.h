// The reductions collectives and Strategy::reduce support. Its own header so
// that comm needs nothing from strategy (the part above it).
#pragma once

namespace baton {

enum class ReduceOp : int { kUnset = 0, kSum = 1, kMean = 2, kMax = 3, kMin = 4 };

}  // namespace baton
