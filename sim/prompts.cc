#include "sim/prompts.h"

#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ari::sim {
namespace internal {
extern const std::string_view kBuiltinPromptsText;  // generated from sim/prompts.textproto
}  // namespace internal

namespace {

namespace dl = ari::drivelog;

// Empty (free text), or a schema name as the node config registers it.
bool ValidFormatName(const std::string& n) {
  if (n.size() > 31) return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
  }
  return true;
}

class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  explicit FirstError(std::string_view origin) : origin_(origin) {}
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (text_.empty()) {
      text_ = origin_ + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) + ": " +
              message;
    }
  }
  void AddWarning(int, google::protobuf::io::ColumnNumber, const std::string&) override {}
  const std::string& text() const { return text_; }

 private:
  std::string origin_;
  std::string text_;
};

}  // namespace

Result<dl::PromptSet> ParsePromptSet(std::string_view text, std::string_view origin) {
  dl::PromptSet set;
  FirstError errors(origin);
  google::protobuf::TextFormat::Parser parser;
  google::protobuf::TextFormat::ParseInfoTree tree;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(&tree);
  if (!parser.ParseFromString(std::string(text), &set)) {
    return MakeError(ErrorCode::kParse, errors.text());
  }
  const auto* field = dl::PromptSet::descriptor()->FindFieldByName("prompt");
  for (int i = 0; i < set.prompt_size(); ++i) {
    const dl::Prompt& p = set.prompt(i);
    const char* problem = nullptr;
    if (p.category() == dl::PROMPT_CATEGORY_UNSPECIFIED)
      problem = "prompt without category";
    else if (p.text().empty())
      problem = "empty prompt text";
    else if (p.text().size() > 2047)
      problem = "prompt text longer than 2047 bytes";
    else if (!ValidFormatName(p.response_format()))
      problem = "response_format must be 1..31 bytes of [a-z0-9_]";
    if (problem) {
      const auto loc = tree.GetLocation(field, i);
      return MakeError(ErrorCode::kInvalidLog, std::string(origin) + ":" +
                                                   std::to_string(loc.line + 1) + ": prompt " +
                                                   std::to_string(i) + ": " + problem);
    }
  }
  if (set.prompt_size() == 0) {
    return MakeError(ErrorCode::kInvalidLog, std::string(origin) + ": no prompts");
  }
  return set;
}

Result<dl::PromptSet> LoadPromptSet(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return MakeError(ErrorCode::kIo, "cannot open " + path.string() + ": " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ParsePromptSet(ss.str(), path.string());
}

std::string_view BuiltinPromptSetText() { return internal::kBuiltinPromptsText; }

Result<dl::PromptSet> BuiltinPromptSet() {
  return ParsePromptSet(internal::kBuiltinPromptsText, "<builtin sim/prompts.textproto>");
}

int CountPrompts(const dl::PromptSet& set, dl::PromptCategory category) {
  int n = 0;
  for (const auto& p : set.prompt()) n += p.category() == category ? 1 : 0;
  return n;
}

}  // namespace ari::sim
