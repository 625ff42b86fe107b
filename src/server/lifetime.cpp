#include <rex/server/lifetime.hpp>

#include <rex/core/timeout.hpp>
#include <rex/server/answer.hpp>

#include <fmt/format.h>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <chrono>
#include <cmath>
#include <stdexcept>

namespace rex::server {

namespace json = boost::json;
namespace bhttp = boost::beast::http;

namespace {

double unix_seconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

}  // namespace

struct Lifetime::State {
  State(asio::any_io_executor executor, std::function<asio::awaitable<void>(std::string)> end)
      : timer(std::move(executor)), on_end(std::move(end)) {}

  asio::steady_timer timer;
  std::function<asio::awaitable<void>(std::string)> on_end;
  std::optional<std::chrono::steady_clock::time_point> deadline;
  double seconds = 0;  // as last set, for the reason given at the end
  std::uint64_t generation = 0;
  bool ended = false;

  // Time until the deadline (negative past it); nullopt without one.
  std::optional<std::chrono::steady_clock::duration> left() const {
    if (!deadline)
      return std::nullopt;
    return *deadline - std::chrono::steady_clock::now();
  }

  // Seconds until the deadline, none past it; nullopt without one.
  std::optional<double> remaining() const {
    const auto l = left();
    if (!l)
      return std::nullopt;
    return std::max(0.0, std::chrono::duration<double>(*l).count());
  }

  json::object describe() const {
    json::object o;
    const auto l = left();
    if (!l) {
      o["max_lifetime"] = nullptr;
      o["deadline"] = nullptr;
      return o;
    }
    o["max_lifetime"] = *remaining();
    o["deadline"] =
        unix_seconds(std::chrono::system_clock::now() +
                     std::chrono::duration_cast<std::chrono::system_clock::duration>(*l));
    return o;
  }
};

namespace {

// Waits for one setting of the deadline; a later setting (a new generation) supersedes it.
asio::awaitable<void> watch(std::shared_ptr<Lifetime::State> s, std::uint64_t generation) {
  auto [ec] = co_await s->timer.async_wait(asio::as_tuple(asio::use_awaitable));
  if (ec || s->generation != generation || s->ended)
    co_return;
  s->ended = true;
  co_await s->on_end(fmt::format("maximum lifetime of {} s reached", s->seconds));
}

// Sets (or, with 0, removes) the deadline `seconds` from now.
void set_deadline(const std::shared_ptr<Lifetime::State>& state, double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > Lifetime::kLongest)
    throw std::invalid_argument(
        fmt::format("max_lifetime must be a number of seconds from 0 to {:.0f}, got {}",
                    Lifetime::kLongest, seconds));
  Lifetime::State& s = *state;
  if (s.ended)
    return;
  ++s.generation;
  s.timer.cancel();
  s.seconds = seconds;
  if (seconds == 0) {
    s.deadline.reset();
    return;
  }
  s.deadline = std::chrono::steady_clock::now() + duration_from_seconds(seconds);
  s.timer.expires_at(*s.deadline);
  asio::co_spawn(s.timer.get_executor(), watch(state, s.generation), asio::detached);
}

}  // namespace

Lifetime::Lifetime(asio::any_io_executor executor,
                   std::function<asio::awaitable<void>(std::string)> on_end)
    : state_(std::make_shared<State>(std::move(executor), std::move(on_end))) {}

Lifetime::~Lifetime() {
  cancel();
}

void Lifetime::set(double seconds) {
  set_deadline(state_, seconds);
}

std::optional<double> Lifetime::remaining() const {
  return state_->remaining();
}

void Lifetime::cancel() {
  ++state_->generation;
  state_->deadline.reset();
  state_->timer.cancel();
}

void Lifetime::add_routes(RouteTable& routes) {
  std::weak_ptr<State> weak = state_;
  routes.add(bhttp::verb::get, "/lifetime", JsonRoute([weak](Request) -> asio::awaitable<Answer> {
               const auto s = weak.lock();
               if (!s)
                 co_return detail_answer(503, "the server is stopping");
               co_return json_answer(200, s->describe());
             }));
  routes.add(bhttp::verb::post, "/lifetime",
             JsonRoute([weak](Request request) -> asio::awaitable<Answer> {
               const auto s = weak.lock();
               if (!s)
                 co_return detail_answer(503, "the server is stopping");
               boost::system::error_code ec;
               const json::value body = json::parse(request.body, ec);
               const json::value* field = nullptr;
               if (!ec && body.is_object())
                 field = body.get_object().if_contains("max_lifetime");
               if (field == nullptr || !field->is_number())
                 co_return detail_answer(
                     422, "expected a JSON object {\"max_lifetime\": <seconds, 0 for none>}");
               try {
                 set_deadline(s, field->to_number<double>());
               } catch (const std::exception& e) {
                 co_return detail_answer(422, e.what());
               }
               if (s->ended)
                 co_return detail_answer(409, "the server's lifetime has already ended");
               co_return json_answer(200, s->describe());
             }));
}

}  // namespace rex::server
