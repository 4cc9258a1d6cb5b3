#include "sim/tools/sim_cli.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace ari::sim_cli {

// Every flag takes a value ("--seed 7" or "--seed=7"); "-o" is "--output".
Result<Args> ParseArgs(std::span<char* const> argv, std::span<const std::string_view> known) {
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string a = argv[i];
    if (a == "-o") a = "--output";
    if (!a.starts_with("--") || a == "--") {
      args.positional.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    if (const size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    } else if (i + 1 < argv.size()) {
      value = argv[++i];
    } else {
      return ari::sim::MakeError(ari::sim::ErrorCode::kInvalidArgument,
                                 "--" + name + " needs a value");
    }
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      return ari::sim::MakeError(ari::sim::ErrorCode::kInvalidArgument, "unknown option --" + name);
    }
    args.flags.emplace_back(name, value);
  }
  return args;
}

int Fail(std::string_view cmd, const std::string& message) {
  std::fprintf(stderr, "ari-sim %.*s: %s\n", static_cast<int>(cmd.size()), cmd.data(),
               message.c_str());
  return kError;
}

Result<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return ari::sim::MakeError(ari::sim::ErrorCode::kIo,
                               "cannot open " + path + ": " + std::strerror(errno));
  }
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return s;
}

Result<void> WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) return ari::sim::MakeError(ari::sim::ErrorCode::kIo, "cannot write " + path);
  return {};
}

}  // namespace ari::sim_cli
