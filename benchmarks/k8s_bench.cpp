// rex_k8s_bench: sandboxes on a Kubernetes cluster fanned out through a SandboxPool of
// KubernetesDeployments, against the floor of the same pods created and watched to Running
// straight through the API with the same parallelism, measured in the same run.
//
//   rex_k8s_bench [--sandboxes N] [--parallel P] [--repeats R] [--image IMAGE]
//                 [--server-image IMAGE] [--pull-policy Never|IfNotPresent|Always]
//                 [--kubeconfig FILES] [--context C] [--namespace NS]
//                 [--connect auto|proxy|pod_ip] [--smoke] [--json] [--strict]
//
// Figures:
//   fanout_N        N sandboxes (50 by default), at most P at once (16), wall time until all
//                   are done. rex: fan_out over a SandboxPool (ReturnPolicy::stop,
//                   max_sandboxes = P); each job acquires (the token's Secret and the pod are
//                   created, the pod is watched until its sandbox container runs, the server
//                   answers), runs `echo hi` and releases (the pod is deleted with grace 0 and
//                   awaited until gone, then its Secret). floor: fan_out over the same N jobs
//                   through one ApiClient: create the same pod (pod_manifest of the same settings;
//                   its token from one Secret made beforehand), watch it until it is Running,
//                   delete it with grace 0 and watch until it is gone. Rex and floor runs
//                   alternate, R of each; the figure is the median of each side.
//                   Target: rex <= 1.2 x floor.
//   create_to_first_command
//                   rex: acquire() to `echo hi` answered, p50 and p90 over every sandbox, against
//                   the floor's create to Running.
//   teardown        rex's release against the floor's delete until gone.
// Each fanout row also gives the cluster's CPU per sandbox on each side (kube-apiserver, etcd,
// the scheduler and controller manager, kubelet, containerd and its shims, when they run on this
// machine): steadier on a busy machine than wall times.
//
// Everything carries the label rex.bench=k8s; what an earlier run left is deleted first, and
// anything left at the end is an error. The cluster is found as kubectl finds it (--kubeconfig,
// $KUBECONFIG, ~/.kube/config); exit status 77 when there is none. The images must be on the
// node (the local test cluster: scripts/k8s.sh server-image and docker-image).
// --smoke: N = 4, P = 2, one run each; exits 0 even when a target misses.

#include <rex/backends/kubernetes/kubernetes_deployment.hpp>
#include <rex/core/object_fields.hpp>
#include <rex/core/random.hpp>
#include <rex/deployment/server_binary.hpp>
#include <rex/kubernetes/api_client.hpp>
#include <rex/kubernetes/kubeconfig.hpp>
#include <rex/kubernetes/pod_spec.hpp>
#include <rex/kubernetes/pod_watch.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>
#include <rex/protocol/commands.hpp>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
namespace k8s = rex::kubernetes;
using namespace rex::bench;

constexpr std::string_view kLabel = "rex.bench";
constexpr std::string_view kLabelValue = "k8s";
constexpr auto kPodWait = std::chrono::minutes(3);  // to Running, and until gone

struct Options {
  int sandboxes = 50;
  std::size_t parallel = 16;
  int repeats = 3;
  std::string image = "rex-test-bookworm:latest";
  std::string server_image;  // empty: rex's default
  std::string pull_policy = "IfNotPresent";
  std::string kubeconfig;
  std::string context;
  std::string namespace_name;
  std::string connect = "auto";
  bool smoke = false;
  bool json = false;
  bool strict = false;
};

// One side's measurements over all its runs: wall times one per run, phases one per sandbox, in
// milliseconds.
struct Side {
  std::vector<double> wall, start, run, teardown;
  double cluster_cpu_ms = 0;  // summed over the runs
};

double cluster_cpu_ms() {
  return cpu_ms_of({"kube-apiserver", "etcd", "kube-scheduler", "kube-controller", "kubelet",
                    "containerd", "containerd-shim", "runc"});
}

std::string selector() {
  return fmt::format("labelSelector={}%3D{}", kLabel, kLabelValue);
}

