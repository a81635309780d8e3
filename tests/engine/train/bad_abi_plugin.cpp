// A plugin that claims another ABI version: the engine must refuse it.
#include <baton/train/plugin_abi.h>

namespace {
int register_nothing(void*, char*, size_t) { return 0; }
const baton_plugin_info kInfo = {sizeof(baton_plugin_info),
                                 BATON_PLUGIN_ABI_VERSION + 41,
                                 "bad_abi",
                                 "0",
                                 "test plugin with a wrong ABI version",
                                 register_nothing,
                                 nullptr};
}  // namespace

extern "C" __attribute__((visibility("default"))) const baton_plugin_info* baton_plugin_entry(
    void) {
  return &kInfo;
}
