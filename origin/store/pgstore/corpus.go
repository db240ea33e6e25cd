package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// Corpus implements store.Store.
func (s *Store) Corpus(ctx context.Context) (*store.CorpusRecord, error) {
	var c store.CorpusRecord
	var announced *string
	var announcedFor *time.Time
	err := s.pool.QueryRow(ctx, `SELECT dir, content_version, loaded_at, announced_version, announced_for FROM corpus WHERE id = 1`).
		Scan(&c.Dir, &c.ContentVersion, &c.LoadedAt, &announced, &announcedFor)
	if err != nil {
		return nil, fmt.Errorf("read the corpus record: %w", mapErr(err))
	}
	if announced != nil && announcedFor != nil {
		c.Announced, c.AnnouncedFor = *announced, *announcedFor
	}
	return &c, nil
}

// RecordCorpus implements store.Store.
func (s *Store) RecordCorpus(ctx context.Context, c store.CorpusRecord) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO corpus (id, dir, content_version, loaded_at) VALUES (1, $1, $2, $3)
		ON CONFLICT (id) DO UPDATE SET dir = EXCLUDED.dir, content_version = EXCLUDED.content_version,
			loaded_at = EXCLUDED.loaded_at`, c.Dir, c.ContentVersion, c.LoadedAt)
	if err != nil {
		return fmt.Errorf("record the corpus: %w", err)
	}
	return nil
}

// RecordFirstCorpus implements store.Store.
func (s *Store) RecordFirstCorpus(ctx context.Context, c store.CorpusRecord) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO corpus (id, dir, content_version, loaded_at) VALUES (1, $1, $2, $3)
		ON CONFLICT (id) DO NOTHING`, c.Dir, c.ContentVersion, c.LoadedAt)
	if err != nil {
		return fmt.Errorf("record the first corpus: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record the first corpus: %w", store.ErrConflict)
	}
	return nil
}

// PinCorpusVersion implements store.Store: the insert, then the read in
// its own statement, which sees a row another store committed while the
// insert waited on it (a read in the insert's statement would not).
func (s *Store) PinCorpusVersion(ctx context.Context, version, digest string, parts []byte, at time.Time) (string, error) {
	if _, err := s.pool.Exec(ctx, `INSERT INTO corpus_versions (content_version, content_digest, recorded_at, pinned_at, parts)
		VALUES ($1, $2, $3, $3, $4) ON CONFLICT (content_version) DO UPDATE
		SET parts = COALESCE(corpus_versions.parts, EXCLUDED.parts),
			pinned_at = GREATEST(corpus_versions.pinned_at, EXCLUDED.pinned_at)
		WHERE corpus_versions.content_digest = EXCLUDED.content_digest`,
		version, digest, at, parts); err != nil {
		return "", fmt.Errorf("pin contentVersion %s: %w", version, err)
	}
	if _, err := s.pool.Exec(ctx, `UPDATE corpus_versions SET parts = NULL
		WHERE parts IS NOT NULL AND pinned_at < $1 AND content_version NOT IN
			(SELECT content_version FROM corpus_versions ORDER BY pinned_at DESC, content_version DESC LIMIT $2)`,
		at.Add(-store.KeepVersionsFor), store.KeepVersions); err != nil {
		return "", fmt.Errorf("drop the parts of old contentVersions: %w", err)
	}
	var pinned string
	if err := s.pool.QueryRow(ctx, `SELECT content_digest FROM corpus_versions WHERE content_version = $1`,
		version).Scan(&pinned); err != nil {
		return "", fmt.Errorf("read contentVersion %s's digest: %w", version, mapErr(err))
	}
	return pinned, nil
}

// CorpusVersionParts implements store.Store.
func (s *Store) CorpusVersionParts(ctx context.Context, version string) ([]byte, error) {
	var parts []byte
	if err := s.pool.QueryRow(ctx, `SELECT parts FROM corpus_versions WHERE content_version = $1 AND parts IS NOT NULL`,
		version).Scan(&parts); err != nil {
		return nil, fmt.Errorf("read contentVersion %s's parts: %w", version, mapErr(err))
	}
	return parts, nil
}

// MarkCorpusAnnounced implements store.Store.
func (s *Store) MarkCorpusAnnounced(ctx context.Context, loadedAt time.Time, version string) error {
	if _, err := s.pool.Exec(ctx, `UPDATE corpus SET announced_version = $1, announced_for = loaded_at
		WHERE id = 1 AND loaded_at = $2`, version, loadedAt); err != nil {
		return fmt.Errorf("mark the corpus record announced: %w", err)
	}
	return nil
}
