// sidecar/consumer/window_rows.cc: the values the log carried for the open window's keys (see
// window_rows.h).
#include "consumer/window_rows.h"

#include <algorithm>

namespace dblog::consumer {

void WindowRows::Left(const std::string& key) {
  auto it = rows_.find(key);
  if (it == rows_.end()) return;
  bytes_ -= it->first.size() + it->second.ByteSizeLong();
  rows_.erase(it);
}

void WindowRows::Carried(const std::string& key, const dblog::v1::Row& new_row) {
  if (overflowed_) return;
  auto [it, inserted] = rows_.try_emplace(key);
  dblog::v1::Row& row = it->second;
  if (inserted) {
    bytes_ += key.size();
  } else {
    bytes_ -= row.ByteSizeLong();
  }
  if (row.values_size() != new_row.values_size()) {
    row.Clear();
    for (int i = 0; i < new_row.values_size(); ++i) row.add_values()->set_unchanged(true);
  }
  for (int i = 0; i < new_row.values_size(); ++i) {
    const dblog::v1::Value& v = new_row.values(i);
    if (v.has_split()) {
      // Its bytes went to the consumer in pieces after the Change: the consumer has the value,
      // a fill must not carry it (a chunk row has no pieces), so it is "keep yours" from now.
      row.mutable_values(i)->set_unchanged(true);
    } else if (!v.unchanged()) {
      *row.mutable_values(i) = v;
    }
  }
  bytes_ += row.ByteSizeLong();
  if (bytes_ > max_bytes_) {  // forget everything: the merges fall back to partial rows
    overflowed_ = true;
    rows_.clear();
    bytes_ = 0;
  }
}

dblog::v1::Row WindowRows::Merge(const std::string& key, const dblog::v1::Row& chunk_row,
                                 const std::vector<int>& fill_columns,
                                 const std::vector<std::uint32_t>& key_columns,
                                 bool* complete) const {
  dblog::v1::Row out = chunk_row;
  const auto carried = rows_.find(key);
  const bool have = carried != rows_.end() && carried->second.values_size() == out.values_size();
  *complete = true;
  for (int i = 0; i < out.values_size(); ++i) {
    if (std::binary_search(fill_columns.begin(), fill_columns.end(), i) ||
        std::find(key_columns.begin(), key_columns.end(), static_cast<std::uint32_t>(i)) !=
            key_columns.end())
      continue;  // the chunk's value is the source's at the high watermark
    if (have && !carried->second.values(i).unchanged()) {
      *out.mutable_values(i) = carried->second.values(i);
    } else {
      out.mutable_values(i)->set_unchanged(true);
      *complete = false;
    }
  }
  return out;
}

}  // namespace dblog::consumer
