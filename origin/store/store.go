// Package store is the origin's persistence contract: organisations and
// their plans, OAuth clients, the identity provider's signing keys and
// authorization codes. Two backends implement it, sqlitestore (the
// default, embedded) and pgstore (PostgreSQL, for scale-out); storetest is
// the conformance suite both must pass.
//
// Every method that returns an organisation returns its current state:
// the licence gate calls GetOrg on every request, so a change applies on
// the next call (spec: Authentication §8), provided every write goes
// through a Store. pgstore reads it afresh; sqlitestore, which must be its
// database's only writer (it locks the file against other origins),
// caches it and invalidates the copy on every write.
package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"time"
)

// Sentinel errors. Backends wrap nothing else in them.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// Quota holds the monthly limits of a plan; nil means no cap.
type Quota struct {
	Calls         *int64
	Downloads     *int64
	Exports       *int64
	TestprepItems *int64
}

// RateLimits holds the hourly caps of a plan; nil means no cap.
type RateLimits struct {
	CallsPerHour       *int64
	LessonReadsPerHour *int64
	URLMintsPerHour    *int64
}

// Org is a licensed organisation and its plan.
type Org struct {
	ID     string
	Name   string
	Tier   string // plan tier, e.g. "standard"
	Status string // "active", "suspended", ...
	// Grants are content tiers ("high") or single subjects ("high/algebra").
	Grants              []string
	Quota               Quota
	RateLimits          RateLimits
	EclaVersion         int
	RequiredEclaVersion int
	RenewsAt            time.Time
	LongURLs            bool // the long-URL override: mints may live 3600 s
	// CreatedAt and UpdatedAt are set by the caller from its clock; the
	// stores save what they are given.
	CreatedAt time.Time
	UpdatedAt time.Time
	// Generation tells this organisation apart from any other that had or
	// will have its ID: CreateOrg gives it a fresh random value (whatever
	// the caller set) and nothing changes it after. Tokens carry it (the
	// org_gen claim) and meters are keyed by it, so that deleting an
	// organisation and creating one with the same ID starts afresh.
	// Organisations created before it existed (migration 0002) have "".
	Generation string
}

// NewGeneration returns a fresh organisation generation: 16 random bytes,
// unpadded base64url.
func NewGeneration() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Clone returns a deep copy of o.
func (o *Org) Clone() *Org {
	c := *o
	c.Grants = append([]string(nil), o.Grants...)
	if o.Grants != nil && c.Grants == nil {
		c.Grants = []string{}
	}
	c.Quota = Quota{cloneInt(o.Quota.Calls), cloneInt(o.Quota.Downloads), cloneInt(o.Quota.Exports), cloneInt(o.Quota.TestprepItems)}
	c.RateLimits = RateLimits{cloneInt(o.RateLimits.CallsPerHour), cloneInt(o.RateLimits.LessonReadsPerHour), cloneInt(o.RateLimits.URLMintsPerHour)}
	return &c
}

func cloneInt(p *int64) *int64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

// Client is an OAuth client of an organisation. The secret is stored only
// as a slow hash.
type Client struct {
	ID           string
	OrgID        string
	SecretHash   []byte
	Scopes       []string // suffixes, e.g. "content.read"
	GrantTypes   []string // "client_credentials", "authorization_code"
	RedirectURIs []string
	CreatedAt    time.Time
	// OrgGeneration is the Generation of the client's organisation, read
	// from it (a client cannot outlive its organisation, so this is the
	// generation it was created under): CreateClient and GetClient fill
	// it; CreateClient ignores what the caller set.
	OrgGeneration string
}

// SigningKey is one of the identity provider's token signing keys. Keys
// persist so that tokens survive restarts, and rotate by kid.
type SigningKey struct {
	KID       string
	Alg       string // "EdDSA"
	Private   []byte // opaque to the store: the identity provider seals the seed (origin/idp)
	CreatedAt time.Time
}

// AuthCode is an issued, not yet redeemed authorization code (RFC 6749
// §4.1, with PKCE S256, RFC 7636). Only a hash of the code is stored.
type AuthCode struct {
	CodeHash    string
	ClientID    string
	RedirectURI string
	Scope       string
	Challenge   string // the S256 code_challenge
	Learner     string // the learner subject, from login_hint
	ExpiresAt   time.Time
}

// The change feed's history (GET /v1/changes, origin/changes): a
// version's parts are kept while it is among the KeepVersions last
// pinned (served) or was pinned within KeepVersionsFor.
const (
	KeepVersions    = 20
	KeepVersionsFor = 90 * 24 * time.Hour
)

// CorpusRecord is the deployment's corpus: the directory that was loaded,
// as the reload (or LECTERN_CORPUS) named it, the contentVersion it held
// and when it was recorded. Every origin on the database converges on it
// (docs/operations.md, Corpus reload).
type CorpusRecord struct {
	Dir            string
	ContentVersion string
	LoadedAt       time.Time
	// Announced is the version last announced to the organisations
	// (content.changed) and AnnouncedFor the LoadedAt of the record it
	// was announced for: a record whose LoadedAt is not AnnouncedFor is
	// not announced yet. Read by Corpus; RecordCorpus and
	// RecordFirstCorpus leave them, MarkCorpusAnnounced sets them.
	Announced    string
	AnnouncedFor time.Time
}

