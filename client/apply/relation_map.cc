// client/apply/relation_map.cc: planning the target's follow-up of source schema changes (see
// relation_map.h).
#include "client/apply/relation_map.h"

#include <algorithm>
#include <optional>
#include <set>

#include "client/apply/column_types.h"
#include "client/apply/sql_text.h"

namespace dblog::apply {

std::string RelationMapDdl(const std::string& schema) {
  return " CREATE TABLE IF NOT EXISTS " + schema +
         ".relations ("
         "   consumer text, relation_oid oid, table_schema text NOT NULL, table_name text NOT NULL,"
         "   updated_at timestamptz NOT NULL DEFAULT now(), target_oid oid,"
         "   PRIMARY KEY (consumer, relation_oid));"
         " CREATE TABLE IF NOT EXISTS " +
         schema +
         ".columns ("
         "   consumer text, relation_oid oid, attnum int, column_name text NOT NULL,"
         "   type_name text NOT NULL, dropped boolean NOT NULL DEFAULT false,"
         "   PRIMARY KEY (consumer, relation_oid, attnum));";
}

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

namespace {

// PlanColumns' steps, in order: columns dropped at the source, renames (with kept columns moved
// out of the way), type changes, new columns. `names_` follows the target's columns (name ->
// type) as the planned statements will leave them.
class ColumnPlanner {
 public:
  ColumnPlanner(const std::vector<MappedColumn>& before, const dblog::v1::Relation& relation,
                const TargetName& table, const std::map<std::string, std::string>& target_types)
      : before_(before),
        relation_(relation),
        table_(table),
        source_(DisplayName(relation.schema(), relation.name())),
        display_(table.Display()),
        alter_("ALTER TABLE " + table.Quoted() + " "),
        names_(target_types) {
    for (const auto& c : relation.columns()) {
      if (c.attnum() == 0)
        throw SchemaError("source table " + source_ + ": column " + c.name() +
                          " arrived without its attnum (a plugin older than the column"
                          " identity); update the dblog extension at the source");
      now_[c.attnum()] = &c;
    }
    for (const MappedColumn& b : before) known_.insert(b.attnum);
  }

  void Dropped(DroppedColumns policy);
  void Renamed();
  void TypesChanged(bool allow_lossy_columns, bool source_went_back);
  ColumnPlan Finish();

 private:
  void MoveAside(MappedColumn& column);
  void Add(std::string statement, std::string note) {
    plan_.statements.push_back(std::move(statement));
    plan_.notes.push_back(std::move(note));
  }

