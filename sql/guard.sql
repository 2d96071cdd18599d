-- guard: dblog._bind_relation(oid) binds the statements of a transaction to a table by its oid
-- (plugin/guard.c). Under the guard a statement may name only the bound tables, catalogs and
-- dblog's own objects; it may call only built-in and dblog functions and operators, and use no
-- domain and no type that is neither built in nor a column type of a bound table. A table
-- whose indexes or statistics would run its owner's code when a query is planned is refused.
\set VERBOSITY terse
CREATE ROLE regress_guard_owner;
CREATE ROLE regress_guard_nobody;
CREATE SCHEMA guard AUTHORIZATION regress_guard_owner;
SET ROLE regress_guard_owner;
CREATE TYPE guard.color AS ENUM ('red', 'green');
CREATE DOMAIN guard.dom AS int CHECK (VALUE > 0);
CREATE TYPE guard.other_enum AS ENUM ('x');
CREATE TABLE guard.t (id int PRIMARY KEY, c guard.color, v text);
INSERT INTO guard.t VALUES (1, 'red', 'a'), (2, 'green', 'b');
CREATE FUNCTION guard.f() RETURNS int LANGUAGE sql AS 'SELECT 1';
CREATE FUNCTION guard.plain(int) RETURNS int LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN $1; END';
CREATE FUNCTION guard.yes() RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS 'BEGIN RETURN true; END';
CREATE FUNCTION guard.inlined(int) RETURNS int LANGUAGE sql IMMUTABLE AS 'SELECT $1';
CREATE VIEW guard.v AS SELECT * FROM guard.t;
CREATE TABLE guard.other (id int);
-- an expression index on a function of a column: the planner never evaluates it
CREATE INDEX ON guard.t (guard.plain(id));
RESET ROLE;
-- only in a transaction block
SELECT dblog._bind_relation('guard.t'::regclass);
BEGIN;
SELECT dblog._bind_relation('guard.t'::regclass);
-- the bound table, its column types, catalogs, built-in and dblog functions: allowed
SELECT t.id, t.c, NULL::guard.color AS typed FROM ONLY guard.t t
 WHERE t.id OPERATOR(pg_catalog.>) 0 ORDER BY t.id;
SELECT pg_catalog.count(*) FROM pg_catalog.pg_class WHERE oid = 'guard.t'::pg_catalog.regclass;
SELECT pg_catalog.length(dblog.encode_row(t.*)) > 0 AS encoded FROM ONLY guard.t t LIMIT 1;
-- anything else fails before it runs (a savepoint keeps the transaction and its guard)
SAVEPOINT s;
SELECT * FROM guard.v;
ROLLBACK TO s;
SELECT * FROM guard.other;
ROLLBACK TO s;
SELECT guard.f();
ROLLBACK TO s;
SELECT NULL::guard.dom;
ROLLBACK TO s;
SELECT NULL::guard.other_enum;
ROLLBACK TO s;
SELECT * FROM guard.t t WHERE t.id = (SELECT guard.f());
ROLLBACK TO s;
COMMIT;
-- the guard ends with the transaction
SELECT count(*) FROM guard.v;
-- a view, a missing table, a table the caller may not read
BEGIN;
SELECT dblog._bind_relation('guard.v'::regclass);
ROLLBACK;
BEGIN;
SELECT dblog._bind_relation(4294967295::oid);
ROLLBACK;
SELECT 'guard.t'::regclass::oid AS t_oid \gset
SET ROLE regress_guard_nobody;
BEGIN;
SELECT dblog._bind_relation(:t_oid);
ROLLBACK;
RESET ROLE;
-- planned code: an index predicate with a constant call, an index expression through an
-- inlined SQL function, a statistics expression; each is refused by name
SET ROLE regress_guard_owner;
CREATE TABLE guard.p (id int PRIMARY KEY, v int);
CREATE INDEX p_pred ON guard.p (v) WHERE guard.yes();
CREATE TABLE guard.q (id int PRIMARY KEY, v int);
CREATE INDEX q_expr ON guard.q (guard.inlined(v));
CREATE TABLE guard.r (id int PRIMARY KEY, v int);
CREATE STATISTICS guard.r_stat ON (v + guard.plain(1)) FROM guard.r;
RESET ROLE;
BEGIN;
SELECT dblog._bind_relation('guard.p'::regclass);
ROLLBACK;
BEGIN;
SELECT dblog._bind_relation('guard.q'::regclass);
ROLLBACK;
BEGIN;
SELECT dblog._bind_relation('guard.r'::regclass);
ROLLBACK;
-- an index predicate is estimated whenever a query's clauses imply it: an operator of the
-- owner's there is refused even with a column argument (its estimator calls the function)
SET ROLE regress_guard_owner;
CREATE FUNCTION guard.same(int, int) RETURNS boolean LANGUAGE plpgsql IMMUTABLE
  AS 'BEGIN RETURN $1 = $2; END';
CREATE OPERATOR guard.=== (LEFTARG = int, RIGHTARG = int, FUNCTION = guard.same, RESTRICT = eqsel);
CREATE TABLE guard.e (k int PRIMARY KEY, v int);
CREATE INDEX e_part ON guard.e (v) WHERE (k IS NOT NULL OR v OPERATOR(guard.===) 5);
-- the same operator on constants through ANY in an index expression: folded when planned
CREATE TABLE guard.a (id int PRIMARY KEY, v int);
CREATE INDEX a_any ON guard.a ((v + CASE WHEN 1 OPERATOR(guard.===) ANY ('{1,2}') THEN 0 END));
-- a key of a composite type, and another column's composite type with a domain inside
CREATE TYPE guard.kt AS (a int);
CREATE TYPE guard.held AS (a guard.dom);
CREATE TABLE guard.c (k guard.kt PRIMARY KEY, x guard.held);
RESET ROLE;
BEGIN;
SELECT dblog._bind_relation('guard.e'::regclass);
ROLLBACK;
BEGIN;
SELECT dblog._bind_relation('guard.a'::regclass);
ROLLBACK;
BEGIN;
SELECT dblog._bind_relation('guard.c'::regclass);
-- the key's type is bound; a column type holding a domain is not (a name swapped to it)
SELECT NULL::guard.kt IS NULL AS key_type_allowed;
SAVEPOINT s;
SELECT NULL::guard.held;
ROLLBACK TO s;
ROLLBACK;
-- and _key_in never reads a value as a type holding a domain, guard or not
SELECT dblog._key_in('(1)', NULL::guard.held);
SELECT dblog._key_in('(1)', NULL::guard.kt) AS key_read;
-- not inside a savepoint (its rollback would release the lock, not the binding)
BEGIN;
SAVEPOINT s;
SELECT dblog._bind_relation('guard.t'::regclass);
ROLLBACK;
-- constraint_exclusion = on folds CHECK constraints when a query is planned
BEGIN;
SET LOCAL constraint_exclusion = on;
SELECT dblog._bind_relation('guard.t'::regclass);
ROLLBACK;
-- a superuser's function is trusted
ALTER FUNCTION guard.yes() OWNER TO CURRENT_USER;
BEGIN;
SELECT dblog._bind_relation('guard.p'::regclass);
ROLLBACK;
DROP SCHEMA guard CASCADE;
DROP ROLE regress_guard_owner;
DROP ROLE regress_guard_nobody;
