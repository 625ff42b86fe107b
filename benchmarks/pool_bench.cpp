// rex_pool_bench: many Docker sandboxes fanned out through a SandboxPool, against the floor of
// the same containers run straight through the engine API with the same parallelism, measured
// in the same run.
//
//   rex_pool_bench [--sizes 50,100] [--parallel P] [--repeats R] [--image IMAGE]
//                  [--connect auto|port] [--network none] [--warm-spares W] [--acquisitions A]
//                  [--smoke] [--json] [--strict]
//
// Figures:
//   fanout_N        N sandboxes, at most P at once (P = 16 by default), wall time until all
//                   are done. rex: fan_out over a SandboxPool (ReturnPolicy::stop,
//                   max_sandboxes = P); each job acquires (the container starts and its server
//                   answers), creates a session, runs `echo hi` and releases (the container is
//                   killed and removed). floor: fan_out over the same N jobs, each straight
//                   through one docker::Engine: create a container of the same image whose
//                   command is `echo hi`, start it, wait for it to exit, remove it. Rex and
//                   floor runs alternate, R of each; the figure is the median of each side.
//                   Target: rex <= 1.2 x floor.
//   fanout_N.start / .run / .teardown
//                   rex's phases per sandbox (acquire; create_session + echo; release) against
//                   the floor's (create + start; wait; remove), p50 and p99 over all runs.
//   warm_acquire    a pool keeping W spares warm (4 by default): acquire() to the first
//                   command's result, each taken once the spares are ready, against the same
//                   with no spares (a cold start), alternating, A of each.
//
// --connect and --network set the rex side's DockerDeploymentConfig fields of those names
// (default: auto, which reaches the server at the container's address when this machine routes
// there, and publishes no port). Each fanout row also reports the engine's CPU (dockerd and
// containerd, with the children they reaped) per sandbox on each side, which a busy machine
// disturbs much less than wall times.
// Every container carries the label rex.bench=pool. Leftovers of earlier runs are removed
// first; a container left at the end is an error. Needs a running engine and the image
// (scripts/common.sh: rex_docker_setup).
// --smoke: N = 6, P = 3, one run each, 3 acquisitions; exits 0 even when a target misses.

#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/docker/engine.hpp>
#include <rex/pool/fan_out.hpp>
#include <rex/pool/sandbox_pool.hpp>
#include <rex/protocol/actions.hpp>
#include <rex/protocol/session.hpp>

#include <fmt/format.h>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench_common.hpp"

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace rex::bench;

constexpr std::string_view kLabel = "rex.bench";
constexpr std::string_view kLabelValue = "pool";

struct Options {
  std::vector<int> sizes{50, 100};
  std::size_t parallel = 16;
  int repeats = 3;
  std::string image = "rex-test-nopython:latest";
  std::string connect = "auto";  // rex's DockerDeploymentConfig::connect
  std::string network;           // "none": rex's server on a unix socket, no published port
  std::size_t warm_spares = 4;
  int acquisitions = 30;
  bool smoke = false;
  bool json = false;
  bool strict = false;
};

// What each side measured over all its runs of one size: wall times one per run, phases one
// per sandbox, in milliseconds.
struct FloorSide {
  std::vector<double> wall, create, start, wait, remove;
  double engine_cpu_ms = 0;  // summed over the runs
};

struct RexSide {
  std::vector<double> wall, acquire, run, teardown;
  double engine_cpu_ms = 0;
  long rss_before_kib = 0;  // this process, before anything ran
  long rss_peak_kib = 0;    // the most seen while sandboxes ran
};

// ---------------------------------------------------------------------------------------------
// The engine: clean state before, nothing left after, and the CPU it spends

// The engine's daemons on this machine. A noisy neighbour changes wall times, but hardly the
// engine's CPU per container.
double engine_cpu_ms() {
  return cpu_ms_of({"dockerd", "containerd"});
}

std::vector<std::string> bench_filter() {
  return {fmt::format("{}={}", kLabel, kLabelValue)};
}

