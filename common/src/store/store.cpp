// The parts of dist/store.h every store shares: timeout validation and PrefixStore.
#include <string>

#include "dist/check.h"
#include "dist/store.h"

namespace dist {

Millis Store::checked_timeout(Millis timeout) {
  if (timeout <= Millis::zero() || timeout > kMaxTimeout) {
    throw ConfigError("a timeout of " + std::to_string(timeout.count()) +
                      " ms is out of range: it must be positive and at most one week (" +
                      std::to_string(kMaxTimeout.count()) + " ms)");
  }
  return timeout;
}

void Store::check_key(const std::string& key) {
  if (key.size() > kMaxStoreKeyBytes) {
    constexpr std::size_t kShown = 80;
    throw Error("store key \"" + key.substr(0, kShown) + "...\" is " + std::to_string(key.size()) +
                " bytes long; keys are limited to " + std::to_string(kMaxStoreKeyBytes));
  }
}

void Store::check_value(const std::string& value) {
  if (value.size() > kMaxStoreValueBytes) {
    throw Error("a store value of " + std::to_string(value.size()) +
                " bytes is over the limit of " + std::to_string(kMaxStoreValueBytes) +
                " (64 MiB): the store is for addresses and small records, not bulk data");
  }
}

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : Store(base->timeout()), prefix_(std::move(prefix)), base_(std::move(base)) {}

std::vector<std::string> PrefixStore::prefixed(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& k : keys) out.push_back(prefixed(k));
  return out;
}

void PrefixStore::set(const std::string& key, const std::string& value) {
  base_->set(prefixed(key), value);
}
std::string PrefixStore::get(const std::string& key) {
  return base_->get(prefixed(key));
}
std::int64_t PrefixStore::add(const std::string& key, std::int64_t delta) {
  return base_->add(prefixed(key), delta);
}
std::string PrefixStore::compare_set(const std::string& key, const std::string& expected,
                                     const std::string& desired) {
  return base_->compare_set(prefixed(key), expected, desired);
}
void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  base_->wait(prefixed(keys), timeout);
}
bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(prefixed(keys));
}
bool PrefixStore::delete_key(const std::string& key) {
  return base_->delete_key(prefixed(key));
}
std::int64_t PrefixStore::num_keys() {
  return base_->num_keys();
}

void acknowledge_read(Store& store, const std::string& topic, int rank) {
  try {
    store.set(topic + "/" + std::to_string(rank), "");
  } catch (const Error&) {  // the store is gone: the reader already has what it needed
  }
}

void wait_for_reads(Store& store, const std::string& topic, const std::vector<int>& ranks,
                    Millis limit) {
  std::vector<std::string> keys;
  for (int r : ranks) keys.push_back(topic + "/" + std::to_string(r));
  if (keys.empty()) return;
  try {
    store.wait(keys, limit);
  } catch (const TimeoutError&) {  // a rank that never reads must not hold rank 0 forever
  }
}

}  // namespace dist
