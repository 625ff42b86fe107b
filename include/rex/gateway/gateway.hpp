// Gateway: `rex gateway`, the stateful sandbox service (shared/GATEWAY.md). It keeps sandboxes
// ("sessions") alive between calls on any provider, records what happens in them (transcripts,
// events), keeps what they produce (artifacts) and destroys them on time, serving the seed's API,
// rex's additions and the proxied SWE-ReX protocol on one HTTP listener.
//
// Guarantees:
// - Intent first: a session's record is committed (SQLite, WAL, synchronous FULL) before its
//   provider is asked for anything, and every change of state is committed before it is
//   acknowledged. `kill -9` at any moment loses no acknowledged session; the next start
//   reconciles records with what the providers run (adopts, finishes, marks lost, removes
//   orphans) before /readyz answers 200.
// - An Idempotency-Key makes a create happen once, however often and concurrently it is sent.
// - One sweeper ends sessions at their idle timeout and maximum lifetime, from deadlines kept in
//   the database; sandboxes also end themselves at their hard deadline.
// - A tenant sees only its own sessions, events, logs and artifacts.
// - stop() drains the listener and leaves the sessions running, for the next start to adopt.
//
// Threading: construct, run and stop from the thread that runs the executor's io_context.
// Blocking work (SQLite, file copies, hashing) runs on threads of the gateway's own.
#pragma once

#include <rex/gateway/gateway_config.hpp>
#include <rex/gateway/registry.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <memory>
#include <string>

namespace rex::gateway {

namespace asio = boost::asio;

class Gateway {
 public:
  /// Opens the storage (creating it on first use) and the providers. The local provider's
  /// sandboxes run the static rex-server that find_rex_server() finds, else `server_executable`,
  /// a rex executable with the `server` subcommand. Throws
  /// GatewayConfigError for a configuration it cannot serve and StoreError for a database it
  /// cannot open.
  Gateway(asio::any_io_executor executor, GatewayConfig config, Registry registry,
          std::string server_executable);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  /// Binds the listener (config.listen); throws std::system_error naming the address.
  void listen();
  /// "http://127.0.0.1:8000" (after listen()).
  std::string url() const;
  /// This gateway's persistent id (the label on everything it starts).
  const std::string& id() const;

  /// Reconciles, then serves until stop(); returns when the listener has drained.
  asio::awaitable<void> run();
  /// Stops accepting and ends event streams; sessions keep running. Safe to call twice.
  void stop();

  struct Impl;  // src/gateway/gateway_impl.hpp

 private:
  std::shared_ptr<Impl> impl_;
};

}  // namespace rex::gateway
