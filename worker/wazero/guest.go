package wazero

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/imports/wasi_snapshot_preview1"
	"github.com/valyala/fastjson"
)

// Module is the compiled edge module. Compile once, then start any number
// of Hosts, or Guests, on it.
type Module struct {
	rt        wazero.Runtime
	compiled  wazero.CompiledModule
	Toolchain string // which toolchain built it, from its custom sections
	Size      int    // bytes of the .wasm
}

// Compile compiles a module (the bytes of build/worker.wasm).
func Compile(ctx context.Context, wasm []byte) (*Module, error) {
	rt := wazero.NewRuntime(ctx)
	if _, err := wasi_snapshot_preview1.Instantiate(ctx, rt); err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("instantiate WASI: %w", err)
	}
	compiled, err := rt.CompileModule(ctx, wasm)
	if err != nil {
		rt.Close(ctx)
		return nil, fmt.Errorf("compile edge module: %w", err)
	}
	for _, name := range []string{"alloc", "configure", "start", "resume"} {
		if _, ok := compiled.ExportedFunctions()[name]; !ok {
			rt.Close(ctx)
			return nil, fmt.Errorf("edge module does not export %s (docs/edge.md: Module ABI)", name)
		}
	}
	return &Module{rt: rt, compiled: compiled, Toolchain: Toolchain(wasm), Size: len(wasm)}, nil
}

// Close releases the runtime and every instance of every Host on it.
func (m *Module) Close(ctx context.Context) error { return m.rt.Close(ctx) }

// Guest is one instance of the edge module, driven through its ABI
// (docs/edge.md: Module ABI) one call at a time. A Host keeps a pool of
// them; tools/bench drives one itself, to time the module's calls apart
// from the host's work. A Guest is not safe for concurrent use.
type Guest struct {
	mod    api.Module
	alloc  api.Function
	fns    [4]api.Function // by Func; Control is nil in a module without leases
	stack  []uint64
	parser fastjson.Parser // reads outputs
}

// Func is an export of the module that takes a message.
type Func int

const (
	Configure Func = iota // the configuration message, once, before any request
	Start                 // a new request
	Resume                // the answer to a subrequest, or a wake
	Control               // a host's own request: flush the leases' usage, revoke leases
)

// Instantiate makes a Guest of m: the reactor's _initialize runs, with the
// real clocks and a crypto random source. The guest's stdout and stderr go
// to w.
func (m *Module) Instantiate(ctx context.Context, w io.Writer) (*Guest, error) {
	mc := wazero.NewModuleConfig().WithName("").WithStartFunctions("_initialize").
		WithSysWalltime().WithSysNanotime().WithRandSource(rand.Reader).
		WithStdout(w).WithStderr(w)
	mod, err := m.rt.InstantiateModule(ctx, m.compiled, mc)
	if err != nil {
		return nil, fmt.Errorf("instantiate edge module: %w", err)
	}
	return &Guest{mod: mod, alloc: mod.ExportedFunction("alloc"), stack: make([]uint64, 2),
		fns: [...]api.Function{Configure: mod.ExportedFunction("configure"),
			Start: mod.ExportedFunction("start"), Resume: mod.ExportedFunction("resume"),
			Control: mod.ExportedFunction("control")}}, nil
}

// Close closes the instance.
func (g *Guest) Close(ctx context.Context) error { return g.mod.Close(ctx) }

// Call writes msg into guest memory (alloc, then a copy), calls fn with it
// and returns fn's output message, in guest memory: valid until the next
// call.
func (g *Guest) Call(fn Func, msg []byte) ([]byte, error) {
	ctx := context.Background() // a client going away must not abort a guest call halfway
	g.stack[0] = uint64(len(msg))
	if err := g.alloc.CallWithStack(ctx, g.stack); err != nil {
		return nil, fmt.Errorf("alloc: %w", err)
	}
	ptr := uint32(g.stack[0])
	if ptr == 0 {
		return nil, fmt.Errorf("alloc refused a message of %d bytes", len(msg))
	}
	if !g.mod.Memory().Write(ptr, msg) {
		return nil, fmt.Errorf("alloc returned %#x, outside memory for %d bytes", ptr, len(msg))
	}
	g.stack[0], g.stack[1] = uint64(ptr), uint64(len(msg))
	if g.fns[fn] == nil {
		return nil, errors.New("the edge module does not export control (docs/edge.md: Module ABI)")
	}
	if err := g.fns[fn].CallWithStack(ctx, g.stack); err != nil {
		return nil, err
	}
	res := g.stack[0]
	optr, olen := uint32(res>>32), uint32(res)
	b, ok := g.mod.Memory().Read(optr, olen)
	if !ok {
		return nil, fmt.Errorf("output at %#x+%d is outside memory", optr, olen)
	}
	return b, nil
}