// The pods and Secrets labelled as ours in the namespace.
asio::awaitable<std::size_t> count_leftovers(k8s::ApiClient& api, const std::string& ns) {
  std::size_t n = 0;
  for (const char* kind : {"pods", "secrets"}) {
    const json::value list =
        co_await api.call("GET", fmt::format("/api/v1/namespaces/{}/{}?{}", ns, kind, selector()));
    n += list.at("items").as_array().size();
  }
  co_return n;
}

// Deletes what carries our label (at once) and waits until no pod of ours is left.
asio::awaitable<std::size_t> remove_leftovers(k8s::ApiClient& api, const std::string& ns) {
  const std::size_t found = co_await count_leftovers(api, ns);
  if (found == 0)
    co_return 0;
  for (const char* kind : {"pods", "secrets"}) {
    json::object now{{"gracePeriodSeconds", 0}};
    co_await api.call("DELETE", fmt::format("/api/v1/namespaces/{}/{}?{}", ns, kind, selector()),
                      std::move(now));
  }
  asio::steady_timer pause(co_await asio::this_coro::executor);
  const auto until = Clock::now() + kPodWait;
  while (co_await count_leftovers(api, ns) > 0) {
    if (Clock::now() > until)
      throw std::runtime_error("what an earlier run left was not gone after 3 minutes");
    pause.expires_after(std::chrono::milliseconds(200));
    co_await pause.async_wait(asio::use_awaitable);
  }
  co_return found;
}

template <class T>
void check_all(const std::vector<rex::Outcome<T>>& outcomes, std::string_view side) {
  for (const auto& o : outcomes) {
    if (!o.has_value())
      throw std::runtime_error(fmt::format("{}: a job failed: {}", side, o.error_message()));
  }
}

// ---------------------------------------------------------------------------------------------
// Floor: the API alone

struct Floor {
  k8s::ApiClient& api;
  const Options& opt;
  std::string ns;
  std::string secret;  // the token of every floor pod
  std::string run_id = rex::random_hex(4);
  int next = 0;
};

asio::awaitable<void> create_floor_secret(Floor& floor) {
  json::object body{
      {"apiVersion", "v1"},
      {"kind", "Secret"},
      {"metadata",
       json::object{{"name", floor.secret},
                    {"labels", json::object{{std::string(kLabel), std::string(kLabelValue)}}}}},
      {"stringData", json::object{{"token", rex::random_hex(16)}}},
  };
  co_await floor.api.call("POST", fmt::format("/api/v1/namespaces/{}/secrets", floor.ns),
                          std::move(body));
}

json::object floor_pod(const Floor& floor, const std::string& name) {
  k8s::PodSpecConfig p;
  p.name = name;
  p.namespace_name = floor.ns;
  p.image = floor.opt.image;
  p.image_pull_policy = floor.opt.pull_policy;
  p.server_image =
      floor.opt.server_image.empty() ? rex::default_server_image() : floor.opt.server_image;
  p.token_secret = floor.secret;
  p.max_lifetime = 86400;  // as KubernetesDeploymentConfig's default
  p.labels = {{std::string(kLabel), std::string(kLabelValue)}};
  return k8s::pod_manifest(p);
}

