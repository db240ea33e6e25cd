package tools

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/lectern-api/lectern/shared/apierr"
	"github.com/lectern-api/lectern/shared/scope"
)

// issue #35, point 9: docs/integrating.md's error table says what a
// client does for every code of shared/apierr, each on a row with its
// status, and its "What lectern sync needs" names the scopes sync asks
// for. A code added to apierr without a row fails here.
func TestIntegratingDocumentsEveryCode(t *testing.T) {
	b, err := os.ReadFile("../docs/integrating.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	i := strings.Index(doc, "## Errors: what a client does")
	if i < 0 {
		t.Fatal(`docs/integrating.md has no "Errors: what a client does"`)
	}
	rows := map[string]string{} // code: the status cell of its row
	for _, line := range strings.Split(doc[i:], "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(line, "| `") {
			continue
		}
		for _, c := range strings.Split(cells[1], ",") {
			rows[strings.Trim(strings.TrimSpace(c), "`")] += strings.TrimSpace(cells[2]) + " "
		}
	}
	for _, c := range append(apierr.Codes(), apierr.Extensions()...) {
		if !strings.Contains(rows[string(c)], strconv.Itoa(apierr.Status(c))) {
			t.Errorf("the error table has no row of %s with status %d", c, apierr.Status(c))
		}
	}
	j := strings.Index(doc, "### What lectern sync needs")
	if j < 0 {
		t.Fatal(`docs/integrating.md has no "What lectern sync needs"`)
	}
	for _, s := range []string{scope.ContentRead, scope.ContentExport, scope.MediaDownload} {
		if !strings.Contains(doc[j:], "`"+scope.Full(s)+"`") {
			t.Errorf(`"What lectern sync needs" does not name %s`, scope.Full(s))
		}
	}
}
