// ExecuTorch's C++ Program::load alone, for `cargo bench --bench load`: for each .pte file named
// on the command line, the median microseconds of one Program::load from a buffer in memory,
// with InternalConsistency verification ("direct") and with Minimal ("direct_minimal"); printed
// as one JSON object keyed by path. A file Program::load refuses gets its error code instead.
// Built by the bench against the headers and libexecutorch.so that the executorch pip package
// ships (its include/ and lib/ folders), so the figure holds no Python or pybind11 call.
#include <executorch/extension/data_loader/buffer_data_loader.h>
#include <executorch/runtime/executor/program.h>
#include <executorch/runtime/platform/runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <vector>

using executorch::extension::BufferDataLoader;
using executorch::runtime::Program;

static double median_us(const std::vector<char>& data, Program::Verification v) {
  const int iters = 2000, rounds = 9;
  std::vector<double> samples;
  for (int r = 0; r < rounds; r++) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; i++) {
      BufferDataLoader loader(data.data(), data.size());
      auto program = Program::load(&loader, v);
      if (!program.ok()) return -1;
    }
    std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
    samples.push_back(took.count() / iters);
  }
  std::sort(samples.begin(), samples.end());
  return samples[rounds / 2];
}

int main(int argc, char** argv) {
  executorch::runtime::runtime_init();
  std::printf("{");
  for (int k = 1; k < argc; k++) {
    std::ifstream in(argv[k], std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::printf("%s\"%s\": {", k > 1 ? ", " : "", argv[k]);
    BufferDataLoader loader(data.data(), data.size());
    auto first = Program::load(&loader, Program::Verification::InternalConsistency);
    if (!first.ok()) {
      std::printf("\"direct_error\": %d}", static_cast<int>(first.error()));
      continue;
    }
    std::printf("\"direct\": %.4f, \"direct_minimal\": %.4f}", median_us(data, Program::Verification::InternalConsistency),
                median_us(data, Program::Verification::Minimal));
  }
  std::printf("}\n");
  return 0;
}