asio::awaitable<void> floor_job(Floor& floor, Side& side) {
  const std::string name = fmt::format("rex-bench-{}-{}", floor.run_id, floor.next++);
  const auto t0 = Clock::now();
  const json::value created = co_await floor.api.call(
      "POST", fmt::format("/api/v1/namespaces/{}/pods", floor.ns), floor_pod(floor, name));
  std::string rv = rex::field_text(created, {"metadata", "resourceVersion"});
  std::string failed;
  auto running = [&](const json::object& pod, bool deleted) {
    if (deleted) {
      failed = "deleted";
      return true;
    }
    const std::string phase = rex::field_text(pod, {"status", "phase"});
    if (phase == "Failed" || phase == "Succeeded")
      failed = phase;
    return !phase.empty() && phase != "Pending";
  };
  if (!co_await k8s::watch_pod(floor.api, floor.ns, name, rv, Clock::now() + kPodWait, running))
    throw std::runtime_error(fmt::format("floor pod {} was not Running after 3 minutes", name));
  if (!failed.empty())
    throw std::runtime_error(fmt::format("floor pod {} ended: {}", name, failed));
  const auto t1 = Clock::now();
  // With grace period 0 the API server forgets the pod at once (the kubelet stops its
  // containers after); else its DELETED event is watched for, from the state read after.
  const std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}", floor.ns, name);
  json::object now{{"gracePeriodSeconds", 0}};
  co_await floor.api.call("DELETE", path, std::move(now));
  try {
    const json::value left = co_await floor.api.call("GET", path);
    rv = rex::field_text(left, {"metadata", "resourceVersion"});
    auto gone = [](const json::object&, bool deleted) { return deleted; };
    if (!co_await k8s::watch_pod(floor.api, floor.ns, name, rv, Clock::now() + kPodWait, gone))
      throw std::runtime_error(fmt::format("floor pod {} was not gone after 3 minutes", name));
  } catch (const k8s::ApiError& e) {
    if (e.status() != 404)
      throw;
  }
  const auto t2 = Clock::now();
  side.start.push_back(ms_between(t0, t1));
  side.teardown.push_back(ms_between(t1, t2));
}

asio::awaitable<void> floor_run(Floor& floor, int n, Side& side) {
  std::vector<int> jobs(static_cast<std::size_t>(n));
  auto fn = [&floor, &side](int&) { return floor_job(floor, side); };
  const double cpu0 = cluster_cpu_ms();
  const auto t0 = Clock::now();
  auto outcomes = co_await rex::fan_out(jobs, floor.opt.parallel, fn);
  side.wall.push_back(ms_since(t0));
  side.cluster_cpu_ms += cluster_cpu_ms() - cpu0;
  check_all(outcomes, "floor");
}

// ---------------------------------------------------------------------------------------------
// rex: a SandboxPool of KubernetesDeployments

rex::SandboxPoolConfig pool_config(const Options& opt, const std::string& ns) {
  rex::KubernetesDeploymentConfig kube;
  kube.image = opt.image;
  kube.server_image = opt.server_image;
  kube.image_pull_policy = opt.pull_policy;
  kube.kubeconfig = opt.kubeconfig;
  kube.context = opt.context;
  kube.namespace_name = ns;
  kube.connect = opt.connect;
  kube.startup_timeout = rex::Seconds(180);
  kube.labels = {{std::string(kLabel), std::string(kLabelValue)}};
  rex::SandboxPoolConfig c;
  c.deployment = kube;
  c.max_sandboxes = opt.parallel;
  c.return_policy = rex::ReturnPolicy::stop;
  return c;
}

asio::awaitable<void> rex_job(rex::SandboxPool& pool, Side& side) {
  const auto t0 = Clock::now();
  auto lease = co_await pool.acquire();
  rex::Command echo;
  echo.command = "echo hi";
  echo.shell = true;
  echo.timeout = 30;
  const auto result = co_await lease.runtime().execute(echo);
  if (result.stdout_ != "hi\n" || result.exit_code != 0)
    throw std::runtime_error(fmt::format("unexpected result of `echo hi`: '{}'", result.stdout_));
  const auto t1 = Clock::now();
  co_await lease.release();
  const auto t2 = Clock::now();
  side.start.push_back(ms_between(t0, t1));
  side.teardown.push_back(ms_between(t1, t2));
}

asio::awaitable<void> rex_run(const Options& opt, const std::string& ns, int n, Side& side) {
  rex::SandboxPool pool(co_await asio::this_coro::executor, pool_config(opt, ns));
  std::vector<int> jobs(static_cast<std::size_t>(n));
  auto fn = [&pool, &side](int&) { return rex_job(pool, side); };
  const double cpu0 = cluster_cpu_ms();
  const auto t0 = Clock::now();
  auto outcomes = co_await rex::fan_out(jobs, opt.parallel, fn);
  side.wall.push_back(ms_since(t0));
  side.cluster_cpu_ms += cluster_cpu_ms() - cpu0;
  co_await pool.shutdown();
  check_all(outcomes, "rex");
}

