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

// A resume refused because this host does not hold the checkpoint the run
// has reached (baton train --resume-step-at-least): a runtime failure, exit
// 1, that `baton launch` does not restart - every attempt placed the same
// way would find the same. Its message starts "resume refused: ".
class ResumeRefused : public RuntimeError {
 public:
  explicit ResumeRefused(const std::string& why) : RuntimeError("resume refused: " + why) {}
};

}  // namespace baton
