// Typed errors thrown inside the engine and caught at the API edge (the CLI,
// the studio). The engine never calls exit() or abort().
#pragma once

#include <stdexcept>
#include <string>

namespace baton {

// Bad input from the user: a config key, a file, a line of data. The message
// names the place and what was expected. The CLI maps it to exit code 2.
class InputError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Something failed while running on valid input (I/O, a collective, a
// plugin that misbehaved). The CLI maps it to exit code 1.
class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace baton
