//===- GlooPlugin.cpp - libkiln_gloo.so: Gloo behind a C function table ---===//
//
// The ranks torchrun or Slurm start know each other only by a rendezvous
// address, MASTER_ADDR:MASTER_PORT, as PyTorch's own do: Gloo (the library
// PyTorch uses on CPUs) then connects every pair over TCP and runs the
// collectives. What Gloo needs from the rendezvous is a key-value store in
// which each rank leaves the address of its end of every pair; here rank 0
// serves one at the rendezvous address (TcpStore below: a few keys, once,
// at start-up), the way torch's TCPStore serves init_process_group. The
// collectives themselves are Gloo's. The only file of Kiln that includes
// Gloo (see CommPluginApi.h for why it sits behind dlopen).
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/CommPluginApi.h"

#include <gloo/allgather.h>
#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Whole-buffer socket I/O; false when the peer is gone.
bool sendAll(int fd, const void *data, size_t bytes) {
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n <= 0)
      return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool recvAll(int fd, void *data, size_t bytes) {
  char *p = static_cast<char *>(data);
  while (bytes > 0) {
    ssize_t n = ::recv(fd, p, bytes, 0);
    if (n <= 0)
      return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

bool sendBytes(int fd, const std::string &bytes) {
  uint32_t length = htonl(static_cast<uint32_t>(bytes.size()));
  return sendAll(fd, &length, 4) && sendAll(fd, bytes.data(), bytes.size());
}

bool recvBytes(int fd, std::string &bytes) {
  uint32_t length = 0;
  if (!recvAll(fd, &length, 4))
    return false;
  bytes.resize(ntohl(length));
  return recvAll(fd, bytes.data(), bytes.size());
}

// The rendezvous store. Requests on a connection, one at a time:
//   'S' key value   set the key; answered with one byte 1
//   'G' key         answered when the key is set: 1 and its value, or 0
//                   once the store's timeout has passed without it
// Keys and values travel as a 4-byte big-endian length and the bytes.
class StoreServer {
public:
  StoreServer(int listener, std::chrono::seconds timeout)
      : listener_(listener), timeout_(timeout) {
    std::thread([this] { acceptLoop(); }).detach();
  }
  // The process ends with the run; its threads with it.

private:
  void acceptLoop() {
    for (;;) {
      int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0)
        return;
      std::thread([this, fd] { serve(fd); }).detach();
    }
  }
  void serve(int fd) {
    for (;;) {
      char op = 0;
      std::string key, value;
      if (!recvAll(fd, &op, 1) || !recvBytes(fd, key))
        break;
      if (op == 'S') {
        if (!recvBytes(fd, value))
          break;
        {
          std::lock_guard<std::mutex> lock(mutex_);
          values_[key] = value;
        }
        changed_.notify_all();
        char ok = 1;
        if (!sendAll(fd, &ok, 1))
          break;
      } else if (op == 'G') {
        std::unique_lock<std::mutex> lock(mutex_);
        bool found = changed_.wait_for(lock, timeout_, [&] { return values_.count(key) > 0; });
        std::string reply = found ? values_[key] : "";
        lock.unlock();
        char status = found ? 1 : 0;
        if (!sendAll(fd, &status, 1) || (found && !sendBytes(fd, reply)))
          break;
      } else {
        break;
      }
    }
    ::close(fd);
  }

  int listener_;
  std::chrono::seconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, std::string> values_;
};

class TcpStore final : public gloo::rendezvous::Store {
public:
  TcpStore(int fd, std::string where) : fd_(fd), where_(std::move(where)) {}
  ~TcpStore() override { ::close(fd_); }

  void set(const std::string &key, const std::vector<char> &data) override {
    std::lock_guard<std::mutex> lock(mutex_);
    char op = 'S', ok = 0;
    if (!sendAll(fd_, &op, 1) || !sendBytes(fd_, key) ||
        !sendBytes(fd_, std::string(data.begin(), data.end())) || !recvAll(fd_, &ok, 1))
      throw std::runtime_error("the rendezvous at " + where_ + " closed the connection");
  }
  std::vector<char> get(const std::string &key) override {
    std::lock_guard<std::mutex> lock(mutex_);
    char op = 'G', status = 0;
    std::string value;
    if (!sendAll(fd_, &op, 1) || !sendBytes(fd_, key) || !recvAll(fd_, &status, 1))
      throw std::runtime_error("the rendezvous at " + where_ + " closed the connection");
    if (!status)
      throw std::runtime_error("waited for '" + key + "' at the rendezvous " + where_ +
                               " past the timeout: a rank did not start or cannot reach it");
    if (!recvBytes(fd_, value))
      throw std::runtime_error("the rendezvous at " + where_ + " closed the connection");
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string> &keys) override {
    for (const std::string &key : keys)
      get(key);
  }

private:
  int fd_;
  std::string where_;
  std::mutex mutex_;
};

// The IPv4 address of `host` (a name or dotted quad), or false.
bool resolve(const std::string &host, int port, sockaddr_in &address) {
  addrinfo hints{}, *found = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  if (::getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0 || !found)
    return false;
  address = *reinterpret_cast<sockaddr_in *>(found->ai_addr);
  address.sin_port = htons(static_cast<uint16_t>(port));
  ::freeaddrinfo(found);
  return true;
}

std::shared_ptr<gloo::rendezvous::Context> context;
std::unique_ptr<StoreServer> server;
uint32_t nextTag = 0;
// Kept after the rendezvous: the groups `split` makes meet in the same
// store (rank 0's server runs as long as the process) on the same device.
std::shared_ptr<TcpStore> rendezvousStore;
std::shared_ptr<gloo::transport::Device> device;
std::chrono::seconds timeout{600};
int groupsMade = 0;
std::string versionText = "Gloo (TCP)";

int fail(char *error, size_t size, const std::string &message) {
  std::snprintf(error, size, "%s", message.c_str());
  return 1;
}

// rankEndpoints[r]: rank r's ends of its connections ("[127.0.0.1]:38322"
// as Gloo prints them): Gloo's errors name the far end of the connection
// that broke, and the message then names its rank too.
std::vector<std::vector<std::string>> rankEndpoints;

// This rank's end of each of its connections, as Gloo's errors print an
// address (Address::str(): its port as Gloo stores it, in network order).
std::vector<std::string> localEndpoints() {
  std::vector<std::string> endpoints;
  for (int r = 0; r < context->size; ++r)
    if (r != context->rank)
      endpoints.push_back(context->getPair(r)->address().str());
  return endpoints;
}

// Fills rankEndpoints: every rank publishes its ends (an all-gather over
// the new context).
void learnRankEndpoints() {
  constexpr size_t kBytes = 8192; // endpoints, newline-separated, NUL-padded
  std::string mine;
  for (const std::string &endpoint : localEndpoints())
    if (mine.size() + endpoint.size() + 1 < kBytes)
      mine += endpoint + "\n";
  mine.resize(kBytes, '\0');
  std::vector<char> all(kBytes * static_cast<size_t>(context->size));
  gloo::AllgatherOptions options(context);
  options.setInput(mine.data(), mine.size());
  options.setOutput(all.data(), all.size());
  options.setTag(nextTag++);
  gloo::allgather(options);
  rankEndpoints.assign(static_cast<size_t>(context->size), {});
  for (size_t r = 0; r < rankEndpoints.size(); ++r) {
    std::string text(&all[r * kBytes], strnlen(&all[r * kBytes], kBytes));
    for (size_t at = 0, end; (end = text.find('\n', at)) != std::string::npos; at = end + 1)
      rankEndpoints[r].push_back(text.substr(at, end - at));
  }
}

std::string brokenWith(const char *what, size_t rank, const std::string &endpoint,
                       const std::string &text) {
  return std::string("Gloo's ") + what + " failed: the connection with rank " +
         std::to_string(rank) + " (" + endpoint + ") broke: rank " + std::to_string(rank) +
         " died or stopped (" + text + ")";
}

// Gloo's error for a failed collective, naming the rank whose connection
// broke when the error names one of its endpoints.
std::string collectiveError(const char *what, const std::exception &e) {
  const std::string text = e.what();
  for (size_t r = 0; r < rankEndpoints.size(); ++r) {
    if (r == static_cast<size_t>(context->rank))
      continue;
    for (const std::string &endpoint : rankEndpoints[r]) {
      // The endpoint, not a longer port that starts with it.
      size_t at = text.find(endpoint);
      if (at == std::string::npos ||
          (at + endpoint.size() < text.size() &&
           std::isdigit(static_cast<unsigned char>(text[at + endpoint.size()]))))
        continue;
      return brokenWith(what, r, endpoint, text);
    }
  }
  // The far end Gloo names may be the other rank's ephemeral port (the end
  // that connected, not the one it listens on: which of the two connects
  // varies from run to run). With two ranks a connection closed or reset by
  // its peer can only be the other rank's.
  bool closedByPeer = text.find("closed by peer") != std::string::npos ||
                      text.find("reset by peer") != std::string::npos ||
                      text.find("Broken pipe") != std::string::npos;
  if (context->size == 2 && closedByPeer) {
    size_t other = context->rank == 0 ? 1 : 0;
    if (other < rankEndpoints.size() && !rankEndpoints[other].empty())
      return brokenWith(what, other, rankEndpoints[other].front(), text);
  }
  return std::string("Gloo's ") + what + " failed (a rank died?): " + text;
}

int init(const KilnCommLaunch *launch, int *rank, int *size, char *error, size_t errorSize) {
  if (context) {
    *rank = context->rank;
    *size = context->size;
    return 0;
  }
  const std::string where =
      std::string(launch->master_addr) + ":" + std::to_string(launch->master_port);
  timeout = std::chrono::seconds(launch->timeout_seconds);
  sockaddr_in master{};
  if (!resolve(launch->master_addr, launch->master_port, master))
    return fail(error, errorSize, "the rendezvous host MASTER_ADDR=" +
                                      std::string(launch->master_addr) + " does not resolve");
  try {
    if (launch->rank == 0) {
      int listener = ::socket(AF_INET, SOCK_STREAM, 0);
      int one = 1;
      ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in any = master;
      any.sin_addr.s_addr = htonl(INADDR_ANY);
      if (::bind(listener, reinterpret_cast<sockaddr *>(&any), sizeof any) != 0 ||
          ::listen(listener, 128) != 0) {
        int code = errno;
        ::close(listener);
        return fail(error, errorSize,
                    "rank 0 cannot serve the rendezvous on port " +
                        std::to_string(launch->master_port) + ": " + std::strerror(code) +
                        " (MASTER_PORT must be free on MASTER_ADDR's host)");
      }
      server = std::make_unique<StoreServer>(listener, timeout);
    }
    // Every rank, rank 0 too, is a client of the store; the others retry
    // until rank 0 serves it.
    int fd = -1;
    for (auto deadline = Clock::now() + timeout;;) {
      fd = ::socket(AF_INET, SOCK_STREAM, 0);
      if (::connect(fd, reinterpret_cast<sockaddr *>(&master), sizeof master) == 0)
        break;
      ::close(fd);
      if (Clock::now() > deadline)
        return fail(error, errorSize,
                    "no rendezvous at " + where + " after " +
                        std::to_string(launch->timeout_seconds) +
                        " s (--comm-timeout): rank 0 did not start or cannot be reached");
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto store = std::make_shared<TcpStore>(fd, where);
    rendezvousStore = store;
    // This rank's end of each pair: the interface GLOO_SOCKET_IFNAME names
    // (as for PyTorch), else loopback for a rendezvous on this host, else
    // the host's name.
    gloo::transport::tcp::attr attr;
    char host[256] = {0};
    if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
      attr.iface = iface;
    else if ((ntohl(master.sin_addr.s_addr) >> 24) == 127)
      attr.hostname = "127.0.0.1";
    else if (::gethostname(host, sizeof host - 1) == 0)
      attr.hostname = host;
    device = gloo::transport::tcp::CreateDevice(attr);
    auto joined = std::make_shared<gloo::rendezvous::Context>(launch->rank, launch->size);
    joined->setTimeout(timeout);
    gloo::rendezvous::PrefixStore prefixed("kiln", *store);
    joined->connectFullMesh(prefixed, device);
    context = joined;
    versionText = "Gloo (TCP, rendezvous at " + where + ")";
    learnRankEndpoints();
  } catch (const std::exception &e) {
    return fail(error, errorSize, std::string("Gloo's rendezvous at ") + where +
                                      " failed: " + e.what());
  }
  *rank = context->rank;
  *size = context->size;
  return 0;
}

} // namespace

// A group: a Gloo context of its own over its ranks, with its own tags.
struct KilnCommGroup {
  std::shared_ptr<gloo::rendezvous::Context> context;
  uint32_t nextTag = 0;
};

namespace {

std::shared_ptr<gloo::rendezvous::Context> contextOf(KilnCommGroup *group) {
  return group ? group->context : context;
}
uint32_t tagOf(KilnCommGroup *group) {
  return group ? group->nextTag++ : nextTag++;
}

int allgather(KilnCommGroup *group, const void *send, size_t bytes, void *recv,
              char *error, size_t size);

int split(int color, int key, KilnCommGroup **group, int *rank, int *size,
          char *error, size_t errorSize) {
  // Every rank's (color, key), then the members of this rank's color in
  // key order: its rank in the group.
  const int64_t mine[2] = {color, key};
  std::vector<int64_t> all(2 * static_cast<size_t>(context->size));
  if (int code = allgather(nullptr, mine, sizeof mine, all.data(), error, errorSize))
    return code;
  std::vector<std::pair<int64_t, int>> members; // (key, world rank)
  for (int r = 0; r < context->size; ++r)
    if (all[2 * r] == color)
      members.push_back({all[2 * r + 1], r});
  std::sort(members.begin(), members.end());
  int index = 0;
  while (members[index].second != context->rank)
    ++index;
  try {
    auto joined = std::make_shared<gloo::rendezvous::Context>(
        index, static_cast<int>(members.size()));
    joined->setTimeout(timeout);
    gloo::rendezvous::PrefixStore prefixed(
        "kiln-group-" + std::to_string(groupsMade++) + "-" + std::to_string(color),
        *rendezvousStore);
    joined->connectFullMesh(prefixed, device);
    *group = new KilnCommGroup{joined};
  } catch (const std::exception &e) {
    return fail(error, errorSize, std::string("Gloo's rendezvous of a group of ") +
                                      std::to_string(members.size()) +
                                      " ranks failed: " + e.what());
  }
  *rank = index;
  *size = static_cast<int>(members.size());
  return 0;
}

void freeGroup(KilnCommGroup *group) { delete group; }

int allreduceSumF32(KilnCommGroup *group, float *data, size_t count, char *error,
                    size_t size) {
  try {
    gloo::AllreduceOptions options(contextOf(group));
    options.setOutput(data, count);
    void (*sum)(void *, const void *, const void *, size_t) = &gloo::sum<float>;
    options.setReduceFunction(sum);
    options.setTag(tagOf(group));
    gloo::allreduce(options);
  } catch (const std::exception &e) {
    return fail(error, size, collectiveError("all-reduce", e));
  }
  return 0;
}

// Gloo's collectives API has no reduce-scatter: the sum of the whole
// buffer comes from its all-reduce (as PyTorch's Gloo backend does it),
// and this rank keeps its slice.
int reduceScatterSumF32(KilnCommGroup *group, const float *send, float *recv,
                        size_t count, char *error, size_t size) {
  static thread_local std::vector<float> whole;
  auto ctx = contextOf(group);
  whole.assign(send, send + count * static_cast<size_t>(ctx->size));
  if (int code = allreduceSumF32(group, whole.data(), whole.size(), error, size))
    return code;
  std::copy_n(whole.data() + count * static_cast<size_t>(ctx->rank), count, recv);
  return 0;
}

int allgather(KilnCommGroup *group, const void *send, size_t bytes, void *recv,
              char *error, size_t size) {
  try {
    auto ctx = contextOf(group);
    gloo::AllgatherOptions options(ctx);
    options.setInput(const_cast<uint8_t *>(static_cast<const uint8_t *>(send)), bytes);
    options.setOutput(static_cast<uint8_t *>(recv), bytes * static_cast<size_t>(ctx->size));
    options.setTag(tagOf(group));
    gloo::allgather(options);
  } catch (const std::exception &e) {
    return fail(error, size, collectiveError("all-gather", e));
  }
  return 0;
}

// Gloo has no job-wide abort: this rank ends, and the others' collectives
// fail on its closed connections.
void abortRun(int code) { std::_Exit(code); }

void finalize() {
  context.reset();
  rendezvousStore.reset();
}

const char *libraryVersion() { return versionText.c_str(); }

const KilnCommPlugin kPlugin = {
    KILN_COMM_PLUGIN_VERSION, init,      split,    freeGroup,
    allreduceSumF32,          reduceScatterSumF32, allgather,
    abortRun,                 finalize,  libraryVersion,
};

} // namespace

extern "C" __attribute__((visibility("default"))) const KilnCommPlugin *
kiln_comm_plugin() {
  // Gloo's TCP pairs write with writev, which raises SIGPIPE when the peer's
  // end is closed (a rank that died): the default action kills this rank
  // silently, mid-write, before it can say which rank broke the run.
  // Ignored, the write fails with EPIPE and Gloo throws, which the run
  // reports (kiln-run: error: ... rank 1 died or stopped). Python, and so
  // torchrun's workers, ignore SIGPIPE the same way.
  ::signal(SIGPIPE, SIG_IGN);
  return &kPlugin;
}
