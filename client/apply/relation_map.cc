// client/apply/relation_map.cc: planning the target's follow-up of source schema changes (see
// relation_map.h).
#include "client/apply/relation_map.h"

#include <algorithm>
#include <optional>
#include <set>

#include "client/apply/column_types.h"
#include "client/apply/sql_text.h"

namespace dblog::apply {

const char kRelationMapDdl[] =
    " CREATE TABLE IF NOT EXISTS dblog_apply.relations ("
    "   consumer text, relation_oid oid, table_schema text NOT NULL, table_name text NOT NULL,"
    "   updated_at timestamptz NOT NULL DEFAULT now(),"
    "   PRIMARY KEY (consumer, relation_oid));"
    " CREATE TABLE IF NOT EXISTS dblog_apply.columns ("
    "   consumer text, relation_oid oid, attnum int, column_name text NOT NULL,"
    "   type_name text NOT NULL, dropped boolean NOT NULL DEFAULT false,"
    "   PRIMARY KEY (consumer, relation_oid, attnum));";

std::string AsideName(const std::string& name, std::uint32_t id) {
  const std::string suffix = "_dblog_" + std::to_string(id);
  std::size_t cut = 63 - suffix.size();
  // Never cut a UTF-8 sequence in two: back up to the lead byte of the one cut.
  if (name.size() > cut)
    while (cut > 0 && (static_cast<unsigned char>(name[cut]) & 0xC0) == 0x80) --cut;
  const std::string head = name.substr(0, cut);
  return head + suffix;
}

std::vector<MappedColumn> ColumnsOf(const dblog::v1::Relation& relation) {
  std::vector<MappedColumn> out;
  for (const auto& c : relation.columns())
    out.push_back(MappedColumn{c.attnum(), c.name(), c.type_name(), false});
  std::sort(out.begin(), out.end(),
            [](const MappedColumn& a, const MappedColumn& b) { return a.attnum < b.attnum; });
  return out;
}

ColumnPlan PlanColumns(const std::vector<MappedColumn>& before, const dblog::v1::Relation& relation,
                       const TargetName& table,
                       const std::map<std::string, std::string>& target_types,
                       DroppedColumns policy, bool allow_lossy_columns) {
  ColumnPlan plan;
  const std::string display = table.Display();
  const std::string alter = "ALTER TABLE " + table.Quoted() + " ";
  std::map<std::uint32_t, const dblog::v1::Column*> now;
  for (const auto& c : relation.columns()) {
    if (c.attnum() == 0)
      throw SchemaError("source table " + relation.schema() + "." + relation.name() + ": column " +
                        c.name() +
                        " arrived without its attnum (a plugin older than the column identity);"
                        " update the dblog extension at the source");
    now[c.attnum()] = &c;
  }
  std::map<std::string, std::string> names = target_types;  // the target's columns as we go
  std::vector<MappedColumn> kept;                           // dropped at the source, kept here
  const auto move_aside = [&](MappedColumn& column) {
    const std::string aside = AsideName(column.name, column.attnum);
    plan.statements.push_back(alter + "RENAME COLUMN " + QuoteIdent(column.name) + " TO " +
                              QuoteIdent(aside));
    plan.notes.push_back("renamed kept column " + column.name + " of target table " + display +
                         " (dropped at the source) to " + aside +
                         ": a new source column has its name");
    names[aside] = names[column.name];
    names.erase(column.name);
    column.name = aside;
  };

  // Columns gone at the source.
  for (const MappedColumn& b : before) {
    if (now.count(b.attnum)) continue;
    if (b.dropped) {
      kept.push_back(b);
      continue;
    }
    if (!names.count(b.name)) continue;  // the target does not have it (any more)
    if (policy == DroppedColumns::kDrop) {
      plan.statements.push_back(alter + "DROP COLUMN " + QuoteIdent(b.name));
      plan.notes.push_back("dropped column " + b.name + " of target table " + display +
                           ": the source dropped it (--keep-dropped-columns keeps such columns)");
      names.erase(b.name);
    } else {
      plan.statements.push_back(alter + "ALTER COLUMN " + QuoteIdent(b.name) + " DROP NOT NULL");
      plan.notes.push_back("kept column " + b.name + " of target table " + display +
                           " that the source dropped: rows written from now on leave it NULL");
      MappedColumn k = b;
      k.dropped = true;
      kept.push_back(k);
    }
  }

  // Renamed columns, and kept columns in the way of a name the source uses now.
  std::map<std::string, std::string> renames;  // old -> new
  std::set<std::string> renamed_from;
  for (const MappedColumn& b : before) {
    const auto it = now.find(b.attnum);
    if (it == now.end() || b.dropped || b.name == it->second->name()) continue;
    if (!names.count(b.name)) continue;  // the target lacks it: a new column to it
    renames[b.name] = it->second->name();
    renamed_from.insert(b.name);
  }
  std::set<std::uint32_t> known;
  for (const MappedColumn& b : before) known.insert(b.attnum);
  for (const auto& c : relation.columns()) {
    const bool is_new = !known.count(c.attnum());
    const bool is_rename_target = [&] {
      for (const auto& [from, to] : renames)
        if (to == c.name()) return true;
      return false;
    }();
    if (!is_new && !is_rename_target) continue;
    for (MappedColumn& k : kept)
      if (k.name == c.name()) move_aside(k);
    if (is_rename_target && names.count(c.name()) && !renamed_from.count(c.name()))
      throw SchemaError("the source renamed a column of " + relation.schema() + "." +
                        relation.name() + " to " + c.name() + ", and target table " + display +
                        " already has a column of that name that the source does not send:"
                        " rename or drop it in the target, then start dblog apply again");
  }
  const bool swap = std::any_of(renames.begin(), renames.end(), [&](const auto& r) {
    return names.count(r.second) > 0;  // its new name is still taken by another being renamed
  });
  std::map<std::string, std::string> types_after = names;
  for (const auto& [from, to] : renames) types_after.erase(from);
  for (const auto& [from, to] : renames) types_after[to] = names.at(from);
  if (swap) {
    for (const auto& [from, to] : renames) {
      const auto it = std::find_if(before.begin(), before.end(),
                                   [&](const MappedColumn& b) { return b.name == from; });
      const std::string tmp = AsideName("dblog_tmp", it->attnum);
      plan.statements.push_back(alter + "RENAME COLUMN " + QuoteIdent(from) + " TO " +
                                QuoteIdent(tmp));
    }
  }
  for (const auto& [from, to] : renames) {
    const auto it = std::find_if(before.begin(), before.end(),
                                 [&](const MappedColumn& b) { return b.name == from; });
    const std::string source = swap ? AsideName("dblog_tmp", it->attnum) : from;
    plan.statements.push_back(alter + "RENAME COLUMN " + QuoteIdent(source) + " TO " +
                              QuoteIdent(to));
    plan.notes.push_back("renamed column " + from + " of target table " + display + " to " + to +
                         ": the source renamed it");
  }
  names = std::move(types_after);

  // Type changes.
  for (const MappedColumn& b : before) {
    const auto it = now.find(b.attnum);
    if (it == now.end() || b.dropped) continue;
    const dblog::v1::Column& c = *it->second;
    if (b.type == c.type_name()) continue;
    const auto t = names.find(c.name());
    if (t == names.end()) continue;  // a new column to the target: PrepareTargetTable
    const std::string& target_type = t->second;
    const Conversion holds = ClassifyConversion(c.type_name(), target_type);
    if (holds != Conversion::kLossy) {
      plan.notes.push_back("column " + c.name() + " of " + relation.schema() + "." +
                           relation.name() + " changed type from " + b.type + " to " +
                           c.type_name() + " at the source; target column " + display + "." +
                           c.name() + " (" + target_type + ") holds every value of it");
      continue;
    }
    if (ClassifyConversion(target_type, c.type_name()) != Conversion::kLossy) {
      plan.statements.push_back(alter + "ALTER COLUMN " + QuoteIdent(c.name()) + " TYPE " +
                                c.type_name() + " USING " + QuoteIdent(c.name()) +
                                "::" + c.type_name());
      plan.notes.push_back("changed the type of column " + c.name() + " of target table " +
                           display + " from " + target_type + " to " + c.type_name() +
                           ": the source changed it from " + b.type);
      names[c.name()] = c.type_name();
      continue;
    }
    if (allow_lossy_columns) continue;  // PrepareTargetTable warns about it
    throw SchemaError("the source changed the type of column " + c.name() + " of " +
                      relation.schema() + "." + relation.name() + " from " + b.type + " to " +
                      c.type_name() + "; target column " + display + "." + c.name() + " is " +
                      target_type +
                      ", which cannot hold every value of the new type, and converting it"
                      " could lose values: nothing of this source transaction was applied and"
                      " the stored position was not advanced. Change the target column (e.g. "
                      "ALTER TABLE " +
                      table.Quoted() + " ALTER COLUMN " + QuoteIdent(c.name()) + " TYPE " +
                      c.type_name() +
                      " USING ...) and start dblog apply again, or start it with"
                      " --allow-lossy-columns");
  }

  // New columns (added by PrepareTargetTable with --create-tables).
  if (!before.empty())
    for (const auto& c : relation.columns())
      if (!known.count(c.attnum())) plan.added.push_back(c.name());

  plan.columns = ColumnsOf(relation);
  for (const MappedColumn& k : kept) plan.columns.push_back(k);
  std::sort(plan.columns.begin(), plan.columns.end(),
            [](const MappedColumn& a, const MappedColumn& b) { return a.attnum < b.attnum; });
  return plan;
}

}  // namespace dblog::apply
