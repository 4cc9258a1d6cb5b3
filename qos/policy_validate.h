// Internal: semantic validation of a parsed ari.policy.Policy message.
#pragma once

#include <google/protobuf/text_format.h>

#include <string>
#include <string_view>
#include <vector>

#include "idl/ari_policy.pb.h"

namespace ari::qos::internal {

inline constexpr uint32_t kMaxQueueCapacity = 4096;
inline constexpr uint32_t kMaxReservedSlots = 64;  // critical_reserved_slots
inline constexpr uint32_t kMaxThreads = 256;
inline constexpr uint32_t kMaxPrefillChunk = 65536;
inline constexpr uint32_t kMaxDecodeTokens = 4096;
inline constexpr uint32_t kMaxPauseMs = 60000;
inline constexpr uint32_t kMaxLayerDrop = 255;
inline constexpr int32_t kMaxDwellMs = 600000;
inline constexpr int64_t kMaxFaultWindowMs = 3600000;
inline constexpr double kMinCelsius = -40.0;
inline constexpr double kMaxCelsius = 150.0;

// Returns one line per problem, "origin:line: field.path: what" (the line is
// left out when `tree` is null or the field has no location). Empty = valid.
std::vector<std::string> ValidatePolicyProto(
    const ari::policy::Policy& policy, const google::protobuf::TextFormat::ParseInfoTree* tree,
    std::string_view origin);

}  // namespace ari::qos::internal
