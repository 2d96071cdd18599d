// sidecar/pgoutput/translate.cc: pgoutput messages to dblog.v1 events (see translate.h).
#include "pgoutput/translate.h"

#include <algorithm>
#include <charconv>
#include <set>

namespace dblog::pgoutput {
namespace {

using dblog::v1::Change;
using dblog::v1::Event;
using dblog::v1::Row;
using dblog::v1::Value;

constexpr std::int64_t kUnixToPgEpochMicros = 946684800000000LL;

std::string Quote(const std::string& s) { return "\"" + s + "\""; }

template <typename T>
T Number(const std::optional<std::string>& cell, const char* what) {
  T v{};
  if (!cell) throw TranslateError(std::string("kRelationQuery: NULL ") + what);
  auto [end, ec] = std::from_chars(cell->data(), cell->data() + cell->size(), v);
  if (ec != std::errc() || end != cell->data() + cell->size())
    throw TranslateError(std::string("kRelationQuery: ") + what + " is not a number: " + *cell);
  return v;
}

const std::string& Text(const std::optional<std::string>& cell, const char* what) {
  if (!cell) throw TranslateError(std::string("kRelationQuery: NULL ") + what);
  return *cell;
}

}  // namespace

const char* const kRelationQuery = R"sql(
SELECT n.nspname, c.relname, c.relreplident, a.attname, a.atttypid,
       (WITH RECURSIVE d(t, base) AS (
            SELECT a.atttypid, ty.typbasetype FROM pg_catalog.pg_type ty
             WHERE ty.oid OPERATOR(pg_catalog.=) a.atttypid
            UNION ALL
            SELECT d.base, ty.typbasetype FROM d JOIN pg_catalog.pg_type ty
                ON ty.oid OPERATOR(pg_catalog.=) d.base)
        SELECT d.t FROM d WHERE d.base OPERATOR(pg_catalog.=) 0),
       a.atttypmod, a.attnum, a.attnotnull, pg_catalog.format_type(a.atttypid, a.atttypmod),
       (SELECT k.ord FROM pg_catalog.pg_index i,
               pg_catalog.unnest(i.indkey::pg_catalog.int2[]) WITH ORDINALITY AS k(attnum, ord)
         WHERE i.indexrelid OPERATOR(pg_catalog.=) (
                 SELECT i2.indexrelid FROM pg_catalog.pg_index i2
                  WHERE i2.indrelid OPERATOR(pg_catalog.=) c.oid
                    AND CASE WHEN c.relreplident OPERATOR(pg_catalog.=) 'i' THEN i2.indisreplident
                             WHEN c.relreplident OPERATOR(pg_catalog.=) 'n' THEN false
                             ELSE i2.indisprimary END)
           AND k.attnum OPERATOR(pg_catalog.=) a.attnum
           AND k.ord OPERATOR(pg_catalog.<=) i.indnkeyatts),
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute d
         WHERE d.attrelid OPERATOR(pg_catalog.=) c.oid AND d.attnum OPERATOR(pg_catalog.>) 0
           AND d.attisdropped),
       (SELECT pg_catalog.count(*) FROM pg_catalog.pg_attribute g
         WHERE g.attrelid OPERATOR(pg_catalog.=) c.oid AND g.attnum OPERATOR(pg_catalog.>) 0
           AND NOT g.attisdropped AND g.attgenerated OPERATOR(pg_catalog.<>) '')
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
  JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) c.oid
 WHERE c.oid OPERATOR(pg_catalog.=) $1::pg_catalog.oid AND a.attnum OPERATOR(pg_catalog.>) 0
   AND NOT a.attisdropped
 ORDER BY a.attnum)sql";

dblog::v1::Relation RelationOf(const CatalogRelation& cat) {
  dblog::v1::Relation rel;
  rel.set_oid(cat.oid);
  rel.set_schema(cat.schema);
  rel.set_name(cat.name);
  rel.set_replica_identity(std::string(1, cat.replica_identity));
  for (const CatalogColumn& cc : cat.columns) {
    auto* col = rel.add_columns();
    col->set_name(cc.name);
    col->set_type_oid(cc.type_oid);
    col->set_type_name(cc.type_name);
    col->set_typmod(cc.typmod);
    col->set_not_null(cc.not_null);
    col->set_attnum(cc.attnum);
  }
  for (std::uint32_t k : cat.key_columns) rel.add_key_columns(k);
  return rel;
}

