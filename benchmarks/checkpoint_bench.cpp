// rex_checkpoint_bench: checkpoints, forks, pauses and rewinds of a Docker sandbox against the
// floors of the raw engine (or of rex's own fresh start, where the floor is "a sandbox that
// carries nothing"), measured in the same run, alternating rex and floor.
//
//   rex_checkpoint_bench [--runs N] [--image IMAGE] [--forks N] [--megabytes N] [--smoke]
//                        [--json] [--strict]
//
// The figures (p50 of --runs samples each):
//   checkpoint   DockerDeployment::checkpoint() of a sandbox whose file system carries
//                --megabytes MB written since its start (its one session's state captured,
//                then the engine's commit), against the engine's commit of the same container
//                (POST /commit, the same pause) alone. Target: <= 1.2x.
//   fork_xN      fork_sandboxes(checkpoint, N) until a command has answered in every fork's
//                restored session, against N fresh sandboxes of the base image started side by
//                side until a command has answered in each (which carry nothing). Target:
//                <= 1.5x.
//   pause        pause() keeping memory (the sessions' state captured, then the engine's pause)
//                against the engine's pause of the same container. Target: <= 1.2x.
//   resume       resume() against the engine's unpause. Target: <= 1.2x.
//   rewind       rewind(checkpoint) until a command answers in the restored session, against a
//                fresh sandbox of the checkpoint's image started until a command answers.
//                Target: <= 1.2x.
// Needs a running engine and the image (scripts/common.sh: rex_docker_setup). --smoke: 2 runs
// of each and 2 forks, exits 0 even when a target misses (a failure still fails).

#include <rex/backends/docker/docker_deployment.hpp>
#include <rex/docker/engine.hpp>

#include <fmt/core.h>
#include <boost/asio/io_context.hpp>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench_common.hpp"

