package wazero

import (
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lectern-api/lectern/shared/token"
)

// instance is one module instance and the host's view of its parked
// requests. mu serialises every call into it.
type instance struct {
	mu     sync.Mutex
	g      *Guest
	parked map[int64]chan struct{} // handle → closed on wake
	woken  map[int64]bool          // wakes that came before their park (defensive)
	dead   error
	clock  func() time.Duration // Config.ThreadCPU
	every  int                  // Config.ThreadCPUEvery, at least 1
	calls  int                  // calls since the last one clocked
	cpu    *atomic.Int64        // the Host's count of module CPU, in ns
	busy   *atomic.Int64        // the Host's count of instances inside a call
}

// call is g.Call, refused once the instance is dead, and clocked when the
// Host counts module CPU. in.mu is held.
func (in *instance) call(fn Func, msg []byte) ([]byte, error) {
	if in.dead != nil {
		return nil, in.dead
	}
	if in.clock != nil {
		if in.calls++; in.calls == in.every {
			in.calls = 0
			runtime.LockOSThread() // the thread's clock is then this call's
			defer runtime.UnlockOSThread()
			defer func(c0 time.Duration) { in.cpu.Add(int64(in.every) * int64(in.clock()-c0)) }(in.clock())
		}
	}
	return in.g.Call(fn, msg)
}

// kill marks the instance unusable and releases its parked requests (they
// fail on their next call). in.mu is held.
func (in *instance) kill(err error) {
	if in.dead != nil {
		return
	}
	in.dead = err
	for hd, ch := range in.parked {
		close(ch)
		delete(in.parked, hd)
	}
}

// SetHeader adds to req the headers of the subrequest o asks for, as the
// host sends them: "Host" is req.Host, and the framing (Content-Length,
// Transfer-Encoding, Connection) is the transport's business.
func (o *Output) SetHeader(req *http.Request) {
	for _, kv := range o.Headers {
		switch strings.ToLower(kv[0]) {
		case "host":
			req.Host = kv[1]
		case "content-length", "transfer-encoding", "connection":
		default:
			req.Header.Add(kv[0], kv[1])
		}
	}
}

// do runs one call and handles its wake list and park registration under
// the instance lock, so a wake can never pass its park.
func (in *instance) do(fn Func, msg message) (*Output, error) {
	b := msg.AppendJSON(nil)
	in.mu.Lock()
	defer in.mu.Unlock()
	in.busy.Add(1)
	raw, err := in.call(fn, b)
	in.busy.Add(-1)
	if err != nil {
		in.kill(fmt.Errorf("edge module instance failed: %w", err))
		return nil, err
	}
	out, err := in.g.Output(raw)
	if err != nil {
		return nil, fmt.Errorf("edge module output %.200q: %w", raw, err)
	}
	for _, hd := range out.Wake {
		if ch, ok := in.parked[hd]; ok {
			close(ch)
			delete(in.parked, hd)
		} else {
			in.woken[hd] = true
		}
	}
	if out.Kind == "park" {
		out.parked = make(chan struct{})
		if in.woken[out.Handle] {
			delete(in.woken, out.Handle)
			close(out.parked)
		} else {
			in.parked[out.Handle] = out.parked
		}
	}
	return out, nil
}

func (in *instance) isDead() bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.dead != nil
}

// unpark forgets a park the host stopped waiting for.
func (in *instance) unpark(handle int64) {
	in.mu.Lock()
	delete(in.parked, handle)
	in.mu.Unlock()
}

// parkTimeout is how long a parked request waits for its wake before
// resuming anyway: past the guest's own give-up on a stuck fetch.
const parkTimeout = token.DefaultInFlightTimeout + 5*time.Second
