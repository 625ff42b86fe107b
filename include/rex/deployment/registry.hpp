// What a backend module registers: its entry in the backend table (rex/backends/backends.hpp),
// with its name, its settings codec, the deployment it makes, the command-line flags that set its
// fields, and what it can do beyond that (gc, a SandboxBackend). make_backend<>() builds an entry
// from the module's settings struct and deployment; each module defines one,
// rex::modules::<name>_entry(), and the table lists them.
//
// Threading: entries are constant; call these from anywhere.
#pragma once

#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/gc.hpp>
#include <rex/deployment/settings.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace rex {

/// What a flag's value is: one string, an integer, a number, one item of a list per use
/// (repeatable), KEY=VALUE into a map per use (repeatable), or a switch that sets the field to
/// false (--keep: remove_container). A flag has the same kind on every backend.
enum class FlagKind { text, integer, number, list, map, off };

/// A command-line flag of the deployment options, and the settings field it sets on one
/// backend.
struct BackendFlag {
  std::string_view flag;   // "--image"
  std::string_view field;  // "image", as on the wire
  std::string_view help;   // what it means there: "the image to start"
  FlagKind kind = FlagKind::text;
};

/// Another name for a backend with one field preset: "podman" is docker on Podman's socket.
struct BackendAlias {
  std::string_view name, backend, field, value, summary;
};

struct Backend {
  std::string_view name;     // "docker": a config's "type"
  std::string_view summary;  // one line for the help: "a container of a Docker engine"
  std::span<const BackendFlag> flags;
  std::span<const BackendAlias> aliases{};
  /// Its name in messages that speak of its settings: "a mapping of Kubernetes settings".
  std::string_view title{};
  /// A variable whose presence makes a gateway offer the backend without a section of its own
  /// in the gateway's configuration (E2B_API_KEY); empty: only a section does.
  std::string_view implied_by{};
  /// Fields a gateway's provider sets unless its section does, as a JSON object.
  std::string_view provider_defaults = "{}";
  /// The settings of a config object (its "type" already chosen), for a whole deployment or as
  /// the defaults of a holder's sandboxes (settings::Reader::Use); DeploymentConfigError.
  DeploymentConfig (*decode)(const boost::json::object& object, settings::Reader::Use use);
  /// Every field of the settings, "type" included.
  boost::json::object (*encode)(const DeploymentConfig& config);
  /// The deployment for the settings; nothing starts until start().
  std::unique_ptr<Deployment> (*make)(asio::any_io_executor executor, DeploymentConfig config);
  /// A short name for prompts and messages ("docker python:3.11"); null: the backend's name.
  std::string (*describe)(const DeploymentConfig& config) = nullptr;
  /// `rex gc`: lists what carries rex's labels where the settings point and removes what the
  /// rules of gc.hpp say should go. Null for a backend that cannot list its sandboxes.
  asio::awaitable<GcReport> (*gc)(asio::any_io_executor executor, DeploymentConfig config,
                                  GcOptions options) = nullptr;
  /// What `rex gc` removes there besides sandboxes, for its help ("the security groups rex made
  /// that nothing uses"); empty: nothing.
  std::string_view gc_also{};
  /// The backend as a SandboxBackend over these settings (a gateway's provider). Null for one
  /// whose sandboxes a holder cannot keep apart from a process (local, remote, dummy, gateway).
  std::unique_ptr<SandboxBackend> (*open)(asio::any_io_executor executor,
                                          DeploymentConfig settings) = nullptr;

  /// Its entry for `flag` ("--image"), or null when the flag does not apply to it.
  const BackendFlag* flag(std::string_view name) const noexcept {
    for (const BackendFlag& f : flags) {
      if (f.flag == name)
        return &f;
    }
    return nullptr;
  }
};

/// A backend this build was made without, and why.
struct MissingBackend {
  std::string_view name, reason;
};

