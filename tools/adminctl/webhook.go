package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/lectern-api/lectern/origin/webhook"
)

// The webhook commands (docs/operations.md, "Webhooks"): an
// organisation's endpoints and their delivery logs.

// parseWebhook turns a webhook command (cmd "webhook <sub>") into its call.
func parseWebhook(cmd string, rest []string) (call, error) {
	base := func(org string) string { return "/admin/v1/orgs/" + url.PathEscape(org) + "/webhooks" }
	switch cmd {
	case "webhook add":
		fs := newFlags(cmd)
		events := fs.String("events", strings.Join(webhook.Types, ","), "event types, comma-separated")
		pos, err := parseFlags(fs, rest, 2)
		if err != nil {
			return call{}, err
		}
		return jsonCall("POST", base(pos[0]), map[string]any{"url": pos[1], "events": list(*events)})
	case "webhook list":
		if err := positional(cmd, rest, 1); err != nil {
			return call{}, err
		}
		return call{"GET", base(rest[0]), nil, ""}, nil
	case "webhook delete", "webhook rotate":
		if err := positional(cmd, rest, 2); err != nil {
			return call{}, err
		}
		path := base(rest[0]) + "/" + url.PathEscape(rest[1])
		if cmd == "webhook delete" {
			return call{"DELETE", path, nil, ""}, nil
		}
		return call{"POST", path + "/rotate", nil, ""}, nil
	case "webhook deliveries":
		// As the ledger's: the values go to the API as given.
		fs := newFlags(cmd)
		fs.String("before", "", "list the deliveries before this id (nextBefore of the previous page)")
		fs.String("limit", "", "deliveries per page (the API's default when omitted)")
		pos, err := parseFlags(fs, rest, 2)
		if err != nil {
			return call{}, err
		}
		return call{"GET", base(pos[0]) + "/" + url.PathEscape(pos[1]) + "/deliveries" + flagQuery(fs), nil, ""}, nil
	}
	return call{}, fmt.Errorf("unknown command %q", cmd)
}
