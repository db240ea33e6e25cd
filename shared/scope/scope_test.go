package scope

import "testing"

func TestParse(t *testing.T) {
	tests := []struct {
		claim string
		has   []string
		not   []string
		str   string
	}{
		{"service-api/content.read", []string{ContentRead}, []string{ContentExport}, "service-api/content.read"},
		{"service-api/media.download  service-api/content.read", []string{ContentRead, MediaDownload}, []string{ProgressRead},
			"service-api/content.read service-api/media.download"},
		// Bare suffixes and foreign scopes grant nothing: tokens carry full names.
		{"content.read openid service-api/unknown", nil, []string{ContentRead}, ""},
		{"", nil, All, ""},
		{"service-api/progress.read service-api/progress.write service-api/testprep.read service-api/content.export",
			[]string{ProgressRead, ProgressWrite, TestprepRead, ContentExport}, []string{ContentRead},
			"service-api/content.export service-api/testprep.read service-api/progress.read service-api/progress.write"},
	}
	for _, tt := range tests {
		s := Parse(tt.claim)
		for _, h := range tt.has {
			if !s.Has(h) {
				t.Errorf("Parse(%q).Has(%s) = false", tt.claim, h)
			}
		}
		for _, n := range tt.not {
			if s.Has(n) {
				t.Errorf("Parse(%q).Has(%s) = true", tt.claim, n)
			}
		}
		if got := s.String(); got != tt.str {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.claim, got, tt.str)
		}
	}
	if Of(ContentRead).Has("") || Of(ContentRead).Has("bogus") {
		t.Error("Has of a non-scope is true")
	}
}

func TestSuffix(t *testing.T) {
	for in, want := range map[string]string{"content.read": "content.read", "service-api/media.download": "media.download", "x": "", "service-api/": ""} {
		got, ok := Suffix(in)
		if got != want || ok != (want != "") {
			t.Errorf("Suffix(%q) = %q, %v", in, got, ok)
		}
	}
	if Full(ContentRead) != "service-api/content.read" {
		t.Error(Full(ContentRead))
	}
}
