package serveradmin

import "testing"

func TestEffectiveLimit(t *testing.T) {
	tests := []struct {
		stream, account int
		version         string
		want            int
		source          string
	}{
		{1_000_000, -1, "2.15.2", 1_000_000, "stream"},
		{1_000_000, 500, "2.15.2", 500, "account"},
		{100, 500, "2.15.2", 100, "stream"},
		{-1, -1, "2.15.2", 1000, "server default"},
		{0, 0, "2.16.0", 1000, "server default"},
		{-1, 200, "2.15.2", 200, "account"},
		{-1, -1, "2.14.9", -1, "none"},
		{-1, -1, "2.11.17", -1, "none"},
		{-1, 7, "2.11.17", 7, "account"},
		{-1, -1, "", 1000, "server default"},
		{-1, -1, "3.0.0", 1000, "server default"},
	}
	for _, tt := range tests {
		got, source := effectiveLimit(tt.stream, tt.account, tt.version)
		if got != tt.want || source != tt.source {
			t.Errorf("effectiveLimit(%d, %d, %q) = %d %q, want %d %q", tt.stream, tt.account, tt.version, got, source, tt.want, tt.source)
		}
	}
}
