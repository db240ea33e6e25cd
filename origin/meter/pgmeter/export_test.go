package pgmeter

import (
	"context"

	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
)

// ApplyBatch applies ops in one transaction on a pooled connection, as
// one batch of the committer would (metertest.Batcher).
func (s *Store) ApplyBatch(ctx context.Context, ops []meter.Op) ([]meter.Result, error) {
	jobs := make([]batch.Job, len(ops))
	for i, op := range ops {
		if err := batch.Validate(op); err != nil {
			return nil, err
		}
		jobs[i] = batch.Job{Op: op}
	}
	conn, err := s.pool.get(ctx)
	if err != nil {
		return nil, err
	}
	defer s.pool.put(conn)
	outs, err := batch.Commit(ctx, backend{conn}, jobs)
	if err != nil {
		return nil, err
	}
	return batch.Results(outs), nil
}

// Setting reads a setting of a connection the Store's pool opens.
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	conn, err := s.pool.get(ctx)
	if err != nil {
		return "", err
	}
	defer s.pool.put(conn)
	var v string
	err = conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}

// WriterSetting reads a setting of the committer's connection. Call it
// with no op in flight: the committer's goroutine owns the connection.
func (s *Store) WriterSetting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.w.conn.QueryRow(ctx, "SELECT current_setting($1)", name).Scan(&v)
	return v, err
}
