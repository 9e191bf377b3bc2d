package benchenv

import (
	"fmt"
	"os"
	"sync"
)

// T lets load drivers use the test harnesses outside `go test`: Fatal
// prints and exits after running the cleanups, Cleanup functions run in
// reverse order at Close.
type T struct {
	mu       sync.Mutex
	cleanups []func()
}

// Helper does nothing; it exists for the harnesses' interface.
func (t *T) Helper() {}

// Fatal reports args and ends the driver.
func (t *T) Fatal(args ...any) { t.die(fmt.Sprint(args...)) }

// Fatalf reports the formatted message and ends the driver.
func (t *T) Fatalf(format string, args ...any) { t.die(fmt.Sprintf(format, args...)) }

// Errorf reports a failure and carries on.
func (t *T) Errorf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "error: "+format+"\n", args...)
}

// Logf reports progress.
func (t *T) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

// Cleanup registers fn to run at Close.
func (t *T) Cleanup(fn func()) {
	t.mu.Lock()
	t.cleanups = append(t.cleanups, fn)
	t.mu.Unlock()
}

// TempDir returns a new folder removed at Close; other users can traverse it
// (PostgreSQL runs as its own user).
func (t *T) TempDir() string {
	dir, err := os.MkdirTemp("", "rxc-bench-")
	if err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Close runs the cleanups, newest first.
func (t *T) Close() {
	t.mu.Lock()
	fns := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}

func (t *T) die(msg string) {
	fmt.Fprintln(os.Stderr, "fatal:", msg)
	t.Close()
	os.Exit(1)
}