// ---------------------------------------------------------------------------------------------
// Results

std::vector<Result> results_of(const Options& opt, const Side& rex_side, const Side& floor) {
  std::vector<Result> results;
  const int n = opt.sandboxes;
  Result wall;
  wall.name = fmt::format("fanout_{}", n);
  wall.rex = stats_of(rex_side.wall);
  wall.floor_p50 = median(floor.wall);
  wall.ratio = wall.floor_p50 > 0 ? wall.rex.p50 / wall.floor_p50 : 0;
  wall.target = 1.2;
  wall.verdict = judge(wall.ratio, 1.2, false);
  wall.note =
      fmt::format("wall ms, median of {} (rex {:.0f}; floor {:.0f}); P={}", rex_side.wall.size(),
                  fmt::join(rex_side.wall, "/"), fmt::join(floor.wall, "/"), opt.parallel);
  const double runs = static_cast<double>(n) * static_cast<double>(rex_side.wall.size());
  const double rex_cpu = rex_side.cluster_cpu_ms / runs;
  const double floor_cpu = floor.cluster_cpu_ms / runs;
  if (rex_cpu > 0 || floor_cpu > 0) {
    wall.note += fmt::format("; cluster CPU per sandbox: rex {:.0f} ms, floor {:.0f} ms", rex_cpu,
                             floor_cpu);
    wall.extra["cluster_cpu_ms_per_sandbox"] = rex_cpu;
    wall.extra["floor_cluster_cpu_ms_per_sandbox"] = floor_cpu;
  }
  wall.extra["sandboxes"] = n;
  wall.extra["parallel"] = opt.parallel;
  results.push_back(std::move(wall));

  Result first = ratio_result("create_to_first_command", rex_side.start, floor.start, 0);
  first.target.reset();
  first.verdict = Verdict::info;
  const Stats rex_start = stats_of(rex_side.start);
  const Stats floor_start = stats_of(floor.start);
  first.note = fmt::format(
      "acquire() to `echo hi` answered vs floor create to Running; p90 rex {:.0f} ms, floor "
      "{:.0f} ms",
      rex_start.p90, floor_start.p90);
  first.extra["p90_ms"] = rex_start.p90;
  first.extra["floor_p90_ms"] = floor_start.p90;
  results.push_back(std::move(first));

  Result teardown = ratio_result("teardown", rex_side.teardown, floor.teardown, 0);
  teardown.target.reset();
  teardown.verdict = Verdict::info;
  teardown.note = "release (pod deleted and gone, then its Secret) vs floor delete until gone";
  results.push_back(std::move(teardown));
  return results;
}

