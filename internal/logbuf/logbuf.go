// Package logbuf is a buffer that concurrent writers may share, for tests
// that assert on what a component logged (and on what it never logs:
// secrets, payloads).
package logbuf

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
)

// Buffer collects writes; the zero value is ready to use.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Logger returns a JSON logger at debug level writing into b.
func (b *Buffer) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// DuplicateKeys parses text as JSON lines (one record a line, as slog's
// JSONHandler writes) and describes every object, at any depth, that holds
// a key more than once — which JSON permits and every reader resolves
// differently. A line that is not JSON is reported too.
func DuplicateKeys(text string) []string {
	var out []string
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		if err := scanValue(dec, "", func(path, key string) {
			out = append(out, fmt.Sprintf("line %d: key %q twice in %s: %s", i+1, key, orRoot(path), line))
		}); err != nil {
			out = append(out, fmt.Sprintf("line %d: not a JSON record (%v): %s", i+1, err, line))
		}
	}
	return out
}

func orRoot(path string) string {
	if path == "" {
		return "the record"
	}
	return path
}

// scanValue reads one JSON value from dec, calling dup for each repeated
// key of an object.
func scanValue(dec *json.Decoder, path string, dup func(path, key string)) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return err
			}
			key, _ := kt.(string)
			if seen[key] {
				dup(path, key)
			}
			seen[key] = true
			if err := scanValue(dec, path+"."+key, dup); err != nil {
				return err
			}
		}
		_, err = dec.Token() // '}'
		return err
	case json.Delim('['):
		for dec.More() {
			if err := scanValue(dec, path+"[]", dup); err != nil {
				return err
			}
		}
		_, err = dec.Token() // ']'
		return err
	}
	return nil
}
