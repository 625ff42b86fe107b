// SandboxLease: one sandbox of a SandboxPool, held exclusively until the lease ends. Move-only.
//
// Ending a lease never blocks: destroying it hands the sandbox back and the pool recycles or
// stops it in a coroutine of its own, on the pool's executor. `co_await release()` does the
// same and waits until the sandbox is back. A lease marked broken (or found dead by check())
// is stopped and replaced, never handed out again.
//
// After the pool's shutdown() the sandbox is stopped at once; runtime() and deployment() then
// throw SandboxPoolClosedError and ending the lease does nothing more.
//
// Threading: use a lease on the pool's executor only.
#pragma once

#include <rex/deployment/deployment.hpp>
#include <rex/protocol/responses.hpp>
#include <rex/runtime/runtime.hpp>

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>

namespace rex {

namespace detail {
class SandboxPoolState;
struct PooledSandbox;
}  // namespace detail

class SandboxLease {
 public:
  /// An empty lease (holds no sandbox).
  SandboxLease() noexcept = default;
  SandboxLease(SandboxLease&& other) noexcept = default;
  /// Hands back the sandbox held so far, then takes other's.
  SandboxLease& operator=(SandboxLease&& other) noexcept;
  SandboxLease(const SandboxLease&) = delete;
  SandboxLease& operator=(const SandboxLease&) = delete;
  ~SandboxLease();

  /// Whether the lease holds a sandbox.
  explicit operator bool() const noexcept { return sandbox_ != nullptr; }

  /// The sandbox's runtime. std::logic_error on an empty lease, SandboxPoolClosedError once
  /// shutdown() stopped the sandbox.
  Runtime& runtime() const;
  Deployment& deployment() const;
  /// The sandbox's number in its pool (1, 2, ...): tells sandboxes apart in logs and tests.
  std::uint64_t sandbox_id() const noexcept;

  /// The pool stops this sandbox when the lease ends, instead of reusing it.
  void mark_broken() noexcept;
  bool broken() const noexcept;

  /// Asks the sandbox whether it is alive (within the pool's health_check_timeout). A dead
  /// sandbox answers {is_alive: false, message saying why} and the lease is marked broken.
  /// Obeys the caller's terminal cancellation.
  asio::awaitable<IsAliveResponse> check();

  /// Hands the sandbox back and waits until the pool has recycled or stopped it. The lease is
  /// empty afterwards. Cancelling the wait does not stop the return.
  asio::awaitable<void> release();

 private:
  friend class detail::SandboxPoolState;
  SandboxLease(std::shared_ptr<detail::SandboxPoolState> pool,
               std::shared_ptr<detail::PooledSandbox> sandbox) noexcept;
  const detail::PooledSandbox& checked() const;

  std::shared_ptr<detail::SandboxPoolState> pool_;
  std::shared_ptr<detail::PooledSandbox> sandbox_;
};

}  // namespace rex
