// Error type of the qos module: recoverable failures (unreadable or invalid
// policy, bad arguments) return std::expected<T, Error>; no exceptions, no abort.
#pragma once

#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace ari::qos {

enum class ErrorCode {
  kIo,               // policy file missing or unreadable
  kParse,            // text format syntax error (message names line:column)
  kInvalidPolicy,    // parsed but semantically wrong (message names field path and line)
  kInvalidArgument,  // caller passed something out of range
  kInternal,
};

std::string_view ErrorCodeName(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  // Human readable; for policy errors one line per problem, each
  // "<origin>:<line>[:<column>]: <field path>: <what is wrong>".
  std::string message;

  std::string ToString() const;
};

template <class T>
using Result = std::expected<T, Error>;

inline std::unexpected<Error> MakeError(ErrorCode code, std::string message) {
  return std::unexpected<Error>(Error{code, std::move(message)});
}

}  // namespace ari::qos
