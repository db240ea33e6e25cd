package sqlitestore

import (
	"context"
	"fmt"
	"time"

	"github.com/lectern-api/lectern/origin/store"
)

// Corpus implements store.Store.
func (s *Store) Corpus(ctx context.Context) (*store.CorpusRecord, error) {
	var c store.CorpusRecord
	err := s.rdb.QueryRowContext(ctx, `SELECT dir, content_version, loaded_at FROM corpus WHERE id = 1`).
		Scan(&c.Dir, &c.ContentVersion, (*stamp)(&c.LoadedAt))
	if err != nil {
		return nil, fmt.Errorf("read the corpus record: %w", mapErr(err))
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
func (s *Store) PinCorpusVersion(ctx context.Context, version, digest string, at time.Time) (string, error) {
	if _, err := s.db.ExecContext(ctx, `INSERT INTO corpus_versions (content_version, content_digest, recorded_at)
		VALUES (?, ?, ?) ON CONFLICT (content_version) DO NOTHING`, version, digest, stamp(at)); err != nil {
		return "", fmt.Errorf("pin contentVersion %s: %w", version, err)
	}
	var pinned string
	if err := s.db.QueryRowContext(ctx, `SELECT content_digest FROM corpus_versions WHERE content_version = ?`,
		version).Scan(&pinned); err != nil {
		return "", fmt.Errorf("read contentVersion %s's digest: %w", version, mapErr(err))
	}
	return pinned, nil
}
