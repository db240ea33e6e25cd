package pgstore

import "embed"

// migrations are applied by Open under migrationLock and recorded in
// schema_migrations.
//
//go:embed migrations/*.sql
var migrations embed.FS

// migrationLock is the advisory lock key that serialises migrations
// ("lectern" in ASCII).
const migrationLock int64 = 0x6c6563746572_6e
