// Command adminctl is the operator's client for Lectern's admin API
// (docs/operations.md, the admin API). It prints each answer's JSON
// pretty-printed and exits 1 with the error body's code and message when
// the API refuses.
//
//	adminctl [-addr URL] [-token T] <command>
//	adminctl help [COMMAND]
//
// The address and token default to LECTERN_ADMIN_ADDR (127.0.0.1:8081)
// and LECTERN_ADMIN_TOKEN, or, when that is unset, the token the origin
// keeps in var/admin-token (run adminctl where make run runs). Commands:
//
//	health
//	org create [-id ID] [-name N] [-grants high,college/calculus] [-json BODY]
//	org get ID
//	org patch ID -json BODY
//	org suspend ID
//	org reinstate ID
//	org delete ID
//	client create ORG [-scopes content.read,content.export] [-grant-types T,...] [-redirect-uris U,...]
//	ledger ORG [-after ID] [-limit N]
//	ledger archive -before RFC3339 [-o FILE]
//	ledger trim -before RFC3339 [-yes]
//	forensic FILE|LINK [-orgs ORG,...]
//	corpus reload DIR
//	clock get
//	clock advance SECONDS
//	clock set RFC3339
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/lectern-api/lectern/internal/cmdline"
	"github.com/lectern-api/lectern/origin/webhook"
	"github.com/lectern-api/lectern/shared/scope"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	switch {
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0) // -h: the usage was asked for
	case err != nil:
		fmt.Fprintln(os.Stderr, "adminctl:", err)
		os.Exit(1)
	}
}

// commands is every command, for the usage and for help: its synopsis
// and what it does.
var commands = []struct{ synopsis, about string }{
	{"health", "Check that the admin API answers."},
	{"org create [-id ID] [-name N] [-grants high,college/calculus] [-json BODY]",
		"Create an organisation; -json is the admin API's body (docs/operations.md), which -id, -name and -grants override."},
	{"org get ID", "Show an organisation, its plan and this month's meters."},
	{"org patch ID -json BODY", "Change an organisation: the members of BODY replace its own."},
	{"org suspend ID", "Suspend an organisation: its next call is refused."},
	{"org reinstate ID", "Reinstate a suspended organisation (the enumeration alarm's suspension included)."},
	{"org delete ID", "Delete an organisation and its clients."},
	{"client create ORG [-scopes content.read,content.export] [-grant-types T,...] [-redirect-uris U,...]",
		"Create an OAuth client of ORG and print its id and secret (shown once).\n" +
			"Scopes are named short, by their suffix, or in full: content.read means " + scope.Prefix + "content.read.\n" +
			"Without -scopes the client gets " + strings.Join(defaultScopes, ",") + ": what lectern sync needs;\n" +
			"lectern sync -media needs media.download too (-scopes content.read,content.export,media.download).\n" +
			"The scopes: " + strings.Join(scope.All, ", ") + ".\n" +
			"Grant types: client_credentials (the default) and authorization_code, for learner apps (with -redirect-uris)."},
	{"ledger ORG [-after ID] [-limit N]", "List ORG's export ledger (minted URLs and shipped exports) in commit order.\n" +
		"An organisation named archive or trim is listed with a flag first: ledger -limit 100 archive."},
	{"ledger archive -before RFC3339 [-o FILE]",
		"Write every organisation's export ledger rows created before the time (at least 24 hours ago) as NDJSON,\n" +
			"one row a line (the ledger's fields and orgId), to FILE or stdout. FILE is created 0600, never overwritten,\n" +
			"and complete or not at all: an answer cut short fails the command and leaves no FILE."},
	{"ledger trim -before RFC3339 [-yes]",
		"Delete every organisation's export ledger rows created before the time (at least 24 hours ago) and print\n" +
			"how many. Archive them first with the same -before: a trimmed row no longer names who got a leaked link.\n" +
			"Without -yes it only says what it would delete, and fails."},
	{"webhook add ORG URL [-events " + strings.Join(webhook.Types, ",") + "]",
		"Register an https endpoint of ORG for the events (default: all of them) and print its id and secret\n" +
			"(whsec_…, shown once: receivers verify each delivery's webhook-signature with it)."},
	{"webhook list ORG", "List ORG's endpoints (without their secrets)."},
	{"webhook delete ORG ID", "Delete an endpoint and its pending deliveries."},
	{"webhook rotate ORG ID", "Give an endpoint a new secret (printed once); for 24 hours deliveries carry\n" +
		"signatures under both, so receivers can switch without missing one."},
	{"webhook deliveries ORG ID [-before ID] [-limit N]",
		"List an endpoint's delivery log, newest first: each event's state, attempts, last answer or error."},
	{"forensic FILE|LINK [-orgs ORG,...]", "Name the organisation a leaked lesson, bundle, bundle file or link came from."},
	{"corpus reload DIR", "Load the corpus in DIR and serve it (every origin on the database follows)."},
	{"clock get", "Show the test clock (LECTERN_TEST_CLOCK=1)."},
	{"clock advance SECONDS", "Move the test clock forward."},
	{"clock set RFC3339", "Move the test clock forward to a time."},
	{"help [COMMAND]", "Show this list, or one command's help (as does COMMAND -h)."},
}

