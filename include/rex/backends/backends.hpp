// The backends this build has, in one table: each module's entry (rex/deployment/registry.hpp),
// listed once in src/backends/backends.cpp. Everything that picks a backend by name (a JSON
// config's "type", `--deployment`, the help, `rex gc`, the gateway's providers) reads this table,
// so adding a backend is a folder of its own and one line there.
//
// Threading: the table is constant; call these from anywhere.
#pragma once

#include <rex/deployment/config.hpp>
#include <rex/deployment/deployment.hpp>
#include <rex/deployment/registry.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

/// Every backend of this build, in the order the help lists them.
std::span<const Backend> backends() noexcept;
/// Every alias of those backends ("podman").
std::span<const BackendAlias> backend_aliases() noexcept;
std::span<const MissingBackend> missing_backends() noexcept;
/// The backend called `name` (not an alias), or null.
const Backend* find_backend(std::string_view name) noexcept;
/// The embedded default: the first backend's settings as their defaults have them (local
/// sessions on this machine, where `rex run` and a pool start when nothing is named).
DeploymentConfig default_deployment_config();

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

/// The backend's name: "local", "remote", "docker", "dummy", "gateway", "e2b", "kubernetes",
/// "fargate", "daytona" or "modal".
std::string_view deployment_type(const DeploymentConfig& config) noexcept;

/// Decodes a config object; "type" selects the backend (absent: "docker", as SWE-agent's
/// default). Field names follow SWE-ReX's deployment configs wherever they mean the same thing,
/// so an existing SWE-agent deployment section loads unchanged; SWE-ReX fields that rex has no
/// use for are accepted and ignored; unknown fields are refused, as SWE-ReX refuses them.
/// DeploymentConfigError for an unknown type, an unknown field, a wrong type or a bad value,
/// naming it.
DeploymentConfig deployment_config_from_json(const boost::json::value& json);
/// Reads a JSON file holding one config object. DeploymentConfigError names the file.
DeploymentConfig load_deployment_config(const std::string& path);
/// Every field, so the result loads back to the same config.
boost::json::object to_json(const DeploymentConfig& config);

/// The config with `image` as the image its sandboxes start from (the field --image sets), for
/// the backends that start a sandbox from an image. DeploymentConfigError naming those for any
/// other ("a local deployment cannot start a sandbox from an image (docker, ... can)").
DeploymentConfig with_image(const DeploymentConfig& config, const std::string& image);

/// The settings a holder of the backend's sandboxes (a gateway's provider) starts them with:
/// `fields` over the entry's provider_defaults, read as defaults (settings::Reader::Use: the
/// fields each sandbox names, such as its image, may be absent). DeploymentConfigError as
/// deployment_config_from_json().
DeploymentConfig provider_settings(const Backend& backend, boost::json::object fields);

/// The deployment for a config. Nothing starts until start(). DeploymentConfigError for
/// settings that cannot work together (checked here, before anything runs), or for an empty
/// config.
std::unique_ptr<Deployment> make_deployment(asio::any_io_executor executor,
                                            DeploymentConfig config);

}  // namespace rex
