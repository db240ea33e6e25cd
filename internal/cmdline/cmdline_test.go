package cmdline

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	env := map[string]string{"LECTERN_A": "from-env", "LECTERN_ON": "1", "LECTERN_OFF": "false"}
	getenv := func(k string) string { return env[k] }
	flags := func() (*FlagSet, *string, *string, *bool, *bool) {
		var a, b string
		var on, off bool
		fs := New("cmd", getenv)
		fs.Env(&a, "LECTERN_A", "a", "def-a", "setting a")
		fs.Env(&b, "LECTERN_B", "b", "def-b", "setting b")
		fs.Switch(&on, "LECTERN_ON", "on", "switch on")
		fs.Switch(&off, "LECTERN_OFF", "off", "switch off")
		return fs, &a, &b, &on, &off
	}

	fs, a, b, on, off := flags()
	if err := fs.Parse(nil, nil); err != nil || *a != "from-env" || *b != "def-b" || !*on || *off {
		t.Errorf("defaults: %v a=%q b=%q on=%v off=%v", err, *a, *b, *on, *off)
	}
	fs, a, _, on, off = flags()
	if err := fs.Parse([]string{"-a", "flag", "-on=false", "-off"}, nil); err != nil || *a != "flag" || *on || !*off {
		t.Errorf("flags: %v a=%q on=%v off=%v", err, *a, *on, *off)
	}

	var out bytes.Buffer
	fs, _, _, _, _ = flags()
	if err := fs.Parse([]string{"-h"}, &out); !errors.Is(err, ErrDone) || !strings.Contains(out.String(), "($LECTERN_B)") || !strings.Contains(out.String(), "-version") {
		t.Errorf("-h: %v\n%s", err, out.String())
	}
	out.Reset()
	fs, _, _, _, _ = flags()
	if err := fs.Parse([]string{"-version"}, &out); !errors.Is(err, ErrDone) || !strings.HasPrefix(out.String(), "cmd ") {
		t.Errorf("-version: %v %q", err, out.String())
	}
	for _, args := range [][]string{{"extra"}, {"-nope"}, {"-on=maybe"}} {
		fs, _, _, _, _ = flags()
		if err := fs.Parse(args, &out); err == nil || errors.Is(err, ErrDone) {
			t.Errorf("%q: %v", args, err)
		}
	}
	env["LECTERN_ON"] = "yes"
	fs, _, _, _, _ = flags()
	if err := fs.Parse(nil, nil); err == nil || !strings.Contains(err.Error(), "LECTERN_ON") {
		t.Errorf("LECTERN_ON=yes: %v", err)
	}
}

// An on/off setting: its default, the environment's value, the flag's
// over it, and any other value refused naming the variable.
func TestOnOff(t *testing.T) {
	env := map[string]string{}
	parse := func(args ...string) (bool, error) {
		var on bool
		fs := New("cmd", func(k string) string { return env[k] })
		fs.OnOff(&on, "LECTERN_X", "x", true, "x")
		return on, fs.Parse(args, nil)
	}
	if on, err := parse(); err != nil || !on {
		t.Errorf("default: %v %v", on, err)
	}
	env["LECTERN_X"] = "off"
	if on, err := parse(); err != nil || on {
		t.Errorf("off: %v %v", on, err)
	}
	if on, err := parse("-x=on"); err != nil || !on {
		t.Errorf("-x=on over off: %v %v", on, err)
	}
	if _, err := parse("-x=1"); err == nil {
		t.Error("-x=1 accepted")
	}
	env["LECTERN_X"] = "yes"
	if _, err := parse(); err == nil || !strings.Contains(err.Error(), "LECTERN_X") {
		t.Errorf("LECTERN_X=yes: %v", err)
	}
}
