package sqlitestore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// Corpus implements store.Store.
func (s *Store) Corpus(ctx context.Context) (*store.CorpusRecord, error) {
	var c store.CorpusRecord
	var announced, announcedFor sql.NullString
	err := s.rdb.QueryRowContext(ctx, `SELECT dir, content_version, loaded_at, announced_version, announced_for FROM corpus WHERE id = 1`).
		Scan(&c.Dir, &c.ContentVersion, (*stamp)(&c.LoadedAt), &announced, &announcedFor)
	if err != nil {
		return nil, fmt.Errorf("read the corpus record: %w", mapErr(err))
	}
	if announced.Valid && announcedFor.Valid {
		at, err := time.Parse(timeLayout, announcedFor.String)
		if err != nil {
			return nil, fmt.Errorf("read the corpus record: announced_for: %w", err)
		}
		c.Announced, c.AnnouncedFor = announced.String, at
	}
	return &c, nil
}

// RecordCorpus implements store.Store.
func (s *Store) RecordCorpus(ctx context.Context, c store.CorpusRecord) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO corpus (id, dir, content_version, loaded_at) VALUES (1, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET dir = excluded.dir, content_version = excluded.content_version,
			loaded_at = excluded.loaded_at`, c.Dir, c.ContentVersion, stamp(c.LoadedAt))
	if err != nil {
		return fmt.Errorf("record the corpus: %w", err)
	}
	return nil
}

// RecordFirstCorpus implements store.Store.
func (s *Store) RecordFirstCorpus(ctx context.Context, c store.CorpusRecord) error {
	res, err := s.db.ExecContext(ctx, `INSERT INTO corpus (id, dir, content_version, loaded_at) VALUES (1, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING`, c.Dir, c.ContentVersion, stamp(c.LoadedAt))
	if err != nil {
		return fmt.Errorf("record the first corpus: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("record the first corpus: %w", err)
	} else if n == 0 {
		return fmt.Errorf("record the first corpus: %w", store.ErrConflict)
	}
	return nil
}

// PinCorpusVersion implements store.Store.
func (s *Store) PinCorpusVersion(ctx context.Context, version, digest string, parts []byte, at time.Time) (string, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO corpus_versions (content_version, content_digest, recorded_at, pinned_at, parts)
		VALUES (?1, ?2, ?3, ?3, ?4) ON CONFLICT (content_version) DO UPDATE
		SET parts = COALESCE(corpus_versions.parts, excluded.parts),
			pinned_at = max(corpus_versions.pinned_at, excluded.pinned_at)
		WHERE corpus_versions.content_digest = excluded.content_digest`,
		version, digest, stamp(at), parts); err != nil {
		return "", fmt.Errorf("pin contentVersion %s: %w", version, err)
	}
	if _, err := s.db.ExecContext(ctx, `UPDATE corpus_versions SET parts = NULL
		WHERE parts IS NOT NULL AND pinned_at < ? AND content_version NOT IN
			(SELECT content_version FROM corpus_versions ORDER BY pinned_at DESC, content_version DESC LIMIT ?)`,
		stamp(at.Add(-store.KeepVersionsFor)), store.KeepVersions); err != nil {
		return "", fmt.Errorf("drop the parts of old contentVersions: %w", err)
	}
	var pinned string
	if err := s.db.QueryRowContext(ctx, `SELECT content_digest FROM corpus_versions WHERE content_version = ?`,
		version).Scan(&pinned); err != nil {
		return "", fmt.Errorf("read contentVersion %s's digest: %w", version, mapErr(err))
	}
	return pinned, nil
}

// CorpusVersionParts implements store.Store.
func (s *Store) CorpusVersionParts(ctx context.Context, version string) ([]byte, error) {
	var parts []byte
	if err := s.rdb.QueryRowContext(ctx, `SELECT parts FROM corpus_versions WHERE content_version = ? AND parts IS NOT NULL`,
		version).Scan(&parts); err != nil {
		return nil, fmt.Errorf("read contentVersion %s's parts: %w", version, mapErr(err))
	}
	return parts, nil
}

// MarkCorpusAnnounced implements store.Store.
func (s *Store) MarkCorpusAnnounced(ctx context.Context, loadedAt time.Time, version string) error {
	if _, err := s.db.ExecContext(ctx, `UPDATE corpus SET announced_version = ?, announced_for = loaded_at
		WHERE id = 1 AND loaded_at = ?`, version, stamp(loadedAt)); err != nil {
		return fmt.Errorf("mark the corpus record announced: %w", err)
	}
	return nil
}
