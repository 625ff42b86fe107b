// Reading the small files a kubeconfig names (certificates, keys, tokens, the service
// account's namespace), shared by the kubeconfig and the API client. Internal to the layer.
#pragma once

#include <string>
#include <string_view>

namespace rex::kubernetes::detail {

/// The whole of a file of at most 4 MiB (a larger one, /dev/zero say, is a mistake). Throws
/// KubeconfigError "WHAT: cannot read PATH: REASON".
std::string read_small_file(const std::string& path, std::string_view what);

/// `text` without the spaces and line ends it ends with (a token or a name written by `echo`).
std::string without_trailing_space(std::string text);

}  // namespace rex::kubernetes::detail