asio::awaitable<std::size_t> remove_leftovers(rex::docker::Engine& engine) {
  auto filter = bench_filter();
  auto containers = co_await engine.list_containers(filter, true);
  for (const auto& c : containers)
    co_await engine.remove_container(c.id, true);
  co_return containers.size();
}

asio::awaitable<std::size_t> count_leftovers(rex::docker::Engine& engine) {
  auto filter = bench_filter();
  auto containers = co_await engine.list_containers(filter, true);
  co_return containers.size();
}

// ---------------------------------------------------------------------------------------------
// Floor: the engine API alone

asio::awaitable<void> floor_job(rex::docker::Engine& engine, const Options& opt, FloorSide& side) {
  json::object body{{"Image", opt.image},
                    {"Cmd", json::array{"echo", "hi"}},
                    {"Labels", json::object{{kLabel, kLabelValue}}},
                    {"HostConfig", json::object{{"Init", false}}}};  // as rex's containers
  const auto t0 = Clock::now();
  const std::string id = co_await engine.create_container(std::move(body));
  const auto t1 = Clock::now();
  co_await engine.start_container(id);
  const auto t2 = Clock::now();
  const auto code = co_await engine.wait_container(id);
  const auto t3 = Clock::now();
  co_await engine.remove_container(id, true);
  const auto t4 = Clock::now();
  if (code != 0)
    throw std::runtime_error(fmt::format("floor container exited with {}", code));
  side.create.push_back(ms_between(t0, t1));
  side.start.push_back(ms_between(t1, t2));
  side.wait.push_back(ms_between(t2, t3));
  side.remove.push_back(ms_between(t3, t4));
}

template <class T>
void check_all(const std::vector<rex::Outcome<T>>& outcomes, std::string_view side) {
  for (const auto& o : outcomes) {
    if (!o.has_value())
      throw std::runtime_error(fmt::format("{}: a job failed: {}", side, o.error_message()));
  }
}

asio::awaitable<void> floor_run(rex::docker::Engine& engine, const Options& opt, int n,
                                FloorSide& side) {
  std::vector<int> jobs(static_cast<std::size_t>(n));
  auto fn = [&engine, &opt, &side](int&) { return floor_job(engine, opt, side); };
  const double cpu0 = engine_cpu_ms();
  const auto t0 = Clock::now();
  auto outcomes = co_await rex::fan_out(jobs, opt.parallel, fn);
  side.wall.push_back(ms_since(t0));
  side.engine_cpu_ms += engine_cpu_ms() - cpu0;
  check_all(outcomes, "floor");
}

// ---------------------------------------------------------------------------------------------
// rex: a SandboxPool of DockerDeployments

rex::SandboxPoolConfig pool_config(const Options& opt, std::size_t max, std::size_t spares) {
  rex::DockerDeploymentConfig docker;
  docker.image = opt.image;
  docker.pull = rex::PullPolicy::never;
  docker.startup_timeout = rex::Seconds(120);
  docker.network_mode = opt.network;
  docker.connect = opt.connect;
  docker.labels = {{std::string(kLabel), std::string(kLabelValue)}};
  rex::SandboxPoolConfig c;
  c.deployment = docker;
  c.max_sandboxes = max;
  c.warm_spares = spares;
  c.return_policy = rex::ReturnPolicy::stop;
  return c;
}

// A session and `echo hi` in a leased sandbox.
asio::awaitable<void> first_command(rex::SandboxLease& lease) {
  rex::CreateBashSessionRequest create;
  create.startup_timeout = 30;
  co_await lease.runtime().create_session(create);
  rex::BashAction echo;
  echo.command = "echo hi";
  echo.timeout = 30;
  auto obs = co_await lease.runtime().run_in_session(echo);
  if (obs.output != "hi\n" || obs.exit_code != 0)
    throw std::runtime_error(fmt::format("unexpected result of `echo hi`: '{}'", obs.output));
}

