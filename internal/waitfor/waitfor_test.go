package waitfor

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

type recorder struct{ failed string }

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed = fmt.Sprintf(format, args...)
}

func TestUntil(t *testing.T) {
	n := 0
	Until(t, time.Second, "the third check", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("checked %d times, want 3", n)
	}
	var r recorder
	start := time.Now()
	Until(&r, 30*time.Millisecond, "never", func() bool { return r.failed != "" })
	if !strings.Contains(r.failed, "timed out after 30ms waiting for never") || time.Since(start) < 30*time.Millisecond {
		t.Errorf("a condition that never holds: failed %q after %s", r.failed, time.Since(start))
	}
}
