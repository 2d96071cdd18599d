// client/cli/progress_bar.cc: the progress line on stderr (see progress_bar.h).
#include "client/cli/progress_bar.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <string_view>

namespace dblog::cli {
namespace {

constexpr std::size_t kBarWidth = 20;

std::size_t TerminalWidth(std::FILE* file) {
  winsize size{};
  if (ioctl(fileno(file), TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  return 80;
}

}  // namespace

void AppendPrintable(std::string& line, std::string_view text) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      line.push_back('?');
    } else if (c == 0xc2 && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xe0) == 0x80) {
      line.push_back('?');
      ++i;
    } else {
      line.push_back(text[i]);
    }
  }
}

std::string PrintableText(std::string_view text) {
  std::string out;
  AppendPrintable(out, text);
  return out;
}

std::string RenderProgressLine(const dblog::v1::Progress& progress, std::size_t width) {
  std::uint64_t copied = 0, estimated = 0;
  int done = 0;
  bool estimated_known = true;  // every table still copying has an estimate
  for (const auto& table : progress.tables()) {
    copied += table.rows_copied();
    if (table.done()) {
      ++done;
      estimated += table.rows_copied();  // finished: its count is exact, whatever the estimate
    } else {
      if (table.rows_estimated() == 0) estimated_known = false;
      estimated += std::max(table.rows_estimated(), table.rows_copied());
    }
  }
  const bool all_done = done == progress.tables_size();
  if (!estimated_known && !all_done) estimated = 0;
  std::string line;
  AppendPrintable(line, progress.phase().empty() ? "copy" : progress.phase());
  if (estimated > 0 || all_done) {
    // 100% only once every table is done: estimates are often low.
    const std::uint64_t percent =
        all_done ? 100 : std::min<std::uint64_t>(99, copied * 100 / estimated);
    const std::size_t filled = static_cast<std::size_t>(percent * kBarWidth / 100);
    line += " [" + std::string(filled, '#') + std::string(kBarWidth - filled, '.') + "] ";
    const std::string pct = std::to_string(percent) + "%";
    line += std::string(4 - std::min<std::size_t>(4, pct.size()), ' ') + pct;
  }
  line += " " + std::to_string(copied);
  if (estimated > 0) line += "/" + std::to_string(estimated);
  line +=
      " rows, " + std::to_string(done) + "/" + std::to_string(progress.tables_size()) + " tables";
  for (const auto& table : progress.tables()) {
    if (table.done()) continue;
    line += " | ";
    AppendPrintable(line, table.schema());
    line += ".";
    AppendPrintable(line, table.name());
    line += " " + std::to_string(table.rows_copied());
    if (table.rows_estimated() > 0) line += "/" + std::to_string(table.rows_estimated());
  }
  if (line.size() > width) {
    std::size_t keep = width >= 3 ? width - 3 : 0;
    // Cut at a character boundary (names can be UTF-8). Columns are counted as bytes, which
    // only makes lines with non-ASCII names shorter than they could be.
    while (keep > 0 && (static_cast<unsigned char>(line[keep]) & 0xc0) == 0x80) --keep;
    line.resize(keep);
    line += std::string(std::min<std::size_t>(3, width), '.');
  }
  return line;
}

void ProgressDisplay::Show(const dblog::v1::Progress& progress) {
  if (!enabled_) return;
  const bool all_done = std::all_of(progress.tables().begin(), progress.tables().end(),
                                    [](const auto& table) { return table.done(); });
  const auto now = std::chrono::steady_clock::now();
  if (shown_ && !all_done && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  // One column short of the terminal, so the cursor never wraps to a new line.
  const std::size_t width = TerminalWidth(err_);
  const std::string line = RenderProgressLine(progress, width > 1 ? width - 1 : width);
  std::fprintf(err_, "\r%s\x1b[K", line.c_str());
  std::fflush(err_);
  shown_ = true;
}

void ProgressDisplay::Clear() {
  if (!shown_) return;
  std::fputs("\r\x1b[K", err_);
  std::fflush(err_);
  shown_ = false;
}

}  // namespace dblog::cli
