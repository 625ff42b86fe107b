// Outcome<T>: what one job of a batch produced, a value or the exception it threw, so one
// failure does not lose the others' results (see fan_out). Outcome<void> holds only the error.
// capture() runs a function or awaits an operation and records what it produced, for code that
// must finish something (kill a child, write a result) before the exception may propagate.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

namespace rex {

namespace detail {
inline std::string describe(const std::exception_ptr& error) {
  if (!error)
    return {};
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown exception";
  }
}
}  // namespace detail

template <class T>
class Outcome {
 public:
  /// Neither value nor error: a job that never ran.
  Outcome() = default;
  static Outcome success(T value) {
    Outcome o;
    o.value_.emplace(std::move(value));
    return o;
  }
  static Outcome failure(std::exception_ptr error) {
    Outcome o;
    o.error_ = std::move(error);
    return o;
  }

  bool has_value() const noexcept { return value_.has_value(); }
  explicit operator bool() const noexcept { return has_value(); }
  /// The value; rethrows the job's exception when it failed (std::logic_error if it never ran).
  T& value() & {
    check();
    return *value_;
  }
  const T& value() const& {
    check();
    return *value_;
  }
  T&& value() && {
    check();
    return std::move(*value_);
  }
  /// value(), as for std::optional and std::expected.
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  /// The job's exception; null when it succeeded.
  std::exception_ptr error() const noexcept { return error_; }
  /// The exception's what(); empty when it succeeded.
  std::string error_message() const { return detail::describe(error_); }

 private:
  void check() const {
    if (error_)
      std::rethrow_exception(error_);
    if (!value_)
      throw std::logic_error("Outcome: the job never ran");
  }
  std::optional<T> value_;
  std::exception_ptr error_;
};

template <>
class Outcome<void> {
 public:
  Outcome() = default;
  static Outcome success() {
    Outcome o;
    o.done_ = true;
    return o;
  }
  static Outcome failure(std::exception_ptr error) {
    Outcome o;
    o.error_ = std::move(error);
    return o;
  }
  bool has_value() const noexcept { return done_; }
  explicit operator bool() const noexcept { return done_; }
  /// Rethrows the job's exception when it failed.
  void value() const {
    if (error_)
      std::rethrow_exception(error_);
    if (!done_)
      throw std::logic_error("Outcome: the job never ran");
  }
  std::exception_ptr error() const noexcept { return error_; }
  std::string error_message() const { return detail::describe(error_); }

 private:
  bool done_ = false;
  std::exception_ptr error_;
};

/// Runs `fn()` and records its value or the exception it threw.
template <class F, class T = std::invoke_result_t<F&>>
Outcome<T> capture(F&& fn) noexcept {
  try {
    if constexpr (std::is_void_v<T>) {
      fn();
      return Outcome<void>::success();
    } else {
      return Outcome<T>::success(fn());
    }
  } catch (...) {
    return Outcome<T>::failure(std::current_exception());
  }
}

/// Awaits `operation` and records its value or the exception it threw (operation_aborted
/// included, when cancelled).
template <class T>
boost::asio::awaitable<Outcome<T>> capture(boost::asio::awaitable<T> operation) {
  try {
    if constexpr (std::is_void_v<T>) {
      co_await std::move(operation);
      co_return Outcome<void>::success();
    } else {
      auto value = co_await std::move(operation);
      co_return Outcome<T>::success(std::move(value));
    }
  } catch (...) {
    co_return Outcome<T>::failure(std::current_exception());
  }
}

}  // namespace rex
