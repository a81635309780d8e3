// Where a command writes its output (`history export --out`): standard
// output for "" or "-"; a regular file (or a new one) through a temporary
// file beside it, renamed over it only once everything was written; a
// symbolic link the same way for the file it points to (the link stays);
// anything else that exists (a device such as /dev/full, a FIFO) opened and
// written in place. A folder, or a missing folder, is an InputError naming
// the flag. Write errors are RuntimeErrors naming the path (exit 1).
#pragma once

#include <cstdio>
#include <string>

namespace baton::cli {

class OutputFile {
 public:
  OutputFile(const std::string& flag, const std::string& path);
  ~OutputFile();  // an uncommitted temporary file is removed
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  std::FILE* get() const { return file_; }
  // Flushes and closes (and renames into place); throws on any failure.
  void commit();

 private:
  std::string flag_, path_, target_, tmp_;
  std::FILE* file_ = nullptr;
  bool owned_ = false;
};

// A stream of lines appended to a file (`launch --events`; "-": standard
// output), flushed line by line so a reader follows it as it grows. Every
// write is checked; the first that fails is kept, named by the flag and the
// path with the reason, and nothing is written after it.
class LineAppender {
 public:
  // InputError naming the flag when the file cannot be opened.
  LineAppender(const std::string& flag, const std::string& path);
  ~LineAppender();
  LineAppender(const LineAppender&) = delete;
  LineAppender& operator=(const LineAppender&) = delete;

  // Writes `line` and a newline. Returns the failure the first time a
  // write fails ("" otherwise, and after that first time).
  std::string write_line(const std::string& line);
  // Flushes and closes (standard output: flushes). Returns the failure if
  // it is new, as write_line does.
  std::string close();
  // The first failure ("" = every write succeeded).
  const std::string& failure() const { return failure_; }

 private:
  std::string fail(int error_number, const char* what);
  std::string flag_, path_, failure_;
  std::FILE* file_ = nullptr;
  bool owned_ = false;
};

// Flushes standard output and reports a write that failed on the way
// ("history list > /dev/full"): RuntimeError naming standard output.
void finish_stdout();

}  // namespace baton::cli
