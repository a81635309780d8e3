// The CPU backend's im2col/col2im loops over a range of images, compiled
// for each ISA (multiversion.h); cpu_conv.cpp splits the batch over threads.
#pragma once

#include <baton/nn/backend.h>

#include <cstdint>

namespace baton::cpu {

// Images [i0, i1) of x (n*h*w, c_in) into patch rows of `cols` (one row of
// kh*kw*cg values per output pixel), channels [c0, c0 + cg).
void im2col_images(const float* x, float* cols, const ConvShape& s, int64_t c0, int64_t cg,
                   int64_t i0, int64_t i1);
// The adjoint: patch rows added back into dx (which the caller zeroed).
void col2im_images(const float* cols, float* dx, const ConvShape& s, int64_t c0, int64_t cg,
                   int64_t i0, int64_t i1);

}  // namespace baton::cpu
