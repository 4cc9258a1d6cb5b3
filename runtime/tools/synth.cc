// ari-synth: writes a random-weight GGUF of a named shape with a real vocabulary.
//   ari-synth --preset tinyllama-1.1b --vocab ggml-vocab-llama-spm.gguf --type q8_0
//             --seed 1 -o /tmp/tinyllama-q8.gguf
#include "runtime/convert/synth.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace {

using ari::runtime::SynthPresets;

void Usage(std::FILE* f) {
  std::fprintf(f,
               "usage: ari-synth --preset NAME --vocab VOCAB.gguf -o OUT.gguf\n"
               "                 [--type f16|q8_0|q4_0|f32|bf16] [--seed S]\n"
               "       ari-synth --list\n"
               "Writes a GGUF with random weights of the preset's shape and the vocabulary\n"
               "(tokenizer.*) of VOCAB.gguf. Same seed, same bytes. Default type f16, seed 1.\n");
}

void List() {
  std::printf("%-16s %-6s %6s %6s %6s %6s %6s %7s %10s %s\n", "preset", "arch", "dim", "ffn",
              "layers", "heads", "kv", "ctx", "theta", "notes");
  for (const auto& p : SynthPresets()) {
    std::printf("%-16.*s %-6.*s %6lld %6lld %6lld %6lld %6lld %7lld %10.0f %s%s\n",
                static_cast<int>(p.name.size()), p.name.data(), static_cast<int>(p.arch.size()),
                p.arch.data(), static_cast<long long>(p.dim), static_cast<long long>(p.ffn),
                static_cast<long long>(p.layers), static_cast<long long>(p.heads),
                static_cast<long long>(p.kv_heads), static_cast<long long>(p.context),
                static_cast<double>(p.rope_theta), p.qkv_bias ? "qkv-bias " : "",
                p.tied_embeddings ? "tied-embeddings" : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset_name, vocab, out, type_name = "f16";
  unsigned long long seed = 1;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&](const char* what) -> const char* {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "ari-synth: %s needs a value\n", what);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--preset") {
      preset_name = value("--preset");
    } else if (arg == "--vocab") {
      vocab = value("--vocab");
    } else if (arg == "--type") {
      type_name = value("--type");
    } else if (arg == "--seed") {
      const char* s = value("--seed");
      char* end = nullptr;
      seed = std::strtoull(s, &end, 10);
      if (end == s || *end != '\0') {
        std::fprintf(stderr, "ari-synth: bad --seed '%s'\n", s);
        return 2;
      }
    } else if (arg == "-o" || arg == "--output") {
      out = value("-o");
    } else if (arg == "--list") {
      List();
      return 0;
    } else if (arg == "-h" || arg == "--help") {
      Usage(stdout);
      return 0;
    } else {
      std::fprintf(stderr, "ari-synth: unknown argument '%s'\n", argv[i]);
      Usage(stderr);
      return 2;
    }
  }
  if (preset_name.empty() || vocab.empty() || out.empty()) {
    Usage(stderr);
    return 2;
  }
  auto preset = ari::runtime::FindSynthPreset(preset_name);
  if (!preset) {
    std::fprintf(stderr, "ari-synth: %s\n", preset.error().message.c_str());
    return 1;
  }
  auto type = ari::runtime::ParseTensorTypeName(type_name);
  if (!type) {
    std::fprintf(stderr, "ari-synth: %s\n", type.error().message.c_str());
    return 1;
  }
  ari::runtime::SynthOptions opts{*preset, *type, seed};
  const auto t0 = std::chrono::steady_clock::now();
  auto summary = ari::runtime::WriteSynthModel(opts, vocab, out);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!summary) {
    std::fprintf(stderr, "ari-synth: %s\n", summary.error().ToString().c_str());
    return 1;
  }
  std::printf(
      "ari-synth: wrote %s: preset %s, type %s, seed %llu, vocab %lld, %.3f B params, "
      "%d tensors (%d stored as f16: rows not a multiple of 32), %.1f MiB in %.1f s\n",
      out.c_str(), preset_name.c_str(), type_name.c_str(), seed,
      static_cast<long long>(summary->vocab_size), static_cast<double>(summary->n_params) / 1e9,
      summary->n_tensors, summary->n_fallback_f16,
      static_cast<double>(summary->file_bytes) / (1024.0 * 1024.0), secs);
  return 0;
}
