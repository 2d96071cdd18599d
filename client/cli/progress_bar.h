// client/cli/progress_bar.h: the one-line progress display `dblog tail` keeps on stderr while a
// bootstrap or repair copies rows (Progress messages), when stderr is a terminal.
// Owns: the progress line's text (pure, RenderProgressLine) and redrawing it on a terminal.
// Must not write anything when disabled: stderr that is not a terminal stays silent.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <string>
#include <string_view>

#include "dblog/v1/consumer.pb.h"

namespace dblog::cli {

// "bootstrap [########............]  44% 4010/9010 rows, 1/3 tables | public.items 3000/5000
// | public.orders 1000/4000": totals first, then every table not yet done. The bar is left out
// while a table still copying has no estimate; it shows 100% only once every table is done
// (estimates are often low). Cut to `width` columns (a terminal line), the cut marked "...".
// Control characters in the names the server sent (phase, schema, table) show as '?'.
std::string RenderProgressLine(const dblog::v1::Progress& progress, std::size_t width);

// `text` (names or messages a server sent) with every control character replaced by '?', for a
// terminal: a table may be called "a\nb" or hold an escape sequence. Control characters: C0 and
// DEL, and C1 (U+0080..U+009F) as UTF-8 encodes them.
void AppendPrintable(std::string& line, std::string_view text);
std::string PrintableText(std::string_view text);

class ProgressDisplay {
 public:
  // enabled: stderr is a terminal. shares_terminal: stdout is a terminal too, so the line must
  // be erased before stdout writes to it.
  ProgressDisplay(std::FILE* err, bool enabled, bool shares_terminal)
      : err_(err), enabled_(enabled), shares_terminal_(shares_terminal) {}

  // Redraws the line (at most ten times a second, except the final all-done update).
  void Show(const dblog::v1::Progress& progress);
  // Erases the line if one is shown.
  void Clear();
  // Call before writing to stdout.
  void BeforeOutput() {
    if (shares_terminal_) Clear();
  }

 private:
  std::FILE* err_;
  bool enabled_;
  bool shares_terminal_;
  bool shown_ = false;
  std::chrono::steady_clock::time_point last_draw_{};
};

}  // namespace dblog::cli
