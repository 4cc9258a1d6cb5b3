// ari-convert: llama2.c checkpoint (legacy fp32, v1 fp32, v2 Q8_0) + tokenizer.bin -> GGUF.
//
//   ari-convert --checkpoint stories260K.bin --tokenizer tok512.bin -o stories260K.gguf
//               [--q80 exact|q8_0] [--name NAME]
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

#include "runtime/convert/llama2c_import.h"

namespace {

void Usage(FILE* f) {
  std::fprintf(f,
               "usage: ari-convert --checkpoint MODEL.bin --tokenizer TOKENIZER.bin -o OUT.gguf\n"
               "                   [--q80 exact|q8_0] [--name NAME]\n"
               "  --q80 exact  (default) llama2.c Q8_0 tensors whose fp32 scales are not exact\n"
               "               in fp16, or whose groups cross rows, are stored as F32 (q * s)\n"
               "  --q80 q8_0   store every row-aligned Q8_0 tensor as GGUF Q8_0 (scales rounded\n"
               "               to fp16)\n");
}

struct ConvertArgs {
  std::string checkpoint, tokenizer, out;
  ari::runtime::Llama2cImportOptions opts;
};

// What ApplyOption did with an option and its value.
enum class OptionResult { kStored, kUnknown, kBadValue /* said on stderr */ };

OptionResult ApplyOption(std::string_view a, const char* v, ConvertArgs& args) {
  if (a == "--checkpoint" || a == "-c") {
    args.checkpoint = v;
  } else if (a == "--tokenizer" || a == "-t") {
    args.tokenizer = v;
  } else if (a == "-o" || a == "--output") {
    args.out = v;
  } else if (a == "--name") {
    args.opts.name = v;
  } else if (a == "--q80") {
    if (std::strcmp(v, "exact") == 0) {
      args.opts.q80 = ari::runtime::Q80Storage::kExact;
    } else if (std::strcmp(v, "q8_0") == 0) {
      args.opts.q80 = ari::runtime::Q80Storage::kQ8_0;
    } else {
      std::fprintf(stderr, "ari-convert: --q80 must be 'exact' or 'q8_0', not '%s'\n", v);
      return OptionResult::kBadValue;
    }
  } else {
    return OptionResult::kUnknown;
  }
  return OptionResult::kStored;
}

}  // namespace

int main(int argc, char** argv) {
  ConvertArgs args;
  // Every argument but --help is an option followed by its value.
  for (int i = 1; i < argc; i += 2) {
    const std::string_view a = argv[i];
    if (a == "-h" || a == "--help") {
      Usage(stdout);
      return 0;
    }
    const char* v = i + 1 < argc ? argv[i + 1] : nullptr;
    const OptionResult r = v == nullptr ? OptionResult::kUnknown : ApplyOption(a, v, args);
    if (r == OptionResult::kBadValue) return 1;
    if (r == OptionResult::kUnknown) {
      std::fprintf(stderr, "ari-convert: unknown or incomplete argument '%s'\n", argv[i]);
      Usage(stderr);
      return 1;
    }
  }
  const std::string& checkpoint = args.checkpoint;
  const std::string& tokenizer = args.tokenizer;
  const std::string& out = args.out;
  const ari::runtime::Llama2cImportOptions& opts = args.opts;
  if (checkpoint.empty() || tokenizer.empty() || out.empty()) {
    std::fprintf(stderr, "ari-convert: --checkpoint, --tokenizer and -o are required\n");
    Usage(stderr);
    return 1;
  }
  auto rep = ari::runtime::ConvertLlama2c(checkpoint, tokenizer, out, opts);
  if (!rep) {
    std::fprintf(stderr, "ari-convert: %s\n", rep.error().ToString().c_str());
    return 1;
  }
  const auto& h = rep->header;
  std::fprintf(stderr,
               "ari-convert: %s (llama2.c v%d: dim %d, hidden %d, layers %d, heads %d/%d, vocab "
               "%d, seq_len %d%s) -> %s: %d Q8_0 + %d F32 tensors",
               checkpoint.c_str(), h.version, h.dim, h.hidden_dim, h.n_layers, h.n_heads,
               h.n_kv_heads, h.vocab_size, h.seq_len,
               h.shared_classifier ? ", shared classifier" : "", out.c_str(), rep->tensors_q8_0,
               rep->tensors_f32);
  if (rep->scales_rounded > 0) {
    std::fprintf(stderr, ", %d scales rounded to fp16", rep->scales_rounded);
  }
  std::fprintf(stderr, "\n");
  return 0;
}
