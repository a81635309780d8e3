/* The plugin ABI. A plugin is a MODULE library that exports one C function,
 * `baton_plugin_entry`, returning a pointer to a static baton_plugin_info.
 *
 * The struct is versioned twice: `abi_version` must equal the engine's
 * BATON_PLUGIN_ABI_VERSION (plugins built against another version are
 * refused with a message), and `struct_size` lets a newer engine know which
 * optional hooks an older plugin's struct has.
 *
 * Thread rules: the entry point and register_components are called once,
 * on the thread that loads plugins, before any training starts. The
 * factories a plugin registers may be called from any thread, but never
 * concurrently for the same registry. unload (optional) is called once,
 * before the library is closed.
 */
#ifndef BATON_PLUGIN_ABI_H
#define BATON_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

/* 2: the C++ classes a plugin's factories build on changed layout (Layer
 * gained product_scratch_bytes and kernel_notes): a plugin built against
 * version 1 would call the wrong virtual functions. */
#define BATON_PLUGIN_ABI_VERSION 2u
#define BATON_PLUGIN_ENTRY_SYMBOL "baton_plugin_entry"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct baton_plugin_info {
  /* required */
  uint32_t struct_size; /* sizeof(baton_plugin_info) as the plugin was built */
  uint32_t abi_version; /* BATON_PLUGIN_ABI_VERSION the plugin was built against */
  const char* name;
  const char* version;
  const char* description;
  /* Registers the plugin's models and datasets into `registry` (a
   * baton::Registry*). Returns 0 on success; otherwise writes a message
   * into err (err_size bytes) and returns nonzero. */
  int (*register_components)(void* registry, char* err, size_t err_size);
  /* optional (may be NULL) */
  void (*unload)(void);
} baton_plugin_info;

typedef const baton_plugin_info* (*baton_plugin_entry_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* BATON_PLUGIN_ABI_H */
