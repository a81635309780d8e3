// Shared by the tests of bad input: run something that must throw
// InputError and look at its message.
#pragma once

#include <baton/core/error.h>
#include <gtest/gtest.h>

#include <exception>
#include <string>

namespace baton_test {

// Runs `fn`, expects an InputError, returns its message (a test failure and
// "" otherwise).
template <typename F>
std::string input_error(F&& fn) {
  try {
    fn();
  } catch (const baton::InputError& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected InputError, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected InputError, nothing was thrown";
  return {};
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

inline bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace baton_test