  const std::vector<MappedColumn>& before_;
  const dblog::v1::Relation& relation_;
  const TargetName& table_;
  const std::string source_, display_, alter_;
  std::map<std::string, std::string> names_;
  std::map<std::uint32_t, const dblog::v1::Column*> now_;  // attnum -> source column now
  std::set<std::uint32_t> known_;                          // attnums mapped before
  std::vector<MappedColumn> kept_;                         // dropped at the source, kept here
  ColumnPlan plan_;
};

void ColumnPlanner::MoveAside(MappedColumn& column) {
  const std::string aside = AsideName(column.name, column.attnum);
  Add(alter_ + "RENAME COLUMN " + QuoteIdent(column.name) + " TO " + QuoteIdent(aside),
      "renamed kept column " + column.name + " of target table " + display_ +
          " (dropped at the source) to " + aside + ": a new source column has its name");
  names_[aside] = names_[column.name];
  names_.erase(column.name);
  column.name = aside;
}

void ColumnPlanner::Dropped(DroppedColumns policy) {
  for (const MappedColumn& b : before_) {
    if (now_.count(b.attnum)) continue;
    if (b.dropped) {
      kept_.push_back(b);
      continue;
    }
    if (!names_.count(b.name)) continue;  // the target does not have it (any more)
    if (policy == DroppedColumns::kDrop) {
      Add(alter_ + "DROP COLUMN " + QuoteIdent(b.name),
          "dropped column " + b.name + " of target table " + display_ +
              ": the source dropped it (--keep-dropped-columns keeps such columns)");
      names_.erase(b.name);
    } else {
      Add(alter_ + "ALTER COLUMN " + QuoteIdent(b.name) + " DROP NOT NULL",
          "kept column " + b.name + " of target table " + display_ +
              " that the source dropped: rows written from now on leave it NULL");
      MappedColumn k = b;
      k.dropped = true;
      kept_.push_back(k);
    }
  }
}

void ColumnPlanner::Renamed() {
  std::map<std::string, std::pair<std::string, std::uint32_t>> renames;  // old -> new, attnum
  for (const MappedColumn& b : before_) {
    const auto it = now_.find(b.attnum);
    if (it == now_.end() || b.dropped || b.name == it->second->name()) continue;
    if (!names_.count(b.name)) continue;  // the target lacks it: a new column to it
    renames[b.name] = {it->second->name(), b.attnum};
  }
  // Kept columns in the way of a name the source uses now; target columns the source does not
  // send in the way of a rename.
  for (const auto& c : relation_.columns()) {
    bool is_rename_target = false;
    for (const auto& [from, to] : renames) is_rename_target |= to.first == c.name();
    if (known_.count(c.attnum()) && !is_rename_target) continue;
    for (MappedColumn& k : kept_)
      if (k.name == c.name()) MoveAside(k);
    if (is_rename_target && names_.count(c.name()) && !renames.count(c.name()))
      throw SchemaError("the source renamed a column of " + source_ + " to " + c.name() +
                        ", and target table " + display_ +
                        " already has a column of that name that the source does not send:"
                        " rename or drop it in the target, then start dblog apply again");
  }
  // A new name still taken by another column being renamed (names swapped): two steps.
  bool swap = false;
  for (const auto& [from, to] : renames) swap |= names_.count(to.first) > 0;
  std::map<std::string, std::string> after = names_;
  for (const auto& [from, to] : renames) after.erase(from);
  for (const auto& [from, to] : renames) after[to.first] = names_.at(from);
  if (swap)
    for (const auto& [from, to] : renames)
      plan_.statements.push_back(alter_ + "RENAME COLUMN " + QuoteIdent(from) + " TO " +
                                 QuoteIdent(AsideName("dblog_tmp", to.second)));
  for (const auto& [from, to] : renames)
    Add(alter_ + "RENAME COLUMN " + QuoteIdent(swap ? AsideName("dblog_tmp", to.second) : from) +
            " TO " + QuoteIdent(to.first),
        "renamed column " + from + " of target table " + display_ + " to " + to.first +
            ": the source renamed it");
  names_ = std::move(after);
}

void ColumnPlanner::TypesChanged(bool allow_lossy_columns, bool source_went_back) {
  for (const MappedColumn& b : before_) {
    const auto it = now_.find(b.attnum);
    if (it == now_.end() || b.dropped) continue;
    const dblog::v1::Column& c = *it->second;
    if (b.type == c.type_name()) continue;
    const auto t = names_.find(c.name());
    if (t == names_.end()) continue;  // a new column to the target: TargetTables::Prepare
    const std::string target_type = t->second;
    if (ClassifyConversion(c.type_name(), target_type) != Conversion::kLossy) {
      plan_.notes.push_back("column " + c.name() + " of " + source_ + " changed type from " +
                            b.type + " to " + c.type_name() + " at the source; target column " +
                            display_ + "." + c.name() + " (" + target_type +
                            ") holds every value of it");
      continue;
    }
    if (ClassifyConversion(target_type, c.type_name()) != Conversion::kLossy) {
      Add(alter_ + "ALTER COLUMN " + QuoteIdent(c.name()) + " TYPE " + c.type_name() + " USING " +
              QuoteIdent(c.name()) + "::" + c.type_name(),
          "changed the type of column " + c.name() + " of target table " + display_ + " from " +
              target_type + " to " + c.type_name() + ": the source changed it from " + b.type);
      names_[c.name()] = c.type_name();
      continue;
    }
    if (source_went_back && ClassifyConversion(b.type, target_type) != Conversion::kLossy) {
      // The source went back (a failover to a standby that never had the last changes the
      // target holds, dblogd reconciling): an attnum the lost history gave to one column can
      // be another column now, and this column's values, as dblog apply left them, are of a
      // history the source no longer has. The reconcile's repairs write every row of the table
      // again, so the column takes the new type empty rather than stop the target for good. Only
      // a column as dblog apply keeps it (it held every value of the source's type before); one
      // made narrower in the target on purpose still stops.
      Add(alter_ + "ALTER COLUMN " + QuoteIdent(c.name()) + " DROP NOT NULL, ALTER COLUMN " +
              QuoteIdent(c.name()) + " TYPE " + c.type_name() + " USING NULL",
          "changed the type of column " + c.name() + " of target table " + display_ + " from " +
              target_type + " to " + c.type_name() +
              ", emptied: the source went back to a history where it is a " + c.type_name() +
              " (a failover); the reconcile's repairs write its values again");
      names_[c.name()] = c.type_name();
      continue;
    }
    if (allow_lossy_columns) continue;  // TargetTables::Prepare warns about it
    throw SchemaError("the source changed the type of column " + c.name() + " of " + source_ +
                      " from " + b.type + " to " + c.type_name() + "; target column " + display_ +
                      "." + c.name() + " is " + target_type +
                      ", which cannot hold every value of the new type, and converting it"
                      " could lose values: nothing of this source transaction was applied and"
                      " the stored position was not advanced. Change the target column (e.g. "
                      "ALTER TABLE " +
                      table_.Quoted() + " ALTER COLUMN " + QuoteIdent(c.name()) + " TYPE " +
                      c.type_name() +
                      " USING ...) and start dblog apply again, or start it with"
                      " --allow-lossy-columns");
  }
}

ColumnPlan ColumnPlanner::Finish() {
  // New columns (added by TargetTables::Prepare with --create-tables).
  if (!before_.empty())
    for (const auto& c : relation_.columns())
      if (!known_.count(c.attnum())) plan_.added.push_back(c.name());
  plan_.columns = ColumnsOf(relation_);
  for (const MappedColumn& k : kept_) plan_.columns.push_back(k);
  std::sort(plan_.columns.begin(), plan_.columns.end(),
            [](const MappedColumn& a, const MappedColumn& b) { return a.attnum < b.attnum; });
  return std::move(plan_);
}

}  // namespace

ColumnPlan PlanColumns(const std::vector<MappedColumn>& before, const dblog::v1::Relation& relation,
                       const TargetName& table,
                       const std::map<std::string, std::string>& target_types,
                       DroppedColumns policy, bool allow_lossy_columns, bool source_went_back) {
  ColumnPlanner planner(before, relation, table, target_types);
  planner.Dropped(policy);
  planner.Renamed();
  planner.TypesChanged(allow_lossy_columns, source_went_back);
  return planner.Finish();
}

}  // namespace dblog::apply
