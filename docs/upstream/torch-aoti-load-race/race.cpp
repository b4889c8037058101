// Construct torch::inductor::AOTIModelPackageLoader for one package from THREADS threads at once, round after
// round, until one construction fails or ROUNDS rounds are done; print how many were built and the first failure
// (on stdout), and each round as it ends (on stderr).
//
//   race PACKAGE.pt2 THREADS ROUNDS
//
// Each round's threads wait at a barrier and then build their loader together, as Triton's model-load threads
// build one for each torch_aoti model that loads at the same time.
#include <torch/csrc/inductor/aoti_package/model_package_loader.h>

#include <atomic>
#include <iostream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::cerr << "usage: race PACKAGE.pt2 THREADS ROUNDS\n";
    return 2;
  }
  const std::string package = argv[1];
  const int threads = std::stoi(argv[2]);
  const int rounds = std::stoi(argv[3]);
  std::atomic<int> built{0};
  std::mutex first_lock;
  std::string first;
  int round = 0;
  for (; round < rounds && first.empty(); ++round) {
    std::atomic<int> waiting{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        ++waiting;
        while (waiting.load() < threads) {
        }
        try {
          torch::inductor::AOTIModelPackageLoader loader(package, "model");
          ++built;
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> hold(first_lock);
          if (first.empty()) first = e.what();
        }
      });
    }
    for (auto& thread : pool) thread.join();
    std::cerr << "round " << round + 1 << " ended\n" << std::flush;  // a corrupted heap may also hang a thread
  }
  std::cout << "built " << built.load() << " in " << round << " rounds of " << threads << "\n";
  if (!first.empty()) std::cout << "first failure: " << first.substr(0, first.find('\n')) << "\n";
  return first.empty() ? 0 : 1;
}
