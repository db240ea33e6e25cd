package licence

import (
	"time"

	"github.com/lectern-api/lectern/origin/store"
	"github.com/lectern-api/lectern/shared/token"
)

// Issued reports whether a token with claims c was issued for o, the
// organisation of its id as it is now, and not for an earlier one of the
// same id that was deleted (docs/operations.md, the admin API: a deleted
// organisation's tokens get 403 NO_ORGANIZATION, also after an
// organisation with the same id is created again). client is the
// token's registered client when o was found through it (the token has
// no org claim), else nil. In order:
//
//   - a token carrying org_gen (the dev identity provider's do) was issued
//     for o exactly when it names o's generation;
//   - a token mapped through its client was when the client belongs to
//     o's generation: clients are deleted with their organisation, and
//     the comparison covers an organisation re-created between the
//     reads of the client and of o;
//   - any other token (another OAuth server's, naming the organisation in
//     its org claim) must not predate o: its iat is at or after o's
//     creation, counted in whole seconds as iat is. A token issued for
//     the deleted organisation in the very second the new one was created
//     passes this test; one without iat fails it, as nothing ties it to
//     o (RFC 9068 §2.2 makes iat required in JWT access tokens).
func Issued(o *store.Org, c token.Claims, client *store.Client) bool {
	switch {
	case c.OrgGen != "" && c.OrgGen != o.Generation:
		return false
	case client != nil:
		return client.OrgGeneration == o.Generation
	case c.OrgGen != "":
		return true
	case c.IssuedAt.IsZero():
		return false
	}
	return !c.IssuedAt.Before(o.CreatedAt.Truncate(time.Second))
}
