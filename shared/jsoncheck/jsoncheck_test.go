package jsoncheck

import (
	"strings"
	"testing"
)

func TestShallow(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int
		want bool
	}{
		{"empty", ``, 0, true},
		{"scalar", `1`, 0, true},
		{"object at limit", `{"a":[1]}`, 2, true},
		{"object past limit", `{"a":[[1]]}`, 2, false},
		{"brackets in string", `{"a":"[[[["}`, 1, true},
		{"escaped quote in string", `{"a":"\"[[["}`, 1, true},
		{"escaped backslash ends string", `{"a":"\\","b":[[1]]}`, 2, false},
		{"closing brackets lower depth", `[[1],[2],[3]]`, 2, true},
		{"deep", strings.Repeat("[", 100) + strings.Repeat("]", 100), 16, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Shallow([]byte(tt.in), tt.max); got != tt.want {
				t.Errorf("Shallow(%q, %d) = %v, want %v", tt.in, tt.max, got, tt.want)
			}
		})
	}
}
