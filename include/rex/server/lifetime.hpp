// Lifetime: rex-server's hard deadline. `--max-lifetime` sets it at start; a server started
// ahead of time (a gateway's spare sandbox) gets its real deadline when it is handed out, with
// POST /lifetime (a rex addition; SWE-ReX's endpoints are unchanged):
//
//   POST /lifetime {"max_lifetime": 3600}  ->  {"max_lifetime": 3600, "deadline": <unix s>}
//   GET  /lifetime                         ->  {"max_lifetime": <s left> | null, "deadline": ...}
//
// max_lifetime counts from the request; 0 removes the deadline. When the deadline passes, the
// callback given at construction runs once (the server closes its sessions and exits).
//
// Threading: construct and use from the thread that runs the executor's io_context.
#pragma once

#include <rex/server/route_table.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace rex::server {

class Lifetime {
 public:
  /// The furthest deadline set() takes: ten years.
  static constexpr double kLongest = 10.0 * 365 * 86400;

  /// `on_end(reason)` runs when the deadline passes.
  Lifetime(asio::any_io_executor executor,
           std::function<asio::awaitable<void>(std::string)> on_end);
  ~Lifetime();
  Lifetime(const Lifetime&) = delete;
  Lifetime& operator=(const Lifetime&) = delete;

  /// The deadline `seconds` from now (0: none). Throws std::invalid_argument for a negative,
  /// non-finite or absurd (over kLongest) value.
  void set(double seconds);
  /// Seconds until the deadline; nullopt when there is none.
  std::optional<double> remaining() const;
  /// No deadline any more, and the callback never runs (the server is stopping anyway).
  void cancel();

  /// GET and POST /lifetime over this lifetime, which must outlive the table.
  void add_routes(RouteTable& routes);

  struct State;  // shared with the routes and the timer's waiter

 private:
  std::shared_ptr<State> state_;
};

}  // namespace rex::server
