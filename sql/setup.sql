-- setup: dblog.check_setup() reports what the server needs (the test cluster has it all,
-- except a WAL retention limit, which is advice).
SELECT check_name, ok FROM dblog.check_setup();
