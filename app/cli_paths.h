// Checks of the paths a command's flags name, before anything runs: each
// failure is an InputError that names the flag, the path and what was
// expected (exit 2), instead of a failure deep in a run.
#pragma once

#include <string>

namespace baton::cli {

// A file the command will create or overwrite: its folder must exist and it
// must not be a folder itself.
void check_output_file(const std::string& flag, const std::string& path);
// A folder that must already exist.
void check_existing_dir(const std::string& flag, const std::string& path);
// A folder the command writes into (made later, with its parents, when
// missing): not a file, a path with room for the names put in it (`room`:
// the longest path the command appends, in bytes), and its nearest
// existing folder must take a new folder (tried, and removed again).
void check_writable_dir(const std::string& flag, const std::string& path, size_t room = 128);

}  // namespace baton::cli
