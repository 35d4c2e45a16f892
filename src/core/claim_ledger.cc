#include "core/claim_ledger.h"

#include <unordered_set>

namespace queuebox {

ClaimLedger::Held& ClaimLedger::Hold(const std::string& id, const std::string& token) {
  auto [it, inserted] = claims_.try_emplace(id);
  if (!inserted && it->second.token != token) {
    // A newer claim of the row: the older one is lost, its publish cancelled if not yet sent.
    if (it->second.cancel) it->second.cancel[it->second.index].store(true);
    it->second = Held{};
  }
  it->second.token = token;
  return it->second;
}

ClaimLedger::Held* ClaimLedger::Find(const std::string& id, const std::string& token) {
  auto it = claims_.find(id);
  return it != claims_.end() && it->second.token == token ? &it->second : nullptr;
}

const ClaimLedger::Held* ClaimLedger::Find(const std::string& id, const std::string& token) const {
  auto it = claims_.find(id);
  return it != claims_.end() && it->second.token == token ? &it->second : nullptr;
}

CancelFlags ClaimLedger::HoldForPublish(std::span<const OutboxRow> rows) {
  CancelFlags flags(new std::atomic<bool>[rows.size()]());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < rows.size(); ++i) {
    Held& c = Hold(rows[i].id, rows[i].claim_token);
    c.cancel = flags;
    c.index = i;
  }
  return flags;
}

void ClaimLedger::HoldForWrite(std::span<const OutboxRow> rows) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const OutboxRow& row : rows) Hold(row.id, row.claim_token).writing = true;
}

void ClaimLedger::StartWriting(std::span<const OutboxRow> rows) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const OutboxRow& row : rows) {
    if (Held* c = Find(row.id, row.claim_token)) c->writing = true;
  }
}

std::vector<bool> ClaimLedger::CountedLost(std::span<const OutboxRow* const> rows) const {
  std::vector<bool> counted(rows.size(), false);
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < rows.size(); ++i) {
    const Held* c = Find(rows[i]->id, rows[i]->claim_token);
    counted[i] = c != nullptr && c->lost;
  }
  return counted;
}

void ClaimLedger::Release(std::span<const OutboxRow* const> rows) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const OutboxRow* row : rows) {
    if (Find(row->id, row->claim_token) != nullptr) claims_.erase(row->id);
  }
}

ClaimLedger::Renewal ClaimLedger::Renew(OutboxClaims& claims, int64_t lease_ms) {
  std::vector<Fence> fences;
  {
    std::lock_guard<std::mutex> lock(mu_);
    fences.reserve(claims_.size());
    for (const auto& [id, claim] : claims_) {
      if (!claim.lost) fences.push_back({id, claim.token});
    }
  }
  Renewal out;
  if (fences.empty()) return out;
  Result<std::vector<std::string>> renewed = claims.Renew(fences, lease_ms);
  if (!renewed.ok()) {
    out.status = renewed.status();
    return out;
  }
  out.renewed = renewed->size();
  if (renewed->size() >= fences.size()) return out;
  // Not renewed and not yet being written: lost (the fence makes that final). A claim whose
  // write started is left to that fenced write.
  std::unordered_set<std::string_view> kept(renewed->begin(), renewed->end());
  std::lock_guard<std::mutex> lock(mu_);
  for (const Fence& f : fences) {
    if (kept.count(f.id) > 0) continue;
    Held* c = Find(f.id, f.claim_token);  // a newer claim of the row is not this one
    if (c == nullptr || c->writing || c->lost) continue;
    c->lost = true;
    if (c->cancel) c->cancel[c->index].store(true);
    ++out.lost;
  }
  return out;
}

size_t ClaimLedger::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return claims_.size();
}

}  // namespace queuebox
