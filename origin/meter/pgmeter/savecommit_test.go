package pgmeter_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/lectern-api/lectern/internal/pgschema"
	"github.com/lectern-api/lectern/origin/meter"
	"github.com/lectern-api/lectern/origin/meter/internal/batch"
	"github.com/lectern-api/lectern/origin/meter/pgmeter"
)

// A batch's writes and its COMMIT go in one round trip (tx.SaveCommit).
// What failed before COMMIT applied nothing and may be tried again; what
// failed at COMMIT is reported as during it and never tried again. The
// failures are raised by triggers on the counters: a sequence counts their
// calls, since nextval outlives the transaction it ran in.
func TestSaveCommit(t *testing.T) {
	for _, tc := range []struct {
		name string
		// trigger is the CREATE TRIGGER that fires fail() on the
		// counters' UPDATE, before COMMIT or at it.
		trigger string
		code    string // SQLSTATE fail raises on its first calls
		fails   int64  // how many of its calls raise it
		// wantErr: Apply fails, with DuringCommit as wantDuring,
		// after wantCalls calls of fail; else it succeeds.
		wantErr, wantDuring bool
		wantCalls           int64
	}{
		{
			// lock_not_available, as a lock wait cut short by
			// lock_timeout: retried in a new transaction.
			name:      "retried before COMMIT",
			trigger:   `CREATE TRIGGER fail BEFORE UPDATE ON meter_counters FOR EACH ROW EXECUTE FUNCTION fail()`,
			code:      "55P03",
			fails:     2,
			wantCalls: 3,
		},
		{
			name:      "refused before COMMIT",
			trigger:   `CREATE TRIGGER fail BEFORE UPDATE ON meter_counters FOR EACH ROW EXECUTE FUNCTION fail()`,
			code:      "P0001",
			fails:     1,
			wantErr:   true,
			wantCalls: 1,
		},
		{
			// A deferred trigger runs at COMMIT: its failure is
			// COMMIT's, whose outcome a client cannot always know.
			name: "at COMMIT",
			trigger: `CREATE CONSTRAINT TRIGGER fail AFTER UPDATE ON meter_counters
				DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION fail()`,
			code:       "55P03",
			fails:      1,
			wantErr:    true,
			wantDuring: true,
			wantCalls:  1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dsn := pgschema.ForTest(t, what)
			s := openStore(t, dsn, pgmeter.Options{})
			now := time.Now()
			op := meter.Op{Org: "acme", Now: now, Stages: []meter.Stage{{{Meter: meter.MonthCalls, N: 1}}}}
			if _, err := s.Apply(t.Context(), op); err != nil { // the row exists: the next batch UPDATEs it
				t.Fatal(err)
			}
			conn, err := pgx.Connect(t.Context(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(context.Background())
			for _, q := range []string{
				`CREATE SEQUENCE fail_calls`,
				fmt.Sprintf(`CREATE FUNCTION fail() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF nextval('fail_calls') <= %d THEN
						RAISE EXCEPTION 'failed on purpose' USING ERRCODE = '%s';
					END IF;
					RETURN NEW;
				END $$`, tc.fails, tc.code),
				tc.trigger,
			} {
				if _, err := conn.Exec(t.Context(), q); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
			}

			_, err = s.Apply(t.Context(), op)
			var calls int64
			if err := conn.QueryRow(t.Context(), `SELECT last_value FROM fail_calls`).Scan(&calls); err != nil {
				t.Fatal(err)
			}
			if (err != nil) != tc.wantErr || (err != nil && batch.DuringCommit(err) != tc.wantDuring) || calls != tc.wantCalls {
				t.Errorf("Apply: %v (during COMMIT: %v) after %d calls of the trigger; want an error %v (during COMMIT: %v) after %d",
					err, batch.DuringCommit(err), calls, tc.wantErr, tc.wantDuring, tc.wantCalls)
			}
			// Nothing of a failed batch was applied (here COMMIT's
			// failure rolled back too), and the writer's connection
			// serves the next batch.
			want := int64(2)
			if tc.wantErr {
				want = 1
			}
			u, err := s.Usage(t.Context(), "acme", now)
			if err != nil {
				t.Fatal(err)
			}
			if got := u.Counters[meter.MonthCalls]; got != want {
				t.Errorf("month calls = %d, want %d", got, want)
			}
			res, err := s.Apply(t.Context(), op)
			if err != nil || res.After.Get(meter.MonthCalls) != want+1 {
				t.Errorf("the next Apply: %v, month calls %d; want %d", err, res.After.Get(meter.MonthCalls), want+1)
			}
		})
	}
}
