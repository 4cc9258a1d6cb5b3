// The DDS domain (dds.h): the Cyclone config it is created from (the shipped loopback one,
// $ARI_CYCLONE_CONFIG, or the caller's), and whether iceoryx shared memory can be used
// (a RouDi daemon reachable, the config enabling it).
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "component/client/dds.h"

#ifndef ARI_CONFIG_DIR
#define ARI_CONFIG_DIR "config"
#endif

namespace ari::component::dds {
namespace {

constexpr char kRoudiSocket[] = "/tmp/roudi";  // iceoryx 2.x: /tmp/<IPC channel "roudi">
constexpr char kShmOffFragment[] = "<SharedMemory><Enable>false</Enable></SharedMemory>";

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string StripCommentsAndSpace(std::string_view xml) {
  std::string out;
  out.reserve(xml.size());
  for (size_t i = 0; i < xml.size();) {
    if (xml.compare(i, 4, "<!--") == 0) {
      const size_t end = xml.find("-->", i + 4);
      if (end == std::string_view::npos) break;
      i = end + 3;
      continue;
    }
    if (!std::isspace(static_cast<unsigned char>(xml[i]))) out.push_back(xml[i]);
    ++i;
  }
  return out;
}

}  // namespace

std::string ShippedConfigUri(std::string_view file_name) {
  return "file://" + std::string(ARI_CONFIG_DIR) + "/" + std::string(file_name);
}

std::string DefaultConfigUri() {
  if (const char* env = std::getenv("ARI_CYCLONE_CONFIG"); env && *env) return env;
  return ShippedConfigUri("cyclonedds-lo.xml");
}

bool RoudiReachable(std::string* why) {
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    if (why) *why = std::string("socket(AF_UNIX): ") + std::strerror(errno);
    return false;
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, kRoudiSocket, sizeof addr.sun_path - 1);
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
  const int err = errno;
  close(fd);
  if (rc != 0 && why) {
    *why = std::string("no RouDi on ") + kRoudiSocket + " (" + std::strerror(err) + ")";
  }
  return rc == 0;
}

bool ConfigEnablesSharedMemory(std::string_view xml) {
  const std::string s = Lower(StripCommentsAndSpace(xml));
  size_t pos = 0;
  while ((pos = s.find("<sharedmemory>", pos)) != std::string::npos) {
    const size_t end = s.find("</sharedmemory>", pos);
    const std::string_view section =
        std::string_view(s).substr(pos, end == std::string::npos ? std::string::npos : end - pos);
    if (section.find("<enable>true</enable>") != std::string_view::npos) return true;
    pos += 1;
  }
  return false;
}

Result<std::shared_ptr<Domain>> Domain::Create(const DomainOptions& options) {
  if (options.domain_id >= 230) {
    return MakeError(ErrorCode::kConfig,
                     "domain id " + std::to_string(options.domain_id) + " out of range (< 230)");
  }
  std::string uri = options.config.empty() ? DefaultConfigUri() : options.config;
  std::string text;
  if (!uri.empty() && uri.front() == '<') {
    text = uri;  // inline XML
  } else {
    std::string path = uri;
    if (path.rfind("file://", 0) == 0)
      path = path.substr(7);
    else
      uri = "file://" + path;
    std::ifstream in(path);
    if (!in) return MakeError(ErrorCode::kConfig, "cannot read Cyclone config " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    text = ss.str();
  }
  std::shared_ptr<Domain> d(new Domain());
  d->id_ = static_cast<dds_domainid_t>(options.domain_id);
  d->shm_requested_ = ConfigEnablesSharedMemory(text);
  if (!d->shm_requested_) {
    d->shm_note_ = "shared memory off: not enabled in the config";
  } else if (options.shared_memory == SharedMemoryMode::kOff) {
    uri += std::string(",") + kShmOffFragment;
    d->shm_note_ = "shared memory off: switched off by the caller; using the network path";
  } else if (std::string why; !RoudiReachable(&why)) {
    uri += std::string(",") + kShmOffFragment;
    d->shm_note_ = "shared memory off: enabled in the config but iox-roudi is not reachable (" +
                   why + "); using the network path";
  } else {
    d->shm_enabled_ = true;
    d->shm_note_ = "shared memory on: iceoryx (iox-roudi reachable)";
  }
  d->config_ = uri;
  const dds_entity_t h = dds_create_domain(d->id_, uri.c_str());
  if (h < 0) {
    return DdsError(h, "dds_create_domain(" + std::to_string(options.domain_id) + ", " + uri +
                           ") (a domain with this id may already exist in this process)");
  }
  d->handle_ = h;
  return d;
}

Domain::~Domain() {
  if (handle_ > 0) dds_delete(handle_);
}

}  // namespace ari::component::dds
