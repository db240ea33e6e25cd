// Package webhook sends an organisation's events to the endpoints it
// registered, signed as the Standard Webhooks specification says, so that
// integrators verify them with an existing library (docs/integrating.md,
// "Webhooks"; docs/decisions/webhooks.md).
//
// An event's source calls one function, Outbox.Emit (or EmitOnce, when
// several origins may see the same change): it writes the event and one
// delivery row per subscribed endpoint to the outbox, in the database,
// in one transaction, and wakes this process's delivery loop. Outbox.Run
// is that loop, on every origin: it claims due rows (on PostgreSQL with
// SELECT … FOR UPDATE SKIP LOCKED, under a claim lease), posts each with
// the headers webhook-id (the event's id, the same on every attempt),
// webhook-timestamp and webhook-signature, and records the outcome. A 2xx
// within 10 s ends a delivery; anything else is tried again with
// exponential backoff and jitter for at least RetryFor (24 h); 410 Gone
// disables the endpoint. A row claimed by an origin that died is claimed
// again once its lease ends, so delivery is at least once and survives a
// SIGKILL, and while a claim holds no other origin sends it.
//
// Endpoint secrets are "whsec_" and the base64 of 32 random bytes, shown
// once when made or rotated. The origin must sign with them, so they are
// kept sealed (AES-256-GCM) under a key derived from the deployment
// secret (shared/subkey.Webhooks), not hashed. Rotation keeps the
// previous secret for Overlap (24 h): deliveries then carry both
// signatures, space-separated.
//
// Only https URLs are posted to, no redirect is followed, and no private,
// loopback, link-local, unspecified or otherwise internal address is
// dialled: the address is checked in the dialer's Control, after DNS, so
// an answer cannot change between the check and the connection
// (dial.go). Config.AllowPrivate lifts both rules for development (make
// run sets LECTERN_WEBHOOK_ALLOW_PRIVATE=1).
package webhook