int usage(const char* self, int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: {} [--sandboxes N] [--parallel P] [--repeats R] [--image IMAGE]\n"
             "          [--server-image IMAGE] [--pull-policy Never|IfNotPresent|Always]\n"
             "          [--kubeconfig FILES] [--context C] [--namespace NS]\n"
             "          [--connect auto|proxy|pod_ip] [--smoke] [--json] [--strict]\n",
             self);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--smoke") {
      opt.smoke = true;
    } else if (a == "--json") {
      opt.json = true;
    } else if (a == "--strict") {
      opt.strict = true;
    } else if (a == "--sandboxes" && has_value) {
      opt.sandboxes = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--parallel" && has_value) {
      opt.parallel = static_cast<std::size_t>(std::max(1, std::atoi(argv[++i])));
    } else if (a == "--repeats" && has_value) {
      opt.repeats = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--image" && has_value) {
      opt.image = argv[++i];
    } else if (a == "--server-image" && has_value) {
      opt.server_image = argv[++i];
    } else if (a == "--pull-policy" && has_value) {
      opt.pull_policy = argv[++i];
    } else if (a == "--kubeconfig" && has_value) {
      opt.kubeconfig = argv[++i];
    } else if (a == "--context" && has_value) {
      opt.context = argv[++i];
    } else if (a == "--namespace" && has_value) {
      opt.namespace_name = argv[++i];
    } else if (a == "--connect" && has_value) {
      opt.connect = argv[++i];
    } else if (a == "--help" || a == "-h") {
      return usage(argv[0], 0);
    } else {
      fmt::print(stderr, "unknown or incomplete argument `{}`\n", a);
      return usage(argv[0], 2);
    }
  }
  if (opt.smoke) {
    opt.sandboxes = 4;
    opt.parallel = 2;
    opt.repeats = 1;
  }
  raise_fd_limit();

  asio::io_context io;
  k8s::ClusterAccess access;
  try {
    k8s::KubeconfigOptions options;
    options.path = opt.kubeconfig;
    options.context = opt.context;
    access = k8s::load_cluster_access(options);
  } catch (const k8s::KubeconfigError& e) {
    fmt::print(stderr, "rex_k8s_bench: no cluster to measure: {}\n", e.what());
    return 77;
  }
  const std::string ns = opt.namespace_name.empty() ? access.namespace_name : opt.namespace_name;
  const std::string server = access.server;
  k8s::ApiClient api(io.get_executor(), std::move(access));
  Floor floor{api, opt, ns, fmt::format("rex-bench-token-{}", rex::random_hex(4))};

  std::FILE* table = opt.json ? stderr : stdout;
  std::vector<Result> results;
  int status = 0;
  try {
    if (const auto removed = run_on(io, remove_leftovers(api, ns)); removed > 0)
      fmt::print(stderr, "removed {} pods and Secrets left by an earlier run\n", removed);
    run_on(io, create_floor_secret(floor));
    // One unmeasured round of each warms the node's caches (image layers, binaries).
    {
      Side scratch_floor, scratch_rex;
      const int n = static_cast<int>(std::min<std::size_t>(opt.parallel, 2));
      run_on(io, floor_run(floor, n, scratch_floor));
      run_on(io, rex_run(opt, ns, n, scratch_rex));
    }
    Side floor_side, rex_side;
    for (int r = 0; r < opt.repeats; ++r) {
      fmt::print(stderr, "  fanout_{}: run {} of {}\n", opt.sandboxes, r + 1, opt.repeats);
      // Alternate which side goes first, so neither always meets the cluster fresher.
      if (r % 2 == 0) {
        run_on(io, floor_run(floor, opt.sandboxes, floor_side));
        run_on(io, rex_run(opt, ns, opt.sandboxes, rex_side));
      } else {
        run_on(io, rex_run(opt, ns, opt.sandboxes, rex_side));
        run_on(io, floor_run(floor, opt.sandboxes, floor_side));
      }
    }
    results = results_of(opt, rex_side, floor_side);
  } catch (const std::exception& e) {
    fmt::print(stderr, "rex_k8s_bench: {}\n", e.what());
    status = 2;
  }
  // Whatever happened, nothing of ours may stay behind but the floor's Secret, deleted here.
  try {
    try {
      run_on(io,
             api.call("DELETE", fmt::format("/api/v1/namespaces/{}/secrets/{}", ns, floor.secret)));
    } catch (const k8s::ApiError& e) {
      if (e.status() != 404)
        throw;
    }
    if (const auto left = run_on(io, count_leftovers(api, ns)); left > 0) {
      fmt::print(stderr, "rex_k8s_bench: {} pods and Secrets left behind; deleting them\n", left);
      run_on(io, remove_leftovers(api, ns));
      status = 2;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rex_k8s_bench: checking for leftovers: {}\n", e.what());
    status = 2;
  }

  fmt::print(table, "{} sandboxes from {} on {} (namespace {}), {} at once, connect {}\n",
             opt.sandboxes, opt.image, server, ns, opt.parallel, opt.connect);
  print_table(table, results);
  if (opt.json)
    print_json(results);
  if (status != 0)
    return status;
  return opt.strict && !opt.smoke && any_missed(results) ? 1 : 0;
}
