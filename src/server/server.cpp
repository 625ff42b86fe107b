#include <rex/server/server.hpp>

#include <rex/server/lifetime.hpp>

#include "server/swerex_routes.hpp"

namespace rex::server {

namespace {

RouteTable server_routes(const asio::any_io_executor& executor, Runtime& runtime,
                         const ServerConfig& config, Lifetime* lifetime) {
  RouteTable routes = swerex_routes(executor, runtime, config);
  if (lifetime != nullptr)
    lifetime->add_routes(routes);
  return routes;
}

}  // namespace

Server::Server(asio::any_io_executor executor, Runtime& runtime, ServerConfig config,
               Lifetime* lifetime)
    : Service(executor, server_routes(executor, runtime, config, lifetime), config) {}

}  // namespace rex::server
