/* plugin/dblog--0.5--0.6.sql: upgrade of the dblog extension from 0.5 to 0.6.
 *
 * 0.6: dblog.consumers remembers the source's timeline each consumer last streamed from, and
 * the last failover dblogd saw for it (issue 24): at each stream start dblogd reads the
 * server's timeline (IDENTIFY_SYSTEM); another one than the stored one means a standby was
 * promoted since, and dblogd records when, between which timelines and what it did (resumed
 * from a synchronized slot, reconciled, bootstrapped again). The table lives in the source, so
 * a promoted standby has the timeline of the primary it replaced: the failover is seen also by
 * a dblogd that restarted with it. dblog.consumer_status shows the three columns.
 *
 * A new version of the extension only ever adds a script like this one: shipped scripts are
 * never edited (docs/operations.md, "Upgrading").
 */

\echo Use "ALTER EXTENSION dblog UPDATE TO '0.6'" to load this file. \quit

ALTER TABLE consumers
  ADD COLUMN timeline bigint,
  ADD COLUMN failed_over_at timestamptz,
  ADD COLUMN failover text;

CREATE OR REPLACE VIEW consumer_status AS
  SELECT c.name, c.slot_name, c.bootstrap_state, s.confirmed_flush_lsn,
         pg_catalog.pg_wal_lsn_diff(pg_catalog.pg_current_wal_lsn(), s.confirmed_flush_lsn)
           AS behind_bytes,
         s.wal_status,
         CASE WHEN s.slot_name IS NULL THEN 'missing'
              WHEN s.wal_status = 'lost' THEN 'lost'
              WHEN s.wal_status = 'unreserved' THEN 'unreserved'
              WHEN s.active THEN 'active'
              ELSE 'inactive' END AS slot_state,
         CASE WHEN s.slot_name IS NULL
                THEN 'none: the next connection creates the slot and bootstraps'
              WHEN s.wal_status = 'lost'
                THEN pg_catalog.format('the slot was invalidated (max_slot_wal_keep_size): SELECT pg_drop_replication_slot(%L); the next connection bootstraps again (restarted)', c.slot_name)
              WHEN s.wal_status = 'unreserved'
                THEN 'the consumer must catch up (acknowledge) before the next checkpoint invalidates the slot'
              ELSE 'none' END AS action,
         c.timeline, c.failed_over_at, c.failover
    FROM dblog.consumers c
         LEFT JOIN pg_catalog.pg_replication_slots s
           ON s.slot_name OPERATOR(pg_catalog.=) c.slot_name
          AND s.database OPERATOR(pg_catalog.=) pg_catalog.current_database();