asio::awaitable<void> rex_job(rex::SandboxPool& pool, RexSide& side) {
  const auto t0 = Clock::now();
  auto lease = co_await pool.acquire();
  const auto t1 = Clock::now();
  co_await first_command(lease);
  const auto t2 = Clock::now();
  side.rss_peak_kib = std::max(side.rss_peak_kib, vm_rss_kib());
  co_await lease.release();
  const auto t3 = Clock::now();
  side.acquire.push_back(ms_between(t0, t1));
  side.run.push_back(ms_between(t1, t2));
  side.teardown.push_back(ms_between(t2, t3));
}

asio::awaitable<void> rex_run(const Options& opt, int n, RexSide& side) {
  rex::SandboxPool pool(co_await asio::this_coro::executor, pool_config(opt, opt.parallel, 0));
  std::vector<int> jobs(static_cast<std::size_t>(n));
  auto fn = [&pool, &side](int&) { return rex_job(pool, side); };
  const double cpu0 = engine_cpu_ms();
  const auto t0 = Clock::now();
  auto outcomes = co_await rex::fan_out(jobs, opt.parallel, fn);
  side.wall.push_back(ms_since(t0));
  side.engine_cpu_ms += engine_cpu_ms() - cpu0;
  co_await pool.shutdown();
  check_all(outcomes, "rex");
}

// ---------------------------------------------------------------------------------------------
// Warm spares: acquire() to the first command's result

asio::awaitable<void> until_ready(rex::SandboxPool& pool, std::size_t spares) {
  asio::steady_timer pause(co_await asio::this_coro::executor);
  const auto deadline = Clock::now() + std::chrono::minutes(2);
  for (;;) {
    const auto s = pool.stats();
    if (s.spares >= spares && s.starting == 0)
      co_return;
    if (Clock::now() > deadline)
      throw std::runtime_error(
          fmt::format("the pool had {} of {} spares ready after 2 minutes", s.spares, spares));
    pause.expires_after(std::chrono::milliseconds(10));
    co_await pause.async_wait(asio::use_awaitable);
  }
}

asio::awaitable<double> time_first_result(rex::SandboxPool& pool) {
  const auto t0 = Clock::now();
  auto lease = co_await pool.acquire();
  co_await first_command(lease);
  const double ms = ms_since(t0);
  co_await lease.release();
  co_return ms;
}

struct WarmTimes {
  std::vector<double> warm;
  std::vector<double> cold;
};

asio::awaitable<void> warm_run(const Options& opt, WarmTimes& times) {
  auto executor = co_await asio::this_coro::executor;
  rex::SandboxPool warm(executor, pool_config(opt, opt.warm_spares + 1, opt.warm_spares));
  rex::SandboxPool cold(executor, pool_config(opt, 1, 0));
  // Each timing starts with the warm pool ready and idle, so its top-ups never overlap one.
  for (int i = 0; i < opt.acquisitions; ++i) {
    co_await until_ready(warm, opt.warm_spares);
    const double warm_ms = co_await time_first_result(warm);
    times.warm.push_back(warm_ms);
    co_await until_ready(warm, opt.warm_spares);
    const double cold_ms = co_await time_first_result(cold);
    times.cold.push_back(cold_ms);
  }
  co_await warm.shutdown();
  co_await cold.shutdown();
}

// ---------------------------------------------------------------------------------------------
// Results

std::string p50_p99(const std::vector<double>& samples) {
  const Stats s = stats_of(samples);
  return fmt::format("{:.0f}/{:.0f}", s.p50, s.p99);
}