std::vector<ValueKind> KindsOf(const CatalogRelation& cat) {
  std::vector<ValueKind> kinds;
  for (const CatalogColumn& cc : cat.columns) kinds.push_back(KindOfBaseType(cc.base_type_oid));
  return kinds;
}

CatalogRelation ParseRelationRows(
    std::uint32_t oid, const std::vector<std::vector<std::optional<std::string>>>& rows) {
  CatalogRelation rel;
  rel.oid = oid;
  if (rows.empty()) throw TranslateError("no table with oid " + std::to_string(oid));
  std::vector<std::pair<std::uint32_t, std::uint32_t>> keys;  // (key position, column)
  for (const auto& r : rows) {
    if (r.size() != 13) throw TranslateError("kRelationQuery: a row of another width");
    if (rel.columns.empty()) {
      rel.dropped_columns = Number<std::uint32_t>(r[11], "dropped columns");
      rel.generated_columns = Number<std::uint32_t>(r[12], "generated columns");
      rel.schema = Text(r[0], "nspname");
      rel.name = Text(r[1], "relname");
      const std::string& ident = Text(r[2], "relreplident");
      if (ident.size() != 1 || std::string("dnfi").find(ident[0]) == std::string::npos)
        throw TranslateError("kRelationQuery: relreplident " + ident);
      rel.replica_identity = ident[0];
    }
    CatalogColumn col;
    col.name = Text(r[3], "attname");
    col.type_oid = Number<std::uint32_t>(r[4], "atttypid");
    col.base_type_oid = Number<std::uint32_t>(r[5], "base type");
    col.typmod = Number<std::int32_t>(r[6], "atttypmod");
    col.attnum = Number<std::uint32_t>(r[7], "attnum");
    col.not_null = Text(r[8], "attnotnull") == "t";
    col.type_name = Text(r[9], "format_type");
    if (r[10]) keys.emplace_back(Number<std::uint32_t>(r[10], "key position"),
                                 static_cast<std::uint32_t>(rel.columns.size()));
    rel.columns.push_back(std::move(col));
  }
  std::sort(keys.begin(), keys.end());
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].first != i + 1) throw TranslateError("kRelationQuery: key positions with a gap");
    rel.key_columns.push_back(keys[i].second);
  }
  return rel;
}

