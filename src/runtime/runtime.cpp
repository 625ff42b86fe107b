#include <rex/runtime/runtime.hpp>

namespace rex {

asio::awaitable<BashObservation> Runtime::run_in_session_streaming(Action action,
                                                                   OutputListener on_output) {
  auto observation = co_await run_in_session(std::move(action));
  if (on_output && !observation.output.empty())
    on_output(observation.output);
  co_return observation;
}

}  // namespace rex
