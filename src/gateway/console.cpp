// The web console's routes: /ui/ and its files, from the binary (console_assets.hpp). The page
// talks to the gateway's public API only, with the API key in a header (never a cookie), so no
// other site can act with it; every answer here forbids framing, and its Content Security Policy
// lets the page run only its own scripts and reach only this origin.
#include "console_assets.hpp"
#include "gateway_impl.hpp"

#include <algorithm>

namespace rex::gateway {

namespace {

using server::Answer;
using server::Request;

// Scripts: only the console's own files, never inline. Styles: also inline, because the
// terminal's renderer (xterm.js) sizes its cells with style elements it writes at run time.
constexpr std::string_view kPolicy =
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' "
    "data: blob:; font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

void secure(Answer& a) {
  a.headers.emplace_back("Content-Security-Policy", std::string(kPolicy));
  a.headers.emplace_back("X-Frame-Options", "DENY");
  a.headers.emplace_back("X-Content-Type-Options", "nosniff");
  a.headers.emplace_back("Referrer-Policy", "no-referrer");
  a.headers.emplace_back("Cross-Origin-Opener-Policy", "same-origin");
  a.headers.emplace_back("Cross-Origin-Resource-Policy", "same-origin");
}

Answer text_answer(unsigned status, std::string body) {
  Answer a;
  a.status = status;
  a.content_type = "text/plain; charset=utf-8";
  a.body = std::move(body);
  secure(a);
  return a;
}

Answer asset_answer(const Request& r, std::string_view path) {
  const auto assets = console_assets();
  if (assets.empty())
    return text_answer(404,
                       "this gateway was built without its console (REX_UI=OFF): the API is "
                       "under /api/\n");
  const auto it = std::find_if(assets.begin(), assets.end(),
                               [&](const ConsoleAsset& a) { return a.path == path; });
  if (it == assets.end())
    return text_answer(404, fmt::format("the console has no file {:?}\n", path));
  Answer a;
  // Always revalidated: a gateway upgraded in place serves its new page at once.
  a.headers.emplace_back("Cache-Control", "no-cache");
  a.headers.emplace_back("ETag", std::string(it->etag));
  secure(a);
  a.content_type = std::string(it->content_type);
  if (const auto seen = r.field("If-None-Match"); seen && *seen == it->etag) {
    a.status = 304;
    return a;
  }
  a.body = std::string(it->bytes);
  return a;
}

Answer redirect(std::string location) {
  Answer a;
  a.status = 308;
  a.content_type = "text/plain; charset=utf-8";
  a.headers.emplace_back("Location", std::move(location));
  secure(a);
  return a;
}

}  // namespace

void add_console_routes(server::RouteTable& t) {
  using boost::beast::http::verb;
  // A person who opens the gateway's address finds the console.
  t.add(verb::get, "/",
        server::JsonRoute([](Request) -> asio::awaitable<Answer> { co_return redirect("/ui/"); }));
  t.add(verb::get, "/ui",
        server::JsonRoute([](Request) -> asio::awaitable<Answer> { co_return redirect("/ui/"); }));
  t.add(verb::get, "/ui/", server::JsonRoute([](Request r) -> asio::awaitable<Answer> {
          co_return asset_answer(r, "index.html");
        }));
  t.add(verb::get, "/ui/{path...}", server::JsonRoute([](Request r) -> asio::awaitable<Answer> {
          const std::string path(r.param("path"));
          co_return asset_answer(r, path);
        }));
}

}  // namespace rex::gateway
