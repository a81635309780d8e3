// A GPU's dense matrix peak, for MFU (model FLOPs utilisation: the model's
// counted FLOPs per second over the devices' peak, as PaLM defined it).
// NVIDIA does not report a peak: it is modelled from the compute
// capability's FLOPs per SM per clock for the products' precision (CUDA
// cores' FMA for fp32, the tensor cores' dense rate for tf32 and bf16, as
// the architecture whitepapers give them) times the SM count times the
// boost clock. Header-only: the CUDA backend and the tests use it.
#pragma once

#include <cstdio>
#include <string>

namespace baton {

struct GpuPeak {
  double flops = 0;  // per second; 0 when not known
  std::string note;  // how it was modelled, or why it is not known
};

// `precision` is the backend's: "fp32", "tf32" or "bf16".
inline GpuPeak gpu_dense_peak(int major, int minor, int sms, double clock_khz,
                              const std::string& precision) {
  // FLOPs per SM per clock: {fp32 FMA, tf32 tensor, bf16 tensor}.
  struct Row {
    int major, minor;
    double fp32, tf32, bf16;
  };
  static constexpr Row kRows[] = {
      {8, 0, 128, 1024, 2048},  // A100
      {8, 6, 256, 512, 1024},   // A10, A40, RTX 30
      {8, 9, 256, 512, 1024},   // L4, L40S, RTX 40
      {9, 0, 256, 2048, 4096},  // H100, H200
  };
  GpuPeak p;
  const int column = precision == "bf16" ? 2 : precision == "tf32" ? 1 : 0;
  char cc[16];
  std::snprintf(cc, sizeof cc, "sm_%d%d", major, minor);
  for (const Row& r : kRows) {
    if (r.major != major || r.minor != minor) continue;
    const double per_clock = column == 2 ? r.bf16 : column == 1 ? r.tf32 : r.fp32;
    if (sms <= 0 || clock_khz <= 0) {
      p.note = std::string("no peak: the device gave no SM count or clock (") + cc + ")";
      return p;
    }
    p.flops = per_clock * sms * clock_khz * 1e3;
    char note[160];
    std::snprintf(note, sizeof note,
                  "modelled %s dense peak: %s's %.0f FLOPs per SM per clock x %d SMs x %.2f GHz",
                  precision.c_str(), cc, per_clock, sms, clock_khz / 1e6);
    p.note = note;
    return p;
  }
  p.note = std::string("no peak: ") + cc + " is not in Baton's table of FLOPs per SM per clock";
  return p;
}

}  // namespace baton
