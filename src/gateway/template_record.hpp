// Templates: E2B's custom sandbox images, built by the gateway on its engine (templates.cpp).
// A template has names (E2B's aliases), tags naming builds, and builds; a ready build is an
// image of the engine and an environment of the gateway (image, user, working directory, start
// and ready commands), so Sandbox.create(name) starts a sandbox of it.
//
// plan_dockerfile() turns a build request (E2B's TemplateBuildStartV2: fromImage or fromTemplate,
// steps RUN, COPY, ENV, WORKDIR, USER, startCmd, readyCmd) into the Dockerfile the engine builds.
// Internal to the gateway library.
#pragma once

#include <rex/gateway/environment.hpp>

#include <boost/json/object.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace rex::gateway {

/// A build request that cannot be built; step() is E2B's name of the step ("1" for the first of
/// `steps`, "base" for the image, "finalize" for the start and ready commands), or empty.
class TemplateError : public std::runtime_error {
 public:
  TemplateError(std::string message, std::string step = {})
      : std::runtime_error(std::move(message)), step_(std::move(step)) {}
  const std::string& step() const noexcept { return step_; }

 private:
  std::string step_;
};

struct BuildLogLine {
  double time = 0;  // unix seconds
  std::string level = "info";
  std::string message;
  std::string step;  // E2B's step name, when the line belongs to one
};

struct TemplateBuild {
  std::string id;
  std::string status = "waiting";  // waiting | building | ready | error
  std::string key;                 // what it builds, hashed: equal keys make equal images
  std::string image;               // the engine's image id, once ready
  std::string provider;            // where it was built (and its sandboxes run)
  std::string start_cmd, ready_cmd;
  std::string user = "user";               // who commands run as by default
  std::string working_dir = "/home/user";  // where they run
  double created_at = 0, finished_at = 0;
  std::string reason, reason_step;  // why it failed
  std::vector<std::string> tags;    // given to it once ready
  std::vector<BuildLogLine> logs;
};

struct TemplateRecord {
  std::string id;
  std::string tenant;
  std::vector<std::string> names;           // its aliases, the first given at creation
  std::map<std::string, std::string> tags;  // tag -> build id ("default": the newest ready)
  int cpu_count = 2;
  int memory_mb = 1024;
  double created_at = 0, updated_at = 0, last_spawned_at = 0;
  std::uint64_t spawn_count = 0;
  std::vector<TemplateBuild> builds;

  TemplateBuild* build(std::string_view id);
  const TemplateBuild* build(std::string_view id) const;
  /// The build sandboxes of the template start from: the "default" tag's, else the newest
  /// ready one; null when none is ready.
  const TemplateBuild* current() const;
  /// The environment a sandbox of `b` is made from, named `name`.
  Environment environment(const TemplateBuild& b, const std::string& name) const;

  boost::json::object to_json() const;
  static TemplateRecord from_json(const boost::json::object& o);
};

/// What plan_dockerfile() makes of a build request.
struct DockerfilePlan {
  std::string dockerfile;
  std::vector<std::string> file_hashes;  // the COPY steps' uploads, under files/<hash>/
  struct Copy {
    std::string hash, src, dest, step;  // as the step names them
  };
  std::vector<Copy> copies;
  // The Dockerfile's instruction numbers ("Step N/M" of the engine, 1-based) -> E2B's step.
  std::vector<std::string> step_of_instruction;
  std::string user = "user";
  std::string working_dir = "/home/user";
  std::string start_cmd, ready_cmd;
  bool force = false;  // the request asks for a build without the cache
};

/// The Dockerfile of a build request starting FROM `base` (an image the engine has). The
/// template's account `user` (home /home/user) is made when the image lacks it; RUN steps run
/// with bash as the step's user; the image ends as root, with its user and working directory
/// kept in the plan. TemplateError naming the step for a malformed one.
DockerfilePlan plan_dockerfile(const boost::json::object& request, std::string_view base);

/// The cache key of a build: the base image's id and every step, command and uploaded file.
std::string build_key(const boost::json::object& request, std::string_view base_id);

/// E2B's hash of a COPY step's files (its SDKs' calculate_files_hash: "COPY src dest", then
/// each file's path, type and mode, size and content, or a link's target) from the archive the
/// SDK uploaded for it; nullopt when the archive holds what the hash cannot be told from (a
/// hard link). Throws what read_archive_entries() throws.
std::optional<std::string> e2b_files_hash(const std::filesystem::path& archive,
                                          std::string_view src, std::string_view dest);

/// E2B's step of a build output line "Step N/M : ..." (Docker's; Podman's "STEP N/M: ...") per
/// the plan;
/// nullopt for other lines.
std::optional<std::string> step_of_line(const DockerfilePlan& plan, std::string_view line);

}  // namespace rex::gateway
