// client/apply/target_tables.cc: see target_tables.h.
#include "client/apply/target_tables.h"

#include "client/apply/sql_text.h"
#include "client/repair_call.h"

namespace dblog::apply {

namespace {

// One row per fact, in three kinds: 't' the relation (oid, whether a table or partitioned
// table), 'c' a column (name, type, not null, has default, generated, identity, type oid),
// 'i' an index column (index oid, primary, the column's name or NULL for an expression) of
// the unique indexes that are valid and not partial, the primary key first, then by index oid,
// each index's key columns in order (an INCLUDE column plays no part in ON CONFLICT's inference).
// Columns 9-11 only order the rows.
constexpr const char* kCatalogQuery =
    "WITH r AS (SELECT c.oid, c.relkind FROM pg_catalog.pg_class c"
    " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
    " WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND c.relname OPERATOR(pg_catalog.=) $2)"
    " SELECT 't', r.oid::pg_catalog.text, (r.relkind OPERATOR(pg_catalog.=) 'r'"
    "   OR r.relkind OPERATOR(pg_catalog.=) 'p')::pg_catalog.text,"
    "   NULL, NULL, NULL, NULL, NULL, 0::pg_catalog.int8, 0::pg_catalog.int8,"
    "   0::pg_catalog.int8 FROM r"
    " UNION ALL"
    " SELECT 'c', a.attname::pg_catalog.text, pg_catalog.format_type(a.atttypid, a.atttypmod),"
    "   a.attnotnull::pg_catalog.text, a.atthasdef::pg_catalog.text,"
    "   (a.attgenerated OPERATOR(pg_catalog.<>) '')::pg_catalog.text,"
    "   (a.attidentity OPERATOR(pg_catalog.<>) '')::pg_catalog.text, a.atttypid::pg_catalog.text,"
    "   0::pg_catalog.int8, 0::pg_catalog.int8, 0::pg_catalog.int8"
    " FROM r JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) r.oid"
    " WHERE a.attnum OPERATOR(pg_catalog.>) 0 AND NOT a.attisdropped"
    " UNION ALL"
    " SELECT 'i', i.indexrelid::pg_catalog.text, i.indisprimary::pg_catalog.text,"
    "   a.attname::pg_catalog.text, NULL, NULL, NULL, NULL,"
    "   (CASE WHEN i.indisprimary THEN 0 ELSE 1 END)::pg_catalog.int8,"
    "   i.indexrelid::pg_catalog.int8, k.ord"
    " FROM r JOIN pg_catalog.pg_index i ON i.indrelid OPERATOR(pg_catalog.=) r.oid"
    " CROSS JOIN LATERAL pg_catalog.unnest(i.indkey) WITH ORDINALITY AS k(attnum, ord)"
    " LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) i.indrelid"
    "   AND a.attnum OPERATOR(pg_catalog.=) k.attnum"
    " WHERE i.indisunique AND i.indisvalid AND i.indpred IS NULL"
    "   AND k.ord OPERATOR(pg_catalog.<=) i.indnkeyatts"  // not its INCLUDE columns
    " ORDER BY 1 DESC, 9, 10, 11";

}  // namespace

const TargetTables::Catalog& TargetTables::Read(const TargetName& name) {
  const auto key = std::make_pair(name.schema, name.name);
  if (const auto it = read_.find(key); it != read_.end()) return it->second;
  PgResult r = target_.Query(kCatalogQuery, {name.schema, name.name},
                             "reading the catalog of target table " + name.Display());
  ++catalog_reads_;
  Catalog c;
  std::vector<std::string> index_order;
  std::map<std::string, UniqueIndex> indexes;
  for (int i = 0; i < r.rows(); ++i) {
    const std::string kind = r.get(i, 0);
    if (kind == "t") {
      c.oid = static_cast<std::uint32_t>(std::stoul(r.get(i, 1)));
      c.table = r.get(i, 2) == "true";
    } else if (kind == "c") {
      c.columns[r.get(i, 1)] = TargetColumn{r.get(i, 2), r.get(i, 3) == "true",
                                            r.get(i, 4) == "true", r.get(i, 5) == "true",
                                            r.get(i, 6) == "true",
                                            static_cast<std::uint32_t>(std::stoul(r.get(i, 7)))};
    } else {
      const std::string id = r.get(i, 1);
      if (!indexes.count(id)) index_order.push_back(id);
      UniqueIndex& index = indexes[id];
      index.primary = r.get(i, 2) == "true";
      // attnum 0 (an expression) has no attribute: such an index cannot be the conflict target
      index.columns.push_back(r.is_null(i, 3) ? std::string() : r.get(i, 3));
    }
  }
  for (const std::string& id : index_order) c.unique_indexes.push_back(std::move(indexes[id]));
  return read_.emplace(key, std::move(c)).first->second;
}

void TargetTables::Change(const std::string& sql, const std::string& what) {
  read_.clear();
  target_.Exec(sql, what);
}

std::uint32_t TargetTables::Oid(const TargetName& name) {
  PgResult r = target_.Query(
      "SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
      " ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
      " WHERE n.nspname OPERATOR(pg_catalog.=) $1 AND c.relname OPERATOR(pg_catalog.=) $2",
      {name.schema, name.name}, "looking up target table " + name.Display());
  ++catalog_reads_;
  return r.rows() == 0 ? 0 : static_cast<std::uint32_t>(std::stoul(r.get(0, 0)));
}

TargetTables::Prepared TargetTables::Prepare(const dblog::v1::Relation& relation,
                                             const TargetName& name, const Host& host) {
  read_.clear();  // what another transaction (or a person) did since is read anew
  Prepared out;
  out.mapping = FollowIdentity(relation, name, host);
  out.fit = Fit(relation, name);
  out.mapping.target_oid = out.fit.oid;
  for (const LossyColumn& column : out.fit.lossy) {
    std::string message = DescribeLossyColumn(name, column);
    if (!lossy_warned_.insert(message).second) continue;  // once per column (and types)
    log_("warning: " + message +
         ": it cannot hold every value of the source's type; values are rounded, truncated or"
         " refused as PostgreSQL's assignment cast does (--allow-lossy-columns)");
  }
  return out;
}

void TargetTables::CheckMappedTable(std::uint32_t oid, const RelationMapping& mapping,
                                    const TargetName& name) {
  if (mapping.target_oid == 0) return;  // recorded by an older dblog apply: trusted by name
  const std::uint32_t now = Read(name).oid;
  if (now == 0 || now == mapping.target_oid) return;
  const std::string fix =
      "UPDATE " + store_.Table("relations") +
      " SET target_oid = NULL WHERE consumer = " + target_.QuoteLiteral(options_.consumer) +
      " AND relation_oid = " + std::to_string(oid);
  throw SchemaError(
      DisplayName(options_.bookkeeping_schema, "relations") + " maps source relation oid " +
      std::to_string(oid) + " of consumer " + options_.consumer + " to target table " +
      mapping.target.Display() + ", recorded as table oid " + std::to_string(mapping.target_oid) +
      ", but " + name.Display() + " in the target is table oid " + std::to_string(now) +
      ": not the table dblog apply created or adopted for it, so it is neither renamed nor"
      " altered. Nothing of this source transaction was applied and the stored position was"
      " not advanced. If " +
      name.Display() +
      " is the right table (recreated, or the target"
      " restored from a dump), run " +
      fix +
      " (it is adopted by name at the next start);"
      " otherwise fix or delete that row");
}

void TargetTables::MoveAside(const TargetName& name, std::uint32_t except, const Host& host) {
  for (auto& [oid, mapping] : store_.mappings()) {
    if (oid == except || mapping.target != name) continue;
    const TargetName aside{name.schema, AsideName(name.name, oid)};
    CheckMappedTable(oid, mapping, name);  // the table there is that relation's
    if (Read(name).oid != 0) {
      Change("ALTER TABLE " + name.Quoted() + " RENAME TO " + QuoteIdent(aside.name),
             "renaming target table " + name.Display() + " to " + aside.Display());
      store_.MoveRegistration(name, aside);
    }
    log_("target table " + name.Display() + " was applied from source relation oid " +
         std::to_string(oid) + ", and the source now has another table of that name (oid " +
         std::to_string(except) + "): renamed it to " + aside.Display() +
         " (if the source dropped that table, drop it; if the source renamed it, it follows at"
         " that table's next change)");
    RelationMapping moved = mapping;
    moved.target = aside;
    const std::uint32_t moved_oid = oid;
    store_.SaveMapping(moved_oid, moved);
    host.moved_aside(moved_oid);
    return;  // one oid per target name
  }
}

void TargetTables::RenameTargetTable(std::uint32_t oid, const std::string& source,
                                     const RelationMapping& mapping, const TargetName& to,
                                     const Host& host) {
  const TargetName from = mapping.target;
  if (Read(from).oid == 0) {
    if (Read(to).oid != 0) {
      CheckMappedTable(oid, mapping, to);  // renamed in the target already, by hand
      log_("the source renamed " + from.Display() + " (relation oid " + std::to_string(oid) +
           ") to " + source + "; target table " + to.Display() + " already has the new name");
      store_.MoveRegistration(from, to);
      return;
    }
    throw SchemaError("the source renamed the table applied into target table " + from.Display() +
                      " (relation oid " + std::to_string(oid) + ") to " + source + ", and " +
                      from.Display() +
                      " is not in the target: restore it (or rename it to " + to.Display() +
                      " yourself), then start dblog apply again; nothing of this source"
                      " transaction was applied and the stored position was not advanced");
  }
  MoveAside(to, oid, host);
  if (Read(to).oid != 0)
    throw SchemaError("the source renamed the table applied into target table " + from.Display() +
                      " (relation oid " + std::to_string(oid) + ") to " + source +
                      ", and the target already has a table " + to.Display() +
                      " that this consumer did not apply into: rename or drop it, then start dblog"
                      " apply again; nothing of this source transaction was applied and the"
                      " stored position was not advanced");
  TargetName at = from;
  if (from.name != to.name) {
    Change("ALTER TABLE " + from.Quoted() + " RENAME TO " + QuoteIdent(to.name),
           "renaming target table " + from.Display() + " to " + to.name);
    at.name = to.name;
  }
  if (from.schema != to.schema) {
    if (options_.create)
      Change("CREATE SCHEMA IF NOT EXISTS " + QuoteIdent(to.schema),
             "creating target schema " + to.schema);
    Change("ALTER TABLE " + at.Quoted() + " SET SCHEMA " + QuoteIdent(to.schema),
           "moving target table " + at.Display() + " to schema " + to.schema);
  }
  store_.MoveRegistration(from, to);
  log_("renamed target table " + from.Display() + " to " + to.Display() + ": the source renamed" +
       " relation oid " + std::to_string(oid) + " to " + source);
}

RelationMapping TargetTables::FollowIdentity(const dblog::v1::Relation& rel,
                                             const TargetName& name, const Host& host) {
  const std::uint32_t oid = rel.oid();
  const std::string source = DisplayName(rel.schema(), rel.name());
  std::vector<MappedColumn> before;
  // A column type the target cannot follow without loss is followed emptied where the target's
  // values are about to be written again anyway (relation_map.h): in a table the open bootstrap
  // cleared (by its oid: a failover during a bootstrap, whose redone bootstrap can meet attnums
  // the lost history gave to other columns), and at the first sight of each relation after a
  // reconcile, whose repairs rewrite every row; a later Relation is the live source's again.
  bool went_back = store_.Follow(oid);
  if (const auto it = store_.mappings().find(oid); it == store_.mappings().end()) {
    MoveAside(name, oid, host);  // first sight: adopted by name
  } else {
    before = it->second.columns;
    went_back = went_back || (it->second.target_oid != 0 && host.cleared(it->second.target_oid));
    CheckMappedTable(oid, it->second, it->second.target);  // before following it
    if (it->second.target != name)
      RenameTargetTable(oid, source, it->second, name, host);
  }
  RelationMapping mapping{name, ColumnsOf(rel)};
  if (before.empty()) return mapping;
  std::map<std::string, std::string> types;  // copied: the plan's statements change the catalog
  {
    const Catalog& catalog = Read(name);
    if (catalog.oid == 0) return mapping;
    for (const auto& [column, c] : catalog.columns) types[column] = c.type;
  }
  const ColumnPlan plan = PlanColumns(before, rel, name, types, options_.dropped_columns,
                                      options_.allow_lossy_columns, went_back);
  for (const std::string& statement : plan.statements)
    Change(statement, "following a schema change of " + source + " in target table " +
                          name.Display());
  for (const std::string& note : plan.notes) log_(note);
  for (const std::string& column : plan.added)
    log_("note: the source added column " + column + " to " + source +
         ": rows it does not write again keep NULL in target table " + name.Display() +
         " (also when the source filled them with a default); when it did, restore them with: " +
         client::RepairTableCall(rel, options_.consumer));
  mapping.columns = plan.columns;
  return mapping;
}

TargetTableFit TargetTables::Fit(const dblog::v1::Relation& relation, const TargetName& name) {
  const std::string display = name.Display();
  const std::vector<std::string> key = SourceKeyNames(relation);
  if (key.empty())
    throw SchemaError("source table " + DisplayName(relation.schema(), relation.name()) +
                      " arrived without key columns");
  if (!Read(name).table && options_.create) {
    Change("CREATE SCHEMA IF NOT EXISTS " + QuoteIdent(name.schema),
           "creating target schema " + name.schema);
    Change(CreateTableSql(relation, name), "creating target table " + display);
    log_("created target table " + display);
  }
  if (!Read(name).table)
    throw SchemaError("target table " + display + " does not exist (source table " +
                      DisplayName(relation.schema(), relation.name()) +
                      "); create it or run with --create-tables");
  if (options_.create) {
    // --create-tables: the source's columns the target lacks are added, nullable: the rows
    // already there have no value for them until the stream brings one
    const TargetColumns columns = Read(name).columns;
    for (const auto& c : relation.columns()) {
      if (columns.count(c.name())) continue;
      Change("ALTER TABLE " + name.Quoted() + " ADD COLUMN IF NOT EXISTS " + QuoteIdent(c.name()) +
                 " " + c.type_name(),
             "adding column " + c.name() + " to target table " + display);
      log_("added column " + c.name() + " " + c.type_name() + " to target table " + display);
    }
  }
  const Catalog& catalog = Read(name);
  TargetTableFit fit = CheckTargetColumns(relation, catalog.columns,
                                          TargetTableOptions{options_.create,
                                                             options_.allow_lossy_columns},
                                          display);
  CheckConflictTarget(catalog.unique_indexes, key, display);
  fit.oid = catalog.oid;
  return fit;
}

}  // namespace dblog::apply