namespace {

namespace asio = boost::asio;
using namespace rex::bench;

struct Options {
  int runs = 8;
  int forks = 8;
  int megabytes = 100;
  std::string image = "rex-test-bookworm:latest";
  bool smoke = false;
  bool json = false;
  bool strict = false;
};

rex::DockerDeploymentConfig config_of(const Options& o, std::string image) {
  rex::DockerDeploymentConfig c;
  c.image = std::move(image);
  c.pull = rex::PullPolicy::never;
  c.startup_timeout = rex::Seconds(120);
  c.labels = {{"rex.bench", "checkpoint"}};
  (void)o;
  return c;
}

rex::BashAction command(std::string text) {
  rex::BashAction a;
  a.command = std::move(text);
  a.timeout = 120;
  return a;
}

asio::awaitable<void> answer(rex::Runtime& rt) {
  auto running = rt.run_in_session(command("echo ok"));
  const rex::BashObservation obs = co_await std::move(running);
  if (obs.output != "ok\n")
    throw std::runtime_error("unexpected answer: " + obs.output);
}

asio::awaitable<void> open_session(rex::Runtime& rt) {
  rex::CreateBashSessionRequest r;
  r.startup_timeout = 60;
  auto creating = rt.create_session(r);
  (void)co_await std::move(creating);
  auto running = rt.run_in_session(command("cd /srv && export TASK=bench && f() { :; }"));
  (void)co_await std::move(running);
}

// What the run does now, on stderr: a run that stops says where.
void step(const std::string& what) {
  std::fprintf(stderr, "rex_checkpoint_bench: %s\n", what.c_str());
  std::fflush(stderr);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc)
        throw std::invalid_argument(a + " needs a value");
      return argv[++i];
    };
    if (a == "--runs")
      o.runs = std::stoi(next());
    else if (a == "--forks")
      o.forks = std::stoi(next());
    else if (a == "--megabytes")
      o.megabytes = std::stoi(next());
    else if (a == "--image")
      o.image = next();
    else if (a == "--smoke")
      o.smoke = true;
    else if (a == "--json")
      o.json = true;
    else if (a == "--strict")
      o.strict = true;
    else {
      std::fprintf(stderr, "unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (o.smoke) {
    o.runs = 2;
    o.forks = 2;
  }
  asio::io_context io;
  rex::docker::Engine engine(io.get_executor());
  std::vector<double> ckpt, ckpt_floor, fork, fork_floor, pause, pause_floor, resume, resume_floor,
      rewind, rewind_floor;
  try {
    step("starting the sandbox");
    rex::DockerDeployment d(io.get_executor(), config_of(o, o.image));
    run_on(io, d.start());
    run_on(io, open_session(d.runtime()));
    run_on(io, [&]() -> asio::awaitable<void> {
      auto writing = d.runtime().run_in_session(command(
          fmt::format("mkdir -p /srv/data && for i in $(seq {}); do head -c 1048576 /dev/urandom > "
                      "/srv/data/f$i; done",
                      o.megabytes)));
      (void)co_await std::move(writing);
    }());
    const std::string container = d.sandbox_id();
    std::vector<std::string> floor_images;
    rex::Checkpoint base;
    for (int run = 0; run < o.runs; ++run) {
      step(fmt::format("run {}: checkpoint, commit, pause, resume", run + 1));
      // checkpoint, alternating with the engine's commit of the same container
      auto t0 = Clock::now();
      rex::Checkpoint cp = run_on(io, d.checkpoint());
      ckpt.push_back(ms_since(t0));
      t0 = Clock::now();
      floor_images.push_back(run_on(
          io, engine.commit_container(container, "rex-bench-floor", fmt::format("r{}", run), {})));
      ckpt_floor.push_back(ms_since(t0));
      if (run == 0)
        base = cp;
      else
        run_on(io, d.remove_checkpoint(cp));

      // pause and resume, alternating with the engine's own
      t0 = Clock::now();
      run_on(io, d.pause());
      pause.push_back(ms_since(t0));
      t0 = Clock::now();
      run_on(io, d.resume());
      resume.push_back(ms_since(t0));
      t0 = Clock::now();
      run_on(io, engine.pause_container(container));
      pause_floor.push_back(ms_since(t0));
      t0 = Clock::now();
      run_on(io, engine.unpause_container(container));
      resume_floor.push_back(ms_since(t0));
    }
    step("removing the floor's images");
    for (const auto& image : floor_images)
      run_on(io, engine.remove_image(image, true));

    for (int run = 0; run < o.runs; ++run) {
      step(fmt::format("run {}: fork x{}", run + 1, o.forks));
      // fork xN to a command answered in every fork, against N fresh sandboxes
      auto t0 = Clock::now();
      auto forks = run_on(io, d.fork_sandboxes(base, o.forks));
      run_on(io, [&]() -> asio::awaitable<void> {
        for (auto& f : forks) {
          auto answering = answer(f->runtime());
          co_await std::move(answering);
        }
      }());
      fork.push_back(ms_since(t0));
      for (auto& f : forks)
        run_on(io, f->stop());
      step(fmt::format("run {}: {} fresh sandboxes", run + 1, o.forks));
      t0 = Clock::now();
      std::vector<std::unique_ptr<rex::DockerDeployment>> fresh;
      for (int i = 0; i < o.forks; ++i)
        fresh.push_back(
            std::make_unique<rex::DockerDeployment>(io.get_executor(), config_of(o, o.image)));
      const BatchResult started = run_all(io, o.forks, [&](int i) -> asio::awaitable<int> {
        co_await fresh[static_cast<std::size_t>(i)]->start();
        auto opening = open_session(fresh[static_cast<std::size_t>(i)]->runtime());
        co_await std::move(opening);
        auto answering = answer(fresh[static_cast<std::size_t>(i)]->runtime());
        co_await std::move(answering);
        co_return 0;
      });
      fork_floor.push_back(ms_since(t0));
      if (started.failed > 0)
        throw std::runtime_error("a fresh sandbox failed: " + started.first_error);
      for (auto& f : fresh)
        run_on(io, f->stop());

      // rewind to a command answered, against a fresh sandbox of the checkpoint's image
      step(fmt::format("run {}: rewind, a sandbox of the checkpoint's image", run + 1));
      t0 = Clock::now();
      run_on(io, d.rewind(base));
      run_on(io, answer(d.runtime()));
      rewind.push_back(ms_since(t0));
      t0 = Clock::now();
      rex::DockerDeployment from_image(io.get_executor(), config_of(o, base.image));
      run_on(io, from_image.start());
      run_on(io, open_session(from_image.runtime()));
      run_on(io, answer(from_image.runtime()));
      rewind_floor.push_back(ms_since(t0));
      run_on(io, from_image.stop());
    }
    run_on(io, d.stop());
    run_on(io, d.remove_checkpoint(base));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "rex_checkpoint_bench: %s\n", e.what());
    return 1;
  }
  std::vector<Result> results;
  results.push_back(ratio_result("checkpoint", ckpt, ckpt_floor, 1.2));
  results.back().note = fmt::format("{} MB changed; floor: the engine's commit", o.megabytes);
  results.push_back(ratio_result(fmt::format("fork_x{}", o.forks), fork, fork_floor, 1.5));
  results.back().note = fmt::format("floor: {} fresh sandboxes of the base image", o.forks);
  results.push_back(ratio_result("pause", pause, pause_floor, 1.2));
  results.back().note = "floor: the engine's pause";
  results.push_back(ratio_result("resume", resume, resume_floor, 1.2));
  results.back().note = "floor: the engine's unpause";
  results.push_back(ratio_result("rewind", rewind, rewind_floor, 1.2));
  results.back().note = "floor: a fresh sandbox of the checkpoint's image";
  if (o.json)
    print_json(results);
  else
    print_table(stdout, results);
  return o.strict && any_missed(results) ? 1 : 0;
}