std::vector<Result> fanout_results(const Options& opt, int n, const RexSide& rex_side,
                                   const FloorSide& floor_side) {
  std::vector<Result> results;
  Result wall;
  wall.name = fmt::format("fanout_{}", n);
  wall.rex = stats_of(rex_side.wall);
  wall.floor_p50 = median(floor_side.wall);
  wall.ratio = wall.floor_p50 > 0 ? wall.rex.p50 / wall.floor_p50 : 0;
  wall.target = 1.2;
  wall.verdict = judge(wall.ratio, 1.2, false);
  const long rss_delta = rex_side.rss_peak_kib - rex_side.rss_before_kib;
  wall.note = fmt::format(
      "wall ms, median of {} (rex {:.0f}; floor {:.0f}); P={}; rex RSS +{:.1f} MiB with {} "
      "sandboxes live",
      rex_side.wall.size(), fmt::join(rex_side.wall, "/"), fmt::join(floor_side.wall, "/"),
      opt.parallel, static_cast<double>(rss_delta) / 1024, opt.parallel);
  wall.extra["sandboxes"] = n;
  wall.extra["parallel"] = opt.parallel;
  wall.extra["runs"] = rex_side.wall.size();
  wall.extra["rss_delta_kib"] = rss_delta;
  const auto per_sandbox = [&](double total) {
    return total / static_cast<double>(n * static_cast<int>(rex_side.wall.size()));
  };
  const double rex_cpu = per_sandbox(rex_side.engine_cpu_ms);
  const double floor_cpu = per_sandbox(floor_side.engine_cpu_ms);
  if (rex_cpu > 0 || floor_cpu > 0) {
    wall.note +=
        fmt::format("; engine CPU per sandbox: rex {:.0f} ms, floor {:.0f} ms", rex_cpu, floor_cpu);
    wall.extra["engine_cpu_ms_per_sandbox"] = rex_cpu;
    wall.extra["floor_engine_cpu_ms_per_sandbox"] = floor_cpu;
  }
  results.push_back(std::move(wall));

  const auto& f = floor_side;
  auto phase = [&](std::string_view name, const std::vector<double>& rex_samples,
                   std::vector<double> floor_samples, std::string note) {
    Result r = ratio_result(fmt::format("fanout_{}.{}", n, name), rex_samples, floor_samples, 0);
    r.target.reset();
    r.verdict = Verdict::info;
    r.note = std::move(note);
    results.push_back(std::move(r));
  };
  std::vector<double> create_start;
  for (std::size_t i = 0; i < f.create.size(); ++i)
    create_start.push_back(f.create[i] + f.start[i]);
  phase("start", rex_side.acquire, create_start,
        fmt::format("acquire vs floor create+start; floor create {} ms, start {} ms (p50/p99)",
                    p50_p99(f.create), p50_p99(f.start)));
  phase("run", rex_side.run, f.wait,
        fmt::format("create_session + echo vs floor wait {} ms (p50/p99)", p50_p99(f.wait)));
  phase("teardown", rex_side.teardown, f.remove,
        fmt::format("release (kill + remove) vs floor remove {} ms (p50/p99)", p50_p99(f.remove)));
  return results;
}

Result warm_result(const Options& opt, const WarmTimes& times) {
  Result r = ratio_result("warm_acquire", times.warm, times.cold, 0);
  r.target.reset();
  r.target_text = "floor=cold";
  r.verdict = Verdict::info;
  r.note = fmt::format(
      "acquire() to `echo hi` answered, {} warm spares ready vs none (cold start); {} each",
      opt.warm_spares, times.warm.size());
  return r;
}

std::vector<int> parse_sizes(std::string_view text) {
  std::vector<int> sizes;
  while (!text.empty()) {
    const auto comma = text.find(',');
    const std::string item(text.substr(0, comma));
    const int n = std::atoi(item.c_str());
    if (n <= 0)
      throw std::invalid_argument(fmt::format("--sizes: '{}' is not a positive number", item));
    sizes.push_back(n);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
  }
  if (sizes.empty())
    throw std::invalid_argument("--sizes: give at least one size, e.g. 50,100");
  return sizes;
}

