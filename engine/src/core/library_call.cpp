#include <baton/core/library_call.h>

namespace baton {
namespace {
thread_local int t_depth = 0;
}  // namespace

LibraryCall::LibraryCall() { ++t_depth; }
LibraryCall::~LibraryCall() { --t_depth; }
bool inside_library_call() { return t_depth > 0; }

}  // namespace baton
