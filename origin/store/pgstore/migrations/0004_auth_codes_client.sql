-- Issue #13: SaveAuthCode's callers prune a client's pending codes to a
-- bound (PruneAuthCodes), newest kept; this index finds them in order.
CREATE INDEX auth_codes_client ON auth_codes (client_id, expires_at);
