// The in-vehicle prompt set scenario generators draw request prompts from
// (ari.drivelog.PromptSet; the shipped one is sim/prompts.textproto, compiled
// into the library).
#pragma once

#include <filesystem>
#include <string_view>

#include "idl/drive_log.pb.h"
#include "sim/error.h"

namespace ari::sim {

// Parses and validates a prompt set: every prompt has a category and 1..2047
// bytes of text. kParse "origin:line:column: ..." / kInvalidLog "origin:line: ...".
Result<ari::drivelog::PromptSet> ParsePromptSet(std::string_view text,
                                                std::string_view origin = "<prompts>");
Result<ari::drivelog::PromptSet> LoadPromptSet(const std::filesystem::path& path);
// The shipped set (the copy of sim/prompts.textproto built into the library).
Result<ari::drivelog::PromptSet> BuiltinPromptSet();
std::string_view BuiltinPromptSetText();

// Number of prompts of a category.
int CountPrompts(const ari::drivelog::PromptSet& set, ari::drivelog::PromptCategory category);

}  // namespace ari::sim
