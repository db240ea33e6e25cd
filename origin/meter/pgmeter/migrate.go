package pgmeter

import "embed"

// migrations are applied by Open under migrationLock and recorded in
// meter_migrations, the meters' own record, apart from the store's.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key under which migrations run, so
// that origins starting together on one database take turns ("lectmetr").
const migrationLock int64 = 0x6c6563746d657472
