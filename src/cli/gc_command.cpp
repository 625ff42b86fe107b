#include "gc_command.hpp"

#include <rex/backends/backends.hpp>
#include <rex/deployment/gc.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>
#include <stdexcept>
#include <vector>

namespace rex::cli {

namespace {

// The backends `rex gc` works on: those that can list their sandboxes.
std::string listing_backends() {
  return backend_names([](const Backend& b) { return b.gc != nullptr; });
}

std::string label(const GcEntry& entry) {
  std::string id = entry.id.substr(0, 12);
  if (id.empty())
    return entry.name;  // a pod or Secret: its namespace and name say it all
  return entry.name.empty() ? id : fmt::format("{} {}", id, entry.name);
}

}  // namespace

void add_gc_options(CLI::App& app, GcCommandOptions& o) {
  app.add_flag("--all", o.all, "Remove every rex sandbox, also those whose owner still runs");
  app.add_flag("--dry-run", o.dry_run, "Only report what would be removed");
  app.add_option("--deployment", o.where.deployment,
                 fmt::format("Where to look: {} (podman too), or a JSON deployment config whose "
                             "settings say where",
                             listing_backends()))
      ->capture_default_str();
  // --<name> for every backend gc works on, and every alias of one.
  for (const Backend& b : backends()) {
    if (b.gc == nullptr)
      continue;
    const std::string also =
        b.gc_also.empty() ? std::string() : fmt::format(" (it also deletes {})", b.gc_also);
    app.add_flag("--" + std::string(b.name), o.shorthands[std::string(b.name)],
                 fmt::format("Same as --deployment {}{}", b.name, also));
    for (const BackendAlias& a : b.aliases)
      app.add_flag("--" + std::string(a.name), o.shorthands[std::string(a.name)],
                   fmt::format("Same as --deployment {}{}", a.name, also));
  }
  add_backend_flags(app, o.where);
}

int gc_command(const GcCommandOptions& o) {
  asio::io_context io(1);
  GcReport report;
  try {
    DeploymentOptions where = o.where;
    std::vector<std::string> named;
    for (const auto& [name, given] : o.shorthands) {
      if (given)
        named.push_back("--" + name);
    }
    if (named.size() > 1)
      throw std::invalid_argument(fmt::format("{}: one at a time", fmt::join(named, ", ")));
    if (named.size() == 1)
      where.deployment = named.front().substr(2);
    const DeploymentConfig config = build_deployment_config(where);
    const Backend* backend = find_backend(config.type());
    if (backend == nullptr || backend->gc == nullptr) {
      std::cerr << fmt::format(
          "rex gc: a {} deployment has no sandboxes to list and collect (gc works on {})\n",
          config.type(), listing_backends());
      return exit_usage;
    }
    GcOptions options;
    options.all = o.all;
    options.dry_run = o.dry_run;
    std::exception_ptr failure;
    asio::co_spawn(io, backend->gc(io.get_executor(), config, options),
                   [&](std::exception_ptr e, GcReport r) {
                     failure = e;
                     report = std::move(r);
                   });
    io.run();
    if (failure)
      std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    // The backends' errors say where they looked and how to fix it.
    std::cerr << "rex gc: " << e.what() << '\n';
    return 1;
  }
  const char* removed = o.dry_run ? "would remove" : "removed";
  for (const auto& entry : report.removed)
    std::cout << fmt::format("{} {}: {}\n", removed, label(entry), entry.reason);
  for (const auto& entry : report.kept)
    std::cout << fmt::format("kept {}: {}\n", label(entry), entry.reason);
  for (const auto& error : report.errors)
    std::cerr << "rex gc: " << error << '\n';
  std::cout << fmt::format("{} {}, {} kept, {} error{}\n", report.removed.size(),
                           o.dry_run ? "to remove" : "removed", report.kept.size(),
                           report.errors.size(), report.errors.size() == 1 ? "" : "s");
  return report.errors.empty() ? 0 : 1;
}

}  // namespace rex::cli