int usage(const char* self, int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: {} [--sizes 50,100] [--parallel P] [--repeats R] [--image IMAGE]\n"
             "          [--connect auto|port] [--network none] [--warm-spares W]\n"
             "          [--acquisitions A] [--smoke] [--json] [--strict]\n",
             self);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string_view a = argv[i];
      const bool has_value = i + 1 < argc;
      if (a == "--smoke") {
        opt.smoke = true;
      } else if (a == "--json") {
        opt.json = true;
      } else if (a == "--strict") {
        opt.strict = true;
      } else if (a == "--sizes" && has_value) {
        opt.sizes = parse_sizes(argv[++i]);
      } else if (a == "--parallel" && has_value) {
        opt.parallel = static_cast<std::size_t>(std::max(1, std::atoi(argv[++i])));
      } else if (a == "--repeats" && has_value) {
        opt.repeats = std::max(1, std::atoi(argv[++i]));
      } else if (a == "--image" && has_value) {
        opt.image = argv[++i];
      } else if (a == "--connect" && has_value) {
        opt.connect = argv[++i];
      } else if (a == "--network" && has_value) {
        opt.network = argv[++i];
      } else if (a == "--warm-spares" && has_value) {
        opt.warm_spares = static_cast<std::size_t>(std::max(1, std::atoi(argv[++i])));
      } else if (a == "--acquisitions" && has_value) {
        opt.acquisitions = std::max(1, std::atoi(argv[++i]));
      } else if (a == "--help" || a == "-h") {
        return usage(argv[0], 0);
      } else {
        fmt::print(stderr, "unknown or incomplete argument `{}`\n", a);
        return usage(argv[0], 2);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}\n", e.what());
    return usage(argv[0], 2);
  }
  if (opt.smoke) {
    opt.sizes = {6};
    opt.parallel = 3;
    opt.repeats = 1;
    opt.warm_spares = 2;
    opt.acquisitions = 3;
  }
  raise_fd_limit();
  const long rss_at_start = vm_rss_kib();

  std::FILE* table = opt.json ? stderr : stdout;
  asio::io_context io;
  rex::docker::Engine engine(io.get_executor());
  std::vector<Result> results;
  int status = 0;
  try {
    if (const auto removed = run_on(io, remove_leftovers(engine)); removed > 0)
      fmt::print(stderr, "removed {} containers left by an earlier run\n", removed);
    // One unmeasured round of each warms the engine's caches (image layers, binaries).
    {
      FloorSide scratch_floor;
      RexSide scratch_rex;
      const int n = static_cast<int>(std::min<std::size_t>(opt.parallel, 4));
      run_on(io, floor_run(engine, opt, n, scratch_floor));
      run_on(io, rex_run(opt, n, scratch_rex));
    }
    for (const int n : opt.sizes) {
      FloorSide floor_side;
      RexSide rex_side;
      rex_side.rss_before_kib = rss_at_start;
      for (int r = 0; r < opt.repeats; ++r) {
        fmt::print(stderr, "  fanout_{}: run {} of {}\n", n, r + 1, opt.repeats);
        // Alternate which side goes first, so neither always meets the engine fresher.
        if (r % 2 == 0) {
          run_on(io, floor_run(engine, opt, n, floor_side));
          run_on(io, rex_run(opt, n, rex_side));
        } else {
          run_on(io, rex_run(opt, n, rex_side));
          run_on(io, floor_run(engine, opt, n, floor_side));
        }
      }
      for (auto& r : fanout_results(opt, n, rex_side, floor_side))
        results.push_back(std::move(r));
    }
    fmt::print(stderr, "  warm_acquire: {} acquisitions\n", opt.acquisitions);
    WarmTimes times;
    run_on(io, warm_run(opt, times));
    results.push_back(warm_result(opt, times));
  } catch (const std::exception& e) {
    fmt::print(stderr, "rex_pool_bench: {}\n", e.what());
    status = 2;
  }
  // Whatever happened, nothing of ours may stay behind.
  try {
    const auto left = run_on(io, count_leftovers(engine));
    if (left > 0) {
      fmt::print(stderr, "rex_pool_bench: {} containers left behind; removing them\n", left);
      run_on(io, remove_leftovers(engine));
      status = 2;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rex_pool_bench: checking for leftovers: {}\n", e.what());
    status = 2;
  }

  fmt::print(table,
             "{} sandboxes from {}, {} at once, connect {}{}; peak RSS of this process {:.1f} "
             "MiB\n",
             fmt::join(opt.sizes, " and "), opt.image, opt.parallel, opt.connect,
             opt.network.empty() ? "" : fmt::format(", network {}", opt.network),
             static_cast<double>(peak_rss_kib()) / 1024);
  print_table(table, results);
  if (opt.json)
    print_json(results);
  if (status != 0)
    return status;
  return opt.strict && !opt.smoke && any_missed(results) ? 1 : 0;
}
