#include "gc_command.hpp"

#include <rex/aws/client.hpp>
#include <rex/deployment/docker_gc.hpp>
#include <rex/deployment/fargate_gc.hpp>
#include <rex/deployment/kubernetes_gc.hpp>
#include <rex/docker/engine.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>

#include <iostream>
#include <stdexcept>

namespace rex::cli {

namespace {

std::string label(const GcEntry& entry) {
  std::string id = entry.id.substr(0, 12);
  if (id.empty())
    return entry.name;  // a pod or Secret: its namespace and name say it all
  return entry.name.empty() ? id : fmt::format("{} {}", id, entry.name);
}

}  // namespace

void add_gc_options(CLI::App& app, GcCommandOptions& o) {
  app.add_flag("--all", o.all, "Remove every rex container, also those whose owner still runs");
  app.add_flag("--dry-run", o.dry_run, "Only report what would be removed");
  app.add_option("--engine", o.engine,
                 "The engine to ask, as DOCKER_HOST (unix:///PATH, tcp://HOST:PORT); default: "
                 "DOCKER_HOST or the runtime's socket");
  app.add_flag("--podman", o.podman, "Use Podman's socket when no engine is given");
  app.add_flag("--kubernetes", o.kubernetes,
               "Delete the pods (and their Secrets) of a Kubernetes cluster instead");
  app.add_option("--namespace", o.namespace_name, "kubernetes: one namespace (default: all)");
  app.add_option("--context", o.context, "kubernetes: the kubeconfig context (default: current)");
  app.add_option("--kubeconfig", o.kubeconfig,
                 "kubernetes: kubeconfig files, ':'-separated (default: KUBECONFIG or "
                 "~/.kube/config)");
  app.add_flag("--fargate", o.fargate,
               "Stop the tasks of an AWS ECS cluster (Fargate) instead, and delete the security "
               "groups rex made that nothing uses; credentials, region and endpoints as the AWS "
               "CLI finds them");
  app.add_option("--cluster", o.cluster, "fargate: the ECS cluster (default: rex-cluster)");
  app.add_option("--region", o.region,
                 "fargate: the AWS region (default: as the AWS CLI finds it)");
  app.add_option("--profile", o.profile,
                 "fargate: the AWS profile (default: as the AWS CLI finds it)");
}

int gc_command(const GcCommandOptions& o) {
  asio::io_context io(1);
  GcReport report;
  try {
    GcOptions options;
    options.all = o.all;
    options.dry_run = o.dry_run;
    std::exception_ptr failure;
    auto done = [&](std::exception_ptr e, GcReport r) {
      failure = e;
      report = std::move(r);
    };
    if (o.fargate && o.kubernetes)
      throw std::invalid_argument("--fargate and --kubernetes: one at a time");
    if (o.fargate) {
      aws::AwsClient client(io.get_executor(), aws::config_from_environment(o.profile, o.region));
      FargateGcOptions fargate_options;
      fargate_options.gc = options;
      fargate_options.cluster = o.cluster;
      asio::co_spawn(io, collect_fargate_garbage(client, fargate_options), done);
      io.run();
    } else if (o.kubernetes) {
      kubernetes::KubeconfigOptions where;
      where.path = o.kubeconfig;
      where.context = o.context;
      kubernetes::ApiClient api(io.get_executor(), kubernetes::load_cluster_access(where));
      KubernetesGcOptions k8s_options;
      k8s_options.gc = options;
      k8s_options.namespace_name = o.namespace_name;
      asio::co_spawn(io, collect_kubernetes_garbage(api, k8s_options), done);
      io.run();
    } else {
      auto config = docker::engine_config_from_environment(o.podman ? "podman" : "docker");
      if (!o.engine.empty())
        config.host = o.engine;
      docker::Engine engine(io.get_executor(), config);
      asio::co_spawn(io, collect_garbage(engine, options), done);
      io.run();
    }
    if (failure)
      std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    // The engine's errors say where it looked and how to fix it.
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
