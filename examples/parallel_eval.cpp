// An evaluation fanned out over many sandboxes: 32 instances, each run in a sandbox of a
// SandboxPool by fan_out, at most 8 at once. Every instance writes its input file, runs a shell
// command on it and reads the result back. Instance 13 fails on purpose: its error is kept in
// its Outcome and the other instances carry on.
//
//   parallel_eval                                   local sandboxes, each in its own directory
//   parallel_eval '{"type":"docker","image":"python:3.11"}'
//   parallel_eval config.json
#include <rex/backends/local/local_config.hpp>
#include <rex/rex.hpp>

#include <fmt/format.h>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/parse.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;

namespace {

constexpr int kInstances = 32;
constexpr std::size_t kParallel = 8;
constexpr int kBroken = 13;

struct Instance {
  int id = 0;
  std::vector<int> numbers;  // the input: the instance sums them in its sandbox
};

struct Answer {
  long sum = 0;
  std::uint64_t sandbox = 0;  // which sandbox of the pool ran it
};

// Runs one command in the lease's default session; a non-zero exit throws (check=raise).
asio::awaitable<std::string> shell(rex::Runtime& sandbox, std::string command) {
  rex::BashAction action;
  action.command = std::move(command);
  action.timeout = 30;
  auto observation = co_await sandbox.run_in_session(action);
  co_return observation.output;
}

// One instance, start to end. An exception thrown here ends up in the instance's Outcome.
asio::awaitable<Answer> evaluate(rex::SandboxPool& pool, const Instance& instance) {
  rex::SandboxLease lease = co_await pool.acquire();  // handed back when the lease ends
  rex::Runtime& sandbox = lease.runtime();
  rex::CreateBashSessionRequest create;
  create.startup_timeout = 30;
  co_await sandbox.create_session(create);

  // A directory for this instance; the sandbox may have served other instances before.
  const std::string setup =
      fmt::format("mkdir -p instance-{0} && cd instance-{0} && pwd", instance.id);
  std::string dir = co_await shell(sandbox, setup);
  while (!dir.empty() && dir.back() == '\n')
    dir.pop_back();

  rex::WriteFileRequest input;
  input.path = dir + "/input.txt";
  input.content = fmt::format("{}\n", fmt::join(instance.numbers, " "));
  co_await sandbox.write_file(input);

  const std::string sum = instance.id == kBroken
                              ? std::string("cat numbers.txt > result.txt")  // no such file
                              : std::string(
                                    "total=0; for n in $(cat input.txt); do "
                                    "total=$((total + n)); done; echo $total > result.txt");
  co_await shell(sandbox, sum);

  rex::ReadFileRequest output;
  output.path = dir + "/result.txt";
  auto result = co_await sandbox.read_file(output);
  Answer answer;
  answer.sum = std::stol(result.content);
  answer.sandbox = lease.sandbox_id();
  co_return answer;
}

asio::awaitable<int> run(rex::SandboxPoolConfig config) {
  rex::SandboxPool pool(co_await asio::this_coro::executor, std::move(config));

  std::vector<Instance> instances;
  for (int id = 1; id <= kInstances; ++id) {
    Instance instance{id, {}};
    for (int n = 1; n <= id; ++n)
      instance.numbers.push_back(n);
    instances.push_back(std::move(instance));
  }

  const auto t0 = std::chrono::steady_clock::now();
  auto job = [&pool](Instance& instance) { return evaluate(pool, instance); };
  std::vector<rex::Outcome<Answer>> outcomes = co_await rex::fan_out(instances, kParallel, job);
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
  const rex::SandboxPoolStats stats = pool.stats();
  co_await pool.shutdown();  // stops every sandbox (containers are removed)

  int passed = 0;
  int failed = 0;
  bool as_intended = true;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const Instance& instance = instances[i];
    const rex::Outcome<Answer>& outcome = outcomes[i];
    if (outcome) {
      const long expected = static_cast<long>(instance.id) * (instance.id + 1) / 2;
      const bool right = outcome.value().sum == expected;
      fmt::print("instance {:2}: sum 1..{} = {} ({}, sandbox {})\n", instance.id, instance.id,
                 outcome.value().sum, right ? "right" : "WRONG", outcome.value().sandbox);
      passed += right ? 1 : 0;
      failed += right ? 0 : 1;
      as_intended = as_intended && right && instance.id != kBroken;
    } else {
      std::string why = outcome.error_message();
      std::replace(why.begin(), why.end(), '\n', ' ');
      fmt::print("instance {:2}: FAILED: {}\n", instance.id, why);
      ++failed;
      as_intended = as_intended && instance.id == kBroken;
    }
  }
  fmt::print("{} instances in {:.2f} s on {} sandboxes, {} at once: {} passed, {} failed{}\n",
             outcomes.size(), took.count(), stats.started, kParallel, passed, failed,
             as_intended ? " (as intended)" : "");
  co_return as_intended ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  namespace fs = std::filesystem;
  std::string scratch;
  try {
    rex::SandboxPoolConfig config;
    config.max_sandboxes = kParallel;
    config.warm_spares = 2;                             // started before the first acquire()
    config.return_policy = rex::ReturnPolicy::recycle;  // a sandbox serves instance after instance
    if (argc > 1) {
      const std::string arg = argv[1];
      config.deployment = arg.starts_with("{")
                              ? rex::deployment_config_from_json(boost::json::parse(arg))
                              : rex::load_deployment_config(arg);
    } else {
      // Local sandboxes share this machine: each gets a directory of its own to work in.
      scratch =
          (fs::temp_directory_path() / fmt::format("rex-parallel-eval-{}", ::getpid())).string();
      config.factory = [scratch, made = 0](asio::any_io_executor executor) mutable {
        rex::LocalDeploymentConfig local;
        local.working_dir = fmt::format("{}/sandbox-{}", scratch, ++made);
        return std::make_unique<rex::LocalDeployment>(std::move(executor), std::move(local));
      };
    }
    asio::io_context io;
    int status = 1;
    asio::co_spawn(io, run(std::move(config)), [&](std::exception_ptr e, int s) {
      if (e)
        std::rethrow_exception(e);
      status = s;
    });
    io.run();
    if (!scratch.empty())
      fs::remove_all(scratch);
    return status;
  } catch (const std::exception& e) {
    std::cerr << "parallel_eval: " << e.what() << '\n';
    if (!scratch.empty()) {
      std::error_code ignored;
      fs::remove_all(scratch, ignored);
    }
    return 1;
  }
}
