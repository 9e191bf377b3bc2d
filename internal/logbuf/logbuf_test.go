package logbuf

import (
	"log/slog"
	"strings"
	"testing"
)

func TestDuplicateKeys(t *testing.T) {
	cases := []struct {
		name, text string
		want       []string // substrings, one per reported problem
	}{
		{"clean", `{"time":"t","level":"INFO","msg":"m","component":"http"}` + "\n" + `{"a":{"b":1,"c":[{"d":1},{"d":2}]}}`, nil},
		{"top level twice", `{"msg":"m","component":"nats","component":"sensorbus"}`, []string{`key "component" twice in the record`}},
		{"in a group", `{"msg":"m","g":{"k":1,"k":2}}`, []string{`key "k" twice in .g`}},
		{"inside an array", `{"l":[{"x":1,"x":1}]}`, []string{`key "x" twice in .l[]`}},
		{"not JSON", `level=INFO msg=m`, []string{"not a JSON record"}},
		{"two lines", `{"a":1,"a":2}` + "\n\n" + `{"b":1,"b":2}`, []string{`line 1: key "a"`, `line 3: key "b"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := DuplicateKeys(tc.text)
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %d problems", got, len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %q does not contain %q", got[i], w)
				}
			}
		})
	}
	// What slog does with a repeated With key: both are written.
	var b Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).With("component", "a").With("component", "b").Info("x")
	if len(DuplicateKeys(b.String())) != 1 {
		t.Fatalf("slog's repeated key not caught: %s", b.String())
	}
}
