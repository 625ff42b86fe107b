// DeploymentConfig: what to start, as data, for whichever backend. Each backend's settings are a
// described struct of its own module (rex/backends/<name>/<name>_config.hpp) that names its
// backend; the backend table (rex/backends/backends.hpp) reads and writes them as JSON with a
// "type" discriminator and turns them into a Deployment.
#pragma once

#include <rex/deployment/settings.hpp>

#include <any>
#include <string_view>
#include <utility>

namespace rex {

/// The settings of one backend, whichever it is: a value, as the settings struct is (a copy is
/// independent of the original). Made from any backend's settings struct (each names its backend:
/// rex/backends/<name>/<name>_config.hpp); a default-made one holds none (empty()).
class DeploymentConfig {
 public:
  DeploymentConfig() = default;
  template <class T>
  requires requires { std::string_view(T::backend); }
  DeploymentConfig(T settings) : type_(T::backend), value_(std::move(settings)) {}

  /// The backend's name: "docker", "kubernetes", ...; empty when it holds none.
  std::string_view type() const noexcept { return type_; }
  bool empty() const noexcept { return !value_.has_value(); }
  /// The settings when they are a T, else null.
  template <class T>
  T* get_if() noexcept {
    return std::any_cast<T>(&value_);
  }
  template <class T>
  const T* get_if() const noexcept {
    return std::any_cast<T>(&value_);
  }
  template <class T>
  bool holds() const noexcept {
    return get_if<T>() != nullptr;
  }
  /// The settings as a T; std::bad_any_cast when they are another backend's.
  template <class T>
  T& get() {
    return std::any_cast<T&>(value_);
  }
  template <class T>
  const T& get() const {
    return std::any_cast<const T&>(value_);
  }

 private:
  std::string_view type_;
  std::any value_;
};

}  // namespace rex
