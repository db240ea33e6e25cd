package webhook_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/lectern-api/lectern/internal/proctest"
	"github.com/lectern-api/lectern/origin/store/pgstore"
	"github.com/lectern-api/lectern/origin/store/sqlitestore"
	"github.com/lectern-api/lectern/origin/webhook"
)

// childEnv makes the test binary a delivery loop (TestMain) on the
// database childDB names, until it is killed.
const (
	childEnv = "LECTERN_WEBHOOK_CHILD"
	childDB  = "LECTERN_WEBHOOK_CHILD_DB"
)

// killClaimFor is the claim lease of the SIGKILL test's loops.
const killClaimFor = 2 * time.Second

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		s, err := openStore(context.Background(), os.Getenv(childDB))
		if err != nil {
			fmt.Println("open:", err)
			os.Exit(2)
		}
		o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, ClaimFor: killClaimFor,
			Poll: 20 * time.Millisecond})
		fmt.Println("READY")
		o.Run(context.Background())
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func openStore(ctx context.Context, dsn string) (both, error) {
	if strings.HasPrefix(dsn, "postgres://") {
		return pgstore.New(ctx, dsn)
	}
	return sqlitestore.New(ctx, dsn)
}

// TestDeliveryAfterSIGKILL: an origin's delivery loop (a child process)
// claims an event and is killed with SIGKILL while its attempt is in
// flight. Nothing else sends the event while the dead loop's claim
// holds; once it has expired another origin's loop claims it again and
// delivers it, under the same webhook-id, and the log counts both
// attempts.
func TestDeliveryAfterSIGKILL(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		release := make(chan struct{})
		rc := newReceiver(t, false, func(n int, _ received) int {
			if n == 1 {
				<-release // the child's attempt: never answered
			}
			return 200
		})
		t.Cleanup(func() { close(release) })

		s, err := openStore(ctx, b.dsn)
		if err != nil {
			t.Fatal(err)
		}
		createOrg(t, s, "acme")
		o := webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, ClaimFor: killClaimFor,
			Poll: 20 * time.Millisecond})
		ep, err := o.AddEndpoint(ctx, "acme", rc.srv.URL, []string{webhook.OrgSuspended})
		if err != nil {
			t.Fatal(err)
		}
		id, err := o.Emit(ctx, "acme", webhook.OrgSuspended, webhook.Suspension{OrgID: "acme", Reason: webhook.ReasonAlarm})
		if err != nil {
			t.Fatal(err)
		}
		s.Close() // SQLite: the child takes the database's lock

		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"=1", childDB+"="+b.dsn)
		child, _, err := proctest.Start(t, "delivery loop", cmd, func(line string) (bool, bool) { return true, line == "READY" })
		if err != nil {
			t.Fatal(err)
		}
		first := rc.wait(t, 10*time.Second)
		child.Kill() // SIGKILL, its attempt in flight
		killed := time.Now()

		s, err = openStore(ctx, b.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		o = webhook.New(webhook.Config{Store: s, Key: testKey, AllowPrivate: true, ClaimFor: killClaimFor,
			Poll: 20 * time.Millisecond})
		run(t, o)
		second := rc.wait(t, 10*time.Second)
		if got := second.at.Sub(first.at); got < killClaimFor-100*time.Millisecond {
			t.Errorf("sent again %v after the first attempt, within the dead loop's claim (%v)", got, killClaimFor)
		}
		if a, b := first.header.Get("webhook-id"), second.header.Get("webhook-id"); a != id || b != id {
			t.Errorf("webhook-id %q then %q, want %q both times", a, b, id)
		}
		d := waitState(t, o, "acme", ep.ID, webhook.Delivered)
		if d.Attempts != 2 || d.Status != 200 {
			t.Errorf("delivery log %+v, want 2 attempts ending 200", d)
		}
		t.Logf("%s: delivered %v after the SIGKILL (claim lease %v)", b.name, second.at.Sub(killed).Round(time.Millisecond), killClaimFor)
	})
}