// defaultScopes are a new client's scopes when client create names none:
// those `lectern sync` asks for (content.read for the listings,
// content.export for the exports), so a client made without thinking of
// scopes can sync. media.download, which sync -media adds, is asked for
// by name (docs/decisions/lectern-sync.md).
var defaultScopes = []string{scope.ContentRead, scope.ContentExport}

// usage is the command line and the commands.
func usage() string {
	var b strings.Builder
	b.WriteString("usage: adminctl [-addr URL] [-token T] <command>\n\ncommands:\n")
	for _, c := range commands {
		b.WriteString("  " + c.synopsis + "\n")
	}
	b.WriteString("\n-addr defaults to $LECTERN_ADMIN_ADDR or 127.0.0.1:8081; -token to $LECTERN_ADMIN_TOKEN,\n" +
		"else the origin's var/admin-token (in the directory the origin was started in).\n" +
		"-version prints the version. adminctl help COMMAND, or COMMAND -h, explains a command.\n")
	return b.String()
}

// help writes the help of the commands whose names start with the words
// of topic ("org" lists every org command), and reports whether there
// was any.
func help(w io.Writer, topic []string) bool {
	want := strings.Join(topic, " ")
	found := false
	for _, c := range commands {
		if name := commandName(c.synopsis); name == want || strings.HasPrefix(name, want+" ") {
			fmt.Fprintf(w, "adminctl %s\n    %s\n", c.synopsis, strings.ReplaceAll(c.about, "\n", "\n    "))
			found = true
		}
	}
	return found
}

// commandName is a synopsis's command words: those before the first
// argument or flag.
func commandName(synopsis string) string {
	var words []string
	for _, w := range strings.Fields(synopsis) {
		if w == strings.ToLower(w) && !strings.HasPrefix(w, "-") && !strings.HasPrefix(w, "[") {
			words = append(words, w)
			continue
		}
		break
	}
	return strings.Join(words, " ")
}

// wantsHelp reports whether a command's arguments ask for its help.
func wantsHelp(args []string) bool {
	for _, a := range args {
		if a == "-h" || a == "-help" || a == "--help" {
			return true
		}
	}
	return false
}

// errUsage is a command line adminctl cannot read; the usage has been
// printed.
var errUsage = errors.New("bad command line (see usage above)")