dblog::v1::Relation MappedRelation(const Relation& r, const CatalogRelation& cat,
                                   std::vector<ValueKind>* kinds) {
  const std::string name = Quote(r.nspname) + "." + Quote(r.relname);
  const std::size_t n = r.columns.size();
  const auto changed = [&](const std::string& what) {
    return TranslateError(what + " (DDL committed after this Relation message; " + name +
                          " cannot be mapped by its catalog any more)");
  };
  if (cat.oid != r.oid) throw changed("the catalog's table has another oid");
  // pgoutput leaves generated columns out of its messages (before 18's publish_generated_columns),
  // so the message's columns are not the live ones by position: refused, as at bootstrap.
  if (cat.generated_columns > 0)
    throw TranslateError(name + " has a generated column, which pgoutput does not send: its "
                         "columns cannot be mapped (pgoutput mode refuses tables with generated "
                         "columns; leave it out of the scope)");
  // Which catalog column each of the message's columns is. The message lists the columns live
  // when the change was written, in attnum order, without attnums. The catalog is read now.
  bool same = cat.columns.size() == n;
  for (std::size_t i = 0; same && i < n; ++i)
    same = cat.columns[i].name == r.columns[i].name &&
           cat.columns[i].type_oid == r.columns[i].type_oid &&
           cat.columns[i].typmod == r.columns[i].typmod;
  // Not the same: columns were renamed, added, dropped or retyped since. A table that never
  // dropped a column has live attnums 1..N now and had 1..n then (n <= N, a column added since
  // comes last): the i-th column of the message is attnum i+1, whatever its name now. With a
  // dropped column that is not known (it may have been live then): stop, never guess.
  if (!same && cat.dropped_columns > 0)
    throw changed("the catalog's " + name + " has " + std::to_string(cat.columns.size()) +
                  " columns (and dropped ones) where pgoutput's Relation has " +
                  std::to_string(n) + " that differ: a column was renamed, added, dropped or "
                  "retyped since");
  if (n > cat.columns.size())
    throw changed("pgoutput's Relation has " + std::to_string(n) + " columns, the catalog " +
                  std::to_string(cat.columns.size()));
  if (cat.key_columns.empty())
    throw TranslateError(name + " has no primary key nor replica identity index");
  dblog::v1::Relation rel;
  rel.set_oid(r.oid);
  rel.set_schema(r.nspname);
  rel.set_name(r.relname);
  rel.set_replica_identity(std::string(1, r.replica_identity));
  kinds->clear();
  std::set<std::uint32_t> flagged;
  for (std::size_t i = 0; i < n; ++i) {
    const CatalogColumn& cc = cat.columns[i];
    const Column& pc = r.columns[i];
    if (cc.type_oid != pc.type_oid || cc.typmod != pc.typmod)
      throw changed("column " + std::to_string(i + 1) + " (" + Quote(pc.name) +
                    ") had another type or typmod then than it has now: it was retyped since");
    auto* col = rel.add_columns();
    col->set_name(pc.name);
    col->set_type_oid(cc.type_oid);
    col->set_type_name(cc.type_name);
    col->set_typmod(cc.typmod);
    col->set_not_null(cc.not_null);
    col->set_attnum(cc.attnum);
    kinds->push_back(KindOfBaseType(cc.base_type_oid));
    if (pc.key) flagged.insert(static_cast<std::uint32_t>(i));
  }
  // pgoutput flags the replica identity's columns, unordered (every column under FULL); the
  // key's order is the catalog's index's.
  const std::set<std::uint32_t> key(cat.key_columns.begin(), cat.key_columns.end());
  if (*key.rbegin() >= n || (r.replica_identity != 'f' && flagged != key))
    throw changed("pgoutput's replica identity is not the catalog's key: it changed since");
  for (std::uint32_t k : cat.key_columns) rel.add_key_columns(k);
  return rel;
}

bool SameLayout(const CatalogRelation& a, const CatalogRelation& b) {
  if (a.oid != b.oid || a.replica_identity != b.replica_identity ||
      a.key_columns != b.key_columns || a.columns.size() != b.columns.size())
    return false;
  for (std::size_t i = 0; i < a.columns.size(); ++i) {
    const CatalogColumn &x = a.columns[i], &y = b.columns[i];
    if (x.attnum != y.attnum || x.name != y.name || x.type_oid != y.type_oid ||
        x.typmod != y.typmod)
      return false;
  }
  return true;
}

const CatalogRelation& CatalogFor(const Relation& r, const CatalogAt& at) {
  if (!at.then || at.then->oid != r.oid || at.then->columns.size() != r.columns.size())
    return at.now;
  for (std::size_t i = 0; i < r.columns.size(); ++i) {
    const CatalogColumn& c = at.then->columns[i];
    if (c.name != r.columns[i].name || c.type_oid != r.columns[i].type_oid ||
        c.typmod != r.columns[i].typmod)
      return at.now;
  }
  return *at.then;
}

Translator::Translator(Catalog catalog, std::uint64_t next_full_xid)
    : catalog_(std::move(catalog)), reference_xid_(next_full_xid) {}

const dblog::v1::Relation* Translator::FindRelation(std::uint32_t oid) const {
  auto it = tables_.find(oid);
  return it == tables_.end() || it->second.announced ? nullptr : &it->second.relation;
}

// The 64-bit xid nearest the reference whose low 32 bits are xid: decoded xids lie within
// 2^31 of any xid the server handed out since (wraparound protection keeps them so).
std::uint64_t Translator::FullXid(std::uint32_t xid) {
  const std::uint64_t epoch = reference_xid_ >> 32;
  std::int64_t candidate = static_cast<std::int64_t>((epoch << 32) | xid);
  const std::int64_t ref = static_cast<std::int64_t>(reference_xid_);
  if (candidate > ref + (1LL << 31)) candidate -= 1LL << 32;
  if (candidate < ref - (1LL << 31)) candidate += 1LL << 32;
  if (candidate < 0) throw TranslateError("xid " + std::to_string(xid) + " before epoch 0");
  const auto full = static_cast<std::uint64_t>(candidate);
  if (full > reference_xid_) reference_xid_ = full;
  return full;
}

