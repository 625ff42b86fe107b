// rex_docker_bench: container start to first successful command, DockerDeployment against the
// floor of the raw engine, measured in the same run.
//
//   rex_docker_bench [--runs N] [--image IMAGE] [--smoke] [--json] [--strict]
//
// Figures (rex and floor runs alternate, so a noisy neighbour hurts both alike):
//   floor          create + start + wait for a container running `/bin/sh -c 'exit 0'`, through
//                  the same Engine API client: what any container start costs on this engine
//   docker_tcp     DockerDeployment.start() (image check, create with the server mounted, start,
//                  address read back, server answering) + create_session + `echo ok` answered,
//                  with the default connect (auto: the container's address when routable)
//   docker_port    the same with the server's port published on 127.0.0.1 (connect: port)
//   docker_unix    the same in network-less mode (unix socket, no port publishing)
// Target: p50 of each <= 1.25 x p50 of floor. Container removal is not
// timed in either. Needs a running engine and the image (scripts/common.sh: rex_docker_setup).
// --smoke: 2 runs each, exits 0 even when a target misses (a failure to start still fails).

#include <rex/deployment/docker_deployment.hpp>
#include <rex/docker/engine.hpp>

#include <fmt/core.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace rex::bench;

struct Options {
  int runs = 10;
  std::string image = "rex-test-nopython:latest";
  bool smoke = false;
  bool json = false;
  bool strict = false;
};

asio::awaitable<double> floor_once(rex::docker::Engine& engine, std::string image) {
  json::object body{{"Image", image},
                    {"Entrypoint", json::array{"/bin/sh", "-c", "exit 0"}},
                    {"Labels", json::object{{"rex.bench", "floor"}}}};
  const auto t0 = Clock::now();
  const std::string id = co_await engine.create_container(std::move(body));
  co_await engine.start_container(id);
  const auto code = co_await engine.wait_container(id);
  const double ms = ms_since(t0);
  co_await engine.remove_container(id, true);
  if (code != 0)
    throw std::runtime_error(fmt::format("floor container exited with {}", code));
  co_return ms;
}

// mode: "auto", "port" (connect) or "none" (network mode: a unix socket).
asio::awaitable<double> rex_once(std::string image, std::string mode) {
  rex::DockerDeploymentConfig c;
  c.image = std::move(image);
  c.pull = rex::PullPolicy::never;
  c.labels = {{"rex.bench", "deployment"}};
  if (mode == "none")
    c.network_mode = "none";
  else
    c.connect = mode;
  auto ex = co_await asio::this_coro::executor;
  rex::DockerDeployment d(ex, c);
  const auto t0 = Clock::now();
  co_await d.start();
  rex::CreateBashSessionRequest create;
  create.startup_timeout = 30;
  co_await d.runtime().create_session(create);
  rex::BashAction echo;
  echo.command = "echo ok";
  echo.timeout = 30;
  auto obs = co_await d.runtime().run_in_session(echo);
  const double ms = ms_since(t0);
  co_await d.stop();
  if (obs.output != "ok\n" || obs.exit_code != 0)
    throw std::runtime_error("unexpected first command result: " + obs.output);
  co_return ms;
}

int usage(const char* self, int code) {
  fmt::print(code == 0 ? stdout : stderr,
             "usage: {} [--runs N] [--image IMAGE] [--smoke] [--json] [--strict]\n", self);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--smoke")
      opt.smoke = true;
    else if (a == "--json")
      opt.json = true;
    else if (a == "--strict")
      opt.strict = true;
    else if (a == "--image" && i + 1 < argc)
      opt.image = argv[++i];
    else if (a == "--runs" && i + 1 < argc)
      opt.runs = std::max(1, std::atoi(argv[++i]));
    else if (a == "--help" || a == "-h")
      return usage(argv[0], 0);
    else {
      fmt::print(stderr, "unknown or incomplete argument `{}`\n", a);
      return usage(argv[0], 2);
    }
  }
  if (opt.smoke)
    opt.runs = 2;

  asio::io_context io;
  rex::docker::Engine engine(io.get_executor());
  std::vector<double> floor_ms, tcp_ms, port_ms, unix_ms;
  try {
    // One unmeasured start of each warms the engine's caches (image layers, binaries).
    run_on(io, floor_once(engine, opt.image));
    run_on(io, rex_once(opt.image, "auto"));
    for (int i = 0; i < opt.runs; ++i) {
      floor_ms.push_back(run_on(io, floor_once(engine, opt.image)));
      tcp_ms.push_back(run_on(io, rex_once(opt.image, "auto")));
      port_ms.push_back(run_on(io, rex_once(opt.image, "port")));
      unix_ms.push_back(run_on(io, rex_once(opt.image, "none")));
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "rex_docker_bench: {}\n", e.what());
    return 1;
  }

  auto figure = [&](std::string name, const std::vector<double>& samples) {
    Result r = ratio_result(std::move(name), samples, floor_ms, 1.25);
    r.note = fmt::format("p90 {:.1f} ms, max {:.1f} ms", r.rex.p90, r.rex.max);
    r.extra["image"] = opt.image;
    return r;
  };
  std::vector<Result> results;
  Result base = figure("floor", floor_ms);
  base.target.reset();
  base.target_text = "floor";
  base.verdict = Verdict::info;
  results.push_back(std::move(base));
  results.push_back(figure("docker_tcp", tcp_ms));
  results.push_back(figure("docker_port", port_ms));
  results.push_back(figure("docker_unix", unix_ms));

  FILE* table = opt.json ? stderr : stdout;
  fmt::print(table, "container start to first command, image {}, {} runs each\n", opt.image,
             opt.runs);
  print_table(table, results);
  if (opt.json)
    print_json(results);
  return opt.strict && any_missed(results) ? 1 : 0;
}
