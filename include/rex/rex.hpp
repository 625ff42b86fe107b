// Umbrella header: everything an agent or harness needs.
#pragma once

#include <rex/docker/engine.hpp>
#include <rex/http/client_errors.hpp>
#include <rex/http/multipart.hpp>
#include <rex/protocol/actions.hpp>
#include <rex/protocol/commands.hpp>
#include <rex/protocol/exceptions.hpp>
#include <rex/protocol/files.hpp>
#include <rex/protocol/json.hpp>
#include <rex/protocol/responses.hpp>
#include <rex/protocol/session.hpp>
#include <rex/runtime/archive.hpp>
#include <rex/runtime/local_runtime.hpp>
#include <rex/runtime/remote_runtime.hpp>
#include <rex/runtime/runtime.hpp>
#include <rex/session/bash_session.hpp>
#include <rex/session/output.hpp>
#include <rex/session/shell_framing.hpp>
#include <rex/version.hpp>
