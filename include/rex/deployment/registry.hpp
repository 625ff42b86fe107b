// The backends this build has, in one table: each one's name, its settings codec, the
// deployment it makes and the command-line flags that set its fields. Everything that picks a
// backend by name (a JSON config's "type", `--deployment`, the help) reads this table, so a
// backend is added in one place.
//
// Threading: the table is constant; call these from anywhere.
#pragma once

#include <rex/deployment/backend.hpp>
#include <rex/deployment/config.hpp>
#include <rex/deployment/gc.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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

struct Backend {
  std::string_view name;     // "docker": a config's "type"
  std::string_view summary;  // one line for the help: "a container of a Docker engine"
  std::span<const BackendFlag> flags;
  /// The settings of a config object (its "type" already chosen); DeploymentConfigError.
  DeploymentConfig (*decode)(const boost::json::object& object);
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

/// Another name for a backend with one field preset: "podman" is docker on Podman's socket.
struct BackendAlias {
  std::string_view name, backend, field, value, summary;
};

/// A backend this build was made without, and why.
struct MissingBackend {
  std::string_view name, reason;
};

/// Every backend of this build, in the order the help lists them.
std::span<const Backend> backends() noexcept;
std::span<const BackendAlias> backend_aliases() noexcept;
std::span<const MissingBackend> missing_backends() noexcept;
/// The backend called `name` (not an alias), or null.
const Backend* find_backend(std::string_view name) noexcept;

/// A short name for prompts and messages: "local", "remote http://host:8000", "docker
/// python:3.11", "podman python:3.11".
std::string describe_deployment(const DeploymentConfig& config);

/// "local, docker, podman, ...": every backend and alias, for messages and the help.
std::string backend_names();
/// "docker, kubernetes, ...": the backends (not the aliases) `which` holds for, in table order.
std::string backend_names(const std::function<bool(const Backend&)>& which);
/// The settings field `flag` sets on the backend `type`. DeploymentConfigError when no backend
/// has the flag, or when this one has not ("--pull does not apply to a kubernetes deployment
/// (only to docker)").
const BackendFlag& backend_flag(std::string_view flag, std::string_view type);
/// Every flag some backend has, each once, in the order the table first names them.
std::vector<const BackendFlag*> deployment_flags();
/// The help of a flag, from what each backend says of it: "docker, kubernetes: the image to
/// start; remote: ...".
std::string backend_flag_help(std::string_view flag);
/// A config object for a backend name or an alias ({"type": "docker", "container_runtime":
/// "podman"}); null when `name` is neither.
std::optional<boost::json::object> backend_base_config(std::string_view name);

}  // namespace rex
