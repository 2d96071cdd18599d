# Makefile: builds and installs the dblog extension (output plugin + SQL API) with PGXS,
# and runs its pg_regress and isolation tests against a running server (make installcheck).
# The C++ side (sidecar, clients, C++ tests) is built by CMakeLists.txt; tests/run.sh runs all.

MODULE_big = dblog
OBJS = plugin/dblog.o plugin/ddl_trigger.o plugin/encoder.o plugin/guard.o plugin/proto.o plugin/relation.o \
	plugin/scope_match.o plugin/scope_sql.o plugin/text.o
PGFILEDESC = "dblog - change-data capture output plugin and SQL API"

EXTENSION = dblog
DATA = plugin/dblog--0.1.sql plugin/dblog--0.1--0.2.sql plugin/dblog--0.2--0.3.sql \
	plugin/dblog--0.3--0.4.sql plugin/dblog--0.4--0.5.sql plugin/dblog--0.5--0.6.sql

REGRESS = $(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))
REGRESS_OPTS = --load-extension=dblog
ISOLATION = $(patsubst specs/%.spec,%,$(sort $(wildcard specs/*.spec)))
ISOLATION_OPTS = --load-extension=dblog

PG_CPPFLAGS = -Wall -Wmissing-prototypes -Werror=implicit-function-declaration

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# A VPATH build (make -f SRC/Makefile VPATH=SRC in another directory, as Debian's pg_buildext
# does for debian/) writes plugin/*.o there: the directory must exist.
ifdef VPATH
$(shell mkdir -p plugin)
endif
