/*-------------------------------------------------------------------------
 *
 * ddl_message.h
 *		  The "dblog.ddl" logical message: written by the event trigger
 *		  (ddl_trigger.c), checked by the output plugin before it is sent
 *		  (dblog.c, ddl_message_authentic), read by dblogd
 *		  (sidecar/consumer/scope_changes.h).
 *
 * The content is one JSON object, always spelled the same way:
 *	 {"oid":16384,"kind":"rename","old_schema":"s","old_name":"a",
 *	  "new_schema":"s","new_name":"b"}
 * The plugin forwards a message only when it is byte for byte what
 * write_ddl_message makes of the values it holds, so what the plugin checked
 * is exactly what dblogd reads.
 *
 * IDENTIFICATION
 *		  plugin/ddl_message.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef DBLOG_DDL_MESSAGE_H
#define DBLOG_DDL_MESSAGE_H

#include "lib/stringinfo.h"

#define DBLOG_DDL_PREFIX "dblog.ddl"

/*
 * No message of the trigger is longer: four names of at most NAMEDATALEN - 1
 * bytes, each byte at worst six once escaped (\u001f), with their quotes;
 * the members' names, the kind and the oid fit in the 128 bytes left.
 * sidecar/consumer/scope_changes.h has the same bound.
 */
#define DBLOG_DDL_MESSAGE_MAX_BYTES (128 + 4 * (2 + 6 * (NAMEDATALEN - 1)))

extern void write_ddl_message(StringInfo buf, Oid relid, const char *kind,
							  const char *old_schema, const char *old_name,
							  const char *new_schema, const char *new_name);

#endif							/* DBLOG_DDL_MESSAGE_H */