void Translator::EnsureBegin(std::vector<Event>* out) {
  if (began_) return;
  began_ = true;
  *out->emplace_back().mutable_begin() = begin_;
}

Translator::Table& Translator::TableOf(std::uint32_t oid, const char* what, std::uint64_t lsn,
                                       std::vector<Event>* out) {
  auto it = tables_.find(oid);
  if (it == tables_.end())
    throw TranslateError(std::string(what) + " of relation " + std::to_string(oid) +
                         ", which no Relation message announced");
  if (it->second.announced) {
    const Relation& r = *it->second.announced;
    CatalogAt at = catalog_(r, lsn, in_txn_ ? begin_.xid() : 0);
    if (at.then) {
      for (CatalogColumn& then : at.then->columns)
        for (const CatalogColumn& now : at.now.columns)
          if (now.attnum == then.attnum && now.type_oid == then.type_oid &&
              now.typmod == then.typmod)
            then.type_name = now.type_name;
    }
    it->second.relation = MappedRelation(r, CatalogFor(r, at), &it->second.kinds);
    it->second.announced.reset();
  }
  if (!it->second.sent) {
    *out->emplace_back().mutable_relation() = it->second.relation;
    it->second.sent = true;
  }
  return it->second;
}

void Translator::ToRow(const Table& table, const Tuple& tuple, const char* what, Row* row,
                       const Row* fill) const {
  const auto& rel = table.relation;
  if (tuple.size() != static_cast<std::size_t>(rel.columns_size()))
    throw TranslateError(std::string(what) + " of " + Quote(rel.name()) + " with " +
                         std::to_string(tuple.size()) + " values for " +
                         std::to_string(rel.columns_size()) + " columns");
  for (std::size_t i = 0; i < tuple.size(); ++i) {
    Value* v = row->add_values();
    switch (tuple[i].kind) {
      case Datum::Kind::kNull:
        v->set_null_value(true);
        break;
      case Datum::Kind::kUnchanged:
        if (fill != nullptr && !fill->values(static_cast<int>(i)).unchanged())
          *v = fill->values(static_cast<int>(i));
        else
          v->set_unchanged(true);
        break;
      case Datum::Kind::kText:
        try {
          FromText(table.kinds[i], tuple[i].bytes, v);
        } catch (const ValueError& e) {
          throw TranslateError(std::string(what) + " of " + Quote(rel.name()) + ", column " +
                               Quote(rel.columns(static_cast<int>(i)).name()) + ": " + e.what());
        }
        break;
      case Datum::Kind::kBinary:
        throw TranslateError(std::string(what) + " of " + Quote(rel.name()) +
                             " in binary: dblog reads pgoutput with binary 'false'");
    }
  }
}

void Translator::KeyOf(const Table& table, const Row& row, Row* key) const {
  for (std::uint32_t k : table.relation.key_columns())
    *key->add_values() = row.values(static_cast<int>(k));
}

Change& Translator::NewChange(const Table& table, Change::Kind kind, std::uint64_t lsn,
                              std::vector<Event>* out) {
  Change& c = *out->emplace_back().mutable_change();
  c.set_kind(kind);
  c.set_relation_oid(table.relation.oid());
  c.set_commit_lsn(begin_.commit_lsn());
  c.set_seq(++seq_);
  c.set_lsn(lsn);
  c.set_xid(begin_.xid());
  c.set_commit_time(begin_.commit_time());
  return c;
}

