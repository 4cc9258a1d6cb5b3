// The memory plan's text form (runtime/engine/engine.h).
#include <cstdio>
#include <string>

#include "runtime/engine/engine.h"

namespace ari::runtime {

std::string MemoryPlan::ToString() const {
  std::string s;
  char line[160];
  for (const Part& p : parts) {
    std::snprintf(line, sizeof(line), "  %-28s %12llu B  (%.2f MiB)\n", p.name.c_str(),
                  static_cast<unsigned long long>(p.bytes), static_cast<double>(p.bytes) / 1048576.0);
    s += line;
  }
  std::snprintf(line, sizeof(line), "  %-28s %12llu B  (%.2f MiB)\n  %-28s %12llu B (mapped)\n",
                "arena total", static_cast<unsigned long long>(total_bytes),
                static_cast<double>(total_bytes) / 1048576.0, "model file",
                static_cast<unsigned long long>(model_file_bytes));
  s += line;
  for (const std::string& n : notes) s += "  note: " + n + "\n";
  return s;
}

}  // namespace ari::runtime