/// Flags several backends have, each meaning the same there.
namespace common_flags {
inline constexpr BackendFlag startup_timeout{"--startup-timeout", "startup_timeout",
                                             "seconds to wait for the sandbox to answer",
                                             FlagKind::number};
inline constexpr BackendFlag env{"--env", "env", "KEY=VALUE set in sessions (repeatable)",
                                 FlagKind::map};
inline constexpr BackendFlag workdir{"--workdir", "working_dir", "the directory sessions start in"};
inline constexpr BackendFlag image{"--image", "image", "the image to start"};
}  // namespace common_flags

/// The pieces of an entry, made from a module's settings struct T (described, naming its
/// backend, with optional `rules`).
namespace entry {

template <class T>
constexpr std::span<const settings::Rule> rules_of() noexcept {
  if constexpr (requires { T::rules; })
    return T::rules;
  else
    return {};
}

/// Reads T from a config object strictly; Check(T&, settings::Reader&), when given, does the
/// checks across fields and takes the fields accepted without being kept.
template <class T, auto Check = nullptr>
DeploymentConfig decode(const boost::json::object& object, settings::Reader::Use use) {
  settings::Reader r(object, T::backend, use);
  T c;
  settings::read(r, c, rules_of<T>());
  if constexpr (!std::is_same_v<decltype(Check), std::nullptr_t>)
    Check(c, r);
  r.finish();
  return c;
}

template <class T>
boost::json::object encode(const DeploymentConfig& config) {
  boost::json::object o = settings::write(config.get<T>(), rules_of<T>());
  o.emplace("type", T::backend);
  return o;
}

/// The deployment D, made from (executor, T) or from T alone.
template <class T, class D>
std::unique_ptr<Deployment> make(asio::any_io_executor executor, DeploymentConfig config) {
  if constexpr (std::is_constructible_v<D, asio::any_io_executor, T>)
    return std::make_unique<D>(std::move(executor), std::move(config.get<T>()));
  else
    return std::make_unique<D>(std::move(config.get<T>()));
}

/// The SandboxBackend Open(executor, T) makes.
template <class T, auto Open>
std::unique_ptr<SandboxBackend> open(asio::any_io_executor executor, DeploymentConfig settings) {
  return Open(std::move(executor), std::move(settings.get<T>()));
}

/// `rex gc` through the SandboxBackend Open makes: what carries rex.managed=1, by the rules of
/// gc.hpp.
template <class T, auto Open>
asio::awaitable<GcReport> gc_by_listing(asio::any_io_executor executor, DeploymentConfig config,
                                        GcOptions options) {
  std::shared_ptr<SandboxBackend> backend = Open(executor, std::move(config.get<T>()));
  std::map<std::string, std::string> managed{{std::string(labels::managed), "1"}};
  std::vector<SandboxInfo> listed = co_await backend->list(std::move(managed));
  std::vector<GcCandidate> found;
  for (auto& s : listed)
    found.push_back(GcCandidate{s.id, {}, std::move(s.labels)});
  std::function<asio::awaitable<void>(const GcCandidate&)> remove =
      [backend](const GcCandidate& c) -> asio::awaitable<void> { co_await backend->destroy(c.id); };
  auto sweeping = sweep_garbage(std::move(found), options, std::move(remove));
  co_return co_await std::move(sweeping);
}

}  // namespace entry

/// A backend's entry from its settings struct T, its checks (see entry::decode) and its
/// deployment D; the module sets what else it has (describe, aliases, gc, open).
template <class T, class D, auto Check = nullptr>
constexpr Backend make_backend(std::string_view summary, std::span<const BackendFlag> flags) {
  return Backend{.name = T::backend,
                 .summary = summary,
                 .flags = flags,
                 .title = T::backend,
                 .decode = entry::decode<T, Check>,
                 .encode = entry::encode<T>,
                 .make = entry::make<T, D>};
}

}  // namespace rex