// run is adminctl without the process: args exclude the program name.
func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("adminctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stdout, usage()) } // only -h asks for it: errors print it below
	addr := fs.String("addr", or(getenv("LECTERN_ADMIN_ADDR"), "127.0.0.1:8081"), "admin API address or URL")
	token := fs.String("token", getenv("LECTERN_ADMIN_TOKEN"), "admin bearer token")
	version := fs.Bool("version", false, "print the version")
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, usage())
		}
		return err
	}
	cmd := fs.Args()
	switch {
	case *version:
		fmt.Fprintln(stdout, cmdline.Version("adminctl"))
		return nil
	case len(cmd) > 0 && cmd[0] == "help":
		if len(cmd) == 1 {
			fmt.Fprint(stdout, usage())
			return nil
		}
		if !help(stdout, cmd[1:]) {
			fmt.Fprint(stderr, usage())
			return fmt.Errorf("%w: no command %q", errUsage, strings.Join(cmd[1:], " "))
		}
		return nil
	case len(cmd) > 0 && wantsHelp(cmd[1:]):
		topic := cmd[:1]
		if len(cmd) > 1 && !strings.HasPrefix(cmd[1], "-") {
			topic = cmd[:2]
		}
		if help(stdout, topic) || help(stdout, cmd[:1]) {
			return nil
		}
	}
	rc, isRetention, err := parseRetention(cmd)
	var c call
	if !isRetention && err == nil {
		c, err = parse(cmd)
	}
	if err != nil {
		fmt.Fprint(stderr, usage())
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if isRetention {
		if err := rc.refused(); err != nil {
			return err
		}
	}
	if *token == "" {
		t, err := keptToken()
		if err != nil {
			return err
		}
		*token = t
	}
	base := *addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	base = strings.TrimSuffix(base, "/")
	if isRetention {
		return rc.run(ctx, base, *token, stdout, stderr)
	}
	return do(ctx, base, *token, c, stdout)
}

// adminTokenFile is where an origin keeps its admin token when
// LECTERN_ADMIN_TOKEN is unset (origin/internal/private/kept.go), relative
// to the directory it was started in, as make run starts it.
const adminTokenFile = "var/admin-token"

