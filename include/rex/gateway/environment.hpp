// Environment: a named, declarative recipe for a gateway session's sandbox (shared/GATEWAY.md,
// "Registry"): which provider starts it, the same fields as DockerDeploymentConfig for what it
// runs (image, memory, cpus, network, env, working_dir, mounts), its default lifetimes and the
// files collected from it before it is destroyed. Plain data: read from the registry's
// environments/*.yaml (parse_environment, registry.hpp) or built in (Registry), and checked for
// types and ranges there; whether a provider can honour it is the gateway's business.
#pragma once

#include <boost/json/object.hpp>

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex::gateway {

/// The most sandboxes one environment may keep started ahead of time, and how many the built-in
/// `local` environment keeps.
inline constexpr std::size_t kMaxSpares = 64;
inline constexpr std::size_t kBuiltInLocalSpares = 2;
/// The image of the built-in `code-interpreter-v1` environment (the project's scripts build it).
inline constexpr std::string_view kCodeInterpreterImage = "rex-code-interpreter:latest";

struct Environment {
  std::string name;         // from the file's `name`, else the file's stem
  std::string description;  // for people choosing one (GET /api/environments)
  // The provider used when a create names none: local | docker | podman (other names are
  // allowed here; the gateway refuses a provider it does not have when the environment is used).
  std::string provider = "local";
  std::string image;                  // docker, podman: the image the sandbox runs
  std::string e2b_template;           // e2b: the template ("template"); "": E2B's "base"
  std::optional<std::string> memory;  // "512m", "2g" or bytes, as DockerDeploymentConfig::memory
  std::optional<double> cpus;         // 1.5 = one and a half cores
  std::string network;  // "" (the engine's default), "none", "bridge"...: network_mode
  std::map<std::string, std::string> env;  // added to the sandbox's environment
  std::string working_dir;  // where execute and relative file paths run; "": provider default
  std::vector<std::string> mounts;   // "HOST:CONTAINER[:ro]", as docker run -v
  double idle_timeout = 600;         // seconds idle before the session expires (0: never)
  double max_lifetime = 3600;        // seconds from creation (0: the gateway's maximum)
  std::vector<std::string> collect;  // paths (glob patterns allowed) copied out before destroy
  // Sandboxes kept started ahead of time, so that a create takes one at once (providers that
  // can hand a running sandbox to a session: local). Only creates that add no env variables of
  // their own take a spare; the others start a sandbox as usual.
  std::size_t spares = 0;
  // Who commands run as when a call names nobody ("": the sandbox's own user, root in a
  // container); a template's is its last USER step's, else E2B's `user`.
  std::string user;
  // Started in the background once the sandbox's server answers (as `user`, in working_dir),
  // and awaited until ready_cmd exits 0 before the sandbox is ready (E2B's startCmd, readyCmd).
  std::string start_cmd;
  std::string ready_cmd;
  bool own_image = false;  // the image is the gateway's (a template's build): never pulled
  // The sandbox serves E2B's code interpreter on port 49999 (the gateway's notebook kernel,
  // started in it as `user` before start_cmd): run_code of E2B's code-interpreter SDKs.
  bool code_interpreter = false;

  /// Every field under its own name (memory and cpus null when unset), for
  /// GET /api/environments.
  boost::json::object to_json() const;
};

}  // namespace rex::gateway