// Store is the persistence contract.
type Store interface {
	// CreateOrg stores a new organisation under a fresh Generation, which
	// it sets in o; ErrConflict if the id exists.
	CreateOrg(ctx context.Context, o *Org) error
	// GetOrg reads an organisation; ErrNotFound if there is none.
	GetOrg(ctx context.Context, id string) (*Org, error)
	// UpdateOrg reads the organisation, applies fn and writes the result
	// in one transaction; ErrNotFound if there is none, fn's error as is.
	// fn cannot change the ID or the Generation.
	UpdateOrg(ctx context.Context, id string, fn func(*Org) error) (*Org, error)
	// DeleteOrg removes an organisation and its clients; ErrNotFound if
	// there is none.
	DeleteOrg(ctx context.Context, id string) error
	// OrgIDs lists the ids of every organisation, in byte order: the
	// candidates of leak forensics when the operator names none.
	OrgIDs(ctx context.Context) ([]string, error)

	// CreateClient stores a client of an existing organisation and sets
	// c.OrgGeneration; ErrConflict if the id exists, ErrNotFound if the
	// org does not.
	CreateClient(ctx context.Context, c *Client) error
	// GetClient reads a client; ErrNotFound if there is none.
	GetClient(ctx context.Context, id string) (*Client, error)

	// SigningKeys lists the signing keys, newest first.
	SigningKeys(ctx context.Context) ([]SigningKey, error)
	// AddSigningKey stores a key; ErrConflict if its kid exists.
	AddSigningKey(ctx context.Context, k SigningKey) error
	// AddSigningKeyUnlessNewer stores k unless a key created after since
	// exists, and reports whether it stored it. The check and the insert
	// are one transaction that every Store on the database takes in
	// turn, so identity providers finding the store due for a key at the
	// same moment (origins started together on an empty database, or at
	// a rotation) add one key between them, not one each. ErrConflict if
	// k's kid exists.
	AddSigningKeyUnlessNewer(ctx context.Context, k SigningKey, since time.Time) (bool, error)
	// ResealSigningKey replaces the Private of key kid with sealed if it
	// is still old (compare and swap); ErrNotFound if there is no such
	// key or its Private is no longer old.
	ResealSigningKey(ctx context.Context, kid string, old, sealed []byte) error

	// SaveAuthCode stores an authorization code.
	SaveAuthCode(ctx context.Context, c AuthCode) error
	// PruneAuthCodes deletes, in one transaction, every code expired at
	// now and all but the keep newest (latest ExpiresAt) codes of
	// clientID; keep < 0 counts as 0. The identity provider calls it
	// before each SaveAuthCode, so that unredeemed codes neither pile up
	// nor exceed a bound per client.
	PruneAuthCodes(ctx context.Context, clientID string, now time.Time, keep int) error
	// TakeAuthCode removes and returns the code with that hash, at most
	// once; ErrNotFound if it is unknown, taken or expired at now.
	TakeAuthCode(ctx context.Context, codeHash string, now time.Time) (*AuthCode, error)

	// TestClockOffset reads the test clock's offset (origin/clock): how
	// far it runs ahead of the wall clock; 0 when none was stored.
	TestClockOffset(ctx context.Context) (time.Duration, error)
	// MoveTestClock sets the test clock's offset to max(offset+add,
	// atLeast) in one statement, so that moves from several origins
	// compose and the offset never decreases, and returns the offset
	// stored. add and atLeast are not negative.
	MoveTestClock(ctx context.Context, add, atLeast time.Duration) (time.Duration, error)

	// Corpus reads the deployment's corpus record; ErrNotFound when none
	// was recorded. It is one row: origins poll it every few seconds.
	Corpus(ctx context.Context) (*CorpusRecord, error)
	// RecordCorpus makes c the deployment's corpus, replacing any record:
	// the last reload to record wins.
	RecordCorpus(ctx context.Context, c CorpusRecord) error
	// RecordFirstCorpus records c only when no corpus is recorded yet, in
	// one statement, so that origins starting at once on a new database
	// agree; ErrConflict when one is.
	RecordFirstCorpus(ctx context.Context, c CorpusRecord) error
	// PinCorpusVersion records digest as contentVersion version's content
	// (corpus.Corpus.ContentDigest), with its parts (the change feed's
	// record of it, origin/changes), unless the version holds a digest
	// already, and returns the digest it holds: the first pinned,
	// whichever store of the database pinned it. A version's digest never
	// changes; a pin of the same digest sets its parts again when they
	// were dropped, and its pin time to at. Each pin drops the parts of
	// the versions past the feed's history: those last pinned more than
	// KeepVersionsFor before at and not among the KeepVersions last
	// pinned.
	PinCorpusVersion(ctx context.Context, version, digest string, parts []byte, at time.Time) (string, error)
	// CorpusVersionParts reads the parts of version; ErrNotFound when the
	// version was never pinned or its parts were dropped.
	CorpusVersionParts(ctx context.Context, version string) ([]byte, error)
	// MarkCorpusAnnounced records that the corpus record of loadedAt, of
	// contentVersion version, is announced; nothing when the record has
	// moved on (another LoadedAt).
	MarkCorpusAnnounced(ctx context.Context, loadedAt time.Time, version string) error

	Close() error
}
