// Package failover starts replicated stores for failover tests, on
// loopback ports, in temporary directories, stopped when the test ends: a
// Redis primary, a replica and three Sentinels ([StartRedis]), and a
// PostgreSQL primary and a standby, synchronous or not ([StartPostgres]).
// Each replica reaches its primary through a [Relay] that the test can
// stall (a congested or partitioned link: the replica falls behind) and
// sever; Crash kills the primary with SIGKILL (nothing saved on the way,
// as a crash of its machine) and severs the relay, so that what the
// replica had not received is lost, as it would be.
//
// What it does not do: fence the old primary (it stays dead), promote a
// PostgreSQL standby by itself (the test calls Promote, as a failover
// tool would), or run anything on more than one machine: the stores share
// one clock.
package failover
