// sidecar/consumer/window_rows.h: the values the log carried for the open window's keys, so that
// a kept key whose events left a column unchanged gets a whole row at the high watermark.
//
// window::Window says which columns of a kept key no event carried (their chunk values are the
// source's at the high watermark: window.h, a fill). The other columns were carried by events,
// and the last such event in the window has the source's value at the high watermark. Merging
// the two gives the whole row: a READ row every consumer applies as a copied row (a sink that
// lost the row gets it back). A column carried only by an event before the low watermark (a
// widened transaction), or a window whose keys outgrew the budget, leaves the row partial: those
// columns are marked unchanged, and the row goes out as an UPDATE ("keep yours").
// Owns: nothing but this merge; Repairs feeds it and emits what it returns.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "dblog/v1/change.pb.h"

namespace dblog::consumer {

class WindowRows {
 public:
  explicit WindowRows(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  // A log event of the window's table while it is open: a new row for `key` (values marked
  // unchanged were not carried), or the key left (a DELETE, or a key change away from it).
  void Carried(const std::string& key, const dblog::v1::Row& new_row);
  void Left(const std::string& key);

  // The row at the high watermark for a kept key: the chunk's values of `fill_columns` and of
  // the key columns, every other column as the window's events last carried it, else unchanged.
  // `complete` says whether no column is left unchanged.
  dblog::v1::Row Merge(const std::string& key, const dblog::v1::Row& chunk_row,
                       const std::vector<int>& fill_columns,
                       const std::vector<std::uint32_t>& key_columns, bool* complete) const;

  bool overflowed() const { return overflowed_; }

 private:
  std::size_t max_bytes_;
  std::size_t bytes_ = 0;
  bool overflowed_ = false;  // past the budget: nothing more is kept, merges stay partial
  std::map<std::string, dblog::v1::Row> rows_;
};

}  // namespace dblog::consumer
