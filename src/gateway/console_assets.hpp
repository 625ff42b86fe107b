// The gateway's web console (/ui/): its files, embedded in the binary at build time
// (scripts/ui.sh writes the definition from ui/; a build with REX_UI=OFF has none).
#pragma once

#include <span>
#include <string_view>

namespace rex::gateway {

struct ConsoleAsset {
  std::string_view path;          // under /ui/: "index.html", "vendor/xterm.mjs"
  std::string_view content_type;  // its Content-Type
  std::string_view etag;          // a quoted prefix of its sha256
  std::string_view bytes;
};

/// Every file of the console; empty when the gateway was built without it.
std::span<const ConsoleAsset> console_assets();

}  // namespace rex::gateway
