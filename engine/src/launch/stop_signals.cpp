#include <baton/launch/stop_signals.h>
#include <pthread.h>

namespace baton {
namespace {
// Never runs (the signals are blocked and taken by sigwait): it only makes
// them caught rather than ignored - a program started in the background
// by a shell has SIGINT ignored, and an ignored signal never reaches
// sigwait.
extern "C" void caught(int /*signo*/) {}
}  // namespace

StopSignals::StopSignals() {
  sigemptyset(&set_);
  for (int s : kSignals) sigaddset(&set_, s);
  pthread_sigmask(SIG_BLOCK, &set_, &old_mask_);
  for (size_t i = 0; i < kSignals.size(); ++i) {
    struct sigaction sa {};
    sa.sa_handler = caught;
    sigemptyset(&sa.sa_mask);
    sigaction(kSignals[i], &sa, &old_[i]);
  }
  waiter_ = std::thread([this] { wait_for_signals(); });
}

StopSignals::~StopSignals() {
  closing_.store(true);
  pthread_kill(waiter_.native_handle(), SIGUSR1);  // wakes sigwait()
  waiter_.join();
  for (size_t i = 0; i < kSignals.size(); ++i) sigaction(kSignals[i], &old_[i], nullptr);
  pthread_sigmask(SIG_SETMASK, &old_mask_, nullptr);
}

void StopSignals::wait_for_signals() {
  for (;;) {
    int sig = 0;
    if (sigwait(&set_, &sig) != 0) continue;
    if (closing_.load()) return;
    if (stop_.load() && sig != SIGUSR1) {
      // Twice: the default action (terminate), as without a handler.
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      sigemptyset(&dfl.sa_mask);
      sigaction(sig, &dfl, nullptr);
      sigset_t one;
      sigemptyset(&one);
      sigaddset(&one, sig);
      pthread_sigmask(SIG_UNBLOCK, &one, nullptr);
      raise(sig);
      return;
    }
    stop_.store(true);
  }
}

}  // namespace baton
