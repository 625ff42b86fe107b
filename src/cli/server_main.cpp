// rex-server (also installed as swerex-remote): serves this machine's bash sessions, processes
// and files over HTTP with SWE-ReX's protocol. `rex-server --auth-token TOKEN [--port 8000]`.
#include <rex/version.hpp>

#include <cstring>
#include <iostream>

#include "server_command.hpp"

int main(int argc, char** argv) {
  // As swerex-remote: -v/--version prints only the version and refuses other arguments.
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--version") == 0 || std::strcmp(argv[i], "-v") == 0) {
      if (argc > 2) {
        std::cout << "Error: --version cannot be combined with other arguments\n";
        return 1;
      }
      std::cout << rex::version() << '\n';
      return 0;
    }
  }
  CLI::App app{"rex-server: serve bash sessions, processes and files over HTTP (SWE-ReX protocol)"};
  rex::cli::ServerOptions options;
  rex::cli::add_server_options(app, options);
  CLI11_PARSE(app, argc, argv);
  return rex::cli::run_server(options);
}
