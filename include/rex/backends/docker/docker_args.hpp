// docker-run flags, as SWE-ReX's `docker_args` carries them, translated into the Docker Engine
// API's container-create fields. rex starts containers through the API, never the CLI, so each
// flag is mapped explicitly; an unknown flag is refused rather than silently dropped.
//
// Translated (both "--flag value" and "--flag=value"; short flags also as "-eVALUE"):
//   -e/--env K=V|K   -v/--volume SRC:DST[:OPTS]   -w/--workdir   -u/--user   -l/--label K=V
//   -m/--memory   --memory-swap   --cpus   --pids-limit   --shm-size   --ulimit NAME=SOFT[:HARD]
//   --network/--net   --platform   --privileged   --cap-add   --cap-drop   --security-opt
//   --read-only   --tmpfs PATH[:OPTS]   --add-host   --hostname/-h   --dns   --init   --rm
// --rm is accepted and has no effect: rex removes its containers itself (remove_container).
#pragma once

#include <rex/deployment/sizes.hpp>

#include <boost/json/object.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace rex {

/// Adds the flags' effects to a container-create body (top-level fields and "HostConfig"); a
/// --platform value is stored into `platform`. DeploymentConfigError names an unknown flag, a
/// flag without its value, or a value that cannot be parsed.
void apply_docker_args(const std::vector<std::string>& args, boost::json::object& create_body,
                       std::optional<std::string>& platform);

}  // namespace rex