// Output reads an output message that Call returned; its strings are
// copied out of guest memory.
func (g *Guest) Output(raw []byte) (*Output, error) { return parseOutput(&g.parser, raw) }

// Configure sends the configuration message and checks that the module
// took it.
func (g *Guest) Configure(c ConfigMessage) error { return configure(g.Call, c) }

// ConfigMessage is the message of configure (docs/edge.md).
type ConfigMessage struct {
	Origin           string `json:"origin"`
	JWKSURL          string `json:"jwksUrl"`
	Issuer           string `json:"issuer"`
	Audience         string `json:"audience"`
	Secret           string `json:"secret"`
	ResourceMetadata string `json:"resourceMetadata"`
	URLKeys          string `json:"urlKeys,omitempty"`
	Leases           bool   `json:"leases,omitempty"` // absent: no leases
	Revoke           string `json:"revoke,omitempty"` // the host's revoke URL; absent: no push
	// ReportEvery is configure's reportEvery: nil (absent) is the module's
	// default (lease.ReportEvery), 0 reports by lease.ReportInterval only.
	ReportEvery *int64 `json:"reportEvery,omitempty"`
	// Origins lists every origin, Origin first, comma-separated, when
	// there are several: the module then signs each call for each.
	Origins string `json:"origins,omitempty"`
	// SecretAccept is LECTERN_SECRET_ACCEPT, the secret accepted beside
	// secret while it is rotated; absent: none.
	SecretAccept string `json:"secretAccept,omitempty"`
	// SignV2 signs by the previous release's rule (edgesig v2); absent:
	// the v3 rule.
	SignV2 bool `json:"signV2,omitempty"`
}

// configure sends c through call (Guest.Call, or a Host's instance's,
// which may count the call's CPU time) and checks that the module took it.
func configure(call func(Func, []byte) ([]byte, error), c ConfigMessage) error {
	msg, _ := json.Marshal(c)
	raw, err := call(Configure, msg)
	if err != nil {
		return fmt.Errorf("configure edge module: %w", err)
	}
	// configure answers a message too; an error there is a bad configuration.
	var out struct {
		Kind, Error string
		Status      int
		Body        string
	}
	if len(raw) > 0 && json.Unmarshal(raw, &out) == nil && (out.Error != "" || out.Status >= 400) {
		return fmt.Errorf("configure edge module: %s%s", out.Error, out.Body)
	}
	return nil
}

// The messages a host sends (docs/edge.md); codec.go writes them.

// StartMessage is the message of start: a new request.
type StartMessage struct {
	Method  string
	Path    string
	Query   string
	Headers [][2]string
	Now     int64
	// BodySHA256 is edgesig.BodyHash of the body the host will forward;
	// "" when the request has none.
	BodySHA256 string
}

// ResumeMessage is the message of resume that answers a subrequest.
type ResumeMessage struct {
	Handle  int64
	Status  int
	Headers [][2]string
	Body    *string
	Error   string
	Now     int64
}

// wakeMessage is the message of resume that wakes a parked request.
type wakeMessage struct {
	Handle int64
	Wake   bool
	Now    int64
}

// controlMessage is the message of control: "flush" or "revoke" (with
// Body, a lease.Revoke).
type controlMessage struct {
	Op   string
	Now  int64
	Body string
}

// Output is any output message of docs/edge.md.
type Output struct {
	Kind        string
	Handle      int64
	Status      int
	Headers     [][2]string
	Body        string
	Passthrough bool
	Method      string
	URL         string
	Forward     bool
	Signatures  []string // X-Lectern-Edge for each origin, with several
	Retry       string   // which failed attempts may go to the next origin: retryAny or retryUnsent ("": as retryUnsent)
	Wake        []int64
	Refresh     *Refresh    // a background JWKS fetch to perform
	Background  *Background // a background subrequest to perform (leases, usage)
	Lease       *LeaseUse   // a leased 304: log it before answering

	parked chan struct{} // for kind "park", in a Host: closed when woken
	body   []byte        // a forward's: the client's body, read by the host
	// sign, for the host's own calls to the origin, signs the call for
	// the origin's host (Signatures are the module's).
	sign func(host string) string
}

// Refresh is an output's "refresh": GET URL in the background, then
// resume Handle.
type Refresh struct {
	Handle int64
	URL    string
	Retry  string // the module's mark, as Output.Retry
}

// Background is an output's "background": perform the request without
// holding up any client's, then resume Handle with its answer.
type Background struct {
	Handle     int64
	Method     string
	URL        string
	Headers    [][2]string
	Body       string
	Signatures []string // X-Lectern-Edge for each origin, with several
	Retry      string   // the module's mark, as Output.Retry
}

// LeaseUse is a leased 304's "lease": lease ID has answered Used 304s.
type LeaseUse struct {
	ID   string
	Used int64
}
