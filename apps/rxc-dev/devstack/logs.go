package devstack

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
)

// logs hands out one append-only file per component under STATE/logs, so
// the terminal shows only the stack's progress and the services' JSON logs
// stay readable one component at a time.
type logs struct {
	dir   string
	level slog.Level

	mu    sync.Mutex
	files []*os.File
}

func newLogs(dir, level string) (*logs, error) {
	l := &logs{dir: dir}
	if err := l.level.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	if err := ensureDir(dir, 0o700); err != nil {
		return nil, fmt.Errorf("logs folder: %w", err)
	}
	return l, nil
}

// file opens STATE/logs/NAME.log for appending.
func (l *logs) file(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(l.dir, name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("log file: %w", err)
	}
	l.mu.Lock()
	l.files = append(l.files, f)
	l.mu.Unlock()
	return f, nil
}

// path is where component NAME logs.
func (l *logs) path(name string) string { return filepath.Join(l.dir, name+".log") }

// logger is a JSON logger writing to STATE/logs/NAME.log.
func (l *logs) logger(name string) (*slog.Logger, error) {
	f, err := l.file(name)
	if err != nil {
		return nil, err
	}
	return slog.New(slog.NewJSONHandler(f, &slog.HandlerOptions{Level: l.level})), nil
}

func (l *logs) close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, f := range l.files {
		errs = append(errs, f.Close())
	}
	l.files = nil
	return errors.Join(errs...)
}