// keptToken is the token in adminTokenFile, for when neither -token nor
// LECTERN_ADMIN_TOKEN gives one.
func keptToken() (string, error) {
	b, err := os.ReadFile(adminTokenFile)
	if t := strings.TrimSpace(string(b)); err == nil && t != "" {
		return t, nil
	}
	if err == nil {
		err = errors.New("empty")
	}
	return "", fmt.Errorf("no admin token: set LECTERN_ADMIN_TOKEN or pass -token (%s, the origin's own when it is unset, is not readable here: %w)",
		adminTokenFile, err)
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// call is one admin API request.
type call struct {
	method, path string
	body         []byte // nil: none
	contentType  string // of body; "": application/json
}

// parse turns a command into its call.
func parse(args []string) (call, error) {
	if len(args) == 0 {
		return call{}, errors.New("no command")
	}
	cmd, rest := args[0], args[1:]
	if len(rest) > 0 && cmd != "health" && cmd != "ledger" && cmd != "forensic" {
		cmd += " " + rest[0]
		rest = rest[1:]
	}
	switch cmd {
	case "health":
		return call{"GET", "/admin/v1/health", nil, ""}, positional(cmd, rest, 0)
	case "org create":
		return parseOrgCreate(cmd, rest)
	case "org get", "org delete", "org suspend", "org reinstate":
		if err := positional(cmd, rest, 1); err != nil {
			return call{}, err
		}
		path := "/admin/v1/orgs/" + url.PathEscape(rest[0])
		switch cmd {
		case "org get":
			return call{"GET", path, nil, ""}, nil
		case "org delete":
			return call{"DELETE", path, nil, ""}, nil
		case "org suspend":
			return call{"PATCH", path, []byte(`{"status":"suspended"}`), ""}, nil
		}
		return call{"PATCH", path, []byte(`{"status":"active"}`), ""}, nil
	case "org patch":
		return parseOrgPatch(cmd, rest)
	case "client create":
		return parseClientCreate(cmd, rest)
	case "ledger":
		return parseLedger(cmd, rest)
	case "forensic":
		return parseForensic(cmd, rest)
	case "corpus reload":
		if err := positional(cmd, rest, 1); err != nil {
			return call{}, err
		}
		// A relative DIR is the operator's, not the origin's: resolve it
		// here (the admin listener is loopback, so both share a disk).
		dir, err := filepath.Abs(rest[0])
		if err != nil {
			return call{}, err
		}
		return jsonCall("POST", "/admin/v1/corpus/reload", map[string]any{"dir": dir})
	case "clock get":
		return call{"GET", "/admin/v1/clock", nil, ""}, positional(cmd, rest, 0)
	case "clock advance":
		if err := positional(cmd, rest, 1); err != nil {
			return call{}, err
		}
		n, err := strconv.ParseInt(rest[0], 10, 64)
		if err != nil || n < 1 {
			return call{}, fmt.Errorf("clock advance: %q is not a positive number of seconds", rest[0])
		}
		return jsonCall("POST", "/admin/v1/clock", map[string]any{"advanceSeconds": n})
	case "webhook add", "webhook list", "webhook delete", "webhook rotate", "webhook deliveries":
		return parseWebhook(cmd, rest) // webhook.go
	case "clock set":
		if err := positional(cmd, rest, 1); err != nil {
			return call{}, err
		}
		return jsonCall("POST", "/admin/v1/clock", map[string]any{"now": rest[0]})
	}
	return call{}, fmt.Errorf("unknown command %q", cmd)
}

// parseOrgCreate turns "org create" into its call: it builds an
// organisation from -json and the flags that override its members.
func parseOrgCreate(cmd string, rest []string) (call, error) {
	fs := newFlags(cmd)
	id := fs.String("id", "", "organisation id (generated when omitted)")
	name := fs.String("name", "", "organisation name")
	grants := fs.String("grants", "", "content grants, comma-separated")
	raw := fs.String("json", "", "JSON body; -id, -name and -grants override its members")
	if _, err := parseFlags(fs, rest, 0); err != nil {
		return call{}, err
	}
	body := map[string]any{}
	if *raw != "" {
		if err := json.Unmarshal([]byte(*raw), &body); err != nil || body == nil {
			return call{}, fmt.Errorf("-json must be a JSON object: %v", err)
		}
	}
	if *id != "" {
		body["orgId"] = *id
	}
	if *name != "" {
		body["orgName"] = *name
	}
	if *grants != "" {
		body["contentGrants"] = list(*grants)
	}
	return jsonCall("POST", "/admin/v1/orgs", body)
}

// parseOrgPatch turns "org patch" into its call: it sends -json as it is,
// once it is valid JSON.
func parseOrgPatch(cmd string, rest []string) (call, error) {
	fs := newFlags(cmd)
	raw := fs.String("json", "", "JSON body with the members to change")
	pos, err := parseFlags(fs, rest, 1)
	if err != nil {
		return call{}, err
	}
	if *raw == "" {
		return call{}, errors.New("org patch needs -json")
	}
	if !json.Valid([]byte(*raw)) {
		return call{}, errors.New("-json is not valid JSON")
	}
	return call{"PATCH", "/admin/v1/orgs/" + url.PathEscape(pos[0]), []byte(*raw), ""}, nil
}

// parseClientCreate turns "client create" into its call: it registers a
// client with the scopes given (the default ones when -scopes is omitted,
// refused when empty), its grant types and redirect URIs.
func parseClientCreate(cmd string, rest []string) (call, error) {
	fs := newFlags(cmd)
	scopes := fs.String("scopes", "", "scopes, comma-separated: suffixes (content.read) or full names (default "+
		strings.Join(defaultScopes, ",")+")")
	grants := fs.String("grant-types", "", "grant types, comma-separated (default client_credentials)")
	redirects := fs.String("redirect-uris", "", "redirect URIs, comma-separated (for authorization_code)")
	pos, err := parseFlags(fs, rest, 1)
	if err != nil {
		return call{}, err
	}
	given := list(*scopes)
	if len(given) == 0 {
		set := false
		fs.Visit(func(f *flag.Flag) { set = set || f.Name == "scopes" })
		if set {
			return call{}, errors.New("client create: -scopes is empty (omit it for the default, " +
				strings.Join(defaultScopes, ",") + ")")
		}
		given = append([]string(nil), defaultScopes...)
	}
	body := map[string]any{"scopes": given}
	if *grants != "" {
		body["grantTypes"] = list(*grants)
	}
	if *redirects != "" {
		body["redirectUris"] = list(*redirects)
	}
	return jsonCall("POST", "/admin/v1/orgs/"+url.PathEscape(pos[0])+"/clients", body)
}

// parseLedger turns "ledger" into its call: it asks an organisation's
// ledger, a page of it when -after or -limit is given.
func parseLedger(cmd string, rest []string) (call, error) {
	// The values go to the API as given: it validates them (400
	// naming the parameter), and its defaults apply to those omitted.
	fs := newFlags(cmd)
	fs.String("after", "", "list the rows after this id (nextAfter of the previous page)")
	fs.String("limit", "", "rows per page (the API's default when omitted)")
	pos, err := parseFlags(fs, rest, 1)
	if err != nil {
		return call{}, err
	}
	return call{"GET", "/admin/v1/orgs/" + url.PathEscape(pos[0]) + "/ledger" + flagQuery(fs), nil, ""}, nil
}

// flagQuery is a query of the flags fs's command line set, as given
// ("?after=…&limit=…"; "" when none is): the paging flags, which the API
// validates and defaults.
func flagQuery(fs *flag.FlagSet) string {
	q := url.Values{}
	fs.Visit(func(f *flag.Flag) { q.Set(f.Name, f.Value.String()) })
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// parseForensic turns "forensic" into its call: it sends what leaked
// (leaked) to be traced to an organisation, among -orgs when given.
func parseForensic(cmd string, rest []string) (call, error) {
	fs := newFlags(cmd)
	orgs := fs.String("orgs", "", "candidate organisations whose tag and canaries are tried, comma-separated (default: every organisation)")
	pos, err := parseFlags(fs, rest, 1)
	if err != nil {
		return call{}, err
	}
	path := "/admin/v1/forensics"
	if *orgs != "" {
		path += "?" + url.Values{"orgs": {strings.Join(list(*orgs), ",")}}.Encode()
	}
	leak, ctype, err := leaked(pos[0])
	return call{"POST", path, leak, ctype}, err
}

// leaked is what forensic sends of arg: a URL (http:// or https://) as
// it is, as text; else the file named arg, as it is (the API caps it);
// else, when no such file exists, a link's path and query.
func leaked(arg string) ([]byte, string, error) {
	if strings.HasPrefix(arg, "http://") || strings.HasPrefix(arg, "https://") {
		return []byte(arg), "text/plain", nil
	}
	b, err := os.ReadFile(arg)
	if errors.Is(err, os.ErrNotExist) && strings.HasPrefix(arg, "/files/") {
		return []byte(arg), "text/plain", nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("forensic: %w", err)
	}
	return b, "application/octet-stream", nil
}

func newFlags(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // run prints the usage once
	return fs
}

// parseFlags parses flags that may come before, between or after the
// positional arguments, and returns the positional ones, which must be n
// (fs is named after its command: newFlags).
func parseFlags(fs *flag.FlagSet, args []string, n int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%s: %w", fs.Name(), err)
		}
		if fs.NArg() == 0 {
			return pos, positional(fs.Name(), pos, n)
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func positional(cmd string, args []string, n int) error {
	if len(args) != n {
		return fmt.Errorf("%s takes %d argument(s), got %d", cmd, n, len(args))
	}
	return nil
}

// list splits a comma-separated flag value, dropping empty items.
func list(s string) []string {
	out := []string{}
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func jsonCall(method, path string, body any) (call, error) {
	b, err := json.Marshal(body)
	return call{method, path, b, ""}, err
}

// do performs c and prints the answer. A non-2xx answer is an error
// carrying the error body's code and message.
func do(ctx context.Context, base, token string, c call, stdout io.Writer) error {
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, base+c.path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if c.body != nil {
		req.Header.Set("Content-Type", or(c.contentType, "application/json"))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if resp.StatusCode/100 != 2 {
		return apiError(resp, raw)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil // 204
	}
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return fmt.Errorf("the answer is not JSON: %w", err)
	}
	out.WriteByte('\n')
	_, err = stdout.Write(out.Bytes())
	return err
}

// apiError turns an error answer into an error: its code and message,
// and the parameter when it names one.
func apiError(resp *http.Response, raw []byte) error {
	var e struct {
		Error struct {
			Code      string `json:"code"`
			Message   string `json:"message"`
			RequestID string `json:"requestId"`
			Parameter string `json:"parameter"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Error.Code == "" {
		return fmt.Errorf("%s %s: %s: %s", resp.Request.Method, resp.Request.URL.Path, resp.Status,
			strings.TrimSpace(string(raw)))
	}
	msg := fmt.Sprintf("%d %s: %s", resp.StatusCode, e.Error.Code, e.Error.Message)
	if e.Error.Parameter != "" {
		msg += " (parameter " + e.Error.Parameter + ")"
	}
	return errors.New(msg + " [request " + e.Error.RequestID + "]")
}
