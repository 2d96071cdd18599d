// sidecar/pg/slot.cc: slot management (see slot.h).
#include "pg/slot.h"

#include "common/quote.h"

#include <cstdio>
#include <stdexcept>
#include <vector>

namespace dblog::pg {
namespace {

constexpr std::string_view kRefusalText = "may not be used as an output plugin";
constexpr std::string_view kDefaultPluginLibraries = "pgoutput, test_decoding";

std::string Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = s.substr(1, s.size() - 2);
  return std::string(s);
}

// output_plugin_libraries is a comma-separated list of library names.
std::vector<std::string> SplitList(std::string_view list) {
  std::vector<std::string> out;
  while (!list.empty()) {
    const std::size_t comma = list.find(',');
    std::string item = Trim(list.substr(0, comma));
    if (!item.empty()) out.push_back(std::move(item));
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return out;
}

// The name in `library "NAME" may not be used as an output plugin`, or "".
std::string LibraryFromMessage(const std::string& message) {
  const std::size_t open = message.find("library \"");
  if (open == std::string::npos) return {};
  const std::size_t start = open + 9;
  const std::size_t close = message.find('"', start);
  if (close == std::string::npos) return {};
  return message.substr(start, close - start);
}

std::uint64_t OptionalLsn(const Result& r, int row, std::string_view column) {
  auto v = r.optional_value(row, column);
  return v ? common::ParseLsn(*v) : 0;
}

}  // namespace

void ValidateSlotName(std::string_view name) {
  // ReplicationSlotValidateName: NAMEDATALEN - 1 bytes of lower-case letters, digits, '_'.
  bool ok = !name.empty() && name.size() <= 63;
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (!ok)
    throw std::invalid_argument("invalid replication slot name \"" + std::string(name) +
                                "\": use 1 to 63 characters of a-z, 0-9 and _");
}

SlotInfo GetSlot(Connection& sql_conn, const std::string& name) {
  Result r = sql_conn.ExecParams(
      "SELECT slot_name, plugin, slot_type, database, active, active_pid,"
      " restart_lsn::text AS restart_lsn, confirmed_flush_lsn::text AS confirmed_flush_lsn,"
      " wal_status"
      " FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
      {name});
  SlotInfo info;
  info.name = name;
  if (r.ntuples() == 0) return info;
  info.exists = true;
  info.plugin = std::string(r.optional_value(0, "plugin").value_or(""));
  info.slot_type = std::string(r.value(0, "slot_type"));
  info.database = std::string(r.optional_value(0, "database").value_or(""));
  info.active = r.bool_value(0, r.column("active"));
  if (auto pid = r.optional_value(0, "active_pid")) info.active_pid = std::stoi(std::string(*pid));
  info.restart_lsn = OptionalLsn(r, 0, "restart_lsn");
  info.confirmed_flush_lsn = OptionalLsn(r, 0, "confirmed_flush_lsn");
  info.wal_status = std::string(r.optional_value(0, "wal_status").value_or(""));
  return info;
}

CreatedSlot CreateSlot(Connection& repl_conn, const std::string& name, const std::string& plugin,
                       bool export_snapshot) {
  ValidateSlotName(name);
  if (!repl_conn.is_replication())
    throw std::invalid_argument("CreateSlot needs a replication connection");
  repl_conn.CheckServerVersion();
  // PostgreSQL 15 syntax; 14 and older spelled it EXPORT_SNAPSHOT / NOEXPORT_SNAPSHOT. From 17
  // on the slot is a failover slot: a standby with sync_replication_slots (or that calls
  // pg_sync_replication_slots()) keeps a copy of it, which the consumer resumes from after the
  // standby is promoted (docs/pgoutput.md, "Failover"). Without such a standby it changes
  // nothing.
  const bool failover = repl_conn.server_version() >= 170000;
  const std::string command = "CREATE_REPLICATION_SLOT " + common::QuoteIdent(name) +
                              " LOGICAL " + common::QuoteIdent(plugin) +
                              (export_snapshot ? " (SNAPSHOT 'export'" : " (SNAPSHOT 'nothing'") +
                              (failover ? ", FAILOVER)" : ")");
  Result r;
  try {
    r = repl_conn.Exec(command);
  } catch (const Error& e) {
    throw ExplainPluginRefusal(repl_conn, e, plugin);
  }
  if (r.ntuples() != 1)
    throw Error(
        "CREATE_REPLICATION_SLOT returned " + std::to_string(r.ntuples()) + " rows instead of 1",
        "", command, "");
  CreatedSlot out;
  out.name = std::string(r.value(0, "slot_name"));
  out.consistent_point = common::ParseLsn(r.value(0, "consistent_point"));
  out.snapshot_name = std::string(r.optional_value(0, "snapshot_name").value_or(""));
  if (export_snapshot && out.snapshot_name.empty())
    throw Error("CREATE_REPLICATION_SLOT exported no snapshot", "", command, "");
  return out;
}

bool DropSlot(Connection& sql_conn, const std::string& name, bool missing_ok) {
  if (missing_ok) {
    Result r = sql_conn.ExecParams(
        "SELECT pg_catalog.pg_drop_replication_slot(slot_name)"
        " FROM pg_catalog.pg_replication_slots WHERE slot_name = $1",
        {name});
    return r.ntuples() > 0;
  }
  sql_conn.ExecParams("SELECT pg_catalog.pg_drop_replication_slot($1)", {name});
  return true;
}

Error ExplainPluginRefusal(Connection& conn, const Error& error, std::string plugin) {
  // 42501 is insufficient_privilege. Either the server's (English) words or the setting itself
  // must show that this is the plugin list, so that another privilege failure, or a translated
  // message, is not misexplained.
  if (error.sqlstate() != "42501") return error;
  if (plugin.empty()) plugin = LibraryFromMessage(error.server_message());
  const bool refused = error.server_message().find(kRefusalText) != std::string::npos;

  // Only superusers and pg_read_all_settings members may read the setting.
  std::optional<std::string> current;
  try {
    Result r = conn.Exec("SHOW output_plugin_libraries");
    if (r.ntuples() == 1) current = std::string(r.value(0, 0));
  } catch (const std::exception&) {
  }
  std::vector<std::string> listed = current ? SplitList(*current) : std::vector<std::string>{};
  bool is_listed = false;
  for (const auto& item : listed) is_listed = is_listed || item == plugin;
  if (!refused && !(current && !plugin.empty() && !is_listed)) return error;
  if (plugin.empty()) plugin = "dblog";

  // The suggested value keeps what is listed; unreadable, start from the default.
  std::string wanted = current ? *current : std::string(kDefaultPluginLibraries);
  if (!is_listed) wanted = wanted.empty() ? plugin : wanted + ", " + plugin;
  // ALTER SYSTEM needs one literal per library: a single 'a, b' string is one (wrong) name
  std::string literal;
  std::size_t start = 0;
  while (start <= wanted.size()) {
    const auto comma = wanted.find(',', start);
    std::string item = wanted.substr(start, comma == std::string::npos ? std::string::npos
                                                                       : comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    if (!item.empty()) {
      if (!literal.empty()) literal += ", ";
      literal += "'";
      for (char c : item) literal += c == '\'' ? std::string("''") : std::string(1, c);
      literal += "'";
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }

  std::string message = "the server refuses output plugin \"" + plugin +
                        "\": PostgreSQL 15.19 and later only load output plugins listed in "
                        "output_plugin_libraries (";
  message += current ? "currently '" + *current + "'"
                     : "this role may not read its value; the default is '" +
                           std::string(kDefaultPluginLibraries) + "'";
  message += "), superusers included. Add " + plugin + " to it as a superuser";
  if (!current) message += ", keeping what is listed already";
  message += ": ALTER SYSTEM SET output_plugin_libraries = " + literal +
             "; SELECT pg_reload_conf(); (a reload is enough; a value set with ALTER ROLE or "
             "ALTER DATABASE takes precedence over ALTER SYSTEM). Server said: " +
             error.server_message();
  return Error(std::move(message), error.sqlstate(), error.sql(), error.server_message(),
               error.detail(), error.hint());
}

}  // namespace dblog::pg
