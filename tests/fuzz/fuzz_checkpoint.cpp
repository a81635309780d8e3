// The checkpoint reader on any file: a clear error or the tensors it holds.
#include <baton/train/checkpoint.h>

#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = baton_fuzz::as_file(data, size, ".ckpt");
  baton_fuzz::expect_clean([&] { (void)baton::read_checkpoint(path); });
  return 0;
}