void Translator::Translate(const LogicalMessage& message, std::uint64_t wal_start,
                           std::vector<Event>* out) {
  if (const auto* b = std::get_if<Begin>(&message)) {
    in_txn_ = true;
    began_ = false;
    seq_ = 0;
    begin_.Clear();
    begin_.set_xid(FullXid(b->xid));
    begin_.set_commit_lsn(b->final_lsn);
    begin_.set_commit_time(b->commit_time + kUnixToPgEpochMicros);
    return;
  }
  if (const auto* c = std::get_if<Commit>(&message)) {
    if (!in_txn_ || c->commit_lsn != begin_.commit_lsn())
      throw TranslateError("a Commit without its Begin");
    in_txn_ = false;
    if (!began_) return;  // nothing in it was sent
    dblog::v1::Commit& commit = *out->emplace_back().mutable_commit();
    commit.set_commit_lsn(c->commit_lsn);
    commit.set_end_lsn(c->end_lsn);
    commit.set_commit_time(c->commit_time + kUnixToPgEpochMicros);
    commit.set_seq(++seq_);
    commit.set_xid(begin_.xid());
    began_ = false;
    return;
  }
  if (const auto* r = std::get_if<Relation>(&message)) {
    // Mapped at the change that follows it: the walsender sends a Relation message without an
    // LSN (dataStart 0, as every message but the change's own), and the layout is the one of
    // that change's LSN.
    Table& t = tables_[r->oid];
    t.announced = *r;
    t.sent = false;
    return;
  }
  if (std::holds_alternative<Type>(message) || std::holds_alternative<Origin>(message)) return;
  if (const auto* i = std::get_if<Insert>(&message)) {
    EnsureBegin(out);
    const Table& t = TableOf(i->relation_oid, "an Insert", wal_start, out);
    Change& c = NewChange(t, Change::INSERT, wal_start, out);
    ToRow(t, i->new_tuple, "an Insert", c.mutable_new_row());
    return;
  }
  if (const auto* u = std::get_if<Update>(&message)) {
    EnsureBegin(out);
    const Table& t = TableOf(u->relation_oid, "an Update", wal_start, out);
    Change& c = NewChange(t, Change::UPDATE, wal_start, out);
    const Row* old_row = nullptr;
    Row old;
    if (u->old_tuple) ToRow(t, *u->old_tuple, "an Update's old row", &old);
    if (u->old_kind == 'O') {
      *c.mutable_old_row() = old;
      old_row = &c.old_row();
    }
    ToRow(t, u->new_tuple, "an Update", c.mutable_new_row(), old_row);
    KeyOf(t, u->old_tuple ? old : c.new_row(), c.mutable_old_key());
    return;
  }
  if (const auto* d = std::get_if<Delete>(&message)) {
    EnsureBegin(out);
    const Table& t = TableOf(d->relation_oid, "a Delete", wal_start, out);
    Change& c = NewChange(t, Change::DELETE, wal_start, out);
    Row old;
    ToRow(t, d->old_tuple, "a Delete's old row", &old);
    KeyOf(t, old, c.mutable_old_key());
    if (d->old_kind == 'O') *c.mutable_old_row() = std::move(old);
    return;
  }
  if (const auto* tr = std::get_if<Truncate>(&message)) {
    EnsureBegin(out);
    for (std::uint32_t oid : tr->relation_oids) TableOf(oid, "a Truncate", wal_start, out);
    dblog::v1::Truncate& e = *out->emplace_back().mutable_truncate();
    for (std::uint32_t oid : tr->relation_oids) e.add_relation_oids(oid);
    e.set_commit_lsn(begin_.commit_lsn());
    e.set_seq(++seq_);
    e.set_lsn(wal_start);
    e.set_cascade(tr->cascade);
    e.set_restart_identity(tr->restart_seqs);
    return;
  }
  if (const auto* m = std::get_if<Message>(&message)) {
    if (m->transactional) {
      if (!in_txn_) throw TranslateError("a transactional Message outside a transaction");
      EnsureBegin(out);
    }
    dblog::v1::Message& e = *out->emplace_back().mutable_message();
    e.set_transactional(m->transactional);
    e.set_prefix(m->prefix);
    e.set_content(std::string(m->content));
    e.set_lsn(m->lsn);
    if (m->transactional) {
      e.set_commit_lsn(begin_.commit_lsn());
      e.set_seq(++seq_);
      e.set_xid(begin_.xid());
    }
    return;
  }
  throw TranslateError(std::string("pgoutput's ") + MessageName(message) +
                       ": dblog reads pgoutput without streaming and two-phase");
}

}  // namespace dblog::pgoutput
