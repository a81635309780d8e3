#include <baton/launch/stop_signals.h>

namespace baton {
namespace {

// Static because a signal handler can reach nothing else (see the header).
std::atomic<bool> g_stop_requested{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the handler needs a lock-free flag");

extern "C" void on_stop_signal(int /*signo*/) { g_stop_requested.store(true); }

}  // namespace

StopSignals::StopSignals() {
  g_stop_requested.store(false);
  for (size_t i = 0; i < kSignals.size(); ++i) {
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    // Once is a request; twice (Ctrl-C again) is the default: terminate.
    sa.sa_flags = kSignals[i] == SIGUSR1 ? 0 : SA_RESETHAND;
    sigaction(kSignals[i], &sa, &old_[i]);
  }
}

StopSignals::~StopSignals() {
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
}

const std::atomic<bool>* StopSignals::flag() { return &g_stop_requested; }

}  // namespace baton
